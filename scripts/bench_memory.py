"""Memory flat as the folder grows: peak RSS of the whole caption job at 100 and at 2,000 clips.

    python scripts/bench_memory.py                     # embedded model, vLLM, 100 vs 2,000 clips
    python scripts/bench_memory.py --engine hf --small 50 --large 500
    python scripts/bench_memory.py --distinct          # 2,000 distinct clips (caption-synth, slow to make)

Each size is one `caption` process (decoders in worker processes; their memory is apart and flat by
construction, video_io/workers.py); the job process's peak RSS (VmHWM) comes from the job summary.
Without --distinct the large folder holds symlinks to the small folder's clips under new names:
every name is its own video to the job (its own requests and records), which is what grows
per-video state; identical frames only make vLLM's prefix cache hit more. Output lengths are forced
short (benchmark.output_tokens) so the run takes minutes, not hours. The last line is one JSON
object with both peaks and their ratio (the target: <= 1.10).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench_common import MODELS, model_overrides

from caption.config import REPO_ROOT
from video_io.synth.dataset import generate_dataset

SEED = 9


def folder(n: int, base: Path | None, distinct: bool) -> Path:
    """n clips: generated (distinct, or the base folder itself), or symlinks cycling over `base`."""
    if distinct or base is None:
        path = REPO_ROOT / "data" / "bench" / f"memory-seed{SEED}-n{n}"
        if not (path / "references.jsonl").exists():
            generate_dataset(path, n, SEED)
        return path
    path = REPO_ROOT / "data" / "bench" / f"memory-seed{SEED}-n{n}-links"
    sources = sorted(base.glob("*.mp4"))
    path.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        link = path / f"clip_{i:05d}.mp4"
        if not link.is_symlink():
            link.symlink_to(sources[i % len(sources)])
    return path


def run(clips: Path, engine: str, overrides: list[str], out: Path, threads: int | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    output = out / "records.jsonl"
    for stale in (output, Path(f"{output}.summary.json")):
        stale.unlink(missing_ok=True)
    command = [sys.executable, "-m", "caption", f"input_dir={clips}", f"output={output}", f"engine={engine}",
               "resume=false", "progress=false", "references=null", f"hydra.run.dir={out}", *overrides]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if threads is not None:  # as scripts/bench_engines.py --threads
        env["OMP_NUM_THREADS"] = str(threads)
        command.append("gpu.env.VLLM_CPU_OMP_THREADS_BIND=nobind")
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{clips} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(Path(f"{output}.summary.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--large", type=int, default=2000)
    ap.add_argument("--engine", choices=("vllm", "hf"), default="vllm")
    ap.add_argument("--model", choices=MODELS, default="embedded")
    ap.add_argument("--distinct", action="store_true", help="generate the large folder instead of symlinking")
    ap.add_argument("--threads", type=int, default=None, help="compute threads (see bench_engines.py --threads)")
    ap.add_argument("--tokens", type=int, default=8, help="forced output tokens per request (median; 4x max)")
    args = ap.parse_args()
    overrides = [*model_overrides(args.model), f"sampling.max_new_tokens={4 * args.tokens}",
                 f"benchmark.output_tokens={{median:{args.tokens},sigma:0.5,min:1,max:{4 * args.tokens}}}"]
    small = folder(args.small, None, True)
    large = folder(args.large, small, args.distinct)
    out = REPO_ROOT / "data" / "bench" / f"memory-{args.engine}-{args.model}"
    rows = {}
    for n, clips in ((args.small, small), (args.large, large)):
        print(f"running {n} clips ...", file=sys.stderr, flush=True)
        rows[n] = run(clips, args.engine, overrides, out / str(n), args.threads)
    print(f"\n{args.engine}, {args.model} model, forced lengths median {args.tokens}, one `caption` process per row\n")
    print("| clips | peak RSS (GiB) | videos/s | generation wall (s) | records ok |")
    print("|---|---|---|---|---|")
    for n, s in rows.items():
        print(f"| {n} | {s['peak_rss_gib']:.3f} | {s['videos_per_s']} | {s['generation_wall_s']} | {s['captions_ok']} |")
    a, b = rows[args.small]["peak_rss_gib"], rows[args.large]["peak_rss_gib"]
    print(json.dumps({"engine": args.engine, "model": args.model, "small": args.small, "large": args.large,
                      "peak_rss_gib_small": a, "peak_rss_gib_large": b, "ratio": round(b / a, 4),
                      "distinct": args.distinct}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
