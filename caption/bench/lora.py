"""The "detailed" LoRA adapter, measured: what it buys (METEOR) and what serving it costs (speed).

    caption-bench lora              # 60 held-out clips, ~2 min on 2 cores

Same decoded clips and prompt, greedy, vLLM on gpu=cpu:
  base             engine without LoRA, the base model
  base, LoRA on    engine with enable_lora (the adapter loaded), requests without an adapter
  detailed         engine with enable_lora, requests with the adapter
METEOR against the clips' detailed references (`references_detailed`, the adapter's style) and
against the short ones (`references`, the base model's style). Writes <out>/results.json, results.md
and results.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, decoded_clips, job_config, requests_for, write_results

SEED = 606  # used by no training run
SERVED = (("base", [], None), ("base, LoRA on", ["lora=detailed"], None), ("detailed", ["lora=detailed"], "detailed"))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "lora")


def serve(clips, decoded, overrides: list[str], adapter: str | None) -> tuple[list, float]:
    """Every clip's caption on a fresh engine with `overrides`, requests with `adapter`: results, seconds."""
    from caption.engines.vllm_engine import VllmEngine

    job = job_config(clips, overrides)
    engine = VllmEngine(job.engine_spec)
    try:
        batch = requests_for(job, decoded, ("caption",))
        for request in batch:
            request.adapter = adapter
        list(engine.run(batch[:2]))  # warm-up (loads the adapter)
        started = time.perf_counter()
        results = list(engine.run(batch))
        wall = time.perf_counter() - started
    finally:
        engine.close()
    return results, wall


def run(args) -> int:
    from eval.meteor import meteor_score

    clips, decoded = decoded_clips("lora", args.n, SEED)
    refs = {json.loads(line)["video"]: json.loads(line) for line in open(clips / "references.jsonl", encoding="utf-8")}
    videos = [path.rsplit("/", 1)[-1] for path, _ in decoded]
    rows = []
    for label, overrides, adapter in SERVED:
        results, wall = serve(clips, decoded, overrides, adapter)
        texts = {r.request.key.rsplit("/", 1)[-1]: r.text for r in results}
        hyps = [texts[v] for v in videos]
        detailed = meteor_score(hyps, [refs[v]["references_detailed"] for v in videos])["meteor"]
        short = meteor_score(hyps, [refs[v]["references"] for v in videos])["meteor"]
        tokens = sum(r.output_tokens for r in results)
        rows.append((label, detailed, short, len(results) / wall, tokens / wall, tokens / len(results)))
    title = f"{args.n} held-out clips (seed {SEED}), greedy, vLLM on gpu=cpu"
    lines = [f"{title}\n", "| served | METEOR vs detailed refs | METEOR vs short refs | videos/s | output tok/s | tokens/caption |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {label} | {detailed:.3f} | {short:.3f} | {vps:.2f} | {tps:.1f} | {per:.1f} |"
              for label, detailed, short, vps, tps, per in rows]
    base_tps = rows[0][4]
    lines.append(f"\nthroughput with LoRA enabled, base requests: {rows[1][4] / base_tps:.2f}x of no LoRA; "
                 f"adapter requests: {rows[2][4] / base_tps:.2f}x (output tokens/s)")
    print("\n" + "\n".join(lines))
    keys = ("served", "meteor_detailed", "meteor_short", "videos_per_s", "output_tokens_per_s", "tokens_per_caption")
    write_results(args.out, "lora", {"clips": args.n, "seed": SEED, "rows": [dict(zip(keys, r)) for r in rows]}, lines,
                  bars([r[0] for r in rows], {"output tok/s": [r[4] for r in rows]}, "output tokens/s"), title)
    return 0
