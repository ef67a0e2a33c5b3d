"""Peak resident memory of a decoder process per clip and backend, decoding as the caption job does.

Each decode runs in a fresh worker, so the peak is that clip's: N frames at the model's size.

    caption-bench decode-memory data/footage/*.mp4 [--frames 8 --size 56x56]

The worker reports its VmHWM in DecodeResult.peak_rss_mib (video_io/decoder_process.py). `--size source`
decodes at the stored size, to see what scaling each frame early saves. Writes <out>/results.json,
results.md and results.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, write_results
from video_io.decode import BACKENDS, DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.workers import DecodePool


def _probe(path: str) -> str:
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        return f"{ctx.width}x{ctx.height} {ctx.name} {float(stream.average_rate or 0):g}fps {stream.frames}f"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("clips", nargs="+", type=Path)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--size", default="56x56", help="WxH the frames are scaled to, or 'source'")
    parser.add_argument("--backends", default="decord,pyav,auto")
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "decode-memory")


def measure(clip: Path, backend: str, frames: int, width: int | None, height: int | None) -> tuple[dict, str]:
    """One decode in a fresh worker: its row and the table line."""
    spec = DecodeSpec(SamplingSpec("uniform", num_frames=frames), width, height, backend)
    with DecodePool(spec, workers=1, timeout_s=600) as pool:
        (result,) = list(pool.imap([str(clip)]))
    used = result.clip.backend if result.ok else f"error: {result.error[:60]}"
    shape = "x".join(map(str, result.clip.frames.shape[1:3][::-1])) if result.ok else "-"
    row = {"clip": clip.name, "backend": backend, "used": used, "frames": frames, "shape": shape,
           "seconds": result.seconds, "peak_rss_mib": result.peak_rss_mib}
    line = (f"| {clip.name} | {_probe(str(clip))} | {backend} | {used} | {frames} @ {shape} | "
            f"{result.seconds:.2f} | {result.peak_rss_mib:.0f} |" if result.peak_rss_mib else
            f"| {clip.name} | - | {backend} | {used} | - | - | - |")
    return row, line


def run(args) -> int:
    width = height = None
    if args.size != "source":
        width, height = (int(v) for v in args.size.lower().split("x"))
    backends = args.backends.split(",")
    for backend in backends:
        if backend not in BACKENDS:
            raise SystemExit(f"caption-bench decode-memory: backends must be among {BACKENDS}")
    lines = ["| clip | stored | backend | used | frames | decode s | peak RSS MiB |", "|---|---|---|---|---:|---:|---:|"]
    print("\n".join(lines))
    rows = []
    for clip in args.clips:
        for backend in backends:
            row, line = measure(clip, backend, args.frames, width, height)
            rows.append(row)
            lines.append(line)
            print(line, flush=True)
    write_results(args.out, "decode-memory", {"frames": args.frames, "size": args.size, "rows": rows}, lines,
                  bars([f"{r['clip']}, {r['backend']}" for r in rows], {"peak RSS (MiB)": [r["peak_rss_mib"] for r in rows]},
                       "peak RSS of the decoder process (MiB)"), f"{args.frames} frames at {args.size}")
    return 0
