"""Speculative decoding, measured: none vs n-gram vs draft model, at batch 1 and at full batch.

    python scripts/bench_spec.py              # 32 clips, ~3 min on 2 cores
    python scripts/bench_spec.py --n 64

Same decoded clips and prompts (the caption and the motion task), greedy decoding, vLLM on gpu=cpu. "batch 1" caps vLLM at
one sequence at a time (max_num_seqs=1); "full" uses the tier's batch. Acceptance rate and mean
accepted length come from vLLM's spec-decode counters; the captions with speculative decoding are
checked to equal the captions without it (greedy output must not change).
"""

from __future__ import annotations

import argparse
import sys
import time

from bench_common import bench_clips, job_config, requests

from caption.engines.vllm_engine import VllmEngine

SEED = 505
TASKS = ("caption", "motion")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    args = ap.parse_args()
    clips, decoded = bench_clips("spec", args.n, SEED)

    rows, reference = [], {}
    for batch_name, batch_override in (("1", ["gpu.max_num_seqs=1"]), ("full", [])):
        for spec in ("none", "ngram", "draft"):
            job = job_config(clips, [f"spec={spec}", *batch_override])
            engine = VllmEngine(job.engine_spec)
            try:
                batch = requests(job, decoded, TASKS)
                list(engine.run(batch[:2]))  # warm-up
                engine.reset_stats()
                started = time.perf_counter()
                results = list(engine.run(batch))
                wall = time.perf_counter() - started
                stats = engine.stats()
            finally:
                engine.close()
            texts = {(r.request.key, r.request.task): r.text for r in results}
            if spec == "none":
                reference[batch_name] = texts
            same = sum(texts[k] == reference[batch_name][k] for k in texts) / len(texts)
            tokens = sum(r.output_tokens for r in results)
            rows.append((batch_name, spec, tokens / wall, stats.get("spec_acceptance_rate"),
                         stats.get("spec_mean_accepted_length"), same))

    print(f"\n{args.n} clips x {len(TASKS)} prompts, greedy, vLLM on gpu=cpu, embedded model + its draft\n")
    print("| batch | speculative | output tok/s | vs none | acceptance rate | mean accepted length | same output |")
    print("|---|---|---|---|---|---|---|")
    none = {b: t for b, s, t, *_ in rows if s == "none"}
    for batch_name, spec, tps, rate, length, same in rows:
        print(f"| {batch_name} | {spec} | {tps:.1f} | {tps / none[batch_name]:.2f}x | "
              f"{'' if rate is None else f'{rate:.2f}'} | {'' if length is None else f'{length:.2f}'} | {same:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
