"""Sampling presets, measured: METEOR, videos/s and caption length per preset on both engines.

    python scripts/bench_sampling.py                 # 100 held-out clips (seed 303), every preset
    python scripts/bench_sampling.py --n 60 --presets greedy quality --engines vllm

Makes the held-out clips with `python -m video_io.synth.cli` (seed 303: never used in training or
validation, see assets/models/vidcap-ko-tiny/README.md), then runs the real caption job
(`caption.job.run_job` on a composed Hydra config) once per (preset, engine), scoring METEOR against
the clips' references. Two extra rows take the design's min_new_tokens (50) out, to show what it
costs a model whose captions are ~13 tokens. Prints a markdown table and writes results.json and
sampling.png to --out. Sampling presets draw with the engine's seed 0: one draw, not an average.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from caption.config import CONF_DIR, REPO_ROOT
from caption.job import run_job

SEED = 303
PRESETS = ("greedy", "factual", "balanced", "creative", "speed", "quality")
# (label, preset, overrides, engines): the design's presets without their 50-token minimum
VARIANTS = (("balanced, min_new_tokens=0", "balanced", ["sampling.min_new_tokens=0"], ("vllm", "hf")),
            ("quality, min_new_tokens=0", "quality", ["sampling.min_new_tokens=0"], ("hf",)))


def held_out_clips(n: int) -> Path:
    clips = REPO_ROOT / "data" / "bench" / f"sampling-seed{SEED}-n{n}"
    if not (clips / "references.jsonl").exists():
        subprocess.run([sys.executable, "-m", "video_io.synth.cli", "--out", str(clips), "--n", str(n),
                        "--seed", str(SEED)], check=True)
    return clips


def run_one(clips: Path, out: Path, label: str, preset: str, engine: str, overrides: list[str]) -> dict:
    output = out / f"{label.replace(', ', '-').replace('=', '')}-{engine}.jsonl"
    output.unlink(missing_ok=True)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"input_dir={clips}", f"output={output}", f"sampling={preset}", f"engine={engine}",
            "progress=false", "resume=false", *overrides])
    summary = run_job(cfg)
    ok = summary["captions_ok"]
    return {"label": label, "preset": preset, "engine": summary["engine"], "overrides": overrides,
            "meteor": summary.get("meteor"), "videos_per_s": summary["videos_per_s"],
            "mean_output_tokens": round(summary["output_tokens"] / ok, 1) if ok else None,
            "captions_ok": ok, "captions_failed": summary["captions_failed"],
            "generation_wall_s": summary["generation_wall_s"], "output": str(output)}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["label"] for r in rows))
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / len(engines)
    for panel, (key, title) in zip(axes, (("meteor", "METEOR (held-out, seed 303)"), ("videos_per_s", "videos/s"))):
        for i, engine in enumerate(engines):
            values = {r["label"]: r[key] for r in rows if r["engine"] == engine}
            xs = [j + (i - (len(engines) - 1) / 2) * width for j in range(len(labels))]
            panel.bar(xs, [values.get(label) or 0 for label in labels], width, label=engine)
        panel.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        panel.set_title(title)
        panel.legend()
    axes[1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="held-out clips (default 100)")
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    ap.add_argument("--engines", nargs="+", default=["vllm", "hf"], choices=["vllm", "hf"])
    ap.add_argument("--no-variants", action="store_true", help="skip the min_new_tokens=0 rows")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "bench" / "sampling-results")
    args = ap.parse_args()
    clips = held_out_clips(args.n)
    args.out.mkdir(parents=True, exist_ok=True)

    jobs = [(p, p, [], e) for p in args.presets for e in args.engines]
    if not args.no_variants:
        jobs += [(label, p, o, e) for label, p, o, engines in VARIANTS if p in args.presets
                 for e in engines if e in args.engines]
    rows = []
    for label, preset, overrides, engine in jobs:
        rows.append(run_one(clips, args.out, label, preset, engine, overrides))
        (args.out / "results.json").write_text(json.dumps({"n": args.n, "seed": SEED, "rows": rows}, indent=2,
                                                          ensure_ascii=False) + "\n", encoding="utf-8")
    plot(rows, args.out / "sampling.png")

    print(f"\n{args.n} held-out clips (seed {SEED}), caption task, gpu=cpu, embedded model\n")
    print("| preset | engine | METEOR | videos/s | mean output tokens | failed |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        meteor = "" if r["meteor"] is None else f"{r['meteor']:.4f}"
        print(f"| {r['label']} | {r['engine']} | {meteor} | {r['videos_per_s']:.2f} | "
              f"{r['mean_output_tokens']} | {r['captions_failed']} |")
    print(f"\nresults: {args.out / 'results.json'}, plot: {args.out / 'sampling.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
