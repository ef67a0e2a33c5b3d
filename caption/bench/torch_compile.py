"""vLLM on CPU, eager against torch.compile (`gpu.enforce_eager`): steady-state speed and start-up.

    caption-bench compile --model bench --dtype float32 bfloat16 --n 96 --repeat 2
    caption-bench compile --engine hf --model bench --n 16   # transformers: static KV cache (caption/bench/hf_static_cache.py)

The cpu tier runs eager (conf/gpu/cpu.yaml) because compiling costs most of a minute at engine
start-up on two cores. This measures what the compiled graphs give back once running, so the
trade-off is a number: each row is the whole `caption` job (vLLM, forced lengths as
`caption-bench engines`, the same clips) with `gpu.enforce_eager` true or false; eager and compiled
runs alternate, `--repeat` times each. Throughput counts from engine ready to the last record, so
start-up is apart; `break-even clips` is how many clips a job needs before the faster steps have
paid for the longer start: extra start-up s / (s per clip eager - s per clip compiled).

Writes <out>/results.json, results.md and results.png; the last line is one JSON object with every row
and each dtype's compiled/eager ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from caption.bench.engines import DEFAULT_LENGTHS, engine_clips, run_job
from caption.bench.harness import BENCH_DATA, MODELS, bars, bench_model, write_results


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--engine", choices=("vllm", "hf"), default="vllm",
                    help="hf: transformers' static KV cache with and without torch.compile against its dynamic "
                         "cache, on one batch of --n clips (caption/bench/hf_static_cache.py)")
    ap.add_argument("--ways", nargs="+", default=["dynamic", "static", "static+compile"],
                    choices=("dynamic", "static", "static+compile"), help="--engine hf: the caches to compare")
    ap.add_argument("--tokens", type=int, default=32, help="--engine hf: output tokens of every row")
    ap.add_argument("--model", choices=MODELS, default="bench")
    ap.add_argument("--n", type=int, default=96, help="clips")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], choices=("float32", "bfloat16"))
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each setting (eager and compiled alternate)")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/compile-<model>")


def measure_runs(args, clips: Path, out: Path) -> list[dict]:
    common = [*bench_model(args.model), "sampling.max_new_tokens=200", f"benchmark.output_tokens={DEFAULT_LENGTHS}",
              f"gpu.max_num_seqs={args.max_num_seqs}"]
    runs = []
    for dtype in args.dtype:
        for attempt in range(args.repeat):
            for eager in (True, False) if attempt % 2 == 0 else (False, True):
                name = f"{dtype}-{'eager' if eager else 'compiled'}-{attempt}"
                print(f"running {name} ...", file=sys.stderr, flush=True)
                summary, _ = run_job("vllm", [f"gpu.dtype={dtype}", f"gpu.enforce_eager={str(eager).lower()}"],
                                     clips, out / name, common)
                runs.append({"dtype": dtype, "eager": eager, "videos_per_s": summary["videos_per_s"],
                             "output_tokens": summary["output_tokens"],
                             "engine_step_s": summary["stages_s"]["engine_step"],
                             "engine_load_s": summary["engine_load_s"]})
    return runs


def compare(dtype: str, runs: list[dict]) -> dict:
    """One dtype's eager and compiled runs: medians, their ratio and the clips a job needs to gain."""
    mine = {eager: [r for r in runs if r["dtype"] == dtype and r["eager"] == eager] for eager in (True, False)}
    if len({r["output_tokens"] for r in mine[True] + mine[False]}) != 1:
        raise SystemExit(f"{dtype}: the runs produced different numbers of tokens: not the same work")
    eager_vps = statistics.median(r["videos_per_s"] for r in mine[True])
    compiled_vps = statistics.median(r["videos_per_s"] for r in mine[False])
    extra_start = (statistics.median(r["engine_load_s"] for r in mine[False])
                   - statistics.median(r["engine_load_s"] for r in mine[True]))
    saved_per_clip = 1 / eager_vps - 1 / compiled_vps
    return {"dtype": dtype, "eager_videos_per_s": eager_vps, "compiled_videos_per_s": compiled_vps,
            "ratio": round(compiled_vps / eager_vps, 3), "extra_start_s": round(extra_start, 1),
            "all_videos_per_s": {"eager": [r["videos_per_s"] for r in mine[True]],
                                 "compiled": [r["videos_per_s"] for r in mine[False]]},
            "break_even_clips": round(extra_start / saved_per_clip) if saved_per_clip > 0 else None}


def run_hf(args) -> int:
    from caption.bench import hf_static_cache

    out = args.out or BENCH_DATA / f"compile-hf-{args.model}"
    result = hf_static_cache.measure(args)
    lines = [f"{result['batch']} clips in one transformers batch, {args.model} model, {result['prompt_tokens']} "
             f"prompt tokens, forced lengths (longest {result['output_tokens_longest']}); median of {args.repeat} "
             "call(s) after a warm-up\n", *hf_static_cache.table(result)]
    print("\n" + "\n".join(lines))
    write_results(out, "compile", {"engine": "hf", "model": args.model, **result}, lines,
                  bars(list(result["runs"]), {"TPOT p50 (ms)": [r["tpot_ms"] for r in result["runs"].values()]},
                       "ms per output token"), f"transformers KV cache, {args.model} model", figsize=(5.6, 3.8))
    print(json.dumps({"engine": "hf", "model": args.model, "runs": result["runs"]}))
    return 0


def run(args) -> int:
    if args.engine == "hf":
        return run_hf(args)
    out = args.out or BENCH_DATA / f"compile-{args.model}"
    runs = measure_runs(args, engine_clips(args.n), out)
    rows = [compare(dtype, runs) for dtype in args.dtype]
    lines = [f"{args.n} clips, vLLM max_num_seqs {args.max_num_seqs}, {args.model} model, forced lengths; "
             f"median of {args.repeat} run(s) each\n",
             "| dtype | eager videos/s | compiled videos/s | compiled / eager | extra start-up (s) | break-even clips |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['eager_videos_per_s']:.2f} | {r['compiled_videos_per_s']:.2f} | "
                     f"{r['ratio']:.2f}x | {r['extra_start_s']:.0f} | "
                     f"{r['break_even_clips'] if r['break_even_clips'] is not None else 'never'} |")
    print("\n" + "\n".join(lines))
    result = {"model": args.model, "clips": args.n, "max_num_seqs": args.max_num_seqs, "rows": rows, "runs": runs}
    labels = [r["dtype"] for r in rows]
    write_results(out, "compile", result, lines,
                  bars(labels, {"eager": [r["eager_videos_per_s"] for r in rows],
                                "torch.compile": [r["compiled_videos_per_s"] for r in rows]},
                       "videos/s (engine ready -> last record)"),
                  f"{args.n} clips, {args.model} model, vLLM on CPU", figsize=(5.6, 3.8))
    print(json.dumps({"model": args.model, "clips": args.n,
                      "rows": [{k: r[k] for k in ("dtype", "eager_videos_per_s", "compiled_videos_per_s", "ratio",
                                                  "extra_start_s", "break_even_clips")} for r in rows]}))
    return 0
