"""Video-token pruning (video.prune_rate, vLLM's EVS), measured: speed, memory and METEOR at each rate.

    caption-bench prune                      # 24 clips x 4 rates x 2 batch sizes, then METEOR; ~15 min
    caption-bench prune --n 48 --rates 0 0.5
    caption-bench prune --model 7b --gpu h100 --n 96   # a GPU machine: the 7B shape on that tier

Speed: the whole `caption` job on the bench model (caption-make-model's ~157M-parameter Qwen2.5-VL,
random weights) with frames of 448x252, the size real footage gets (576 video tokens per clip at 8
frames), every request forced to the same output length so each rate does the same generation
work; once with one request in flight (gpu.max_num_seqs=1 and engine.max_inflight=1, so TTFT is not
time spent queueing) and once with the tier's full batch.
Reported: videos/s of the job, TTFT p50 from vLLM's per-request metrics, video tokens per request as
the engine reports them, and the job's peak memory. Quality: METEOR of the embedded model on
caption-synth clips at the same rates, apart for clips whose object moves slowly (nearly still) and
fast. Writes <out>/results.json, results.md and results.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from caption.bench.harness import BENCH_DATA, HELD_OUT_SEED, MODELS, bench_model, clip_set, run_caption, write_results

SIZE = (448, 252)  # a 16:9 frame within Qwen2.5-VL's usual budget, both sides multiples of 28
SPEED_SEED = 606
LENGTHS = "{median:24,sigma:0.0,min:24,max:24,seed:0}"  # the same work at every rate


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=24, help="clips for the speed runs")
    ap.add_argument("--quality-n", type=int, default=48, help="held-out caption-synth clips for METEOR")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75])
    ap.add_argument("--model", choices=MODELS, default="bench", help="the speed runs' model (random weights but "
                    "embedded); 7b on a GPU machine")
    ap.add_argument("--gpu", default=None, help="the tier every run takes (gpu=...); default: this machine's")
    ap.add_argument("--threads", type=int, default=None, help="one unbound OpenMP pool of this size")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "prune")


def speed_row(clips: Path, out: Path, rate: float, batch: str, args) -> dict:
    """One whole job at `rate` with one request in flight or the full batch."""
    overrides = [*bench_model(args.model), *([f"gpu={args.gpu}"] if args.gpu else []), f"video.width={SIZE[0]}", f"video.height={SIZE[1]}",
                 f"video.prune_rate={rate}", f"benchmark.output_tokens={LENGTHS}",
                 *(["gpu.max_num_seqs=1", "engine.max_inflight=1"] if batch == "1" else [])]
    run = run_caption(clips, out / f"speed-{batch}-{rate}", overrides, engine="vllm", threads=args.threads)
    records = [r for r in run.records() if r["status"] == "ok"]
    ttfts = [r["ttft_s"] for r in records if r.get("ttft_s") is not None]
    return {"model": args.model, "rate": rate, "batch": batch, "videos_per_s": run.summary["videos_per_s"],
            "ttft_p50_ms": 1000 * statistics.median(ttfts) if ttfts else None,
            "video_tokens": statistics.median(r["video_tokens"] for r in records),
            "prompt_tokens": statistics.median(r["prompt_tokens"] for r in records),
            "peak_rss_gib": run.peak_rss_gib, "wall_s": run.wall_s}


def split_by_speed(clips: Path) -> dict[str, Path]:
    """caption-synth clips in two folders (links) by how fast their object moves."""
    rows = [json.loads(line) for line in (clips / "references.jsonl").read_text(encoding="utf-8").splitlines()]
    folders = {}
    for speed in ("slow", "fast"):
        folder = clips.parent / f"{clips.name}-{speed}"
        folder.mkdir(exist_ok=True)
        kept = [row for row in rows if row["attributes"]["speed"] == speed]
        for row in kept:
            link = folder / row["video"]
            if not link.exists():
                link.symlink_to(clips / row["video"])
        (folder / "references.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept),
                                                 encoding="utf-8")
        folders[speed] = folder
    return folders


def quality_row(folders: dict[str, Path], out: Path, rate: float, args) -> dict:
    """METEOR of the embedded model at `rate`, on the slow and on the fast clips."""
    row = {"rate": rate}
    for speed, folder in folders.items():
        run = run_caption(folder, out / f"quality-{speed}-{rate}",
                          [f"video.prune_rate={rate}", *([f"gpu={args.gpu}"] if args.gpu else [])], engine="vllm",
                          references=True, threads=args.threads)
        row[f"meteor_{speed}"] = run.summary["meteor"]
        row[f"video_tokens_{speed}"] = statistics.median(r["video_tokens"] for r in run.records())
        row[f"clips_{speed}"] = run.summary["videos_run"] if "videos_run" in run.summary else len(run.records())
    return row


def tables(speed: list[dict], quality: list[dict]) -> list[str]:
    base = {r["batch"]: r["videos_per_s"] for r in speed if r["rate"] == 0}
    lines = [f"Speed: the {speed[0]['model']} model, frames {SIZE[0]}x{SIZE[1]}, 8 per clip, {LENGTHS} output tokens\n",
             "| prune_rate | in flight | videos/s | vs rate 0 | TTFT p50 (ms) | video tokens | prompt tokens | peak RSS (GiB) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in speed:
        ratio = f"{r['videos_per_s'] / base[r['batch']]:.2f}x" if base.get(r["batch"]) else ""
        ttft = "" if r["ttft_p50_ms"] is None else f"{r['ttft_p50_ms']:.0f}"
        lines.append(f"| {r['rate']:g} | {r['batch']} | {r['videos_per_s']:.3f} | {ratio} | {ttft} | "
                     f"{r['video_tokens']:g} | {r['prompt_tokens']:g} | {r['peak_rss_gib'] or 0:.2f} |")
    lines += ["", "Quality: the embedded model on held-out caption-synth clips (56x56 frames, 16 video tokens)\n",
              "| prune_rate | video tokens | METEOR, slow (nearly still) | METEOR, fast |", "|---|---|---|---|"]
    for q in quality:
        lines.append(f"| {q['rate']:g} | {q['video_tokens_slow']:g} | {q['meteor_slow']:.4f} ({q['clips_slow']} clips) | "
                     f"{q['meteor_fast']:.4f} ({q['clips_fast']} clips) |")
    return lines


def run(args) -> int:
    out = Path(args.out)
    speed_clips = clip_set("prune", args.n, SPEED_SEED, size=SIZE)
    speed = [speed_row(speed_clips, out, rate, batch, args) for batch in ("1", "full") for rate in args.rates]
    folders = split_by_speed(clip_set("prune-quality", args.quality_n, HELD_OUT_SEED))
    quality = [quality_row(folders, out, rate, args) for rate in args.rates]
    lines = tables(speed, quality)
    print("\n" + "\n".join(lines))
    title = (f"video.prune_rate on vLLM ({args.gpu or 'this machine'}): {args.model} model {SIZE[0]}x{SIZE[1]} x 8 frames, {args.n} clips; "
             f"METEOR of the embedded model on {args.quality_n} held-out clips")
    write_results(out, "prune", {"speed": speed, "quality": quality, "size": SIZE, "clips": args.n,
                                 "quality_clips": args.quality_n}, lines, plot(speed, quality), title,
                  figsize=(8.4, 4.2))
    return 0


def plot(speed: list[dict], quality: list[dict]):
    """Speed (videos/s, both batch sizes) beside quality (METEOR, slow and fast clips), by rate."""
    rates = [q["rate"] for q in quality]

    def draw(fig) -> None:
        left, right = fig.subplots(1, 2)
        for batch in ("1", "full"):
            left.plot(rates, [r["videos_per_s"] for r in speed if r["batch"] == batch], "o-", label=f"{batch} in flight")
        left.set(xlabel="video.prune_rate", ylabel="videos/s (whole job)", title="speed: bench model")
        for speed_name in ("slow", "fast"):
            right.plot(rates, [q[f"meteor_{speed_name}"] for q in quality], "o-", label=f"{speed_name} clips")
        right.set(xlabel="video.prune_rate", ylabel="METEOR", ylim=(0, 1.05), title="quality: embedded model")
        for ax in (left, right):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    return draw
