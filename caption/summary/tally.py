"""Counting what a job did, the progress bar, and the end-of-job summary (saved; printed by caption/summary/terminal.py)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caption.engines.base import StageClock
from caption.outcome import exit_status, interrupts
from caption.output.checks import keep_existing
from caption.summary.console import console
from caption.summary.coverage import coverage_of_job, coverage_warning
from caption.summary.scoring import score_captions
from caption.summary.terminal import print_plan, print_summary
from caption.sweep import RESULT_FILE, run_dir, write_result
from vidcap_ko.record import Record, record_key
from vidcap_ko.writing import WriteFailed, write_whole, writing

if TYPE_CHECKING:
    from caption.settings.config import JobConfig


@dataclass
class JobTally:
    videos_found: int = 0
    videos_skipped: int = 0  # already had records (resume)
    videos_todo: int = 0  # videos this job set out to caption (after resume and limit)
    videos_written: set = field(default_factory=set)  # videos that got at least one record in this job
    videos_captioned: set = field(default_factory=set)  # ... at least one ok record: what the speed counts
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
    stopped: str | None = None  # None: ran to the end; else interrupted | engine did not load | engine died |
    # fail_fast | write failed | input gone
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
    tidy_warning: str | None = None  # the records file could not be tidied at the end (caption/output/records_file.py)
    clock: StageClock = field(default_factory=StageClock)  # the job's side: decode_wait, write
    _bar: Any = None  # a tqdm bar while progress is shown

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

    def count(self, record: Record) -> None:
        self.videos_written.add(record["video"])
        if record.get("segment_index") is not None:
            part = (record["video"], record["segment_index"])
            self.segments_written.add(part)
            if record["status"] != "ok":
                self.segments_failed.add(part)
        if record["status"] == "ok":
            self.videos_captioned.add(record["video"])
            self.requests_ok += 1
            self.requests_flagged += bool(record.get("flags"))
            self.prompt_tokens += record.get("prompt_tokens") or 0
            self.output_tokens += record.get("output_tokens") or 0
        else:
            self.requests_error += 1
            self.error_keys.add(record_key(record))
            where = f"segment {record['segment_index']} ({_tenths(record.get('start_s'))}-" \
                    f"{_tenths(record.get('end_s'))} s): " if record.get("segment_index") is not None else ""
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

    def summary(self, job: JobConfig, engine_stats: dict) -> dict:
        now = time.perf_counter()
        gen_wall = (self.generation_ended or now) - (self.generation_started or self.started)
        videos_run = len(self.videos_written)  # an interrupted job ran fewer than it set out to
        # the speed is over what was captioned: a clip that only got an error record (a broken file) took no
        # generation, and counting it made a trial of one broken clip report hundreds of videos/s. Nothing
        # captioned: no speed (None), not a rate of zero over a wall that generated nothing
        captioned = len(self.videos_captioned)
        measured = gen_wall > 0 and self.requests_ok > 0
        engine_stats = dict(engine_stats)
        engine_stages = engine_stats.pop("engine_stages_s", None)
        # None where no engine ran in this process (runner=ray: the engines are actors elsewhere, and a
        # breakdown without engine steps would report the engine idle all the time)
        stages = stage_breakdown(self.clock.seconds, engine_stages, gen_wall) if engine_stages is not None else None
        return {
            "model": job.model.name, "engine": job.engine, "gpu": job.gpu.get("name"),
            "settings": job.settings,  # the records this summary describes are those made with these
            "tasks": list(job.options.tasks), "output": str(job.files().output),
            "videos_found": self.videos_found, "videos_skipped_resume": self.videos_skipped,
            "videos_todo": self.videos_todo, "videos_run": videos_run, "videos_captioned": captioned,
            "videos_failed": len(self.failures),
            "captions_ok": self.requests_ok, "captions_flagged": self.requests_flagged,
            "captions_failed": self.requests_error,
            # long videos split into segments (video.segments): each segment is captioned as a clip is
            "videos_segmented": len({video for video, _ in self.segments_written}),
            "segments_run": len(self.segments_written), "segments_failed": len(self.segments_failed),
            "scan_s_total": round(self.scan_s, 2),
            # to the millisecond, as the stages are: a sub-second job's idle fraction and stages then read back
            # from the summary's own figures (0.29 s for 0.294 was 0.011 off the fraction it printed)
            "wall_s": round(now - self.started, 2), "generation_wall_s": round(gen_wall, 3),
            "videos_per_s": round(captioned / gen_wall, 3) if measured else None,  # videos_captioned per second
            "output_tokens": self.output_tokens, "prompt_tokens": self.prompt_tokens,
            "output_tokens_per_s": round(self.output_tokens / gen_wall, 1) if measured else None,
            "decode_s_total": round(self.decode_s, 2),
            # runner=ray decodes in actors sized by runner.decode_cpus, not in this process's pool
            "decode_workers": job.decode_workers if job.runner.name == "local" else None,
            "stages_s": stages,
            "engine_idle_fraction": (round(max(0.0, 1 - stages["engine_step"] / gen_wall), 4)
                                     if stages and gen_wall > 0 and self.generation_started is not None else None),
            "input_dir": str(job.files().input_dir),
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


def save_summary(summary: dict, path: Path) -> None:
    """Write the summary whole or not at all (a reader never sees half of one); WriteFailed says why not."""
    path = Path(path)
    with writing(path, "summary file", setting="summary_path"):
        write_whole(path, (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


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
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def finish(job: JobConfig, tally: JobTally, stats: dict) -> dict:
    """The summary of a job that ended (however): scored, warned, saved, printed. A signal meanwhile is
    noted, not raised (caption/outcome.py interrupts), and the summary says interrupted."""
    summary = tally.summary(job, stats)
    summary["peak_rss_gib"] = round(peak_rss_gib(), 3)
    if summary.get("segments_run"):  # how much of the long videos the records caption (caption/summary/coverage.py)
        summary["coverage"] = coverage_of_job(job)
    if job.files().references is not None:  # a stopped job too: over the captions it wrote, the rest counted
        # as not captioned. A few seconds; a signal meanwhile ends the job after it, a second one at once
        summary.update(score_captions(job))
    if interrupts.received and summary["stopped"] is None:
        summary["stopped"] = "interrupted"
    summary["plan_warnings"] = list(job.plan.warnings)
    summary["run_warnings"] = run_warnings(job, summary)
    for warning in summary["run_warnings"]:
        console.warn(f"caption: warning: {warning}")
    summary["exit_status"] = exit_status(summary)
    folder = run_dir()  # the command's run folder (runs/<date>/<time>/): its result.json holds this summary too
    summary["run_result"] = str(folder / RESULT_FILE) if folder is not None else None
    if not _saved(write_result, {"plan": job.plan.to_dict(), "summary": summary}, summary=summary):
        summary["run_result"] = None
    summary_path = job.files().summary_path
    saved = _saved(_replace_summary, summary, summary_path, job.options.overwrite, summary=summary)
    print_summary(summary, summary_path, full=job.options.verbose, saved=saved)
    return summary


def _tenths(seconds: object) -> str:
    """A segment's bound as the review page shows it (caption/report/data.py ClipEntry.title): 2.9, not 2.941667."""
    return f"{seconds:.1f}" if isinstance(seconds, (int, float)) else "?"


