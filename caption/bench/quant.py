"""Quantization on the embedded model, measured in one run on the same clips.

    caption-bench quant              # 100 held-out clips, ~4 min on 2 cores
    caption-bench quant --n 40       # quicker

Each row is the real `caption` job in a fresh process (so peak memory is its own), on the same
held-out synthetic clips, scored with METEOR against their references:

    none  vLLM, float32              (the baseline)
    gptq  vLLM, W4A16 compressed-tensors checkpoint (caption-quantize)
    awq   vLLM, W4A16 compressed-tensors checkpoint (caption-quantize)
    none  transformers, float32      (the baseline for bitsandbytes, which only transformers runs)
    int8  transformers + bitsandbytes LLM.int8, quantized while loading
    nf4   transformers + bitsandbytes NF4 (double quant), quantized while loading

Prints a markdown table: weight bytes, peak RSS, throughput, METEOR and its change against the
unquantized run on the same engine; writes <out>/results.json, results.md and results.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from caption.bench.harness import BENCH_DATA, HELD_OUT_SEED, bars, clip_set, run_caption, write_results
from caption.settings.config import REPO_ROOT

RUNS = (("none", "vllm"), ("gptq", "vllm"), ("awq", "vllm"), ("none", "hf"), ("int8", "hf"), ("nf4", "hf"))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--data", type=Path, default=REPO_ROOT / "data" / "heldout")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "quant")


def run(args) -> int:
    clips = clip_set("bench", args.n, HELD_OUT_SEED, root=args.data)
    rows = []
    for quant, engine in RUNS:
        summary = run_caption(clips, args.out / f"{quant}-{engine}", [f"quant={quant}"], engine=engine,
                              references=True).summary
        rows.append((quant, engine, summary))
        print(f"  {quant:>5} on {engine:<4}: {summary['videos_per_s']} videos/s, METEOR {summary.get('meteor')}",
              file=sys.stderr)
    baseline = {engine: s["meteor"] for quant, engine, s in rows if quant == "none"}
    title = f"{args.n} held-out clips (seed {HELD_OUT_SEED}), gpu=cpu, one `caption` process per row"
    lines = [f"{title}\n", "| quant | engine | weights (MB) | peak RSS (GiB) | videos/s | output tok/s | METEOR | vs unquantized |",
             "|---|---|---|---|---|---|---|---|"]
    for quant, engine, s in rows:
        delta = s["meteor"] - baseline[engine]
        weights = s.get("weight_bytes")
        lines.append(f"| {quant} | {engine} | {weights / 1e6:.2f} | {s['peak_rss_gib']:.2f} | {s['videos_per_s']:.2f} | "
                     f"{s['output_tokens_per_s']:.1f} | {s['meteor']:.4f} | {delta:+.4f} |")
    print("\n" + "\n".join(lines))
    result = {"clips": args.n, "seed": HELD_OUT_SEED,
              "rows": [{"quant": q, "engine": e, "summary": s} for q, e, s in rows]}
    labels = [f"{q}, {e}" for q, e, _ in rows]
    write_results(args.out, "quant", result, lines,
                  bars(labels, {"videos/s": [s["videos_per_s"] for *_, s in rows],
                                "METEOR": [s["meteor"] for *_, s in rows],
                                "peak RSS (GiB)": [s["peak_rss_gib"] for *_, s in rows]}, ""), title)
    return 0
