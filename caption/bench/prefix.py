"""Prefix caching, measured: caching on vs off, for one and for three prompts per video.

    caption-bench prefix            # 48 clips, ~2 min on 2 cores
    caption-bench prefix --n 96
    caption-bench prefix --model bench --n 32    # the ~157M random-weight Qwen2.5-VL

Same decoded clips, same vLLM settings, one engine with `enable_prefix_caching` on and one with
it off. Three prompts per video (caption, keywords, motion) share the system prompt and the
video's tokens, which come first in every prompt (caption/prompts.py), so with caching only the
first of them prefills the video. Reports time to first token (median, from vLLM's per-request
metrics), total time, throughput and vLLM's own prefix-cache hit rate. Writes <out>/results.json,
results.md and results.png.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from caption.bench.harness import (
    BENCH_DATA,
    MODELS,
    bars,
    bench_model,
    decoded_clips,
    job_config,
    requests_for,
    write_results,
)

SEED = 404


def measure(engine, batch: list) -> dict:
    engine.reset_stats()
    started = time.perf_counter()
    results = list(engine.run(batch))
    wall = time.perf_counter() - started
    assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
    stats = engine.stats()
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    return {"requests": len(results), "wall_s": wall, "ttft_median_ms": 1000 * statistics.median(ttfts),
            "requests_per_s": len(results) / wall, "hit_rate": stats["prefix_cache_hit_rate"] or 0.0}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2, help="runs per cell; the faster is kept")
    ap.add_argument("--model", choices=MODELS, default="embedded",
                    help="embedded: the 2.2M model (prefill nearly free); bench: random-weight Qwen2.5-VL ~157M")
    ap.add_argument("--threads", type=int, default=None,
                    help="one unbound OpenMP thread pool of this size (as caption-bench engines --threads); "
                         "default: the tier's binding")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/prefix-<model>")


def measure_cells(args, clips, decoded, overrides: list[str]):
    """(caching, prompts per video, best measurement) for caching off and on, 1 and 3 prompts; the last job."""
    from caption.engines.vllm_engine import VllmEngine

    rows = []
    for caching in (False, True):
        cfg = job_config(clips, [*overrides, f"engine.enable_prefix_caching={str(caching).lower()}",
                                 "tasks=[caption,keywords,motion]"])  # sizes the processor cache for 3 per video
        engine = VllmEngine(cfg.engine_spec)
        try:
            for tasks in (("caption",), ("caption", "keywords", "motion")):
                batch = requests_for(cfg, decoded, tasks)
                list(engine.run(batch[:4]))  # warm-up, outside the measurement
                best = min((measure(engine, batch) for _ in range(args.repeats)), key=lambda m: m["wall_s"])
                rows.append((caching, len(tasks), best))
        finally:
            engine.close()
    return rows, cfg


def run(args) -> int:
    overrides = bench_model(args.model)
    if args.threads is not None:  # before vLLM (and torch's thread pool) start
        import os

        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        overrides.append("gpu.env.VLLM_CPU_OMP_THREADS_BIND=nobind")
    clips, decoded = decoded_clips("prefix", args.n, SEED, overrides)
    rows, cfg = measure_cells(args, clips, decoded, overrides)
    title = (f"{args.n} clips, vLLM on gpu=cpu, {args.model} model ({cfg.model.name}), best of {args.repeats} runs "
             f"per cell")
    lines = [f"{title}\n",
             "| prompts/video | prefix caching | requests | TTFT median (ms) | total (s) | requests/s | hit rate | speed-up |",
             "|---|---|---|---|---|---|---|---|"]
    off = {n: m for caching, n, m in rows if not caching}
    for caching, n, m in rows:
        speedup = off[n]["wall_s"] / m["wall_s"]
        lines.append(f"| {n} | {'on' if caching else 'off'} | {m['requests']} | {m['ttft_median_ms']:.1f} | "
                     f"{m['wall_s']:.2f} | {m['requests_per_s']:.1f} | {m['hit_rate']:.2f} | {speedup:.2f}x |")
    print("\n" + "\n".join(lines))
    result = {"model": args.model, "clips": args.n, "repeats": args.repeats,
              "rows": [{"prefix_caching": c, "prompts_per_video": n, **m} for c, n, m in rows]}
    write_results(args.out or BENCH_DATA / f"prefix-{args.model}", "prefix", result, lines,
                  bars([f"{n} prompt(s)/video" for n in off],
                       {f"caching {'on' if c else 'off'}": [m["requests_per_s"] for cc, _, m in rows if cc == c]
                        for c in (False, True)}, "requests/s"), title)
    return 0
