"""python -m scripts.docsgen [--check] | record DIR --command CMD (see scripts/docsgen/__init__.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scripts.docsgen import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.docsgen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    sub = parser.add_subparsers(dest="action")
    rec = sub.add_parser("record", help="file a caption-bench run (its results.json and results.md) in docs/results")
    rec.add_argument("run_dir", type=Path, help="the folder the benchmark wrote results.json into")
    rec.add_argument("--command", required=True, help="the command line that made it, as the docs will show it")
    args = parser.parse_args(argv)
    if args.action == "record":
        from scripts.docsgen.record import record

        print(f"filed {record(args.run_dir, args.command, build.REPO_ROOT / build.RESULTS)}")
        args.check = False
    if args.check:
        stale = build.stale()
        if stale:
            print(f"stale generated docs: {', '.join(stale)}; run `{build.REGENERATE}`", file=sys.stderr)
            return 1
        print("generated docs are current")
        return 0
    changed = build.write()
    print("\n".join(f"wrote {p}" for p in changed) or "generated docs were current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
