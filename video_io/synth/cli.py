"""caption-synth: write synthetic Korean background clips with reference captions.

    caption-synth --out data/demo --n 24 --seed 7 [--frames 32 --size 112x112 --fps 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from video_io.synth.args import frame_size
from video_io.synth.dataset import SynthSpec, generate_dataset


def _size(text: str) -> tuple[int, int]:
    width, height = frame_size(text)
    if width < 32 or height < 32 or width % 2 or height % 4:
        raise argparse.ArgumentTypeError(
            f"--size needs sides of at least 32 px, an even width and a height divisible by 4, got {text!r}")
    return width, height


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="caption-synth", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the .mp4 files and references.jsonl")
    parser.add_argument("--n", type=_positive, required=True, help="number of clips")
    parser.add_argument("--seed", type=int, default=0, help="data set seed; same seed, same bytes")
    parser.add_argument("--start", type=int, default=0, help="index of the first clip (for splits)")
    parser.add_argument("--frames", type=_positive, default=SynthSpec.n_frames, help="frames per clip")
    parser.add_argument("--size", type=_size, default=(SynthSpec.width, SynthSpec.height), help="WxH")
    parser.add_argument("--fps", type=_positive, default=SynthSpec.fps, help="frame rate")
    parser.add_argument("--workers", type=_positive, default=1,
                        help="processes making clips at once (the same bytes with any number)")
    args = parser.parse_args(argv)

    if args.frames < 2:
        parser.error("--frames must be at least 2: motion needs two frames")
    spec = SynthSpec(n_frames=args.frames, width=args.size[0], height=args.size[1], fps=args.fps)
    started = time.perf_counter()
    refs = generate_dataset(args.out, args.n, args.seed, spec, start=args.start, workers=args.workers)
    print(f"wrote {args.n} clips ({spec.n_frames} frames, {spec.width}x{spec.height}, {spec.fps} fps) "
          f"and {refs} in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
