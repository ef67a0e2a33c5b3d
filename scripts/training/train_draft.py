"""Train the text-only draft model for speculative decoding with the embedded captioner.

    python -m scripts.training.train_draft                 # ~3 min on 2 cores (600 steps)
    python -m scripts.training.train_draft --steps 20 --out /tmp/draft   # smoke run

vLLM 0.32 refuses a vision-language draft ("does not support M-RoPE yet") but takes a text-only
causal LM that shares the target's tokenizer: the real-world pairing is Qwen2.5-0.5B-Instruct
drafting for Qwen2.5-VL-7B. This builds the same pairing in miniature: a 2-layer Qwen2 causal LM
with the embedded model's tokenizer, trained on the token sequences the target sees (system
prompt, video placeholders, instruction) followed by the target's answers (every task, and the
detailed style the LoRA adapter writes). It cannot see the video, so it learns the captions'
language: the fixed parts it guesses right, the attributes only by prior.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from caption.prompts import INSTRUCTIONS_KO, build_prompt
from caption.settings.config import REPO_ROOT
from video_io.synth.attributes import draw_attributes
from video_io.synth.captions_ko import TASK_ANSWERS, detailed_caption

DRAFT = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, head_dim=64, max_position_embeddings=1024, rms_norm_eps=1e-6,
             rope_theta=10000.0, tie_word_embeddings=True)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def prompt_ids(processor, task: str) -> list[int]:
    """The target's prompt tokens for a task, video placeholders expanded as for 8 frames of 56x56."""
    from transformers.video_utils import VideoMetadata

    meta = VideoMetadata(total_num_frames=32, fps=8.0, duration=4.0,
                         frames_indices=list(range(2, 32, 4)), video_backend="decord")
    out = processor(text=[build_prompt("qwen2_5_vl", task)], videos=[np.zeros((8, 56, 56, 3), np.uint8)],
                    video_metadata=[meta], do_sample_frames=False, return_tensors="pt")
    return out["input_ids"][0].tolist()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=Path, default=REPO_ROOT / "assets/models/vidcap-ko-tiny")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "assets/models/vidcap-ko-draft")
    ap.add_argument("--sequences", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from transformers import AutoProcessor, Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    processor = AutoProcessor.from_pretrained(args.target)
    tok = processor.tokenizer
    target_config = json.loads((args.target / "config.json").read_text())
    end_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    prompts = {task: prompt_ids(processor, task) for task in INSTRUCTIONS_KO}
    answers = {**TASK_ANSWERS}
    rng = np.random.default_rng(args.seed)
    sequences, starts = [], []
    for i in range(args.sequences):
        attributes = draw_attributes(rng)
        task = ["caption", "caption", "keywords", "motion", "detailed"][i % 5]
        text = detailed_caption(attributes) if task == "detailed" else answers[task](attributes)
        prompt = prompts["caption" if task == "detailed" else task]
        sequences.append(prompt + tok(text).input_ids + [end_id])
        starts.append(len(prompt))

    config = Qwen2Config(vocab_size=target_config["text_config"]["vocab_size"], bos_token_id=pad_id,
                         eos_token_id=end_id, pad_token_id=pad_id, **DRAFT)
    model = Qwen2ForCausalLM(config)
    print(f"draft: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{len(sequences)} training sequences")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 25)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    model.train()
    losses = []
    for step in range(1, args.steps + 1):
        rows = rng.choice(len(sequences), size=args.batch, replace=False)
        width = max(len(sequences[r]) for r in rows)
        ids = torch.full((args.batch, width), pad_id)
        labels = torch.full((args.batch, width), -100)
        mask = torch.zeros((args.batch, width), dtype=torch.long)
        for j, r in enumerate(rows):
            seq = torch.tensor(sequences[r])
            ids[j, :len(seq)], mask[j, :len(seq)] = seq, 1
            labels[j, starts[r]:len(seq)] = seq[starts[r]:]  # learn the answers, not the prompt
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == 1:
            print(f"step {step:5d}  loss {np.mean(losses[-100:]):.4f}", flush=True)

    model.eval()
    model.generation_config.eos_token_id = [end_id, pad_id]
    model.generation_config.pad_token_id = pad_id
    model.save_pretrained(args.out)
    for name in TOKENIZER_FILES:  # the same tokenizer as the target, byte for byte
        shutil.copy(args.target / name, args.out / name)
    def portable(value):  # paths inside the repo are logged relative to it
        return str(value.relative_to(REPO_ROOT)) if isinstance(value, Path) and value.is_relative_to(REPO_ROOT) \
            else str(value)

    log = {"target": portable(args.target), "args": {k: portable(v) for k, v in vars(args).items()},
           "final_loss": round(float(np.mean(losses[-100:])), 4),
           "minutes_total": round((time.perf_counter() - started) / 60, 1)}
    (args.out / "training_log.json").write_text(json.dumps(log, indent=2) + "\n")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
