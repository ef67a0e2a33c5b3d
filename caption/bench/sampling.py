"""Sampling presets, measured: METEOR, videos/s and caption length per preset on both engines.

    caption-bench sampling                 # 100 held-out clips, every preset
    caption-bench sampling --n 60 --presets greedy quality --engines vllm

Makes the held-out clips (caption-synth, caption.bench.harness.HELD_OUT_SEED: never used in training or
validation, see assets/models/vidcap-ko-tiny/README.md), then runs the real caption job in a fresh
process once per (preset, engine), scoring METEOR against the clips' references. Two extra rows take
the design's min_new_tokens (50) out, to show what it costs a model whose captions are ~13 tokens.
Prints a markdown table and writes results.json, results.md and results.png to --out. Sampling
presets draw with the engine's seed 0: one draw, not an average.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from caption.bench.harness import BENCH_DATA, HELD_OUT_SEED, clip_set, run_caption, write_results

PRESETS = ("greedy", "factual", "balanced", "creative", "speed", "quality")
# (label, preset, overrides, engines): the design's presets without their 50-token minimum
VARIANTS = (("balanced, min_new_tokens=0", "balanced", ["sampling.min_new_tokens=0"], ("vllm", "hf")),
            ("quality, min_new_tokens=0", "quality", ["sampling.min_new_tokens=0"], ("hf",)))


def run_one(clips: Path, out: Path, label: str, preset: str, engine: str, overrides: list[str]) -> dict:
    job = run_caption(clips, out / f"{label.replace(', ', '-').replace('=', '')}-{engine}",
                      [f"sampling={preset}", *overrides], engine=engine, references=True, check=False)
    if job.summary is None:
        raise SystemExit(f"{label} on {engine} wrote no summary (exit {job.exit_code}):\n{job.log_tail()}")
    summary = job.summary
    ok = summary["captions_ok"]
    return {"label": label, "preset": preset, "engine": summary["engine"], "overrides": overrides,
            "meteor": summary.get("meteor"), "videos_per_s": summary["videos_per_s"],
            "mean_output_tokens": round(summary["output_tokens"] / ok, 1) if ok else None,
            "captions_ok": ok, "captions_failed": summary["captions_failed"],
            "generation_wall_s": summary["generation_wall_s"], "output": str(job.output)}


def plot(rows: list[dict]):
    def draw(fig) -> None:
        labels = list(dict.fromkeys(r["label"] for r in rows))
        engines = list(dict.fromkeys(r["engine"] for r in rows))
        axes = fig.subplots(1, 2)
        width = 0.8 / len(engines)
        for panel, (key, title) in zip(axes, (("meteor", f"METEOR (held-out, seed {HELD_OUT_SEED})"),
                                              ("videos_per_s", "videos/s"))):
            for i, engine in enumerate(engines):
                values = {r["label"]: r[key] for r in rows if r["engine"] == engine}
                xs = [j + (i - (len(engines) - 1) / 2) * width for j in range(len(labels))]
                panel.bar(xs, [values.get(label) or 0 for label in labels], width, label=engine)
            panel.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
            panel.set_title(title)
            panel.legend()
        axes[1].set_yscale("log")
    return draw


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=100, help="held-out clips (default 100)")
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    ap.add_argument("--engines", nargs="+", default=["vllm", "hf"], choices=["vllm", "hf"])
    ap.add_argument("--no-variants", action="store_true", help="skip the min_new_tokens=0 rows")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "sampling-results")


def run(args) -> int:
    clips = clip_set("sampling", args.n, HELD_OUT_SEED)
    jobs = [(p, p, [], e) for p in args.presets for e in args.engines]
    if not args.no_variants:
        jobs += [(label, p, o, e) for label, p, o, engines in VARIANTS if p in args.presets
                 for e in engines if e in args.engines]
    rows = [run_one(clips, args.out, label, preset, engine, overrides) for label, preset, overrides, engine in jobs]
    title = f"{args.n} held-out clips (seed {HELD_OUT_SEED}), caption task, gpu=cpu, embedded model"
    lines = [f"{title}\n", "| preset | engine | METEOR | videos/s | mean output tokens | failed |", "|---|---|---|---|---|---|"]
    for r in rows:
        meteor = "" if r["meteor"] is None else f"{r['meteor']:.4f}"
        lines.append(f"| {r['label']} | {r['engine']} | {meteor} | {r['videos_per_s']:.2f} | "
                     f"{r['mean_output_tokens']} | {r['captions_failed']} |")
    print("\n" + "\n".join(lines))
    write_results(args.out, "sampling", {"n": args.n, "seed": HELD_OUT_SEED, "rows": rows}, lines, plot(rows), title,
                  figsize=(13, 4.8))
    return 0
