"""Counting what a job did, the progress bar, and the end-of-job summary (printed and saved)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from caption.console import console
from caption.coverage import coverage_line, coverage_of_job, coverage_warning
from caption.engines.base import StageClock
from caption.faults import WriteFailed, free_bytes, remove_quietly, writing
from caption.outcome import exit_status, interrupts
from caption.pipeline.record import record_key
from caption.records import keep_existing
from caption.scoring import score_captions
from caption.sweep import write_result


@dataclass
class JobTally:
    videos_found: int = 0
    videos_skipped: int = 0  # already had records (resume)
    videos_todo: int = 0  # videos this job set out to caption (after resume and limit)
    videos_written: set = field(default_factory=set)  # videos that got at least one record in this job
    requests_ok: int = 0
    requests_error: int = 0
    requests_flagged: int = 0  # ok, with undecodable text removed (the record's flags)
    prompt_tokens: int = 0
    output_tokens: int = 0
    decode_s: float = 0.0
    scan_s: float = 0.0  # finding long videos' segments (shot detection), in the decoders
    segments_written: set = field(default_factory=set)  # (video, segment index) with a record in this job
    segments_failed: set = field(default_factory=set)  # (video, segment index) with an error record
    failures: dict[str, str] = field(default_factory=dict)  # video -> first error
    started: float = field(default_factory=time.perf_counter)
    generation_started: float | None = None
    generation_ended: float | None = None  # the last record written (engine and decoder shut-down come after)
    requests_todo: int = 0  # (video, task, adapter) records this job set out to write
    stopped: str | None = None  # None: ran to the end; else interrupted | engine died | fail_fast
    stop_reason: str | None = None
    engine_failures: list[str] = field(default_factory=list)
    engine_restarts: int = 0
    kept: list[str] = field(default_factory=list)  # earlier files overwrite=true moved aside
    error_keys: set = field(default_factory=set)  # this run's error records
    # error records of earlier runs that still stand (not retried) for clips found: video -> its error
    earlier_failures: dict[str, str] = field(default_factory=dict)
    earlier_errors: int = 0  # ... as records
    recaptioned: list[str] = field(default_factory=list)  # clips whose file changed, captioned anew
    legacy_videos: int = 0  # clips whose records carry no `source`: done by name only
    tidy_warning: str | None = None  # the records file could not be tidied at the end (caption/record_store.py)
    clock: StageClock = field(default_factory=StageClock)  # the job's side: decode_wait, write
    _bar: object = None

    def start_progress(self, total: int, enabled: bool) -> None:
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="caption", desc="captioning", file=console.err,
                             dynamic_ncols=True, smoothing=0.1)

    def expect(self, records: int) -> None:
        """`records` more to write than the job set out with: a video it found to have several segments."""
        self.requests_todo += records
        if self._bar is not None:
            self._bar.total += records
            self._bar.refresh()

    def count(self, record: dict) -> None:
        self.videos_written.add(record["video"])
        if record.get("segment_index") is not None:
            part = (record["video"], record["segment_index"])
            self.segments_written.add(part)
            if record["status"] != "ok":
                self.segments_failed.add(part)
        if record["status"] == "ok":
            self.requests_ok += 1
            self.requests_flagged += bool(record.get("flags"))
            self.prompt_tokens += record.get("prompt_tokens") or 0
            self.output_tokens += record.get("output_tokens") or 0
        else:
            self.requests_error += 1
            self.error_keys.add(record_key(record))
            where = f"segment {record['segment_index']} ({record.get('start_s')}-{record.get('end_s')} s): " \
                if record.get("segment_index") is not None else ""
            self.failures.setdefault(record["video"], where + (record.get("error") or "unknown error"))
        if self._bar is not None:
            self._bar.update(1)
            if self.requests_error:
                self._bar.set_postfix(failed=self.requests_error, refresh=False)

    def note_standing_errors(self, store, found: set[str]) -> None:
        """After the run: the error records earlier runs left for clips found, which this run did not redo
        (no retry_errors, or `limit` or a stop cut the retry short). They count as failures of the job."""
        standing = [k for k in store.errors_kept() if k[0] in found and k not in self.error_keys]
        self.earlier_errors = len(standing)
        self.earlier_failures = {k[0]: store.error_text.get(k[0], "unknown error") for k in standing}
        self.tidy_warning = store.tidy_warning

    def close_progress(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def summary(self, job, engine_stats: dict) -> dict:
        now = time.perf_counter()
        gen_wall = (self.generation_ended or now) - (self.generation_started or self.started)
        videos_run = len(self.videos_written)  # an interrupted job ran fewer than it set out to
        engine_stats = dict(engine_stats)
        engine_stages = engine_stats.pop("engine_stages_s", None)
        # None where no engine ran in this process (runner=ray: the engines are actors elsewhere, and a
        # breakdown without engine steps would report the engine idle all the time)
        stages = stage_breakdown(self.clock.seconds, engine_stages, gen_wall) if engine_stages is not None else None
        return {
            "model": job.model.name, "engine": job.engine, "gpu": job.gpu.get("name"),
            "settings": job.settings,  # the records this summary describes are those made with these
            "tasks": list(job.tasks), "output": str(job.output),
            "videos_found": self.videos_found, "videos_skipped_resume": self.videos_skipped,
            "videos_todo": self.videos_todo, "videos_run": videos_run, "videos_failed": len(self.failures),
            "captions_ok": self.requests_ok, "captions_flagged": self.requests_flagged,
            "captions_failed": self.requests_error,
            # long videos split into segments (video.segments): each segment is captioned as a clip is
            "videos_segmented": len({video for video, _ in self.segments_written}),
            "segments_run": len(self.segments_written), "segments_failed": len(self.segments_failed),
            "scan_s_total": round(self.scan_s, 2),
            "wall_s": round(now - self.started, 2), "generation_wall_s": round(gen_wall, 2),
            "videos_per_s": round(videos_run / gen_wall, 3) if gen_wall > 0 else None,
            "output_tokens": self.output_tokens, "prompt_tokens": self.prompt_tokens,
            "output_tokens_per_s": round(self.output_tokens / gen_wall, 1) if gen_wall > 0 else None,
            "decode_s_total": round(self.decode_s, 2),
            # runner=ray decodes in actors sized by runner.decode_cpus, not in this process's pool
            "decode_workers": job.decode_workers if job.runner.name == "local" else None,
            "stages_s": stages,
            "engine_idle_fraction": (round(max(0.0, 1 - stages["engine_step"] / gen_wall), 4)
                                     if stages and gen_wall > 0 and self.generation_started is not None else None),
            "input_dir": str(job.input_dir),
            "stopped": self.stopped, "stop_reason": self.stop_reason,
            "records_left_undone": self.requests_todo - self.requests_ok - self.requests_error,
            "engine_restarts": self.engine_restarts, "engine_failures": self.engine_failures or None,
            "previous_files_kept_as": self.kept or None,
            # the output as a whole, for the clips found: error records earlier runs left (exit status 3
            # until retry_errors=true runs them again), clips captioned anew because their file changed
            "errors_from_earlier_runs": self.earlier_errors, "videos_failed_earlier": len(self.earlier_failures),
            "videos_recaptioned_changed": len(self.recaptioned) or None,
            "videos_without_identity": self.legacy_videos or None,
            **engine_stats,
            "tidy_warning": self.tidy_warning,
            "failures": [{"video": v, "error": e} for v, e in sorted(self.failures.items())],
            "failures_earlier": [{"video": v, "error": e} for v, e in sorted(self.earlier_failures.items())],
        }


def stage_breakdown(job_stages: dict, engine_stages: dict, wall: float) -> dict:
    """Where the generation wall time of the job's one thread went: waiting on decoder processes,
    the engine's input processing (vLLM's multimodal processor at submit, transformers' processor),
    engine steps (the only stage that generates tokens), writing records, and the rest (building
    requests, bookkeeping). `decode_cpu` is apart: decoder processes' own seconds, in parallel.
    `beside_engine_step`, where present: seconds of decode wait and processor that ran while the engine
    generated (out of the sum, which stays the engine's busy time and what kept it idle)."""
    # the transformers engine takes the next batch from the decoders and through the processor while one
    # generates (caption/engines/hf_engine.py): that time is not the engine's idle time, and is reported apart
    beside = {k: engine_stages.get(f"{k}_beside_step", 0.0) for k in ("decode_wait", "processor")}
    stages = {"decode_wait": max(0.0, job_stages.get("decode_wait", 0.0) - beside["decode_wait"]),
              "processor": engine_stages.get("processor", 0.0),
              "engine_step": engine_stages.get("engine_step", 0.0), "write": job_stages.get("write", 0.0)}
    stages["other"] = max(0.0, wall - sum(stages.values()))
    if any(beside.values()):
        stages["beside_engine_step"] = sum(beside.values())
    return {k: round(v, 3) for k, v in stages.items()}


def print_summary(summary: dict, path: Path, out=None, full: bool = False, saved: bool = True) -> None:
    """A few lines for the terminal (every figure is in the summary file); `full`: every key."""
    out = out or console.out
    print("\n== caption job summary ==", file=out)
    if full:
        rows = [(k, v) for k, v in summary.items()
                if k not in ("failures", "plan_warnings", "run_warnings") and v is not None]
    else:
        rate = summary.get("videos_per_s")
        rows = [("videos", f"{summary['videos_found']} found, {summary['videos_skipped_resume']} already done, "
                           f"{summary['videos_run']} run, {summary['videos_failed']} failed"),
                ("segments", f"{summary['segments_run']} of {summary['videos_segmented']} long videos, "
                             f"{summary['segments_failed']} failed; finding them took {summary['scan_s_total']} s"
                 if summary.get("segments_run") else None),
                ("coverage", coverage_line(summary.get("coverage"))),
                ("captions", f"{summary['captions_ok']} ok"
                             + (f" ({summary['captions_flagged']} flagged)" if summary.get("captions_flagged") else "")
                             + f", {summary['captions_failed']} failed"),
                ("earlier", f"{summary['errors_from_earlier_runs']} error record(s) of {summary['videos_failed_earlier']} "
                            "video(s) from earlier runs remain in the output: retry_errors=true runs them again"
                 if summary.get("errors_from_earlier_runs") else None),
                ("speed", f"{rate} videos/s, {summary.get('output_tokens_per_s')} output tokens/s over "
                          f"{summary['generation_wall_s']} s (engine start {summary.get('engine_load_s', '-')} s)"
                 if rate else None),
                ("time", ", ".join(f"{k} {v} s" for k, v in summary["stages_s"].items())
                 + f"; engine idle {summary['engine_idle_fraction']:.0%}"
                 if rate and summary.get("engine_idle_fraction") is not None else None),
                ("METEOR", f"{summary['meteor']} over {summary.get('meteor_n')} "
                           f"{'references (clips or scenes)' if summary.get('segments_run') else 'videos'}"
                 if "meteor" in summary else None),
                ("peak memory", f"{summary['peak_rss_gib']} GiB"),
                ("records", summary["output"])]
        rows = [(k, v) for k, v in rows if v is not None]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}", file=out)
    for warning in [*summary.get("plan_warnings", []), *summary.get("run_warnings", [])]:
        print(f"  warning: {warning}", file=out)
    failures = summary["failures"]
    if failures:
        print(f"  {len(failures)} video(s) failed (their records have status=error):", file=out)
        for item in failures[:20]:
            print(f"    - {item['video']}: {item['error']}", file=out)
        if len(failures) > 20:
            print(f"    ... and {len(failures) - 20} more in {path}", file=out)
    earlier = summary.get("failures_earlier") or []
    if earlier:
        print(f"  {len(earlier)} video(s) failed in earlier runs and were not run again:", file=out)
        for item in earlier[:20]:
            print(f"    - {item['video']}: {item['error']}", file=out)
        if len(earlier) > 20:
            print(f"    ... and {len(earlier) - 20} more in {path}", file=out)
    if summary.get("stopped"):
        print(f"  stopped early ({summary['stopped']}): {summary['records_left_undone']} record(s) left undone; "
              "run the same command again to resume", file=out)
    print(f"  summary saved to {path}" if saved else f"  summary NOT saved: {path} could not be written", file=out)
    if console.log_path is not None:
        print(f"  full log: {console.log_path}", file=out)


