"""Score the embedded captioner on a held-out synthetic set, through the whole pipeline.

    python -m scripts.training.eval_toy                       # 200 held-out clips, ~2 min on 2 cores
    python -m scripts.training.eval_toy --n 60 --engine hf    # quicker, on the transformers engine

Runs the real caption job (crawl, decoding in worker processes with video.seek=--seek, prompt, engine, JSONL
records) three times: on the frames as they are, on only the first frame repeated, and on the
frames in reverse order. It then counts from the captions how often each attribute is named
right (direction: also how often the *opposite* direction is named) and scores the captions
with METEOR (Korean morphemes, METEOR 1.5 parameters) against the references.

If the frames reach the model in order, reversed frames flip the direction and a single frame
leaves it at chance. The table is what the model card (assets/models/vidcap-ko-tiny/README.md)
reports; `--json` saves it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from caption.bench.harness import HELD_OUT_SEED, compose_config
from caption.engines import build_engine
from caption.job import run_job
from caption.planning import load_planned_job
from caption.settings.config import REPO_ROOT
from eval.meteor import meteor_score
from video_io.synth.attributes import ClipAttributes
from video_io.synth.captions_ko import parse_attributes
from video_io.synth.dataset import generate_dataset

ATTRIBUTES = ("scene", "time", "weather", "object", "direction", "speed")
ABLATIONS = ("none", "first_frame", "reverse")


def score(records_path: Path, references: dict[str, dict]) -> dict:
    captions = {}
    for line in open(records_path, encoding="utf-8"):
        record = json.loads(line)
        if record["task"] == "caption":
            captions[record["video"]] = record["caption"] if record["status"] == "ok" else ""
    videos = sorted(references)
    hits = {a: 0 for a in ATTRIBUTES}
    opposite = 0
    for video in videos:
        truth = references[video]["attributes"]
        parsed = parse_attributes(captions.get(video, ""))
        for a in ATTRIBUTES:
            hits[a] += parsed[a] == truth[a]
        opposite += parsed["direction"] == ClipAttributes(**truth).reversed().direction
    meteor = meteor_score([captions.get(v, "") for v in videos],
                          [references[v]["references"] for v in videos], tokenizer="kiwi")
    n = len(videos)
    return {"n": n, "meteor": round(meteor["meteor"], 4), **{a: round(hits[a] / n, 4) for a in ATTRIBUTES},
            "direction_opposite": round(opposite / n, 4), "missing": n - sum(v in captions for v in videos)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=HELD_OUT_SEED)
    ap.add_argument("--engine", default="vllm", choices=("vllm", "hf"))
    ap.add_argument("--data", type=Path, default=REPO_ROOT / "data" / "heldout")
    ap.add_argument("--model-path", default=None, help="another checkpoint folder (default: the preset's)")
    ap.add_argument("--seek", default="auto", choices=("auto", "keyframe", "exact"),
                    help="video.seek: which frame of each sampling segment (video_io/decode.py)")
    ap.add_argument("--json", type=Path, default=None, help="also save the table as JSON")
    args = ap.parse_args()

    folder = args.data / f"seed{args.seed}-n{args.n}"
    if not (folder / "references.jsonl").exists():
        generate_dataset(folder / "clips", args.n, args.seed)
        (folder / "clips" / "references.jsonl").rename(folder / "references.jsonl")
    references = {json.loads(line)["video"]: json.loads(line) for line in open(folder / "references.jsonl", encoding="utf-8")}

    base = [f"input_dir={folder / 'clips'}", f"engine={args.engine}", "progress=false", "resume=false",
            f"video.seek={args.seek}", "overwrite=true"]  # its own outputs: a rerun starts afresh
    if args.model_path:
        base.append(f"model.path={args.model_path}")
    job = load_planned_job(compose_config(base + [f"output={folder / 'unused.jsonl'}"]))
    engine = build_engine(job.engine_spec)  # one engine for all runs
    rows = {}
    try:
        for ablation in ABLATIONS:
            out = folder / f"captions-{args.engine}-{args.seek}-{ablation}.jsonl"
            run_job(compose_config(base + [f"output={out}", f"video.ablation={ablation}"]), engine=engine)
            rows[ablation] = score(out, references)
    finally:
        engine.close()

    print(f"\nheld-out synthetic set: {args.n} clips, seed {args.seed}, engine {args.engine}, "
          f"model {job.model.path}")
    header = ["frames", "METEOR", *ATTRIBUTES, "opposite dir."]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    labels = {"none": "as decoded", "first_frame": "first frame only", "reverse": "reversed order"}
    for ablation, r in rows.items():
        cells = [labels[ablation], f"{r['meteor']:.3f}", *(f"{r[a]:.2f}" for a in ATTRIBUTES),
                 f"{r['direction_opposite']:.2f}"]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "seed": args.seed, "engine": args.engine,
                                         "results": rows}, indent=2) + "\n")
    print(json.dumps(rows["none"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
