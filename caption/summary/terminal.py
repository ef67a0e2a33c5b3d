"""What a job prints on the terminal: the plan, the start lines and their notes, and the end-of-job
summary in a few lines (every figure is in the summary file: caption/summary/tally.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from caption.summary.console import console
from caption.summary.coverage import coverage_line
from caption.summary.scoring import meteor_lines
from vidcap_ko.writing import free_bytes
from video_io.crawl import VIDEO_EXTENSIONS, other_suffixes

if TYPE_CHECKING:
    from caption.settings.config import JobConfig


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
                *[("METEOR", line) for line in meteor_lines(
                    summary, "clips or scenes" if summary.get("segments_run") else "clips")],
                ("peak memory", f"{summary['peak_rss_gib']} GiB"),
                ("records", summary["output"])]
        rows = [(k, v) for k, v in rows if v is not None]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}", file=out)
    for warning in [*summary.get("plan_warnings", []), *summary.get("run_warnings", [])]:
        print(f"  warning: {warning}", file=out)
    _print_failures(summary["failures"], "failed (their records have status=error)", path, out)
    _print_failures(summary.get("failures_earlier") or [], "failed in earlier runs and were not run again", path, out)
    if summary.get("stopped"):
        again = ("the same command resumes once the model loads (why it did not: the last line)"
                 if summary["stopped"] == "engine did not load" else "run the same command again to resume")
        print(f"  stopped early ({summary['stopped']}): {summary['records_left_undone']} record(s) left undone; "
              f"{again}", file=out)
    print(f"  summary saved to {path}" if saved else f"  summary NOT saved: {path} could not be written", file=out)
    if console.quiet_log is not None:  # a job that is not quiet after one that was has no log of its own
        print(f"  full log: {console.quiet_log}", file=out)


def _print_failures(failures: list[dict], what: str, path: Path, out) -> None:
    """The first 20 failed videos with their errors; the rest are in the summary file."""
    if not failures:
        return
    print(f"  {len(failures)} video(s) {what}:", file=out)
    for item in failures[:20]:
        print(f"    - {item['video']}: {item['error']}", file=out)
    if len(failures) > 20:
        print(f"    ... and {len(failures) - 20} more in {path}", file=out)


def print_job_start(job: JobConfig, found: int, todo: int, skipped: int, notes: list[str], out=None) -> None:
    """The plan in a few lines, before anything heavy loads."""
    out = out or console.out
    plan, d = job.plan, job.decode
    frames = d.sampling.num_frames if d.sampling.mode == "uniform" else f"up to {d.sampling.max_frames}"
    quant = plan.quantization.get("method") or "none"
    paths = job.paths  # None with plan_only: the lines then say what would run
    print(f"caption: {found} videos in {paths and paths.input_dir} ({todo} to caption, {skipped} already done) "
          f"-> {paths and paths.output}", file=out)
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
          f"tasks {', '.join(job.options.tasks)}{decoders}", file=out)
    variants = ", ".join("base model" if v is None else f"adapter {v}" for v in job.variants())
    spec = (f"speculative {job.speculative['method']} ({job.speculative['num_speculative_tokens']} tokens)"
            if job.speculative else "no speculative decoding")
    print(f"  decode  sampling {job.sampling.name}, {variants}, {spec}", file=out)
    for note in notes:
        print(f"  note    {note}", file=out)
    if console.quiet_log is not None:
        print(f"  log     {console.quiet_log}", file=out)


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


def resume_notes(videos, todo, store, tally) -> list[str]:
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


def start_notes(job: JobConfig, output: Path, records: int) -> list[str]:
    """What the user should know before the job starts (warnings about captions are the plan's): a plan
    this runner runs only part of, a disk too small for the records to come."""
    notes = _space_notes(output, records)
    link = job.files().output_link
    if link is not None:
        notes.append(f"output={link} is a symbolic link: the job writes the file it leads to, {output} (its lock, "
                     "summary and tidying too), and leaves the link as it is")
    if job.runner.name == "local" and job.plan.replicas > 1:
        notes.append(f"the plan has {job.plan.replicas} engines of {job.plan.tensor_parallel_size} GPU(s) each; "
                     "runner=local runs one of them: runner=ray runs them all")
    return notes


def foreign_footage_notes(job: JobConfig, videos: Sequence) -> list[str]:
    """A folder mixing the model's kind of footage with other clips (caption/planning.py foreign_footage):
    how many of the clips found are not of its kind, said before they are captioned."""
    footage = job.foreign_footage
    other = [key for key, _ in videos if footage is not None and footage.warns(key)]
    if not other:
        return []
    return [f"{len(other)} of {len(videos)} clips (e.g. '{other[0]}') are not {footage.kind} clips ({job.model.name} "
            f"knows only those, and the folder's references describe only {len(footage.known)} clip(s) as such): their "
            "captions will be nonsense, and their records say so"]


def no_videos_note(input_dir: Path | str) -> str:
    """Why a folder gave no clips: what it holds instead, and what the crawl takes (video_io/crawl.py)."""
    others = other_suffixes(input_dir)
    held = ("it holds no other files either" if not others else "it holds " + ", ".join(
        f"{n} {suffix or 'extensionless'} file(s)" for suffix, n in sorted(others.items(), key=lambda kv: -kv[1])[:5]))
    return (f"no video files in {input_dir} or its subfolders ({held}); the job takes files ending in "
            f"{', '.join(sorted(VIDEO_EXTENSIONS))}: check input_dir")


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