def print_job_start(job, found: int, todo: int, skipped: int, notes: list[str], out=None) -> None:
    """The plan in a few lines, before anything heavy loads."""
    out = out or console.out
    plan, d = job.plan, job.decode
    frames = d.sampling.num_frames if d.sampling.mode == "uniform" else f"up to {d.sampling.max_frames}"
    quant = plan.quantization.get("method") or "none"
    print(f"caption: {found} videos in {job.input_dir} ({todo} to caption, {skipped} already done) -> {job.output}",
          file=out)
    auto = next((n for n in plan.notes if n.startswith("gpu=auto")), None)
    print(f"  model   {job.model.name} ({job.model.family}) on {plan.engine}, tier {plan.tier}, {plan.dtype}, "
          f"quant {quant}", file=out)
    if auto:
        print(f"  tier    {auto}", file=out)
    size = (f"{d.width}x{d.height}" if d.width else f"up to {d.max_pixels} px, aspect kept" if d.max_pixels
            else "source size")
    decoders = f", {job.decode_workers} decoder processes" if job.runner.name == "local" else ""
    if decoders and d.backend == "nvdec":
        decoders += " on the GPU's NVDEC"
    print(f"  input   {frames} frames of {size} (<= {plan.vision_tokens_per_clip} video tokens), "
          f"tasks {', '.join(job.tasks)}{decoders}", file=out)
    variants = ", ".join("base model" if v is None else f"adapter {v}" for v in job.variants())
    spec = (f"speculative {job.speculative['method']} ({job.speculative['num_speculative_tokens']} tokens)"
            if job.speculative else "no speculative decoding")
    print(f"  decode  sampling {job.sampling.name}, {variants}, {spec}", file=out)
    for note in notes:
        print(f"  note    {note}", file=out)
    if console.log_path is not None:
        print(f"  log     {console.log_path}", file=out)


