"""clips/s of the caption job with runner=local and runner=ray (1 and 2 engine actors), same clips.

Each run is the real `caption` command on synthetic clips (embedded model, vLLM on CPU). Ray runs
start their own single-machine Ray instance (runner.address unset). Reported per run: the wall time of
the command, and the steady rate: records written per second between the first and the last record
(the file is polled), which leaves out engine start-up (several seconds per actor here).

    caption-bench runners --n 48

Writes <out>/results.json, results.md and results.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, clip_set, run_caption, write_results

RUNS = {
    "local": [],
    "ray, 1 actor": ["runner=ray", "runner.actors=1", "runner.engine_cpus=1", "runner.decode_cpus=0.5",
                      "runner.batch_clips=4"],
    "ray, 2 actors": ["runner=ray", "runner.actors=2", "runner.engine_cpus=0.5", "runner.decode_cpus=0.5",
                      "runner.batch_clips=4"],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "runners")


def run(args) -> int:
    clips = clip_set("runners", args.n, args.seed)
    lines = [f"| runner ({args.n} clips) | records | wall s | videos/s (summary) | steady records/s |", "|---|---|---|---|---|"]
    print("\n".join(lines))
    rows = []
    for name, overrides in RUNS.items():
        job = run_caption(clips, args.out / name.replace(" ", "").replace(",", "-"), overrides, watch=True)
        r = {"runner": name, "records": job.record_count, "wall_s": round(job.wall_s, 1),
             "videos_per_s (job summary)": job.summary["videos_per_s"],
             "steady records/s": None if job.steady_records_per_s is None else round(job.steady_records_per_s, 2)}
        rows.append(r)
        lines.append(f"| {name} | {r['records']} | {r['wall_s']} | {r['videos_per_s (job summary)']} | "
                     f"{r['steady records/s']} |")
        print(lines[-1], flush=True)
    write_results(args.out, "runners", {"clips": args.n, "seed": args.seed, "rows": rows}, lines,
                  bars([r["runner"] for r in rows], {"videos/s (summary)": [r["videos_per_s (job summary)"] for r in rows],
                                                     "steady records/s": [r["steady records/s"] for r in rows]},
                       "per second"), f"runner=local and runner=ray, {args.n} clips, embedded model, vLLM")
    return 0
