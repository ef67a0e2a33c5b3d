"""vLLM against the transformers baseline: the whole caption job, same clips, one run each.

    python scripts/bench_engines.py           # 200 clips, ~2 min on 2 cores
    python scripts/bench_engines.py --n 400

Each row is the real `caption` job in a fresh process (decoding in worker processes included),
greedy, on the same synthetic clips; throughput counts from the first decoded clip to the last
record (engine start-up excluded, reported apart). The captions of both engines are compared.
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

SEED = 707


def run(engine: str, clips: Path, out_dir: Path, extra: list[str]) -> tuple[dict, dict]:
    output = out_dir / f"{engine}.jsonl"
    command = [str(Path(sys.executable).parent / "caption"), f"input_dir={clips}", f"output={output}",
               f"engine={engine}", "resume=false", "progress=false", f"hydra.run.dir={out_dir / engine}", *extra]
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{proc.stderr[-3000:]}")
    captions = {json.loads(l)["video"]: json.loads(l)["caption"] for l in open(output, encoding="utf-8")}
    return json.loads(Path(f"{output}.summary.json").read_text()), captions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--hf-batch", type=int, default=16, help="transformers batch size")
    args = ap.parse_args()
    clips = REPO_ROOT / "data" / "bench" / f"engines-seed{SEED}-n{args.n}"
    if not (clips / "references.jsonl").exists():
        generate_dataset(clips, args.n, SEED)
    with tempfile.TemporaryDirectory() as tmp:
        vllm, vllm_caps = run("vllm", clips, Path(tmp), [])
        hf, hf_caps = run("hf", clips, Path(tmp), [f"engine.batch_size={args.hf_batch}"])
    same = sum(vllm_caps[v] == hf_caps.get(v) for v in vllm_caps) / len(vllm_caps)
    print(f"\n{args.n} clips (seed {SEED}), greedy, gpu=cpu, embedded model, one `caption` process per row\n")
    print("| engine | videos/s | output tok/s | engine start (s) | peak RSS (GiB) | METEOR | vs transformers |")
    print("|---|---|---|---|---|---|---|")
    for name, s in (("transformers (batch %d)" % args.hf_batch, hf), ("vLLM", vllm)):
        print(f"| {name} | {s['videos_per_s']:.2f} | {s['output_tokens_per_s']:.1f} | {s['engine_load_s']:.1f} | "
              f"{s['peak_rss_gib']:.2f} | {s.get('meteor', float('nan')):.4f} | "
              f"{s['videos_per_s'] / hf['videos_per_s']:.2f}x |")
    print(f"\nidentical captions: {same:.0%} of {len(vllm_caps)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