def save_summary(summary: dict, path: Path) -> None:
    """Write the summary whole or not at all (a reader never sees half of one); WriteFailed says why not."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    with writing(path, "summary file", setting="summary_path"):
        try:
            tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            remove_quietly(tmp)
            raise


def reset_peak_rss() -> None:
    """Start a new peak-memory measurement for this process (Linux: clear_refs 5 resets VmHWM),
    so each job of an in-process sweep reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_gib() -> float:
    """Peak resident memory of this process since reset_peak_rss() (the engine lives here on CPU;
    decoders are separate processes), in GiB."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def print_plan(plan: dict, path: Path | None, out=None) -> None:
    out = out or console.out
    memory = plan["memory_gib"]
    q = plan["quantization"]
    if not q:  # refused before any setting could be worked out
        rows = [("model", plan["model"]), ("tier", plan["tier"]), ("engine", plan["engine"]),
                ("fits", "NO: " + " ".join(plan["reasons"]))]
        _print_rows("plan", rows, path, out)
        return
    rows = [
        ("model", f"{plan['model']} ({plan['family']})"), ("tier", plan["tier"]),
        ("engine", f"{plan['engine']} ({plan['engine_reason']})"), ("dtype", plan["dtype"]),
        ("quantization", f"{q['method']}{'' if q['bits'] is None else ' %s-bit' % q['bits']} ({q['why']})"),
        ("engine settings", plan["vllm"] if plan["vllm"] is not None else plan["hf"] or plan.get("server")),
        ("video tokens per clip", plan["vision_tokens_per_clip"]),
        ("tokens per request", plan["tokens_per_request"]),
        ("memory (GiB)", ", ".join(f"{k} {v}" for k, v in memory.items() if v is not None)),
        ("fits", f"{'yes' if plan['fits'] else 'NO'}: {' '.join(plan['reasons'])}"),
    ]
    rows += [("note", n) for n in plan.get("notes") or []]
    rows += [("warning", w) for w in plan["warnings"]]
    _print_rows("plan", rows, path, out)


def _print_rows(title: str, rows: list, path: Path | None, out) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==", file=out)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}", file=out)
    if path is not None:
        print(f"  {title} saved to {path}", file=out)


def finish(job, tally: JobTally, stats: dict) -> dict:
    """The summary of a job that ended (however): scored, warned, saved, printed. A signal meanwhile is
    noted, not raised (caption/outcome.py interrupts), and the summary says interrupted."""
    summary = tally.summary(job, stats)
    summary["peak_rss_gib"] = round(peak_rss_gib(), 3)
    if summary.get("segments_run"):  # how much of the long videos the records caption (caption/coverage.py)
        summary["coverage"] = coverage_of_job(job)
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


def run_warnings(job, summary: dict) -> list[str]:
    """What the finished job's own figures say the user should change."""
    warnings = []
    if job.speculative is not None and summary.get("spec_draft_tokens") == 0 and summary.get("output_tokens"):
        warnings.append(f"spec={job.speculative['method']} proposed no tokens in this job: speculative decoding "
                        "only cost time here; run with spec=none")
    if summary.get("videos_without_identity"):
        warnings.append(f"{summary['videos_without_identity']} clip(s) have records without a file identity "
                        "(`source`; written by a vidcap-ko before 2026-11-26): counted as done by their names alone")
    if summary.get("tidy_warning"):
        warnings.append(summary["tidy_warning"])
    if coverage_warning(summary.get("coverage")):
        warnings.append(coverage_warning(summary["coverage"]))
    if summary.get("captions_flagged"):
        warnings.append(f"{summary['captions_flagged']} caption(s) held undecodable text (U+FFFD or control "
                        "characters), removed and noted in their records' flags")
    return warnings


