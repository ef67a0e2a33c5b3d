"""Shot detection on real footage joined at known times: precision and recall of cuts, per kind.

    caption-bench scenes-real --sources DIR [--videos 4 --pieces 10]

The repo ships no real footage, and these machines reach no video site. Debian's `opencv-doc` package
holds a few real camera clips: OpenCV's tracking samples (`box.mp4.gz`, `cup.mp4.gz`, 640x480 H.264, a
hand-held camera), a street scene from a fixed camera (`vtest.avi`, 768x576 MPEG-4 at 10 fps) and a
tree in the wind (`tree.avi`, 320x240 Cinepak). To get them:

    apt-get download opencv-doc && dpkg -x opencv-doc_*.deb /tmp/ocv
    mkdir -p data/real && cp /tmp/ocv/usr/share/doc/opencv-doc/examples/data/{vtest,tree}.avi data/real/
    gunzip -c /tmp/ocv/usr/share/doc/opencv-doc/opencv4/html/box.mp4.gz > data/real/box.mp4   # and cup.mp4.gz

Each joined video (640x480, 25 fps, x264) is `--pieces` pieces of 4-8 s taken from random places of the
source clips, never two of one source in a row (every join is a real change of shot), joined in turn by
a hard cut, a 1-s dissolve and a 1-s fade through black; the true times follow caption-synth-long's
convention (video_io/synth/long.py). Clips with cuts of their own (OpenCV's Megamind trailer) are not
sources: their cut times are unknown. Detectors and scoring are caption-bench scenes' (a found cut
matches a true one within --tolerance s).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.harness import BENCH_DATA, HELD_OUT_SEED, write_results
from bench.scenes import KINDS, accuracy, detectors
from video_io.synth.mux import encode_all, timed_frames

SIZE, FPS = (640, 480), 25
PIECE_S = (4.0, 8.0)
TRANSITION_S = 1.0
SUFFIXES = (".mp4", ".avi", ".mkv", ".mov", ".webm")


def read_frames(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(times in s from the first frame, frames (N, 480, 640, 3) uint8) of a source clip."""
    import av

    times, frames = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = float(stream.time_base)
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            times.append(frame.pts * base)
            frames.append(frame.to_ndarray(width=SIZE[0], height=SIZE[1], format="rgb24"))
    order = np.argsort(times, kind="stable")
    t = np.asarray(times)[order]
    return t - t[0], np.stack(frames)[order]


def plan_pieces(lengths: dict[str, float], pieces: int, rng: np.random.Generator) -> list[tuple[str, float, float]]:
    """(source, start_s, length_s) of each piece: never the same source twice in a row."""
    out, last = [], None
    for _ in range(pieces):
        source = rng.choice([s for s in sorted(lengths) if s != last])
        length = min(rng.uniform(*PIECE_S), lengths[source])
        out.append((source, rng.uniform(0, lengths[source] - length), length))
        last = source
    return out