def _replace_summary(summary: dict, path, overwrite: bool) -> None:
    """Save the summary in place of an earlier one at that path (a run before this resume, or before
    overwrite), which is kept beside it under a timestamped name where replacing it would lose what it
    says (_says_what_nothing_else_keeps)."""
    if _says_what_nothing_else_keeps(Path(path), overwrite):
        kept = keep_existing(path)
        if kept is not None:
            summary["previous_files_kept_as"] = [*(summary.get("previous_files_kept_as") or []), str(kept)]
    save_summary(summary, path)


def _says_what_nothing_else_keeps(path: Path, overwrite: bool) -> bool:
    """Whether the file at `path` would be lost for good if this job's summary replaced it. A job run again
    and again over the same output (a nightly run over a growing folder, resumes after stops) would
    otherwise pile up a dated copy per run. Not lost: the summary of a run that wrote no record (the
    records, and the summary replacing it, say all it said), and one whose run folder's result.json
    (`run_result`) still holds it. Kept: a file that is not such a summary, and whatever stood there
    when overwrite=true started afresh (it goes with the records file moved aside)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    if overwrite:
        return True
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return True
    if not isinstance(earlier, dict):
        return True
    if earlier.get("captions_ok") == 0 and earlier.get("captions_failed") == 0:  # absent (older summaries): kept
        return False
    return not _held_in_run_folder(earlier)


def _held_in_run_folder(summary: dict) -> bool:
    """Whether the result.json `summary` names still holds it: a run folder reused since
    (hydra.run.dir=... given twice) or removed holds it no more."""
    where = summary.get("run_result")
    if not where:
        return False
    try:
        held = json.loads(Path(where).read_text(encoding="utf-8")).get("summary")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False

    def own(s: dict) -> dict:  # the summary beside the output also names the copies made as it was saved
        return {k: v for k, v in s.items() if k != "previous_files_kept_as"}

    return isinstance(held, dict) and own(held) == own(summary)


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


def run_warnings(job: JobConfig, summary: dict) -> list[str]:
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


def report_plan(job: JobConfig) -> dict:
    """plan_only (or, in a sweep, a plan that cannot run): the plan printed and saved, nothing run."""
    plan = job.plan.to_dict()
    path = write_result({"plan": plan, "summary": None})
    print_plan(plan, path)
    return {"plan": plan, "exit_status": 0 if job.options.plan_only else 2}