def resume_notes(videos, todo, store, tally: JobTally) -> list[str]:
    """What a resumed output holds that the user should know before the job runs: error records that
    stay (not retried), retries that `limit` leaves for later, clips captioned anew because their file changed."""
    notes = []
    found = {key for key, _ in videos}
    standing = {k[0] for k in store.errors if k[0] in found}
    if standing:
        notes.append(f"{len(standing)} video(s) already done hold error records: retry_errors=true runs them again")
    retried = {k[0] for k, why in store.redo.items() if why == "retry_errors=true" and k[0] in found}
    if retried:
        later = len(retried - {key for key, _ in todo})
        notes.append(f"retrying {len(retried) - later} video(s) whose records are errors"
                     + (f"; {later} more wait for a later run (limit), their error records kept" if later else ""))
    if tally.recaptioned:
        notes.append(f"{len(tally.recaptioned)} video(s) changed since their records were made (e.g. "
                     f"'{tally.recaptioned[0]}'): captioned again, their old records go to the superseded file")
    return notes


def start_notes(job, output: Path, records: int) -> list[str]:
    """What the user should know before the job starts (warnings about captions are the plan's): a plan
    this runner runs only part of, a disk too small for the records to come."""
    notes = _space_notes(output, records)
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


def report_plan(job) -> dict:
    """plan_only (or, in a sweep, a plan that cannot run): the plan printed and saved, nothing run."""
    plan = job.plan.to_dict()
    path = write_result({"plan": plan, "summary": None})
    print_plan(plan, path)
    return {"plan": plan, "exit_status": 0 if job.plan_only else 2}
