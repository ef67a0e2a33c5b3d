"""pip against uv: seconds to install the same pins into a fresh virtual environment (why set-up uses uv).

Times pip against uv installing the same pins (`-c constraints.txt -e '.[cpu,test,bench]'`) into a
fresh virtual environment, each from a cold and from a warm download cache, with the same indexes
(this machine's pip configuration, passed to uv as scripts/setup.sh does) and both compiling bytecode
(pip does by default; uv with --compile-bytecode, as set-up runs it). Why set-up uses uv.

    caption-bench installers --out data/bench_installers   # ~7 min

Prints a table (seconds, pip / uv), writes results.json, results.md and results.png in --out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from caption.bench.harness import bars, write_results
from caption.settings.config import REPO_ROOT as REPO

UV = REPO / "build" / "uv" / "bin" / "uv"
SPEC = ["-c", "constraints.txt", "-e", ".[cpu,test,bench]"]


def pip_index_args() -> list[str]:
    """pip's configured indexes as uv flags (the same translation as scripts/setup.sh)."""
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=REPO / "data" / "bench_installers")


def run(args) -> int:
    if not UV.exists():
        raise SystemExit(f"{UV} is missing: run make setup first")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for installer in ("pip", "uv"):
            cache = Path(tmp) / f"cache-{installer}"
            for state in ("cold", "warm"):  # cold: an empty cache; warm: the cache the cold run filled
                seconds = install(installer, Path(tmp) / "venv", cache)
                rows.append({"installer": installer, "cache": state, "seconds": round(seconds, 1)})
                print(f"{installer} {state}: {seconds:.1f} s", flush=True)
    by = {(r["installer"], r["cache"]): r["seconds"] for r in rows}
    lines = ["| cache | pip (s) | uv (s) | pip / uv |", "|---|---|---|---|"]
    lines += [f"| {state} | {by['pip', state]} | {by['uv', state]} | {by['pip', state] / by['uv', state]:.1f}x |"
              for state in ("cold", "warm")]
    print("\n" + "\n".join(lines))
    write_results(args.out, "installers", {"spec": SPEC, "rows": rows}, lines,
                  bars(["cold cache", "warm cache"], {i: [by[i, s] for s in ("cold", "warm")] for i in ("pip", "uv")},
                       "seconds to a fresh .venv"), "pip against uv, the same pins, a fresh virtual environment",
                  figsize=(5, 3))
    return 0
