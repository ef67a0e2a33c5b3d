"""The caption job, as a story: validate the config -> plan -> check the output -> find the clips ->
run them (decode, generate, write each record as it comes) -> summarize.

Where decoding and generation run is the runner's business (caption/runners/: this machine, or a Ray
cluster); what turns decoded clips into records is the pipeline's (caption/pipeline/); the records file
is caption/output/records_file.py's (checked by caption/output/checks.py), the summary caption/summary/tally.py's. One job
writes an output at a time (caption/output/lock.py). Records are keyed by clip path, name the file they
were made from (caption/output/provenance.py) and are written the moment each arrives, so a stopped job resumes
without losing or repeating one. However the job ends (done, interrupted, engine dead, fail_fast, a disk
that refused a record), the records are flushed and the summary says how; `caption.outcome.exit_status`
turns that into the exit status.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Generator, Iterable, Iterator, Sequence

from omegaconf import DictConfig

from caption.engines.base import Engine
from caption.outcome import FailFast, interrupts, stops_recorded
from caption.output.checks import check_output, check_settings, check_summary
from caption.output.lock import OutputLock
from caption.output.provenance import (
    InputFolder,
    changed_files,
    legacy_videos,
    made_from_another_file,
    refuse_changed,
)
from caption.output.records_file import RecordStore
from caption.pipeline.record import record_keys
from caption.pipeline.supervisor import check_given_engine
from caption.planning import plan_job
from caption.runners import make_runner
from caption.runners.base import Runner
from caption.settings.config import JobConfig, load_job_config
from caption.settings.unread import check_settings_read
from caption.summary.console import console
from caption.summary.scoring import check_references
from caption.summary.tally import JobTally, finish, report_plan, reset_peak_rss
from caption.summary.terminal import foreign_footage_notes, no_videos_note, print_job_start, resume_notes, start_notes
from vidcap_ko.record import Record, record_key
from vidcap_ko.writing import WriteFailed, check_writable, writing
from video_io.crawl import crawl_videos

Videos = Sequence[tuple[str, Path | str]]  # (key: the clip's path relative to input_dir, path or object URL)
Summary = dict[str, Any]  # <output>.summary.json (caption/summary/tally.py)


def run_job(cfg: DictConfig, engine: Engine | None = None, videos: Videos | None = None,
            given: Iterable[str] = ()) -> Summary:
    """Run the job `cfg` describes; returns the summary (its `exit_status` is the process's).
    `engine`: an already loaded engine to reuse (it stays open), e.g. across jobs in one process.
    `videos`: the clips to caption instead of crawling input_dir (the Python API's file lists).
    `given`: the overrides the user gave, each checked to be read by this job (caption/settings/unread.py)."""
    records = job_records(cfg, engine, videos, given)
    while True:
        try:
            next(records)
        except StopIteration as done:
            summary: Summary = done.value
            return summary


def job_records(cfg: DictConfig, engine: Engine | None = None, videos: Videos | None = None,
                given: Iterable[str] = ()) -> Generator[Record, None, Summary]:
    """The job as a stream: yields each record once it is written, returns the summary. A caller that
    stops iterating stops the job: decoders and an owned engine are closed, the records written stay,
    and no summary is written for a job its caller abandoned."""
    job = plan_job(load_job_config(cfg))  # a wrong setting or a plan that cannot run fails here, before loading
    check_settings_read(given, cfg, job)  # a key given that this job would not read fails here too
    if job.options.plan_only or not job.planned().fits:  # not fitting gets here only in a sweep: a row saying why
        return report_plan(job)
    check_references(job)  # a references file METEOR could not read: said now, not after the captions
    if engine is not None and job.runner.name == "local":  # runner=ray loads its own, in its actors
        check_given_engine(job, engine)  # one loaded for other settings would make captions the records misname
    lock = check_outputs(job)  # from here to the end, no other job writes this output (caption/output/lock.py)
    try:
        return (yield from _locked_job(job, engine, videos, lock))
    finally:
        lock.release()


def _locked_job(job: JobConfig, engine: Engine | None, videos: Videos | None,
                lock: OutputLock) -> Generator[Record, None, Summary]:
    files, options = job.files(), job.options
    for warning in job.planned().warnings:  # on the terminal and in caption.log; the summary and records keep them
        console.warn(f"caption: plan warning: {warning}")
    if lock.unsupported:
        console.warn(f"caption: warning: the filesystem of {files.output} gives no file locks ({lock.unsupported}): "
                     "make sure no other job writes this output while this one runs")
    reset_peak_rss()
    tally = JobTally()
    if videos is None and files.manifest is not None:  # input_list=: the videos it names, rows left out said
        videos = files.manifest.videos
        for line in files.manifest.refused:
            console.warn(f"caption: input_list: {line}")
    found = crawl_videos(files.input_dir) if videos is None else videos
    store = RecordStore.open(files.output, resume=options.resume, retry_errors=options.retry_errors,
                             overwrite=options.overwrite, expected=job.settings_ids, checked=True)
    tally.kept += [str(store.kept_as)] if store.kept_as is not None else []
    try:
        _check_sources(job, found, store, tally)  # another file under a known name: refused, or captioned anew
    except BaseException:
        store.close()
        raise
    runner: Runner | None = None
    ended = False  # from here on, however the job ends, the summary says how
    try:
        with stops_recorded(tally):
            todo = _pending(job, found, store, tally)
            runner = make_runner(job, engine)
            if todo:
                yield from _run(job, runner, todo, store, tally)
        ended = True
    finally:
        interrupts.hold()  # from here to the summary a signal is noted (the summary says interrupted), not raised
        try:
            stats = _close(runner, store, tally, found)
        finally:
            if not ended:  # abandoned by its caller (GeneratorExit), or a bug on its way up: no summary
                interrupts.release()
    try:
        return finish(job, tally, stats)
    finally:
        interrupts.release()


def check_outputs(job: JobConfig) -> OutputLock:
    """Before anything loads: the output and summary files are the job's to write (OutputRefused), their
    disk takes files (WriteFailed), no other job writes the output (OutputBusy), and resuming would not mix
    in records made another way. Returns the output's lock, held."""
    output, summary = job.files().output, job.files().summary_path
    check_summary(summary, overwrite=job.options.overwrite)
    with writing(output.parent, "output folder", setting="output"):
        output.parent.mkdir(parents=True, exist_ok=True)  # the run folder, when output is its default
    for folder, setting in ((output.parent, "output"), (summary.parent, "summary_path")):
        try:  # a read-only, unwritable or full disk: now, before the model loads, not after
            check_writable(folder, "output folder")
        except WriteFailed as exc:
            raise exc.again(setting=setting) from None
    with writing(output.parent, "output folder", setting="output"):
        lock = OutputLock.acquire(output)
    try:  # what the output holds, read while no other job can change it
        check_output(output, resume=job.options.resume, overwrite=job.options.overwrite)
        if not job.options.overwrite:  # records made another way are never counted as this job's
            check_settings(output, job.expected_ids(), job.record_settings(), job.options.add_beside)
    except BaseException:
        lock.release()
        raise
    return lock


def _check_sources(job: JobConfig, found: Videos, store: RecordStore, tally: JobTally) -> None:
    """Records made from another file than the one found under their name: refused in one line, or with
    recaption_changed=true captioned anew (caption/output/provenance.py)."""
    changed = changed_files(job.files().input_dir, found, store)
    captioned = {video for video, *_ in store.ok}
    # a file whose records are all errors is simply captioned again (a broken clip re-exported in its place);
    # one with a caption of another file is the user's call
    misattributed = {video: why for video, why in changed.items() if video in captioned}
    if misattributed and not job.options.recaption_changed:
        refuse_changed(job.files().output, misattributed)
    store.recaption(changed, made_from_another_file(job.files().input_dir, found))
    tally.recaptioned = sorted(changed)
    tally.legacy_videos = legacy_videos(found, store)


def _pending(job: JobConfig, videos: Videos, store: RecordStore, tally: JobTally) -> Videos:
    """The clips still to caption (resume, limit), counted in the tally and said on the terminal. A video
    split into segments is done when each of its segments is (its records say how many it has); how
    many segments a video not yet seen has is known once the decoders have looked (_run counts them)."""
    keys = {key: record_keys(job, key, store.segments.get(key)) for key, _ in videos}
    pending = [(key, path) for key, path in videos if not all(store.done(k) for k in keys[key])]
    todo = pending if job.options.limit is None else pending[: job.options.limit]
    tally.videos_found, tally.videos_skipped, tally.videos_todo = len(videos), len(videos) - len(pending), len(todo)
    tally.requests_todo = sum(not store.done(k) for key, _ in todo for k in keys[key])
    notes = [*start_notes(job, job.files().output, tally.requests_todo), *foreign_footage_notes(job, videos),
             *resume_notes(videos, todo, store, tally)]
    if not videos and job.files().input_dir is not None:  # a wrong folder, most likely: say what it holds
        notes.append(no_videos_note(job.files().input_dir))
    print_job_start(job, len(videos), len(todo), tally.videos_skipped, notes)
    return todo


def _run(job: JobConfig, runner: Runner, todo: Videos, store: RecordStore, tally: JobTally) -> Iterator[Record]:
    """Start the runner and write each record it gives as it comes (yielding it)."""
    folder = InputFolder(job.files().input_dir)
    runner.start(todo, store, tally)  # the engine loads here
    interrupts.stop_if_received()  # a signal Python could not raise while it loaded (caption/outcome.py)
    tally.generation_started = time.perf_counter()
    tally.start_progress(tally.requests_todo, job.options.progress)
    counted = {key for key, _ in todo if key in store.segments}  # videos whose segments _pending counted
    for record in runner.records():
        if store.done(record_key(record)):  # a clip retried after its actor died may come twice
            continue
        if record["status"] == "error":  # failed because the whole folder went away? then stop, no record
            folder.check(tally.requests_ok + tally.requests_error)
        if record.get("segments") and record["video"] not in counted:  # counted as one clip so far
            counted.add(record["video"])
            tally.expect((record["segments"] - 1) * len(record_keys(job, record["video"])))
        # a signal waits while a record is written and counted: a record in the file is a record the summary
        # counts (a signal between the two left one record uncounted), and the job stops right after it
        with tally.clock("write"), interrupts.shield():
            store.write(record)
            tally.count(record)
        interrupts.stop_if_received()
        if job.options.fail_fast and record["status"] == "error":
            raise FailFast(record["video"])
        yield record
    tally.generation_ended = time.perf_counter()  # before decoders and engines shut down


def _close(runner: Runner | None, store: RecordStore, tally: JobTally, found: Videos) -> dict[str, Any]:
    """Stop the runner (decoders, engines) and close the records; the runner's figures. The tally learns
    which error records stand in the file for the clips found, earlier runs' included."""
    tally.close_progress()
    stats = runner.stats() if runner is not None else {}
    if runner is not None:
        runner.close()
    store.close()
    tally.note_standing_errors(store, {key for key, _ in found})
    return stats
