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


BENCH_MODEL_DIR = REPO_ROOT / "data" / "models" / "qwen2_5_vl-cpu"
EMBEDDED_MODEL_DIR = REPO_ROOT / "assets" / "models" / "vidcap-ko-tiny"
MODELS = ("bench", "embedded")


def model_overrides(model: str) -> list[str]:
    """Job overrides for `--model`: `embedded` is the 2.2M-parameter checkpoint in assets/ (all
    overhead: it says little about engines); `bench` is caption-make-model's random-weight
    Qwen2.5-VL `cpu` shape (~157M parameters), made once under data/models (~15-30 s)."""
    if model == "embedded":
        return []
    if model != "bench":
        raise SystemExit(f"--model {model}: choose one of {', '.join(MODELS)}")
    if not (BENCH_MODEL_DIR / "config.json").is_file():
        print(f"making the bench model in {BENCH_MODEL_DIR} (caption-make-model --family qwen2_5_vl --shape cpu)",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "caption.make_model", "--family", "qwen2_5_vl", "--shape", "cpu",
                        "--out", str(BENCH_MODEL_DIR), "--force"], check=True)
    return [f"hydra.searchpath=[file://{BENCH_MODEL_DIR}/vidcap_preset]", "model=random_qwen2_5_vl_cpu"]


def measure_bandwidth_gbs(mib: int = 512, repeats: int = 5) -> float:
    """This machine's memory bandwidth: the best of `repeats` numpy copies of a `mib` MiB array,
    counting the bytes read and the bytes written (GB/s, 1e9 bytes)."""
    src = np.ones(mib * 2**20 // 8, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - started)
    return 2 * src.nbytes / best / 1e9


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
