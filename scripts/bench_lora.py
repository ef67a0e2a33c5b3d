"""The "detailed" LoRA adapter, measured: what it buys (METEOR) and what serving it costs (speed).

    python scripts/bench_lora.py              # 60 held-out clips, ~2 min on 2 cores

Same decoded clips and prompt, greedy, vLLM on gpu=cpu:
  base             engine without LoRA, the base model
  base, LoRA on    engine with enable_lora (the adapter loaded), requests without an adapter
  detailed         engine with enable_lora, requests with the adapter
METEOR against the clips' detailed references (`references_detailed`, the adapter's style) and
against the short ones (`references`, the base model's style).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench_common import bench_clips, job_config, requests

from caption.engines.vllm_engine import VllmEngine
from eval.meteor import meteor_score

SEED = 606  # used by no training run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60)
    args = ap.parse_args()
    clips, decoded = bench_clips("lora", args.n, SEED)
    refs = {json.loads(l)["video"]: json.loads(l) for l in open(clips / "references.jsonl", encoding="utf-8")}
    videos = [path.rsplit("/", 1)[-1] for path, _ in decoded]

    rows = []
    for label, overrides, adapter in (("base", [], None), ("base, LoRA on", ["lora=detailed"], None),
                                      ("detailed", ["lora=detailed"], "detailed")):
        job = job_config(clips, overrides)
        engine = VllmEngine(job.engine_spec)
        try:
            batch = requests(job, decoded, ("caption",))
            for request in batch:
                request.adapter = adapter
            list(engine.run(batch[:2]))  # warm-up (loads the adapter)
            started = time.perf_counter()
            results = list(engine.run(batch))
            wall = time.perf_counter() - started
        finally:
            engine.close()
        texts = {r.request.key.rsplit("/", 1)[-1]: r.text for r in results}
        hyps = [texts[v] for v in videos]
        detailed = meteor_score(hyps, [refs[v]["references_detailed"] for v in videos])["meteor"]
        short = meteor_score(hyps, [refs[v]["references"] for v in videos])["meteor"]
        tokens = sum(r.output_tokens for r in results)
        rows.append((label, detailed, short, len(results) / wall, tokens / wall, tokens / len(results)))

    print(f"\n{args.n} held-out clips (seed {SEED}), greedy, vLLM on gpu=cpu\n")
    print("| served | METEOR vs detailed refs | METEOR vs short refs | videos/s | output tok/s | tokens/caption |")
    print("|---|---|---|---|---|---|")
    for label, detailed, short, vps, tps, per in rows:
        print(f"| {label} | {detailed:.3f} | {short:.3f} | {vps:.2f} | {tps:.1f} | {per:.1f} |")
    base_tps = rows[0][4]
    print(f"\nthroughput with LoRA enabled, base requests: {rows[1][4] / base_tps:.2f}x of no LoRA; "
          f"adapter requests: {rows[2][4] / base_tps:.2f}x (output tokens/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
