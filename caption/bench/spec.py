"""Speculative decoding, measured: none vs n-gram vs draft model, at batch 1 and at full batch.

    caption-bench spec              # 32 clips, ~3 min on 2 cores
    caption-bench spec --n 64

Same decoded clips and prompts (the caption and the motion task), greedy decoding, vLLM on gpu=cpu. "batch 1" caps vLLM at
one sequence at a time (max_num_seqs=1); "full" uses the tier's batch. Acceptance rate and mean
accepted length come from vLLM's spec-decode counters; the captions with speculative decoding are
checked to equal the captions without it (greedy output must not change). Writes <out>/results.json,
results.md and results.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, decoded_clips, job_config, requests_for, write_results

SEED = 505
TASKS = ("caption", "motion")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "spec")


def generate(clips, decoded, overrides: list[str]) -> tuple[list, float, dict]:
    """Every request on a fresh engine with `overrides` (after a warm-up): results, seconds, vLLM's counters."""
    from caption.engines.vllm_engine import VllmEngine

    job = job_config(clips, overrides)
    engine = VllmEngine(job.engine_spec)
    try:
        batch = requests_for(job, decoded, TASKS)
        list(engine.run(batch[:2]))  # warm-up
        engine.reset_stats()
        started = time.perf_counter()
        results = list(engine.run(batch))
        wall = time.perf_counter() - started
        stats = engine.stats()
    finally:
        engine.close()
    return results, wall, stats


def run(args) -> int:
    clips, decoded = decoded_clips("spec", args.n, SEED)
    rows, reference = [], {}
    for batch_name, batch_override in (("1", ["gpu.max_num_seqs=1"]), ("full", [])):
        for spec in ("none", "ngram", "draft"):
            results, wall, stats = generate(clips, decoded, [f"spec={spec}", *batch_override])
            texts = {(r.request.key, r.request.task): r.text for r in results}
            if spec == "none":
                reference[batch_name] = texts
            same = sum(texts[k] == reference[batch_name][k] for k in texts) / len(texts)
            tokens = sum(r.output_tokens for r in results)
            rows.append((batch_name, spec, tokens / wall, stats.get("spec_acceptance_rate"),
                         stats.get("spec_mean_accepted_length"), same))
    title = f"{args.n} clips x {len(TASKS)} prompts, greedy, vLLM on gpu=cpu, embedded model + its draft"
    lines = [f"{title}\n",
             "| batch | speculative | output tok/s | vs none | acceptance rate | mean accepted length | same output |",
             "|---|---|---|---|---|---|---|"]
    none = {b: t for b, s, t, *_ in rows if s == "none"}
    for batch_name, spec, tps, rate, length, same in rows:
        lines.append(f"| {batch_name} | {spec} | {tps:.1f} | {tps / none[batch_name]:.2f}x | "
                     f"{'' if rate is None else f'{rate:.2f}'} | {'' if length is None else f'{length:.2f}'} | {same:.0%} |")
    print("\n" + "\n".join(lines))
    keys = ("batch", "speculative", "output_tokens_per_s", "acceptance_rate", "mean_accepted_length", "same_output")
    write_results(args.out, "spec", {"clips": args.n, "rows": [dict(zip(keys, r)) for r in rows]}, lines,
                  bars([f"batch {b}" for b in none], {s: [t for b, ss, t, *_ in rows if ss == s]
                                                     for s in ("none", "ngram", "draft")}, "output tokens/s"), title)
    return 0
