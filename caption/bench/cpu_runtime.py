"""What vLLM's CPU guide asks for, on the whole job: tcmalloc and Intel OpenMP preloaded, threads bound.

    caption-bench cpu-runtime --model bench --n 16

vLLM's CPU worker warns when libtcmalloc and libiomp are not in LD_PRELOAD
(vllm/v1/worker/cpu_worker.py). They can only be preloaded before the process starts, so each row is a
fresh `caption` process (vLLM, forced lengths as `caption-bench engines`) with:
- threads: `bind all` (conf/gpu/cpu.yaml: VLLM_CPU_OMP_THREADS_BIND=all, one thread per CPU, bound),
  `bind 1` (one thread bound to the last CPU), `nobind 1` (one unbound thread, OMP_NUM_THREADS=1);
- preload: none, tcmalloc (Debian libtcmalloc-minimal4), tcmalloc + libiomp5 (PyPI intel-openmp).
Writes <out>/results.json, results.md and results.png; the last line
is one JSON object with every row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from caption.bench.engines import engine_clips, run_job
from caption.bench.harness import BENCH_DATA, MODELS, bars, bench_model, write_results

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
IOMP = str(Path(sys.prefix) / "lib" / "libiomp5.so")  # PyPI intel-openmp installs it into the environment


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", choices=MODELS, default="bench")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--median", type=float, default=40)
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/cpu-runtime-<model>")


def settings() -> list[tuple[str, str, list[str], dict]]:
    """(threads, preload, job overrides, environment) of every row."""
    last = str(max(os.sched_getaffinity(0)))
    threads = {"bind all": ([], {}), "bind 1": ([f"gpu.env.VLLM_CPU_OMP_THREADS_BIND={last}"], {}),
               "nobind 1": (["gpu.env.VLLM_CPU_OMP_THREADS_BIND=nobind"], {"OMP_NUM_THREADS": "1"})}
    preloads = {"none": "", "tcmalloc": TCMALLOC, "tcmalloc+iomp": f"{TCMALLOC}:{IOMP}"}
    found = []
    for thread_name, (overrides, env) in threads.items():
        for preload_name, preload in preloads.items():
            if thread_name != "nobind 1" and preload_name == "tcmalloc":
                continue  # keep the grid small: tcmalloc alone is measured once
            found.append((thread_name, preload_name, overrides, {**env, **({"LD_PRELOAD": preload} if preload else {})}))
    return found


def run(args) -> int:
    for path in (TCMALLOC, IOMP):
        if not Path(path).is_file():
            raise SystemExit(f"{path} is missing: apt-get install libtcmalloc-minimal4 / pip install intel-openmp")
    clips = engine_clips(args.n)
    common = [*bench_model(args.model), "sampling.max_new_tokens=200",
              f"benchmark.output_tokens={{median:{args.median},sigma:0.6,min:8,max:200}}"]
    out = args.out or BENCH_DATA / f"cpu-runtime-{args.model}"
    rows = []
    for thread_name, preload_name, overrides, extra in settings():
        print(f"running {thread_name}, preload {preload_name} ...", file=sys.stderr, flush=True)
        summary, _ = run_job("vllm", overrides, clips, out / f"{thread_name}-{preload_name}".replace(" ", "_"),
                             common, env_extra=extra)
        rows.append({"threads": thread_name, "preload": preload_name, "videos_per_s": summary["videos_per_s"],
                     "output_tokens_per_s": summary["output_tokens_per_s"],
                     "engine_step_s": summary["stages_s"]["engine_step"],
                     "engine_load_s": summary.get("engine_load_s"), "peak_rss_gib": summary["peak_rss_gib"]})
    title = f"{args.n} clips, vLLM, {args.model} model, forced lengths median {args.median:g}"
    lines = [f"{title}\n",
             "| threads | LD_PRELOAD | videos/s | output tok/s | engine steps (s) | engine start (s) | peak RSS (GiB) |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['threads']} | {r['preload']} | {r['videos_per_s']} | {r['output_tokens_per_s']} | "
              f"{r['engine_step_s']} | {r['engine_load_s']} | {r['peak_rss_gib']} |" for r in rows]
    print("\n" + "\n".join(lines))
    write_results(out, "cpu-runtime", {"model": args.model, "clips": args.n, "rows": rows}, lines,
                  bars([f"{r['threads']}, {r['preload']}" for r in rows], {"videos/s": [r["videos_per_s"] for r in rows]},
                       "videos/s"), title)
    print(json.dumps({"model": args.model, "clips": args.n, "rows": rows}))
    return 0
