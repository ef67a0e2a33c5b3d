"""What the engine benchmarks share: the model to bench, composing a job config, a decoded clip
set, requests, the machine's memory bandwidth, and the arithmetic of decode steps."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hydra import compose, initialize_config_dir

from caption.config import CONF_DIR, REPO_ROOT
from caption.planning import load_planned_job
from caption.engines.base import Request
from caption.prompts import build_prompt
from video_io.crawl import crawl_videos
from video_io.synth.dataset import generate_dataset
from video_io.workers import DecodePool


def job_config(clips: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"input_dir={clips}", f"output={clips}/unused.jsonl",
                                                        "engine=vllm", *overrides])
    return load_planned_job(cfg)


def bench_clips(name: str, n: int, seed: int, overrides: list[str] = ()) -> tuple[Path, list]:
    """A synthetic clip folder under data/bench (made once) and its clips decoded as the job would
    (frame count and size are the model preset's: pass the same overrides as the job's)."""
    clips = REPO_ROOT / "data" / "bench" / f"{name}-seed{seed}-n{n}"
    if not (clips / "references.jsonl").exists():
        generate_dataset(clips, n, seed)
    job = job_config(clips, list(overrides))
    with DecodePool(job.decode, workers=2) as pool:
        decoded = sorted(((r.path, r.clip) for r in pool.imap(str(p) for _, p in crawl_videos(clips))),
                         key=lambda item: item[0])
    return clips, decoded


def requests(job, decoded, tasks) -> list[Request]:
    return [Request(key=key, task=task, adapter=None, prompt=build_prompt(job.model.family, task),
                    frames=clip.frames, video_metadata=clip.metadata())
            for key, clip in decoded for task in tasks]


EMBEDDED_MODEL_DIR = REPO_ROOT / "assets" / "models" / "vidcap-ko-tiny"
# `--model`: the embedded checkpoint, or a random-weight Qwen2.5-VL of one of caption-make-model's shapes
# (`bench` is its `cpu` shape, ~157M parameters; `3b` / `7b` take the presets' architecture, for GPU machines)
MADE_SHAPES = {"bench": "cpu", "tiny": "tiny", "3b": "3b", "7b": "7b"}
MODELS = ("embedded", *MADE_SHAPES)


def model_dir(model: str) -> Path:
    if model == "embedded":
        return EMBEDDED_MODEL_DIR
    return REPO_ROOT / "data" / "models" / f"qwen2_5_vl-{MADE_SHAPES[model]}"


def model_overrides(model: str) -> list[str]:
    """Job overrides for `--model`: `embedded` is the 2.2M-parameter checkpoint in assets/ (all
    overhead: it says little about engines); the others are caption-make-model's random-weight
    Qwen2.5-VL of that shape, made once under data/models (`bench`: ~15-30 s; `7b`: ~16.5 GB in bf16)."""
    if model not in MODELS:
        raise SystemExit(f"--model {model}: choose one of {', '.join(MODELS)}")
    if model == "embedded":
        return []
    folder, shape = model_dir(model), MADE_SHAPES[model]
    if not (folder / "config.json").is_file():
        print(f"making the {model} model in {folder} (caption-make-model --family qwen2_5_vl --shape {shape})",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "caption.make_model", "--family", "qwen2_5_vl", "--shape", shape,
                        "--out", str(folder), "--force"], check=True)
    return [f"hydra.searchpath=[file://{folder}/vidcap_preset]", f"model=random_qwen2_5_vl_{shape}"]


def measure_bandwidth_gbs(mib: int = 512, repeats: int = 5, device: str = "cpu") -> float:
    """The memory bandwidth decode steps read from: the best of `repeats` copies of a `mib` MiB array
    (numpy on the CPU; a torch tensor on `device` "cuda", where the engine's weights and KV live),
    counting the bytes read and the bytes written (GB/s, 1e9 bytes)."""
    if device == "cuda":
        import torch

        src = torch.ones(mib * 2**20 // 8, dtype=torch.float64, device="cuda")
        dst = torch.empty_like(src)
        copy, sync, nbytes = dst.copy_, torch.cuda.synchronize, src.numel() * 8
        copy(src)  # the first copy pays the kernel's launch set-up
    else:
        src = np.ones(mib * 2**20 // 8, dtype=np.float64)
        dst = np.empty_like(src)
        copy, sync, nbytes = (lambda a: np.copyto(dst, a)), (lambda: None), src.nbytes
    best = float("inf")
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        copy(src)
        sync()
        best = min(best, time.perf_counter() - started)
    return 2 * nbytes / best / 1e9


# bytes per element: safetensors' names and torch's
WIDTH = {"F32": 4, "BF16": 2, "F16": 2, "float32": 4, "bfloat16": 2, "float16": 2}


def decoder_bytes(model_path: str, compute_dtype: str | None = None) -> dict:
    """What one decode step must read, from the checkpoint itself: the language model's weights (every
    safetensors tensor but the vision tower's; the input embedding is a lookup, counted whole, an
    overestimate of a few percent) and the KV cache bytes per token of context. `compute_dtype`: the
    dtype the engine loads them in, where it differs from the checkpoint's."""
    weights = 0
    for file in Path(model_path).glob("*.safetensors"):
        with open(file, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        for name, info in header.items():
            if name != "__metadata__" and "visual" not in name:
                start, end = info["data_offsets"]
                stored = WIDTH.get(info["dtype"], 4)  # the engine holds them converted to compute_dtype
                weights += (end - start) // stored * WIDTH.get(compute_dtype or "", stored)
    config = json.loads((Path(model_path) / "config.json").read_text())
    text = config.get("text_config", config)
    dtype = compute_dtype or str(text.get("dtype") or config.get("dtype") or text.get("torch_dtype") or "float32")
    width = WIDTH.get(dtype, 4)
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    kv_per_token = 2 * text["num_hidden_layers"] * text["num_key_value_heads"] * head_dim * width
    return {"weight_bytes": weights, "kv_bytes_per_token": kv_per_token}


def percentile(values, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None
