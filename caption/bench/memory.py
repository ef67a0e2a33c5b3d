"""Memory flat as the folder grows: peak RSS of the whole caption job at 100 and at 2,000 clips.

    caption-bench memory                     # embedded model, vLLM, 100 vs 2,000 clips
    caption-bench memory --engine hf --small 50 --large 500
    caption-bench memory --distinct          # 2,000 distinct clips (caption-synth, slow to make)

Each size is one `caption` process (decoders in worker processes; their memory is apart and flat by
construction, video_io/workers.py); the job process's peak RSS (VmHWM) comes from the job summary.
Without --distinct the large folder holds symlinks to the small folder's clips under new names:
every name is its own video to the job (its own requests and records), which is what grows
per-video state; identical frames only make vLLM's prefix cache hit more. Output lengths are forced
short (benchmark.output_tokens) so the run takes minutes, not hours. The last line is one JSON
object with both peaks and their ratio (the target: <= 1.10). Writes <out>/results.json, results.md
and results.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from caption.bench.harness import BENCH_DATA, MODELS, bars, bench_model, clip_set, run_caption, write_results

SEED = 9


def folder(n: int, base: Path | None, distinct: bool) -> Path:
    """n clips: generated (distinct, or the base folder itself), or symlinks cycling over `base`."""
    if distinct or base is None:
        return clip_set("memory", n, SEED)
    path = BENCH_DATA / f"memory-seed{SEED}-n{n}-links"
    sources = sorted(base.glob("*.mp4"))
    path.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        link = path / f"clip_{i:05d}.mp4"
        if not link.is_symlink():
            link.symlink_to(sources[i % len(sources)])
    return path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--large", type=int, default=2000)
    ap.add_argument("--engine", choices=("vllm", "hf"), default="vllm")
    ap.add_argument("--model", choices=MODELS, default="embedded")
    ap.add_argument("--distinct", action="store_true", help="generate the large folder instead of symlinking")
    ap.add_argument("--threads", type=int, default=None, help="compute threads (see caption-bench engines --threads)")
    ap.add_argument("--tokens", type=int, default=8, help="forced output tokens per request (median; 4x max)")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/memory-<engine>-<model>")


def run(args) -> int:
    overrides = [*bench_model(args.model), f"sampling.max_new_tokens={4 * args.tokens}",
                 f"benchmark.output_tokens={{median:{args.tokens},sigma:0.5,min:1,max:{4 * args.tokens}}}"]
    small = folder(args.small, None, True)
    large = folder(args.large, small, args.distinct)
    out = args.out or BENCH_DATA / f"memory-{args.engine}-{args.model}"
    rows = {}
    for n, clips in ((args.small, small), (args.large, large)):
        print(f"running {n} clips ...", file=sys.stderr, flush=True)
        rows[n] = run_caption(clips, out / str(n), overrides, engine=args.engine, threads=args.threads).summary
    title = f"{args.engine}, {args.model} model, forced lengths median {args.tokens}, one `caption` process per row"
    lines = [f"{title}\n", "| clips | peak RSS (GiB) | videos/s | generation wall (s) | records ok |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {s['peak_rss_gib']:.3f} | {s['videos_per_s']} | {s['generation_wall_s']} | {s['captions_ok']} |"
              for n, s in rows.items()]
    print("\n" + "\n".join(lines))
    a, b = rows[args.small]["peak_rss_gib"], rows[args.large]["peak_rss_gib"]
    headline = {"engine": args.engine, "model": args.model, "small": args.small, "large": args.large,
                "peak_rss_gib_small": a, "peak_rss_gib_large": b, "ratio": round(b / a, 4), "distinct": args.distinct}
    write_results(out, "memory", {**headline, "summaries": {str(n): s for n, s in rows.items()}}, lines,
                  bars([f"{n} clips" for n in rows], {"peak RSS (GiB)": [s["peak_rss_gib"] for s in rows.values()]},
                       "peak RSS of the job process (GiB)"), title)
    print(json.dumps(headline))
    return 0
