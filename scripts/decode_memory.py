"""Peak resident memory of a decoder process per clip and backend (each decode in a fresh
worker, so the peak is that clip's), as the caption job decodes: N frames at the model's size.

    PYTHONPATH=. python scripts/decode_memory.py data/footage/*.mp4 [--frames 8 --size 56x56]

The worker reports its VmHWM in DecodeResult.peak_rss_mib (video_io/workers.py). `--size source`
decodes at the stored size, to see what scaling each frame early saves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from video_io.decode import BACKENDS, DecodeSpec  # noqa: E402
from video_io.sampling import SamplingSpec  # noqa: E402
from video_io.workers import DecodePool  # noqa: E402


def _probe(path: str) -> str:
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        return f"{ctx.width}x{ctx.height} {ctx.name} {float(stream.average_rate or 0):g}fps {stream.frames}f"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clips", nargs="+", type=Path)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--size", default="56x56", help="WxH the frames are scaled to, or 'source'")
    parser.add_argument("--backends", default="decord,pyav,auto")
    args = parser.parse_args(argv)
    width = height = None
    if args.size != "source":
        width, height = (int(v) for v in args.size.lower().split("x"))
    backends = args.backends.split(",")
    for backend in backends:
        if backend not in BACKENDS:
            parser.error(f"backends must be among {BACKENDS}")
    print(f"| clip | stored | backend | used | frames | decode s | peak RSS MiB |")
    print("|---|---|---|---|---:|---:|---:|")
    for clip in args.clips:
        for backend in backends:
            spec = DecodeSpec(SamplingSpec("uniform", num_frames=args.frames), width, height, backend)
            with DecodePool(spec, workers=1, timeout_s=600) as pool:
                (result,) = list(pool.imap([str(clip)]))
            used = result.clip.backend if result.ok else f"error: {result.error[:60]}"
            shape = "x".join(map(str, result.clip.frames.shape[1:3][::-1])) if result.ok else "-"
            print(f"| {clip.name} | {_probe(str(clip))} | {backend} | {used} | {args.frames} @ {shape} | "
                  f"{result.seconds:.2f} | {result.peak_rss_mib:.0f} |" if result.peak_rss_mib else
                  f"| {clip.name} | - | {backend} | {used} | - | - | - |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
