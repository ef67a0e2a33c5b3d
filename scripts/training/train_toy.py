"""Train the embedded Korean captioner (vidcap-ko-tiny) from scratch on CPU, deterministically.

    python -m scripts.training.train_toy --out assets/models/vidcap-ko-tiny            # ~30 min on 2 cores
    python -m scripts.training.train_toy --out /tmp/toy --steps 30 --train-clips 256   # smoke run

Data: `caption-synth` clips, decoded with the pipeline's own decoder (video_io) and
preprocessed with the model's own processor, so training sees exactly what the caption job
feeds the model. Three tasks are mixed (caption, keywords, motion; see caption/prompts.py);
the caption target is the canonical reference sentence.

Motion is hard to learn from captions alone (a prototype stayed at chance on direction), so a
training-only auxiliary head reads the vision tower's output — averaged over space within each
time group, concatenated in time order — and predicts direction and speed. It only shapes the
vision features; it is not part of the saved checkpoint, which stays a plain
Qwen2_5_VLForConditionalGeneration.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np
import torch

from caption.prompts import build_prompt
from scripts.training.toy_model import build_model, build_processor, build_tokenizer, caption_corpus
from vidcap_ko.families.qwen2_5_vl import transformers_fix
from video_io.decode import DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.synth.attributes import DIRECTIONS, SPEEDS, ClipAttributes
from video_io.synth.captions_ko import TASK_ANSWERS, parse_attributes
from video_io.synth.dataset import SynthSpec, generate_dataset
from video_io.workers import DecodePool

FAMILY = "qwen2_5_vl"
TASK_MIX = {"caption": 0.7, "keywords": 0.15, "motion": 0.15}
DECODE = DecodeSpec(sampling=SamplingSpec(mode="uniform", num_frames=8), width=56, height=56)
TRAIN_SEED, EVAL_SEED = 101, 202  # data set seeds; the card's held-out set is caption.bench.harness.HELD_OUT_SEED


def synth_version() -> str:
    """Hash of the generator's source: the data cache is rebuilt whenever the generator changes."""
    import hashlib

    import video_io.synth as synth

    digest = hashlib.sha1()
    for source in sorted(Path(synth.__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:8]


def _generate_part(args):
    folder, n, seed, start = args
    generate_dataset(Path(folder), n, seed, SynthSpec(), start=start)


def make_split(folder: Path, n: int, seed: int, parts: int = 2) -> list[dict]:
    """Generate (once) n clips in `parts` parallel folders; returns records with 'path' added."""
    chunk = math.ceil(n / parts)
    jobs = [(folder / f"part{p}", min(chunk, n - p * chunk), seed, p * chunk) for p in range(parts)]
    todo = [j for j in jobs if j[1] > 0 and not (Path(j[0]) / "references.jsonl").exists()]
    if todo:
        with mp.get_context("spawn").Pool(len(todo)) as pool:
            pool.map(_generate_part, todo)
    records = []
    for part_folder, count, _, _ in jobs:
        if count <= 0:
            continue
        for line in open(Path(part_folder) / "references.jsonl", encoding="utf-8"):
            record = json.loads(line)
            record["path"] = str(Path(part_folder) / record["video"])
            records.append(record)
    return records


def decode_and_preprocess(records: list[dict], processor) -> tuple[torch.Tensor, list[dict]]:
    """Pixel patches (N, patches, dim) of every clip, through the pipeline's decoder."""
    by_path = {}
    with DecodePool(DECODE, workers=2, timeout_s=60) as pool:
        for result in pool.imap([r["path"] for r in records]):
            if not result.ok:
                raise RuntimeError(f"training clip failed to decode: {result.path}: {result.error}")
            by_path[result.path] = result.clip
    chunks, metadata = [], []
    from transformers.video_utils import VideoMetadata

    for start in range(0, len(records), 256):
        clips = [by_path[r["path"]] for r in records[start:start + 256]]
        metas = [{k: v for k, v in c.metadata().items() if k != "do_sample_frames"} for c in clips]
        out = processor.video_processor(videos=[c.frames for c in clips], return_tensors="pt",
                                        video_metadata=[VideoMetadata(**m) for m in metas],
                                        do_sample_frames=False)
        grid = out["video_grid_thw"]
        assert (grid == grid[0]).all(), "all training clips must give the same patch grid"
        chunks.append(out["pixel_values_videos"].reshape(len(clips), int(grid[0].prod()), -1))
        metadata.extend(metas)
    return torch.cat(chunks), metadata


class Batcher:
    """Builds (inputs, aux targets) for a list of clip indices, each with a task.

    `answers` maps each task to the target text for a clip's attributes (the base model's
    tasks by default; the LoRA script passes the detailed style for the caption task)."""

    def __init__(self, processor, records, pixels, metadata, answers=None):
        self.records, self.pixels = records, pixels
        self.answer_fns = answers or {task: TASK_ANSWERS[task] for task in TASK_MIX}
        tok = processor.tokenizer
        self.pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
        self.end_id = tok.convert_tokens_to_ids("<|im_end|>")
        from transformers.video_utils import VideoMetadata

        tasks = list(self.answer_fns)
        probe = processor(text=[build_prompt(FAMILY, task) for task in tasks],
                          videos=[np.zeros((8, 56, 56, 3), np.uint8)] * len(tasks),
                          video_metadata=[VideoMetadata(**metadata[0])] * len(tasks),
                          do_sample_frames=False, padding=True, return_tensors="pt")
        self.prompt_ids = {}
        for row, task in enumerate(tasks):
            ids = probe["input_ids"][row][probe["attention_mask"][row].bool()].tolist()
            self.prompt_ids[task] = ids
        self.grid = probe["video_grid_thw"][0]
        self.video_id = tok.convert_tokens_to_ids("<|video_pad|>")
        self.second_per_grid = float(probe["second_per_grid_ts"][0])
        self.answers = {}
        self.tok = tok

    def answer_ids(self, index: int, task: str) -> list[int]:
        key = (index, task)
        if key not in self.answers:
            attributes = ClipAttributes(**self.records[index]["attributes"])
            self.answers[key] = self.tok(self.answer_fns[task](attributes)).input_ids + [self.end_id]
        return self.answers[key]

    def token_types(self, ids: torch.Tensor) -> torch.Tensor:
        """0 text, 2 video: without them transformers silently falls back to 1-D positions,
        and the model would learn positions that neither engine uses at inference."""
        return (ids == self.video_id).int() * 2

    def batch(self, indices, tasks):
        sequences, labels = [], []
        for i, task in zip(indices, tasks):
            prompt, answer = self.prompt_ids[task], self.answer_ids(i, task)
            sequences.append(prompt + answer)
            labels.append([-100] * len(prompt) + answer)
        width = max(map(len, sequences))
        ids = torch.full((len(indices), width), self.pad_id)
        lab = torch.full((len(indices), width), -100)
        mask = torch.zeros((len(indices), width), dtype=torch.long)
        for row, (seq, lb) in enumerate(zip(sequences, labels)):
            ids[row, :len(seq)], lab[row, :len(lb)], mask[row, :len(seq)] = torch.tensor(seq), torch.tensor(lb), 1
        attrs = [self.records[i]["attributes"] for i in indices]
        aux = (torch.tensor([DIRECTIONS.index(a["direction"]) for a in attrs]),
               torch.tensor([SPEEDS.index(a["speed"]) for a in attrs]))
        inputs = dict(input_ids=ids, attention_mask=mask, labels=lab, mm_token_type_ids=self.token_types(ids),
                      pixel_values_videos=self.pixels[indices].reshape(-1, self.pixels.shape[-1]),
                      video_grid_thw=self.grid.repeat(len(indices), 1),
                      second_per_grid_ts=torch.full((len(indices),), self.second_per_grid))
        return inputs, aux


@torch.no_grad()
def greedy_captions(model, batcher: Batcher, pixels: torch.Tensor, max_new_tokens: int = 28) -> list[str]:
    """Greedy captions for a block of clips (all prompts have the same length: no padding)."""
    prompt = torch.tensor(batcher.prompt_ids["caption"])
    captions = []
    for start in range(0, len(pixels), 64):
        block = pixels[start:start + 64]
        n = len(block)
        ids = prompt.repeat(n, 1)
        out = model.generate(input_ids=ids, attention_mask=torch.ones(n, len(prompt), dtype=torch.long),
                             mm_token_type_ids=batcher.token_types(ids),
                             pixel_values_videos=block.reshape(-1, block.shape[-1]),
                             video_grid_thw=batcher.grid.repeat(n, 1),
                             second_per_grid_ts=torch.full((n,), batcher.second_per_grid),
                             max_new_tokens=max_new_tokens, do_sample=False)
        captions.extend(batcher.tok.batch_decode(out[:, len(prompt):], skip_special_tokens=True))
    return captions


def attribute_accuracy(captions: list[str], records: list[dict]) -> dict[str, float]:
    keys = ("scene", "time", "weather", "object", "direction", "speed")
    hits = {k: 0 for k in keys}
    for caption, record in zip(captions, records):
        parsed = parse_attributes(caption)
        for k in keys:
            hits[k] += parsed[k] == record["attributes"][k]
    return {k: round(v / max(1, len(records)), 4) for k, v in hits.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("data/toy-train"), help="synthetic data cache")
    ap.add_argument("--train-clips", type=int, default=8000)
    ap.add_argument("--eval-clips", type=int, default=192)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--aux-weight", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    transformers_fix()  # train with the positions vLLM (and Qwen) use: see vidcap_ko/families/common/qwen2_5_vl_positions.py
    started = time.perf_counter()
    tokenizer = build_tokenizer(caption_corpus())
    processor = build_processor(tokenizer)
    model = build_model(tokenizer, seed=args.seed)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab {len(tokenizer)}")

    version = synth_version()
    train = make_split(args.work / f"train-{TRAIN_SEED}-{args.train_clips}-{version}", args.train_clips, TRAIN_SEED)
    held = make_split(args.work / f"eval-{EVAL_SEED}-{args.eval_clips}-{version}", args.eval_clips, EVAL_SEED)
    print(f"data ready in {time.perf_counter() - started:.0f}s")
    train_px, train_meta = decode_and_preprocess(train, processor)
    eval_px, eval_meta = decode_and_preprocess(held, processor)
    print(f"decoded + preprocessed in {time.perf_counter() - started:.0f}s: train {tuple(train_px.shape)}")
    batcher = Batcher(processor, train, train_px, train_meta)
    eval_batcher = Batcher(processor, held, eval_px, eval_meta)

    # training-only motion head over the vision tower's merged tokens (see module docstring)
    captured = {}
    model.model.visual.register_forward_hook(lambda m, i, o: captured.__setitem__("v", o.pooler_output))
    t_groups = int(batcher.grid[0]) // 1
    tokens_per_group = int(batcher.grid[1] * batcher.grid[2]) // 4
    hidden = model.config.text_config.hidden_size
    aux_head = torch.nn.Linear(t_groups * hidden, len(DIRECTIONS) + len(SPEEDS))

    params = list(model.parameters()) + list(aux_head.parameters())
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 25)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    rng = np.random.default_rng(args.seed)
    tasks, weights = list(TASK_MIX), np.array(list(TASK_MIX.values()))
    log, history = [], []
    model.train()
    loop_started = time.perf_counter()
    for step in range(1, args.steps + 1):
        indices = rng.choice(len(train), size=args.batch, replace=False)
        batch_tasks = rng.choice(tasks, size=args.batch, p=weights / weights.sum())
        inputs, (direction, speed) = batcher.batch(indices, batch_tasks)
        out = model(**inputs)
        pooled = captured["v"].reshape(args.batch, t_groups, tokens_per_group, hidden).mean(2).reshape(args.batch, -1)
        logits = aux_head(pooled)
        aux = (torch.nn.functional.cross_entropy(logits[:, :4], direction)
               + torch.nn.functional.cross_entropy(logits[:, 4:], speed))
        loss = out.loss + args.aux_weight * aux
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        history.append((out.loss.item(), aux.item()))
        if step % 50 == 0 or step == 1:
            lm, ax = np.mean(history[-50:], axis=0)
            elapsed = time.perf_counter() - loop_started
            print(f"step {step:5d}  lm {lm:.4f}  aux {ax:.4f}  lr {schedule.get_last_lr()[0]:.2e}  "
                  f"{elapsed / step:.2f}s/step", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            model.eval()
            accuracy = attribute_accuracy(greedy_captions(model, eval_batcher, eval_px), held)
            model.train()
            entry = {"step": step, "minutes": round((time.perf_counter() - loop_started) / 60, 2),
                     "lm_loss": round(float(np.mean([h[0] for h in history[-50:]])), 4), **accuracy}
            log.append(entry)
            print("eval", json.dumps(entry), flush=True)

    model.eval()
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    summary = {"args": {k: str(v) for k, v in vars(args).items()}, "train_data_seed": TRAIN_SEED,
               "eval_data_seed": EVAL_SEED, "minutes_total": round((time.perf_counter() - started) / 60, 1),
               "seconds_per_step": round((time.perf_counter() - loop_started) / args.steps, 3),
               "parameters": sum(p.numel() for p in model.parameters()), "evals": log,
               "torch": torch.__version__}
    (args.out / "training_log.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(f"saved {args.out} ({summary['minutes_total']} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
