"""The caption job, top to bottom: validate -> check the output -> find clips -> load engine ->
decode, generate, record -> summarize.

The runner decides where decoding and generation run: `runner=local` decodes in worker processes
that feed one engine in this process as a stream; `runner=ray` decodes in Ray tasks and captions on
a pool of engine actors (caption/runner_ray.py), each running `caption_clips` below, the same code
as the local runner. Either way records stream back here and are written the moment each arrives,
keyed by clip path, so a stopped job resumes without losing or repeating a record. A clip that cannot be decoded or generated gets an error record and the
job goes on; so does a request the engine could not take, and an engine that breaks is restarted
(a bounded number of times) with the requests it had not started. However the job ends (done,
interrupted, engine dead, fail_fast), the records are flushed and the summary says how it ended;
`caption.outcome.exit_status` turns that into the exit status.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import deque
from typing import Generator, Iterable, Iterator

import numpy as np
from omegaconf import DictConfig

from caption.admission import PositionLimits, refusal
from caption.config import JobConfig, load_job_config
from caption.console import console
from caption.engines import build_engine
from caption.engines.base import Request, Result
from caption.faults import WriteFailed, check_writable, free_bytes, writing
from caption.outcome import EngineDied, EngineFailure, FailFast, JobInterrupted, exit_status, interrupts
from caption.planning import plan_job
from caption.prompts import build_prompt
from caption.records import RecordStore, check_output, check_settings, check_summary, keep_existing, record_key
from caption.scoring import score_captions
from caption.summary import (JobTally, peak_rss_gib, print_job_start, print_plan, print_summary, reset_peak_rss,
                             save_summary)
from caption.sweep import write_result
from families import get_family
from video_io.crawl import crawl_videos
from video_io.decode import Clip
from video_io.workers import DecodePool, DecodeResult, main_script_hidden


def run_job(cfg: DictConfig, engine=None, videos: list[tuple[str, str]] | None = None) -> dict:
    """Run the job `cfg` describes; returns the summary (its `exit_status` is the process's).
    `engine`: an already loaded engine to reuse (it stays open), e.g. across jobs in one process.
    `videos`: (key, path) pairs to caption instead of crawling input_dir (the Python API's file lists)."""
    records = job_records(cfg, engine, videos)
    while True:
        try:
            next(records)
        except StopIteration as done:
            return done.value


def job_records(cfg: DictConfig, engine=None, videos: list[tuple[str, str]] | None = None) -> Generator[dict, None, dict]:
    """The job as a stream: yields each record once it is written, returns the summary. Closing the
    stream early (the caller stops iterating) stops the job: decoders and an owned engine are closed,
    the records written so far stay; no summary is written for a job its caller abandoned."""
    job = load_job_config(cfg)  # a wrong setting fails here, before anything is probed, loaded or written
    job = plan_job(job)  # the engine's settings; a plan that cannot run fails here, before any model loads
    if job.plan_only or not job.plan.fits:  # not fitting gets here only in a sweep: a row saying why
        return _report_plan(job)
    _check_outputs(job)  # refuse a file that is not ours, or a disk that cannot take it, before anything loads
    for warning in job.plan.warnings:  # on the terminal and in caption.log; the summary and records keep them
        console.warn(f"caption: plan warning: {warning}")
    reset_peak_rss()
    tally = JobTally()
    store = RecordStore.open(job.output, resume=job.resume, retry_errors=job.retry_errors, overwrite=job.overwrite,
                             expected=job.settings_ids)
    if store.kept_as is not None:
        tally.kept.append(str(store.kept_as))
    runner, stats, ended = None, {}, False  # from here on, however the job ends, the summary says how
    try:
        try:
            try:
                videos = crawl_videos(job.input_dir) if videos is None else videos
                todo = _todo(job, videos, store, tally)
                runner = _make_runner(job, engine)
                if todo:
                    runner.start()
                    tally.generation_started = time.perf_counter()
                    tally.start_progress(tally.requests_todo, job.progress)
                    for record in runner.records(todo, store.done, tally):
                        if not store.done(record_key(record)):  # a clip retried after its actor died may come twice
                            with tally.clock("write"):
                                _write(store, tally, record, job.fail_fast)
                            yield record
                    tally.generation_ended = time.perf_counter()  # before decoders and engines shut down
            except (JobInterrupted, KeyboardInterrupt):  # KeyboardInterrupt: the Python API, without our handler
                tally.stopped = "interrupted"
            except EngineDied as exc:
                tally.stopped, tally.stop_reason = "engine died", str(exc)
            except FailFast:
                tally.stopped = "fail_fast"
            except WriteFailed as exc:  # the disk, not the job: what is written stays whole, a re-run resumes
                written = tally.requests_ok + tally.requests_error
                tally.stopped = "write failed"
                tally.stop_reason = str(exc.again(tail=f"the {written} record(s) this run wrote are whole, and "
                                                       "it resumes after them"))
        except (JobInterrupted, KeyboardInterrupt):  # a first signal while handling one of the above
            tally.stopped = tally.stopped or "interrupted"
        ended = True
    finally:
        interrupts.hold()  # from here to the summary a signal is noted (the summary says interrupted), not raised
        try:
            tally.close_progress()
            stats = runner.stats() if runner is not None else {}
            if runner is not None:
                runner.close()
            store.close()
        finally:
            if not ended:  # abandoned by its caller (GeneratorExit), or a bug on its way up: no summary
                interrupts.release()
    try:
        return _summarize(job, tally, stats)
    finally:
        interrupts.release()


def _check_outputs(job: JobConfig) -> None:
    """The output and summary files are the job's to write (OutputRefused), their disk takes files
    (WriteFailed), and resuming would not mix records made another way (OutputRefused)."""
    check_output(job.output, resume=job.resume, overwrite=job.overwrite)
    check_summary(job.summary_path, overwrite=job.overwrite)
    with writing(job.output.parent, "output folder", setting="output"):
        job.output.parent.mkdir(parents=True, exist_ok=True)  # the run folder, when output is its default
    for folder, setting in ((job.output.parent, "output"), (job.summary_path.parent, "summary_path")):
        try:  # a read-only, unwritable or full disk: now, before the model loads, not after
            check_writable(folder, "output folder")
        except WriteFailed as exc:
            raise exc.again(setting=setting) from None
    if not job.overwrite:  # records made another way are never counted as this job's
        check_settings(job.output, job.settings_ids, job.settings, job.add_beside)


def _todo(job: JobConfig, videos: list, store: RecordStore, tally: JobTally) -> list:
    """The videos still to caption (resume, limit), counted in the tally and said on the terminal."""
    pending = [(key, path) for key, path in videos if not all(store.done(k) for k in _keys(job, key))]
    todo = pending if job.limit is None else pending[: job.limit]
    tally.videos_found, tally.videos_skipped, tally.videos_todo = len(videos), len(videos) - len(pending), len(todo)
    tally.requests_todo = sum(not store.done(k) for key, _ in todo for k in _keys(job, key))
    print_job_start(job, len(videos), len(todo), tally.videos_skipped,
                    _scope_notes(job) + _space_notes(job.output, tally.requests_todo))
    return todo


def _summarize(job: JobConfig, tally: JobTally, stats: dict) -> dict:
    """The summary of a job that ended (however): scored, warned, saved, printed."""
    summary = tally.summary(job, stats)
    summary["peak_rss_gib"] = round(peak_rss_gib(), 3)
    if job.references is not None and tally.stopped is None and not interrupts.received:
        summary.update(score_captions(job))  # a few seconds; a signal meanwhile ends the job after it
    if interrupts.received and summary["stopped"] is None:
        summary["stopped"] = "interrupted"
    summary["plan_warnings"] = list(job.plan.warnings)
    summary["run_warnings"] = run_warnings(job, summary)
    for warning in summary["run_warnings"]:
        console.warn(f"caption: warning: {warning}")
    summary["exit_status"] = exit_status(summary)
    _saved(write_result, {"plan": job.plan.to_dict(), "summary": summary}, summary=summary)
    saved = _saved(_replace_summary, summary, job.summary_path, summary=summary)
    print_summary(summary, job.summary_path, full=job.verbose, saved=saved)
    return summary


def _replace_summary(summary: dict, path) -> None:
    """Save the summary; an earlier one at that path (a run before this resume, or before overwrite)
    is kept beside it under a timestamped name, never overwritten."""
    kept = keep_existing(path)
    if kept is not None:
        summary["previous_files_kept_as"] = [*(summary.get("previous_files_kept_as") or []), str(kept)]
    save_summary(summary, path)


def _saved(save, *args, summary: dict) -> bool:
    """Run `save`; where the disk refuses, the job's own stop reason (if any) stays the one reported,
    else the failure becomes the job's (exit status 5). Whether it was saved."""
    try:
        save(*args)
        return True
    except WriteFailed as exc:
        if summary.get("stopped") is None:
            summary.update(stopped="write failed", stop_reason=str(exc))
            summary["exit_status"] = exit_status(summary)
        return False


def _make_runner(job: JobConfig, engine=None):
    if job.runner.name == "ray":
        if engine is not None:
            raise ValueError("runner=ray loads its engines in Ray actors: it cannot take an engine")
        from caption.runner_ray import RayRunner

        return RayRunner(job)
    return LocalRunner(job, engine)


class LocalRunner:
    """Decoding in worker processes of this machine (video.workers), generation in one engine here."""

    def __init__(self, job: JobConfig, engine=None):
        self.job, self.supervisor = job, _EngineSupervisor(job, engine)
        self.pool: DecodePool | None = None

    def start(self) -> None:
        job = self.job
        # decoder processes start (spawned: seconds of imports each) while the engine loads
        self.pool = DecodePool(job.decode, job.decode_workers, job.decode_timeout_s).__enter__()
        self.supervisor.start()

    def records(self, todo: list[tuple[str, object]], done, tally: JobTally) -> Iterator[dict]:
        job = self.job
        paths = {str(path): key for key, path in todo}
        limits = PositionLimits.from_checkpoint(job.model.path, job.model.family, job.model.max_model_len)
        yield from caption_clips(self.pool.imap(paths), paths, job, self.supervisor, limits, done, tally)

    def stats(self) -> dict:
        return {"runner": "local", **self.supervisor.stats()}

    def close(self) -> None:
        self.supervisor.close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def caption_clips(decoded: Iterable[DecodeResult], keys: dict[str, str], job: JobConfig,
                  supervisor: "_EngineSupervisor", limits: PositionLimits, done, tally: JobTally) -> Iterator[dict]:
    """Decoded clips in, records out: a record per result, and error records for clips that did not
    decode or that the engine cannot take. `done(key)`: whether a (video, task, adapter) has its record."""
    refused: deque[dict] = deque()
    requests = RequestIntake(decoded, keys, job, done, refused.append, tally, limits)
    for result in supervisor.run(requests, tally):
        while refused:
            yield refused.popleft()
        yield _result_record(result, job)
    while refused:
        yield refused.popleft()


def load_engine(job: JobConfig):
    """The engine a planned job names, loaded (a caller that keeps it passes it to run_job, e.g. the Python
    API across calls). vLLM may spawn its engine process: it must not run the caller's script again."""
    with main_script_hidden():
        return build_engine(job, get_family(job.model.family).stop)


class _EngineSupervisor:
    """Owns the engine for one job: loads it, and restarts it when it breaks mid-run (at most
    `engine.max_restarts` times), handing the new engine the requests the old one had not started.
    An engine passed in by the caller is used as it is and never restarted or closed."""

    def __init__(self, job: JobConfig, engine=None):
        self.job, self.engine, self.owned = job, engine, engine is None
        self.restarts = 0

    def start(self) -> None:
        if self.engine is None:
            self.engine = self._build()
        self.engine.reset_stats()  # a reused engine reports this job's counters only

    def run(self, requests: Iterable[Request], tally: JobTally) -> Iterator[Result]:
        stream: Iterator[Request] = iter(requests)  # a RequestIntake keeps its ready() through restarts
        while True:
            try:
                yield from self.engine.run(stream)
                return
            except EngineFailure as failure:
                tally.engine_failures.append(str(failure))
                if not self.owned or self.restarts >= self.job.engine_options.max_restarts:
                    raise EngineDied(self._died_message(failure)) from None
                self.restarts += 1
                tally.engine_restarts = self.restarts
                self.engine.close()
                self.engine = self._build()
                if isinstance(stream, RequestIntake):
                    stream.prepend(failure.unsubmitted)
                else:
                    stream = itertools.chain(failure.unsubmitted, stream)

    def _build(self):
        return load_engine(self.job)

    def _died_message(self, failure: EngineFailure) -> str:
        plan, video = self.job.plan, self.job.decode
        settings = plan.vllm if plan.vllm is not None else plan.hf
        return (f"the {self.job.engine} engine failed ({failure}) after {self.restarts} restart(s) "
                f"(engine.max_restarts={self.job.engine_options.max_restarts}). Plan: model {plan.model}, tier {plan.tier}, "
                f"{settings}, {video.sampling.num_frames} frames of {video.width}x{video.height}. If it ran out of "
                "memory, lower gpu.max_num_seqs, video.num_frames or the frame size (video.width/height)")

    def stats(self) -> dict:
        if self.engine is None:
            return {}
        try:
            return self.engine.stats()
        except Exception:  # a broken engine may not answer; the job's own counts still stand
            return {}

    def close(self) -> None:
        if self.owned and self.engine is not None:
            self.engine.close()
        self.engine = None


_END = object()


def run_warnings(job: JobConfig, summary: dict) -> list[str]:
    """What the finished job's own figures say the user should change."""
    warnings = []
    if job.speculative is not None and summary.get("spec_draft_tokens") == 0 and summary.get("output_tokens"):
        warnings.append(f"spec={job.speculative['method']} proposed no tokens in this job: speculative decoding "
                        "only cost time here; run with spec=none")
    if summary.get("captions_flagged"):
        warnings.append(f"{summary['captions_flagged']} caption(s) held undecodable text (U+FFFD or control "
                        "characters), removed and noted in their records' flags")
    return warnings


def _scope_notes(job: JobConfig) -> list[str]:
    """What the user should know before trusting the speed (warnings about captions are the plan's)."""
    notes = []
    if job.runner.name == "local" and job.plan.replicas > 1:
        notes.append(f"the plan has {job.plan.replicas} engines of {job.plan.tensor_parallel_size} GPU(s) each; "
                     "runner=local runs one of them: runner=ray runs them all")
    return notes


RECORD_BYTES_GUESS = 1024  # a caption record is ~0.6-0.9 KB (the demo's); room for longer captions


def _space_notes(output, records: int) -> list[str]:
    """Warn where the output's disk looks too small for the records to come (the job still runs:
    it stops cleanly when the disk fills, and a re-run resumes)."""
    free = free_bytes(output.parent)
    need = records * RECORD_BYTES_GUESS
    if free is None or free >= 2 * need:
        return []
    return [f"the disk holding {output} has {_size(free)} free and ~{records} records need about {_size(need)}: "
            "if it fills, the job stops (exit status 5) and a re-run resumes"]


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def _report_plan(job: JobConfig) -> dict:
    plan = job.plan.to_dict()
    path = write_result({"plan": plan, "summary": None})
    print_plan(plan, path)
    return {"plan": plan, "exit_status": 0 if job.plan_only else 2}


def _keys(job: JobConfig, video: str):
    """One record per (video, task, adapter); adapter None is the base model."""
    return [(video, task, adapter) for adapter in job.variants() for task in job.tasks]


def _write(store: RecordStore, tally: JobTally, record: dict, fail_fast: bool = False) -> None:
    store.write(record)
    tally.count(record)
    if fail_fast and record["status"] == "error":
        raise FailFast(record["video"])


def _apply_ablation(clip: Clip, ablation: str) -> np.ndarray:
    """Diagnostics that prove the model reads motion from frame order (see the model card)."""
    if ablation == "reverse":
        return clip.frames[::-1].copy()
    if ablation == "first_frame":
        return np.repeat(clip.frames[:1], len(clip.frames), axis=0)
    return clip.frames


def error_records(job: JobConfig, done, key: str, error: str, **extra) -> list[dict]:
    """The error records of a clip: one per (task, adapter) that has no record yet."""
    return [_base_record(job, video, task, adapter) | {"status": "error", "error": error} | extra
            for video, task, adapter in _keys(job, key) if not done((video, task, adapter))]


class RequestIntake:
    """Decoded clips in, requests out: one request per (clip, task, adapter) still to do, for clips that
    decoded and that the engine can take; error records for the others go to `emit`.

    `next()` waits on the decoders when nothing is ready (counted as the stage `decode_wait`); `ready()`
    says, without waiting, whether it would return at once, so that an engine with requests in flight
    takes only the clips already decoded instead of stopping its steps for the next ones (where the
    decoded stream cannot say, a list for instance, everything counts as ready)."""

    def __init__(self, decoded: Iterable[DecodeResult], keys: dict[str, str], job: JobConfig, done, emit,
                 tally: JobTally, limits: PositionLimits):
        self.decoded = iter(decoded)
        self._decoded_ready = getattr(self.decoded, "ready", None)
        self.keys, self.job, self.done, self.emit, self.tally, self.limits = keys, job, done, emit, tally, limits
        self.pending: deque[Request] = deque()
        self.ended = False

    def __iter__(self) -> "RequestIntake":
        return self

    def __next__(self) -> Request:
        while not self.pending:
            if self.ended:
                raise StopIteration
            with self.tally.clock("decode_wait"):
                result = next(self.decoded, _END)
            self._take(result)
        return self.pending.popleft()

    def ready(self) -> bool:
        while not self.pending and not self.ended:
            if self._decoded_ready is not None:
                with self.tally.clock("decode_wait"):  # receiving finished clips from the decoders
                    if not self._decoded_ready():
                        return False
            self._take(next(self.decoded, _END))
        return True

    def prepend(self, requests: Iterable[Request]) -> None:
        """Put requests back at the front (an engine's unsubmitted requests, after it broke)."""
        self.pending.extendleft(reversed(list(requests)))

    def _take(self, result) -> None:
        if result is _END:
            self.ended = True
        else:
            self.pending.extend(self._requests_of(result))

    def _requests_of(self, result: DecodeResult) -> list[Request]:
        job, key = self.job, self.keys[result.path]
        if not result.ok:
            for record in error_records(job, self.done, key, f"decode: {result.error}",
                                        decode_s=round(result.seconds, 4)):
                self.emit(record)
            return []
        clip = result.clip
        self.tally.decode_s += clip.decode_seconds
        metadata = clip.metadata()
        budget = job.plan.tokens_per_request - job.plan.vision_tokens_per_clip
        refused = refusal(len(clip.frames), metadata, self.limits, budget)
        if refused is not None:
            for record in error_records(job, self.done, key, f"refused before generation: {refused}",
                                        decode_s=round(clip.decode_seconds, 4), decoder=clip.backend):
                self.emit(record)
            return []
        frames = _apply_ablation(clip, job.ablation)
        context = {"decode_s": clip.decode_seconds, "indices": clip.indices, "times": clip.times, "seek": clip.seek,
                   "frames": len(frames), "backend": clip.backend, "notes": clip.notes,
                   "queued_at": time.perf_counter()}
        # the requests hold the frames; nothing else here may keep them alive
        return [Request(key=video, task=task, adapter=adapter, prompt=build_prompt(job.model.family, task),
                        frames=frames, video_metadata=metadata, context=dict(context),
                        forced_output_tokens=(job.forced_lengths.draw(video, task, adapter)
                                              if job.forced_lengths is not None else None))
                for video, task, adapter in _keys(job, key) if not self.done((video, task, adapter))]


def _base_record(job: JobConfig, video: str, task: str, adapter: str | None) -> dict:
    """The fields every record has; `settings` says how it was made (caption/fingerprint.py)."""
    return {"video": video, "task": task, "adapter": adapter, "status": None, "caption": None,
            "error": None, "model": job.model.name, "engine": job.engine,
            "settings_id": job.settings_ids[(task, adapter)], "settings": job.settings,
            **({"warnings": list(job.caption_warnings)} if job.caption_warnings else {})}


def _result_record(result: Result, job: JobConfig) -> dict:
    r = result.request
    record = _base_record(job, r.key, r.task, r.adapter)
    caption, flags = (None, []) if result.error else clean_caption(result.text)
    record.update({
        "status": "error" if result.error else "ok",
        "caption": caption,
        "error": f"generate: {result.error}" if result.error else None,
        "frames": r.context["frames"] if "frames" in r.context else len(r.frames),
        "frame_indices": r.context.get("indices"),
        "frame_times": r.context.get("times"),  # seconds from the first frame, of the frames used
        "seek": r.context.get("seek"),  # "keyframe", "nearby" or "exact" (video_io/decode.py)
        "decoder": r.context.get("backend"),
        "prompt_tokens": result.prompt_tokens, "output_tokens": result.output_tokens,
        "finish_reason": result.finish_reason,
        "decode_s": round(r.context.get("decode_s", 0.0), 4), "generate_s": round(result.generate_s, 4),
    })
    if result.ttft_s is not None:
        record["ttft_s"] = round(result.ttft_s, 4)
    if result.tpot_s is not None:
        record["tpot_s"] = round(result.tpot_s, 5)
    if "queued_at" in r.context:  # from the clip's frames reaching the engine side to this record
        record["latency_s"] = round(time.perf_counter() - r.context["queued_at"], 4)
    if r.forced_output_tokens is not None:
        record["forced_output_tokens"] = r.forced_output_tokens
    if job.ablation != "none":
        record["ablation"] = job.ablation
    if r.context.get("notes"):
        record["notes"] = r.context["notes"]
    if flags:
        record["flags"] = flags
    return record


# U+FFFD stands for bytes that were not UTF-8 (a reply cut inside a character, byte tokens sampled out of
# order); control characters other than tab and newline are never meant in a caption either
_UNDECODABLE = re.compile(r"[\ufffd\x00-\x08\x0b-\x1f\x7f]")


def clean_caption(text: str) -> tuple[str, list[str]]:
    """The caption without undecodable characters, and a flag saying what was removed (an `ok`
    record with flags is not a clean one: the summary counts them and the review page shows them)."""
    found = _UNDECODABLE.findall(text)
    if not found:
        return text, []
    replacement = found.count("\ufffd")
    what = ", ".join(part for part in (f"{replacement} U+FFFD" if replacement else "",
                                       f"{len(found) - replacement} control" if len(found) > replacement else "") if part)
    cleaned = " ".join(_UNDECODABLE.sub(" ", text).split())
    return cleaned, [f"undecodable text: {what} character(s) removed"]
