"""Quantization on the embedded model, measured in one run on the same clips.

    python scripts/bench_quant.py                # 100 held-out clips, ~4 min on 2 cores
    python scripts/bench_quant.py --n 40         # quicker

Each row is the real `caption` job in a fresh process (so peak memory is its own), on the same
held-out synthetic clips, scored with METEOR against their references:

    none  vLLM, float32              (the baseline)
    gptq  vLLM, W4A16 compressed-tensors checkpoint (caption-quantize)
    awq   vLLM, W4A16 compressed-tensors checkpoint (caption-quantize)
    none  transformers, float32      (the baseline for bitsandbytes, which only transformers runs)
    int8  transformers + bitsandbytes LLM.int8, quantized while loading
    nf4   transformers + bitsandbytes NF4 (double quant), quantized while loading

Prints a markdown table: weight bytes, peak RSS, throughput, METEOR and its change against the
unquantized run on the same engine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from caption.config import REPO_ROOT
from video_io.synth.dataset import generate_dataset

HELD_OUT_SEED = 303
RUNS = (("none", "vllm"), ("gptq", "vllm"), ("awq", "vllm"), ("none", "hf"), ("int8", "hf"), ("nf4", "hf"))


def run(quant: str, engine: str, clips: Path, out_dir: Path) -> dict:
    output = out_dir / f"{quant}-{engine}.jsonl"
    command = [str(Path(sys.executable).parent / "caption"), f"input_dir={clips}", f"output={output}",
               f"quant={quant}", f"engine={engine}", "resume=false", "progress=false",
               f"hydra.run.dir={out_dir / f'run-{quant}-{engine}'}"]
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"{quant}/{engine} failed:\n{proc.stderr[-3000:]}")
    return json.loads(Path(f"{output}.summary.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--data", type=Path, default=REPO_ROOT / "data" / "heldout")
    args = ap.parse_args()
    clips = args.data / f"bench-seed{HELD_OUT_SEED}-n{args.n}"
    if not (clips / "references.jsonl").exists():
        generate_dataset(clips, args.n, HELD_OUT_SEED)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for quant, engine in RUNS:
            summary = run(quant, engine, clips, Path(tmp))
            rows.append((quant, engine, summary))
            print(f"  {quant:>5} on {engine:<4}: {summary['videos_per_s']} videos/s, METEOR {summary.get('meteor')}",
                  file=sys.stderr)
    baseline = {engine: s["meteor"] for quant, engine, s in rows if quant == "none"}
    print(f"\n{args.n} held-out clips (seed {HELD_OUT_SEED}), gpu=cpu, one `caption` process per row\n")
    print("| quant | engine | weights (MB) | peak RSS (GiB) | videos/s | output tok/s | METEOR | vs unquantized |")
    print("|---|---|---|---|---|---|---|---|")
    for quant, engine, s in rows:
        delta = s["meteor"] - baseline[engine]
        weights = s.get("weight_bytes")
        print(f"| {quant} | {engine} | {weights / 1e6:.2f} | {s['peak_rss_gib']:.2f} | {s['videos_per_s']:.2f} | "
              f"{s['output_tokens_per_s']:.1f} | {s['meteor']:.4f} | {delta:+.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
