"""Train the "detailed" Korean caption LoRA adapter for the embedded model, with peft.

    python -m scripts.training.train_lora                      # ~10 min on 2 cores
    python -m scripts.training.train_lora --steps 20 --train-clips 128 --out /tmp/lora   # smoke run

Same prompt as the base model's caption task; the adapter changes what the model says: several
sentences naming the scene and time, the sky and weather, and where the object comes from and
goes (`references_detailed` in caption-synth's references.jsonl). Only the language model's
linear layers get adapters (the vision tower is untouched), which is what vLLM serves.
The data, the adapter and its evaluation are deterministic given --seed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from caption.settings.config import REPO_ROOT
from eval.meteor import meteor_score
from scripts.training.train_toy import Batcher, decode_and_preprocess, greedy_captions, make_split, synth_version
from vidcap_ko.families.qwen2_5_vl import transformers_fix
from video_io.synth.captions_ko import detailed_caption

LORA_TRAIN_SEED, LORA_EVAL_SEED = 111, 212
# the language model's linear layers (vision tower blocks use other names: qkv, proj)
TARGET_MODULES = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, default=REPO_ROOT / "assets/models/vidcap-ko-tiny")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "assets/adapters/vidcap-ko-detailed")
    ap.add_argument("--work", type=Path, default=REPO_ROOT / "data/toy-train")
    ap.add_argument("--train-clips", type=int, default=3000)
    ap.add_argument("--eval-clips", type=int, default=96)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from peft import LoraConfig, get_peft_model
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    transformers_fix()  # the positions vLLM uses (vidcap_ko/families/common/qwen2_5_vl_positions.py)
    started = time.perf_counter()
    processor = AutoProcessor.from_pretrained(args.base)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(args.base, dtype=torch.float32)
    version = synth_version()
    train = make_split(args.work / f"lora-{LORA_TRAIN_SEED}-{args.train_clips}-{version}", args.train_clips,
                       LORA_TRAIN_SEED)
    held = make_split(args.work / f"lora-eval-{LORA_EVAL_SEED}-{args.eval_clips}-{version}", args.eval_clips,
                      LORA_EVAL_SEED)
    train_px, train_meta = decode_and_preprocess(train, processor)
    eval_px, eval_meta = decode_and_preprocess(held, processor)
    answers = {"caption": detailed_caption}
    batcher = Batcher(processor, train, train_px, train_meta, answers=answers)
    eval_batcher = Batcher(processor, held, eval_px, eval_meta, answers=answers)

    config = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.0, bias="none",
                        target_modules=TARGET_MODULES, task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"LoRA r={args.rank}: {sum(p.numel() for p in trainable)} trainable parameters")
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.0)
    warmup = max(1, args.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    rng = np.random.default_rng(args.seed)
    model.train()
    losses = []
    loop_started = time.perf_counter()
    for step in range(1, args.steps + 1):
        indices = rng.choice(len(train), size=args.batch, replace=False)
        inputs, _ = batcher.batch(indices, ["caption"] * args.batch)
        loss = model(**inputs).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == 1:
            print(f"step {step:4d}  loss {np.mean(losses[-50:]):.4f}  "
                  f"{(time.perf_counter() - loop_started) / step:.2f}s/step", flush=True)

    model.eval()
    captions = greedy_captions(model, eval_batcher, eval_px, max_new_tokens=96)
    refs = [r["references_detailed"] for r in held]
    score = meteor_score(captions, refs, tokenizer="kiwi")["meteor"]
    print(f"held-out ({len(held)} clips) METEOR vs detailed references: {score:.4f}")
    print("example:", captions[0])
    # name the base, not a path on this machine (peft records whatever it was loaded from)
    model.peft_config["default"].base_model_name_or_path = "vidcap-ko-tiny"
    model.save_pretrained(args.out)
    def portable(value):  # paths inside the repo are logged relative to it
        return str(value.relative_to(REPO_ROOT)) if isinstance(value, Path) and value.is_relative_to(REPO_ROOT) \
            else str(value)

    log = {"base": portable(args.base), "args": {k: portable(v) for k, v in vars(args).items()},
           "train_data_seed": LORA_TRAIN_SEED,
           "eval_data_seed": LORA_EVAL_SEED, "heldout_meteor_detailed": round(score, 4),
           "final_loss": round(float(np.mean(losses[-50:])), 4),
           "minutes_total": round((time.perf_counter() - started) / 60, 1), "example": captions[0]}
    (args.out / "training_log.json").write_text(json.dumps(log, indent=2, ensure_ascii=False) + "\n")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
