"""Times pip against uv installing the same pins (`-c constraints.txt -e '.[cpu,test,bench]'`) into a
fresh virtual environment, each from a cold and from a warm download cache, with the same indexes
(this machine's pip configuration, passed to uv as tools/setup.sh does) and both compiling bytecode
(pip does by default; uv with --compile-bytecode, as set-up runs it). Why set-up uses uv.

    .venv/bin/python tools/bench_installers.py --out data/bench_installers   # ~7 min

Prints a table (seconds, pip / uv), writes results.json and installers.png in --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UV = REPO / "build" / "uv" / "bin" / "uv"
SPEC = ["-c", "constraints.txt", "-e", ".[cpu,test,bench]"]


def pip_index_args() -> list[str]:
    """pip's configured indexes as uv flags (the same translation as tools/setup.sh)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    flags = {".index-url": "--index-url", ".extra-index-url": "--extra-index-url", ".find-links": "--find-links",
             ".constraint": "--constraint"}
    args = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        for suffix, flag in flags.items():
            if key.endswith(suffix):
                args += [x for item in value.strip("'").split() for x in (flag, item)]
    return args


def timed(cmd: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def install(installer: str, venv: Path, cache: Path) -> float:
    """Seconds from nothing to the environment installed (creating the venv included)."""
    import os

    shutil.rmtree(venv, ignore_errors=True)
    env = dict(os.environ)
    if installer == "pip":
        env["PIP_CACHE_DIR"] = str(cache)
        return (timed(["python3", "-m", "venv", str(venv)], env)
                + timed([str(venv / "bin" / "pip"), "install", "-q", *SPEC], env))
    env["UV_CACHE_DIR"] = str(cache)
    return (timed([str(UV), "venv", "-q", "--seed", str(venv)], env)
            + timed([str(UV), "pip", "install", "-q", "--compile-bytecode", "--python", str(venv / "bin" / "python"),
                     "--index-strategy", "unsafe-best-match", *pip_index_args(), *SPEC], env))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "bench_installers")
    args = parser.parse_args()
    if not UV.exists():
        sys.exit(f"{UV} is missing: run make setup first")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for installer in ("pip", "uv"):
            cache = Path(tmp) / f"cache-{installer}"
            for state in ("cold", "warm"):  # cold: an empty cache; warm: the cache the cold run filled
                seconds = install(installer, Path(tmp) / "venv", cache)
                rows.append({"installer": installer, "cache": state, "seconds": round(seconds, 1)})
                print(f"{installer} {state}: {seconds:.1f} s", flush=True)
    by = {(r["installer"], r["cache"]): r["seconds"] for r in rows}
    print("\n| cache | pip (s) | uv (s) | pip / uv |\n|---|---|---|---|")
    for state in ("cold", "warm"):
        print(f"| {state} | {by['pip', state]} | {by['uv', state]} | {by['pip', state] / by['uv', state]:.1f}x |")
    (args.out / "results.json").write_text(json.dumps({"spec": SPEC, "rows": rows}, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    for i, installer in enumerate(("pip", "uv")):
        ax.bar([x + i * 0.35 for x in range(2)], [by[installer, s] for s in ("cold", "warm")], 0.35, label=installer)
    ax.set_xticks([0.175, 1.175], ["cold cache", "warm cache"])
    ax.set_ylabel("seconds to a fresh .venv")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "installers.png", dpi=120)
    print(f"\nwrote {args.out / 'results.json'} and {args.out / 'installers.png'}")


if __name__ == "__main__":
    main()