def join(sources: dict[str, tuple[np.ndarray, np.ndarray]], plan: list[tuple[str, float, float]], out: Path) -> dict:
    """Write the joined video; its scenes.jsonl-style truth (cuts: kind, time_s, start_s, end_s)."""
    import av

    def picture(source: str, t: float) -> np.ndarray:
        times, frames = sources[source]
        return frames[max(0, int(np.searchsorted(times, t, side="right")) - 1)]

    edges = np.cumsum([0.0, *(length for _, _, length in plan)])
    n_frames = int(edges[-1] * FPS)
    cuts = []
    for k in range(1, len(plan)):
        kind = KINDS[(k - 1) % len(KINDS)]
        at = round(edges[k] * FPS) / FPS
        span = 0.0 if kind == "cut" else TRANSITION_S
        cuts.append({"kind": kind, "time_s": round(at, 6), "start_s": round(at - span / 2, 6),
                     "end_s": round(at + span / 2, 6)})

    def frame_at(t: float) -> np.ndarray:
        k = min(len(plan) - 1, int(np.searchsorted(edges, t, side="right")) - 1)
        source, start, _ = plan[k]
        image = picture(source, start + t - edges[k]).astype(np.float32)
        for cut in cuts:  # inside a gradual transition: mix the two pieces
            if cut["kind"] != "cut" and cut["start_s"] <= t < cut["end_s"]:
                j = next(m for m in range(1, len(plan)) if abs(edges[m] - cut["time_s"]) < 1 / FPS)
                a = picture(plan[j - 1][0], plan[j - 1][1] + t - edges[j - 1]).astype(np.float32)
                b = picture(plan[j][0], plan[j][1] + max(0.0, t - edges[j])).astype(np.float32)
                alpha = (t - cut["start_s"]) / TRANSITION_S
                if cut["kind"] == "dissolve":
                    image = a * (1 - alpha) + b * alpha
                else:
                    image = a * (1 - 2 * alpha) if alpha < 0.5 else b * (2 * alpha - 1)
        return image

    with av.open(str(out), mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = *SIZE, "yuv420p"
        stream.codec_context.options = {"crf": "20", "preset": "fast", "g": str(2 * FPS)}
        pictures = (np.clip(np.rint(frame_at(i / FPS)), 0, 255).astype(np.uint8) for i in range(n_frames))
        encode_all(container, stream, timed_frames(pictures, FPS, format="rgb24"))
    return {"video": out.name, "duration_s": n_frames / FPS, "cuts": cuts,
            "pieces": [{"source": s, "start_s": round(a, 3), "length_s": round(n, 3)} for s, a, n in plan]}


def joined_set(sources_dir: Path, videos: int, pieces: int, seed: int) -> Path:
    folder = BENCH_DATA / f"scenes-real-seed{seed}-v{videos}-p{pieces}"
    truth_path = folder / "scenes.jsonl"
    if truth_path.exists():
        return folder
    paths = sorted(p for p in Path(sources_dir).iterdir() if p.suffix.lower() in SUFFIXES)
    if len(paths) < 2:
        raise SystemExit(f"--sources {sources_dir}: needs at least two video clips (this command's --help says "
                         "where Debian keeps some)")
    sources = {p.name: read_frames(p) for p in paths}
    lengths = {name: float(t[-1]) for name, (t, _) in sources.items()}
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = [join(sources, plan_pieces(lengths, pieces, rng), folder / f"joined_{v:02d}.mp4") for v in range(videos)]
    truth_path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", type=Path, required=True, help="a folder of real clips, each one shot")
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--pieces", type=int, default=10, help="pieces per joined video")
    parser.add_argument("--seed", type=int, default=HELD_OUT_SEED)
    parser.add_argument("--tolerance", type=float, default=0.5, help="seconds a detected cut may be off")
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "scenes-real")


def run(args) -> int:
    folder = joined_set(args.sources, args.videos, args.pieces, args.seed)
    truth = [json.loads(line) for line in open(folder / "scenes.jsonl", encoding="utf-8")]
    rows = []
    for name, detect in detectors().items():
        row = {"detector": name, **accuracy([(t["cuts"], detect(folder / t["video"])) for t in truth], args.tolerance)}
        rows.append(row)
        print(f"{name}: " + " ".join(f"{k}={row[k]:.3f}" for k in ("precision", "recall_cut", "recall_dissolve",
                                                                   "recall_fade")), flush=True)

    def cell(v):
        return "-" if v is None else f"{v:.2f}"

    counts = {k: sum(c["kind"] == k for t in truth for c in t["cuts"]) for k in KINDS}
    sources = sorted({p["source"] for t in truth for p in t["pieces"]})
    note = (f"{len(truth)} videos joined from real clips ({', '.join(sources)}) at known times: {counts['cut']} hard "
            f"cuts, {counts['dissolve']} dissolves, {counts['fade']} fades (1 s); a found cut matches within "
            f"±{args.tolerance} s.")
    lines = [note, "", "| detector | precision | recall hard cuts | recall dissolves | recall fades | detections |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['detector']} | {cell(r['precision'])} | {cell(r['recall_cut'])} | {cell(r['recall_dissolve'])} | "
              f"{cell(r['recall_fade'])} | {r['detections']} |" for r in rows]
    print("\n" + "\n".join(lines))
    write_results(args.out, "scenes-real", {"rows": rows, "truth": counts, "sources": sources, "clips": str(folder)},
                  lines, title="shot detection on real footage joined at known times")
    return 0
