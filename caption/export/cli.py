"""`caption-export RECORDS --format vtt|srt|csv|parquet`: subtitles and tables from a caption job's records.

vtt / srt: one subtitle file per video (its `ok` captions as cues at their times: caption/export/cues.py),
named after the video and mirroring its subfolders under `--out` (default: `<RECORDS stem>-<format>/`
beside RECORDS; give the clips folder to put each file beside its video, where players find it). One
task and one adapter: `--task` (default caption) and `--adapter` (default: the base model, 'none').
csv / parquet: one row per record, errors included (caption/export/tables.py), into one file (default:
`<RECORDS stem>.<format>` beside RECORDS); every task and adapter unless `--task` / `--adapter` pick.

Nothing is overwritten: an output file that exists is refused (exit 2) unless `--overwrite`. Each file
is written whole under a temporary name, then renamed; a disk that refuses a file ends the command in
one line (exit 5: vidcap_ko/writing.py) and removes the files this run had already written, so the same
command can run again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path, PurePosixPath

from caption.export import cues as C
from caption.export import tables as T
from caption.export.read import DEFAULT_TASK, ExportError, Loaded, load, one_settings, select
from caption.report.data import resolve_input_dir
from caption.summary.coverage import subtitle_note
from eval.inputs import NONE_LABEL
from vidcap_ko.exit_status import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, EXIT_WRITE_FAILED
from vidcap_ko.record import settings_labels
from vidcap_ko.writing import WriteFailed, check_can_write, remove_quietly, write_whole, writing
from video_io.store import clip_path, exists, input_there

PROG = "caption-export"
SUBTITLES = {"vtt": "WebVTT", "srt": "SRT"}
TABLES = {"csv": "CSV", "parquet": "Parquet"}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="Write WebVTT or SRT subtitles per video, or a CSV or "
                                 "Parquet table, from a caption job's JSONL records.")
    ap.add_argument("records", type=Path, help="the caption job's JSONL records")
    ap.add_argument("--format", required=True, choices=[*SUBTITLES, *TABLES])
    ap.add_argument("--out", type=Path, help="vtt/srt: a folder (default <RECORDS stem>-<format>/ beside RECORDS); "
                                             "csv/parquet: a file (default <RECORDS stem>.<format> beside RECORDS)")
    ap.add_argument("--task", help=f"records of this task (subtitles default: {DEFAULT_TASK}; tables: every task)")
    ap.add_argument("--adapter", help=f"records of this adapter ('{NONE_LABEL}': the base model, the subtitles' "
                                      "default; tables: every adapter)")
    ap.add_argument("--settings", metavar="ID", help="records with this settings_id (a file holding records made "
                                                     "with several settings)")
    ap.add_argument("--input-dir", help="the folder (or s3:// prefix) the records' video paths are relative to, to read "
                                                   "clip durations (default: input_dir in RECORDS.summary.json, "
                                                   "else RECORDS' folder)")
    ap.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    return ap


def write_atomic(path: Path, data: bytes, what: str) -> None:
    """Write `data` under a temporary name beside `path`, sync, rename: a reader never sees half a file."""
    with writing(path, what, setting="--out"):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, data)


def write_all(files: dict[Path, bytes], what: str, overwrite: bool, records: Path) -> None:
    """Write every file, or refuse (ExportError, before writing any) one that exists without
    --overwrite; after a failed write, remove the files this run created (WriteFailed goes on)."""
    for path in files:
        if path.resolve() == records.resolve():
            raise ExportError(f"{path}: is the records file itself; choose another --out")
        if (path.exists() or path.is_symlink()) and not path.is_file():
            raise ExportError(f"{path}: exists and is not a regular file; choose another --out")
    existing = [p for p in files if p.exists()]
    if existing and not overwrite:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise ExportError(f"{existing[0]}{more} already exists and is never overwritten: choose another --out, "
                          "or add --overwrite to replace it")
    created = []
    try:
        for path, data in files.items():
            new = not path.exists()
            write_atomic(path, data, what)
            if new:
                created.append(path)
    except WriteFailed:
        for path in created:
            remove_quietly(path)
        raise


def subtitle_paths(videos: list[str], out: Path, fmt: str) -> dict[str, Path]:
    """video -> its subtitle file: the video's path under `out` with the format's suffix; two videos
    that would share a name (a.mp4, a.mov) keep their whole file name (a.mp4.vtt). Parts that would
    leave `out` (absolute paths, '..') are dropped."""
    def relative(video: str) -> PurePosixPath:
        parts = [p for p in PurePosixPath(video.replace("\\", "/")).parts if p not in ("/", ".", "..")]
        return PurePosixPath(*parts) if parts else PurePosixPath("video")

    stems = {v: relative(v).with_suffix(f".{fmt}") for v in videos}
    shared = {s for s, n in Counter(stems.values()).items() if n > 1}
    return {v: out / (relative(v).with_name(relative(v).name + f".{fmt}") if stems[v] in shared else stems[v])
            for v in videos}


def _subtitle_records(args, loaded: Loaded) -> tuple[list[dict], list[dict], str, str]:
    task, adapter = args.task or DEFAULT_TASK, args.adapter or NONE_LABEL
    chosen = select(loaded, task, adapter, args.settings)
    ok = [r for r in chosen if r["status"] == "ok"]
    errors = [r for r in chosen if r["status"] != "ok"]
    if not ok:
        raise ExportError(f"{loaded.path}: no ok record to make subtitles of (task {task}, adapter {adapter}: "
                          f"{len(errors)} error record(s))")
    one_settings(loaded.path, ok, settings_labels(loaded.records))
    return ok, errors, task, adapter


def export_subtitles(args, loaded: Loaded) -> tuple[dict, list[str]]:
    """Write one subtitle file per video; returns (what was done, notes)."""
    ok, errors, task, adapter = _subtitle_records(args, loaded)
    input_dir, input_from = resolve_input_dir(loaded.path, args.input_dir)
    durations = C.ClipDurations(input_dir if input_there(input_dir) else None)
    by_video: dict[str, list[C.Cue]] = {}
    empty = 0
    for record in ok:
        cue = C.cue_of(record, durations)
        if cue is not None:
            by_video.setdefault(record["video"], []).append(cue)
        empty += cue is None
    if not by_video:
        raise ExportError(f"{loaded.path}: every ok record of task {task}, adapter {adapter} has an empty caption")
    changed = changed_videos(ok, input_dir)
    for video in changed:  # a subtitle file beside another file than the one captioned would caption it wrongly
        by_video.pop(video, None)
    if not by_video:
        video, why = next(iter(changed.items()))
        raise ExportError(f"{loaded.path}: every video's file changed since captioning (e.g. '{video}': {why}): "
                          "caption them again (caption ... recaption_changed=true), or give the folder they were "
                          "captioned from with --input-dir")
    out = args.out or loaded.path.with_name(f"{loaded.path.stem}-{args.format}")
    paths = subtitle_paths(sorted(by_video), out, args.format)
    render = C.FORMATS[args.format]
    files = {paths[v]: render(C.arrange(cues)).encode("utf-8") for v, cues in sorted(by_video.items())}
    write_all(files, f"{SUBTITLES[args.format]} file", args.overwrite, loaded.path)
    notes = []
    if durations.used:
        found = ", ".join(f"{source}: {n}" for source, n in durations.used.items())
        notes.append(f"whole-clip cues end at the clip's duration from {found} (videos looked for in {input_dir}, "
                     f"{input_from}; --input-dir sets it)")
    if changed:
        video, why = next(iter(changed.items()))
        notes.append(f"{len(changed)} video(s) changed since captioning, their subtitles left out (e.g. '{video}': "
                     f"{why}); caption them again with recaption_changed=true")
    notes += [n for n in [subtitle_note(ok + errors)] if n]  # long videos: the gaps between cues, explained
    done = {"files": len(files), "cues": sum(len(c) for c in by_video.values()), "out": out,
            "selection": f"task {task}, adapter {adapter}", "errors": errors,
            "empty": empty}
    return done, notes


def changed_records(records: list[dict], input_dir: Path | str) -> dict[int, str]:
    """{record's line: what differs} for the records whose file in `input_dir` is not the one they were made
    from (their `source`: video_io/identity.py), each record checked on its own: records of one video
    made with other settings may name other files (add_beside=true). A file not there cannot be checked,
    nor mislead: left alone."""
    from video_io.identity import compare

    changed, known = {}, {}
    for record in records:
        path = clip_path(input_dir, record["video"])
        checked = (record["video"], json.dumps(record.get("source"), sort_keys=True))
        if checked not in known:
            known[checked] = compare(record.get("source"), path, input_dir) if exists(path) else None
        if known[checked] is not None:
            changed[record["_line"]] = known[checked]
    return changed


def changed_videos(records: list[dict], input_dir: Path | str) -> dict[str, str]:
    """{video: what differs} for the videos with a record changed_records finds (the first one's reason)."""
    changed: dict[str, str] = {}
    why = changed_records(records, input_dir)
    for record in records:
        if record["_line"] in why:
            changed.setdefault(record["video"], why[record["_line"]])
    return changed


def export_table(args, loaded: Loaded) -> tuple[dict, list[str]]:
    chosen = select(loaded, args.task, args.adapter, args.settings)
    out = args.out or loaded.path.with_name(f"{loaded.path.stem}.{args.format}")
    input_dir, _ = resolve_input_dir(loaded.path, args.input_dir)
    changed = changed_records(chosen, input_dir) if input_there(input_dir) else {}
    table = T.rows(chosen, settings_labels(loaded.records), changed)
    write_all({out: T.FORMATS[args.format](table)}, f"{TABLES[args.format]} file", args.overwrite, loaded.path)
    errors = [r for r in chosen if r["status"] != "ok"]
    notes = []
    if changed:
        notes.append(f"{len(changed)} row(s) made from another file than the one under their name in {input_dir} "
                     "(column changed_since_captioning says what differs)")
    return {"files": 1, "rows": len(table), "out": out, "errors": errors}, notes


def summary_line(args, done: dict, loaded: Loaded) -> str:
    """The one line the command prints: what it wrote, and the records it left out or found replaced."""
    if args.format in SUBTITLES:
        what = (f"{done['files']} {SUBTITLES[args.format]} file(s), {done['cues']} cue(s), to {done['out']} "
                f"({done['selection']})")
    else:
        what = f"{done['rows']} row(s) to {done['out']}"
    parts = [f"{PROG}: wrote {what}"]
    errors = done["errors"]
    if errors:
        first = errors[0]
        verb = "left out" if args.format in SUBTITLES else "included as rows"
        parts.append(f"{len(errors)} error record(s) {verb} (first: {first['video']}: {first.get('error')})")
    if done.get("empty"):
        parts.append(f"{done['empty']} ok record(s) with an empty caption left out")
    if loaded.replaced:
        parts.append(f"{loaded.replaced} record(s) replaced by a later line for the same video and segment")
    return "; ".join(parts)


def output_target(args, loaded: Loaded) -> Path:
    """What the command will write: the subtitles' folder, or the table."""
    if args.format in SUBTITLES:
        return args.out or loaded.path.with_name(f"{loaded.path.stem}-{args.format}")
    return args.out or loaded.path.with_name(f"{loaded.path.stem}.{args.format}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        loaded = load(args.records)
        check_can_write(output_target(args, loaded), f"{({**SUBTITLES, **TABLES})[args.format]} file", "--out",
                        into=args.format in SUBTITLES)  # before reading clip durations and rendering
        export = export_subtitles if args.format in SUBTITLES else export_table
        done, notes = export(args, loaded)
    except ExportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WriteFailed as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    for note in [*loaded.notes, *notes]:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    print(summary_line(args, done, loaded))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
