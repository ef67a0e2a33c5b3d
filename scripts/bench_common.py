"""What the engine benchmarks share: composing a job config, a decoded clip set, requests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from caption.config import CONF_DIR, REPO_ROOT, load_job_config
from caption.engines.base import Request
from caption.prompts import build_prompt
from video_io.crawl import crawl_videos
from video_io.synth.dataset import generate_dataset
from video_io.workers import DecodePool


def job_config(clips: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"input_dir={clips}", f"output={clips}/unused.jsonl",
                                                        "engine=vllm", *overrides])
    return load_job_config(cfg)


def bench_clips(name: str, n: int, seed: int) -> tuple[Path, list]:
    """A synthetic clip folder under data/bench (made once) and its clips decoded as the job would."""
    clips = REPO_ROOT / "data" / "bench" / f"{name}-seed{seed}-n{n}"
    if not (clips / "references.jsonl").exists():
        generate_dataset(clips, n, seed)
    job = job_config(clips, [])
    with DecodePool(job.decode, workers=2) as pool:
        decoded = sorted(((r.path, r.clip) for r in pool.imap(str(p) for _, p in crawl_videos(clips))),
                         key=lambda item: item[0])
    return clips, decoded


def requests(job, decoded, tasks) -> list[Request]:
    return [Request(key=key, task=task, adapter=None, prompt=build_prompt(job.model.family, task),
                    frames=clip.frames, video_metadata=clip.metadata())
            for key, clip in decoded for task in tasks]
