"""`caption-make-model`: write a random-weight checkpoint of a real model family and shape.

    caption-make-model --family qwen2_5_vl --shape cpu --out data/models/qwen2_5_vl-cpu [--seed 0]
    caption-make-model --family qwen2_5_vl --shape 7b --out /tmp/q7 --config-only   # no weights
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from caption.make_model.common import DTYPES, FAMILY_NAMES, SHARD_BYTES, MakeModelError, make_checkpoint


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="caption-make-model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", required=True, choices=FAMILY_NAMES)
    parser.add_argument("--shape", required=True,
                        help="tiny | cpu | a preset's size (conf/model/<family>_<shape>.yaml, e.g. 3b, 7b, 8b)")
    parser.add_argument("--out", required=True, help="folder to write (must be empty or absent)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=DTYPES, default=None,
                        help="weights' dtype (default: float32 for tiny/cpu, the preset's dtype otherwise)")
    parser.add_argument("--config-only", action="store_true",
                        help="write config, tokenizer and processor, but no weights")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.add_argument("--shard-gb", type=float, default=SHARD_BYTES / 2**30,
                        help="largest weights file (GiB); one file is written when the model is smaller")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is made here; never reach a hub
    started = time.perf_counter()
    try:
        made = make_checkpoint(args.family, args.shape, args.out, seed=args.seed, dtype=args.dtype,
                               config_only=args.config_only, force=args.force,
                               shard_bytes=int(args.shard_gb * 2**30))
    except MakeModelError as exc:
        print(f"caption-make-model: {exc}", file=sys.stderr)
        sys.exit(2)
    made["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(made, ensure_ascii=False))


if __name__ == "__main__":
    main()
