"""vLLM alone on clips decoded beforehand: the throughput a whole `caption` job is held against.

    caption-bench engine-only --clips data/bench/engines-seed707-n96 -- \\
        hydra.searchpath=[file://$PWD/data/models/qwen2_5_vl-cpu/vidcap_preset] model=random_qwen2_5_vl_cpu \\
        gpu.max_num_seqs=32 "benchmark.output_tokens={median:40,sigma:0.6,min:8,max:200,seed:0}"

`caption-bench engines` runs it after each vLLM row, with that row's overrides and threads, so the
two numbers come from the same clips, plan, engine settings and forced lengths. Here every clip is
decoded first (decoder processes, as the job's), then the job's own VllmEngine is built and every
request goes to vLLM's `LLM.generate` in one call: its scheduler has all of them from the start,
nothing waits on a decoder, nothing is written. The time counts from the engine being ready to
`generate` returning, as the job's `videos_per_s` counts from the engine being ready to its last
record; vLLM's multimodal processor runs inside both. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from caption.bench.harness import job_config
from caption.engines.base import Request
from caption.prompts import build_prompt
from video_io.crawl import crawl_videos
from video_io.workers import DecodePool

if TYPE_CHECKING:
    from caption.settings.config import JobConfig


def decoded_requests(job: JobConfig, clips: Path) -> list[Request]:
    """The job's requests for every clip of `clips`, keyed and forced as the job keys and forces them
    (the clip's path relative to the folder; benchmark.output_tokens drawn from that key)."""
    videos = crawl_videos(clips)
    keys = {str(path): key for key, path in videos}
    with DecodePool(job.decode, workers=2) as pool:
        results = sorted(pool.imap(str(path) for _, path in videos), key=lambda r: keys[r.path])
    failed = [r.path for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} clip(s) failed to decode, e.g. {failed[0]}")
    requests = []
    for result in results:
        key, clip = keys[result.path], result.clip
        for task in job.options.tasks:
            forced = job.forced_lengths.draw(key, task, None) if job.forced_lengths is not None else None
            requests.append(Request(key=key, task=task, adapter=None, prompt=build_prompt(job.model.family, task),
                                    frames=clip.frames, video_metadata=clip.metadata(),
                                    forced_output_tokens=forced))
    return requests


def count_steps(llm_engine) -> dict:
    """Count and time the engine steps LLM.generate makes (it calls llm_engine.step() until done), as
    the job's summary counts its own (engine_steps, stages_s.engine_step)."""
    counts, step = {"steps": 0, "seconds": 0.0}, llm_engine.step

    def counted():
        started = time.perf_counter()
        try:
            return step()
        finally:
            counts["steps"] += 1
            counts["seconds"] += time.perf_counter() - started

    llm_engine.step = counted
    return counts


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clips", type=Path, required=True, help="the folder of clips the job ran on")
    ap.add_argument("overrides", nargs="*", help="the job's Hydra overrides (model, gpu, max_num_seqs, lengths)")


def run(args) -> int:
    from caption.engines.vllm_engine import VllmEngine

    job = job_config(args.clips, args.overrides)
    if job.adapters:
        raise SystemExit("engine-only runs the base model: leave lora at none")
    requests = decoded_requests(job, args.clips)
    engine = VllmEngine(job.engine_spec)
    steps = count_steps(engine.llm.llm_engine)
    try:
        started = time.perf_counter()
        outputs = engine.llm.generate([engine.prompt_for(r) for r in requests],
                                      [engine.params_for(r) for r in requests], use_tqdm=False)
        wall = time.perf_counter() - started
    finally:
        engine.close()
    produced = [len(o.outputs[0].token_ids) for o in outputs]
    if any(r.forced_output_tokens is not None and n != r.forced_output_tokens for r, n in zip(requests, produced)):
        raise SystemExit("some request did not get its forced length: not the job's work")
    videos = len({r.key for r in requests})
    print(json.dumps({"videos": videos, "requests": len(requests), "output_tokens": sum(produced),
                      "wall_s": round(wall, 3), "videos_per_s": round(videos / wall, 3),
                      "output_tokens_per_s": round(sum(produced) / wall, 1),
                      "engine_steps": steps["steps"], "engine_step_s": round(steps["seconds"], 3),
                      "engine_load_s": round(engine.load_s, 2), "max_num_seqs": job.plan.vllm["max_num_seqs"]}))
    return 0

