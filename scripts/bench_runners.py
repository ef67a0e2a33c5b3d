"""clips/s of the caption job with runner=local and runner=ray (1 and 2 engine actors), same clips.

Each run is the real `caption` command on synthetic clips (embedded model, vLLM on CPU). Ray runs
start their own single-machine Ray instance (runner.address unset). Reported per run: the wall time of
the command, and the steady rate: records written per second between the first and the last record
(the file is polled), which leaves out engine start-up (several seconds per actor here).

    python scripts/bench_runners.py --n 48
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from video_io.synth.dataset import generate_dataset

RUNS = {
    "local": [],
    "ray, 1 actor": ["runner=ray", "runner.actors=1", "runner.engine_cpus=1", "runner.decode_cpus=0.5",
                      "runner.batch_clips=4"],
    "ray, 2 actors": ["runner=ray", "runner.actors=2", "runner.engine_cpus=0.5", "runner.decode_cpus=0.5",
                      "runner.batch_clips=4"],
}


def run(clips: Path, out: Path, overrides: list[str]) -> dict:
    cmd = [sys.executable, "-m", "caption", f"input_dir={clips}", f"output={out}", "references=null",
           "progress=false", f"hydra.run.dir={out.parent / out.stem}", *overrides]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seen, first, last = 0, None, None
    while proc.poll() is None:
        count = out.read_bytes().count(b"\n") if out.exists() else 0
        now = time.perf_counter()
        if count > seen:
            first, last, seen = first or now, now, count
        time.sleep(0.05)
    count = out.read_bytes().count(b"\n") if out.exists() else 0
    if count > seen:
        first, last, seen = first or time.perf_counter(), time.perf_counter(), count
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
    wall = time.perf_counter() - started
    summary = json.loads(Path(f"{out}.summary.json").read_text())
    steady = (seen - 1) / (last - first) if last and first and last > first else None
    return {"records": seen, "wall_s": round(wall, 1), "videos_per_s (job summary)": summary["videos_per_s"],
            "steady records/s": None if steady is None else round(steady, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clips = Path(tmp) / "clips"
        generate_dataset(clips, args.n, args.seed)
        print(f"| runner ({args.n} clips) | records | wall s | videos/s (summary) | steady records/s |")
        print("|---|---|---|---|---|")
        for name, overrides in RUNS.items():
            r = run(clips, Path(tmp) / f"{name.replace(' ', '').replace(',', '-')}.jsonl", overrides)
            print(f"| {name} | {r['records']} | {r['wall_s']} | {r['videos_per_s (job summary)']} | "
                  f"{r['steady records/s']} |", flush=True)


if __name__ == "__main__":
    main()
