"""The caption job, top to bottom: validate -> find clips -> load engine -> decode, generate,
record -> summarize.

Decoding runs in worker processes and feeds the engine as a stream; records are written the
moment each result arrives, keyed by clip path, so a stopped job resumes without losing or
repeating a record. A clip that cannot be decoded or generated gets an error record and the
job goes on.
"""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator

import numpy as np
from omegaconf import DictConfig

from caption.config import JobConfig, load_job_config
from caption.engines import build_engine
from caption.engines.base import Request, Result
from caption.prompts import build_prompt, prompt_format
from caption.records import RecordStore
from caption.scoring import score_captions
from caption.summary import JobTally, peak_rss_gib, print_plan, print_summary, reset_peak_rss, save_summary
from caption.sweep import write_result
from video_io.crawl import crawl_videos
from video_io.decode import Clip
from video_io.workers import DecodePool, DecodeResult


def run_job(cfg: DictConfig, engine=None) -> dict:
    """Run the job `cfg` describes; returns the summary. `engine`: an already loaded engine to
    reuse (it stays open), e.g. across several jobs in one process."""
    job = load_job_config(cfg)  # fails here, before any model loads, if the config is wrong
    if job.plan_only:
        return _report_plan(job)
    for warning in job.plan.warnings:  # e.g. a sampling knob this engine does not apply
        print(f"caption: plan warning: {warning}", file=sys.stderr)
    reset_peak_rss()
    tally = JobTally()
    videos = crawl_videos(job.input_dir)
    store = RecordStore.open(job.output, resume=job.resume, retry_errors=job.retry_errors)
    pending = [(key, path) for key, path in videos if not all(store.done(k) for k in _keys(job, key))]
    todo = pending if job.limit is None else pending[: job.limit]
    tally.videos_found, tally.videos_skipped, tally.videos_todo = len(videos), len(videos) - len(pending), len(todo)

    owns_engine = engine is None
    if owns_engine and todo:
        engine = build_engine(job, prompt_format(job.model.family).stop)
    if engine is not None:
        engine.reset_stats()  # a reused engine reports this job's counters only
    tally.generation_started = time.perf_counter()
    tally.start_progress(sum(not store.done(k) for key, _ in todo for k in _keys(job, key)), job.progress)
    try:
        if todo:
            paths = {str(path): key for key, path in todo}
            with DecodePool(job.decode, job.decode_workers, job.decode_timeout_s) as pool:
                requests = _requests(pool.imap(paths), paths, job, store, tally)
                for result in engine.run(requests):
                    _write(store, tally, _result_record(result, job))
    finally:
        tally.close_progress()
        stats = engine.stats() if engine is not None and todo else {}
        if owns_engine and engine is not None:
            engine.close()
        store.close()
    summary = tally.summary(job, stats)
    summary["peak_rss_gib"] = round(peak_rss_gib(), 3)
    summary["plan_warnings"] = list(job.plan.warnings)
    if job.references is not None:
        summary.update(score_captions(job))
    save_summary(summary, job.summary_path)
    print_summary(summary, job.summary_path)
    write_result({"plan": job.plan.to_dict(), "summary": summary})
    return summary


def _report_plan(job: JobConfig) -> dict:
    plan = job.plan.to_dict()
    path = write_result({"plan": plan, "summary": None})
    print_plan(plan, path)
    return {"plan": plan}


def _keys(job: JobConfig, video: str):
    """One record per (video, task, adapter); adapter None is the base model."""
    return [(video, task, adapter) for adapter in job.variants() for task in job.tasks]


def _write(store: RecordStore, tally: JobTally, record: dict) -> None:
    store.write(record)
    tally.count(record)


def _apply_ablation(clip: Clip, ablation: str) -> np.ndarray:
    """Diagnostics that prove the model reads motion from frame order (see the model card)."""
    if ablation == "reverse":
        return clip.frames[::-1].copy()
    if ablation == "first_frame":
        return np.repeat(clip.frames[:1], len(clip.frames), axis=0)
    return clip.frames


def _requests(decoded: Iterable[DecodeResult], keys: dict[str, str], job: JobConfig,
              store: RecordStore, tally: JobTally) -> Iterator[Request]:
    """One request per (clip, task) for clips that decoded; error records for those that did not."""
    for result in decoded:
        key = keys[result.path]
        if not result.ok:
            for video, task, adapter in _keys(job, key):
                if not store.done((video, task, adapter)):
                    _write(store, tally, _base_record(job, video, task, adapter) | {
                        "status": "error", "error": f"decode: {result.error}",
                        "decode_s": round(result.seconds, 4)})
            continue
        clip = result.clip
        tally.decode_s += clip.decode_seconds
        frames = _apply_ablation(clip, job.ablation)
        for video, task, adapter in _keys(job, key):
            if store.done((video, task, adapter)):
                continue
            yield Request(key=video, task=task, adapter=adapter,
                          prompt=build_prompt(job.model.family, task), frames=frames,
                          video_metadata=clip.metadata(),
                          context={"decode_s": clip.decode_seconds, "indices": clip.indices,
                                   "backend": clip.backend, "notes": clip.notes})


def _base_record(job: JobConfig, video: str, task: str, adapter: str | None) -> dict:
    return {"video": video, "task": task, "adapter": adapter, "status": None, "caption": None,
            "error": None, "model": job.model.name, "engine": job.engine}


def _result_record(result: Result, job: JobConfig) -> dict:
    r = result.request
    record = _base_record(job, r.key, r.task, r.adapter)
    record.update({
        "status": "error" if result.error else "ok",
        "caption": None if result.error else result.text,
        "error": f"generate: {result.error}" if result.error else None,
        "frames": len(r.frames), "frame_indices": r.context.get("indices"),
        "decoder": r.context.get("backend"),
        "prompt_tokens": result.prompt_tokens, "output_tokens": result.output_tokens,
        "finish_reason": result.finish_reason,
        "decode_s": round(r.context.get("decode_s", 0.0), 4), "generate_s": round(result.generate_s, 4),
    })
    if result.ttft_s is not None:
        record["ttft_s"] = round(result.ttft_s, 4)
    if job.ablation != "none":
        record["ablation"] = job.ablation
    if r.context.get("notes"):
        record["notes"] = r.context["notes"]
    return record
