"""The job's output: one JSONL record per (video, task, adapter) — and segment, for a long video split
into segments — appended as results arrive.

Records are keyed by the clip's path, never by position, so arrival order does not matter and a
job that is stopped (even by kill -9) resumes where it was: records already written are kept,
a half-written last line is cut off, and only what has no record yet is run again. Each record says
which file it was made from (`source`: video_io/identity.py), and a record counts as done only for that
file. caption/output/records_file.py appends the records while the job runs.

The job writes only to a file that is absent, empty, or already holds this job's caption
records. Anything else named as `output=` (a user's settings.json, notes, another tool's JSONL)
is refused before any model loads, and never changed: not truncated, not appended to. Starting
afresh over an existing file takes `overwrite=true`, and even then the old file is kept beside
the new one under a timestamped name.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from caption.settings.settings_ids import IdKey, SettingsIds
from vidcap_ko.record import RECORD_PREFIX, Record, is_record, segment_index
from vidcap_ko.writing import writing

# (task, adapter, segmented) -> the settings_id this job gives such records, and which records are its
# own (caption/output/fingerprint.py SettingsIds; a segment's record also says how the video was cut)
ExpectedKey = IdKey  # (task, adapter, segmented)
Expected = SettingsIds


def expected_key(record: Record) -> ExpectedKey:
    """The key of a record's settings_id in Expected."""
    return record.get("task", "caption"), record.get("adapter"), segment_index(record) is not None


class OutputRefused(Exception):
    """`output` (or the summary file) is not the job's to write; the message says what to change."""


def dumps_record(record: Record) -> str:
    """One JSON line. File names that are not UTF-8 reach us as surrogate escapes (os.fsdecode):
    those are written \\u-escaped, which json reads back to the same key, so resume still matches."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True)
    return line + "\n"


def kept_name(path: Path) -> Path:
    """Where overwrite=true keeps an existing file: `<stem>.<UTC time><suffix>` beside it."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    candidate = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.{stamp}-{n}{path.suffix}")
        n += 1
    return candidate


def _first_foreign_line(data: bytes) -> tuple[int, str] | None:
    """(line number, why) of the first complete line that is not a caption record, else None."""
    for line_no, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return line_no, "not JSON"
        if not is_record(value):
            return line_no, "not a caption record"
    return None


def check_output(path: Path, resume: bool, overwrite: bool) -> None:
    """Raise OutputRefused unless the job may write `path` under these options; changes nothing."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    if not path.is_file():
        raise OutputRefused(f"`output={path}` is not a regular file; give a JSONL file path such as captions.jsonl")
    keep = f"or add overwrite=true to start afresh (the file is then kept, renamed to {path.stem}.<time>{path.suffix})"
    if overwrite:
        return
    names = path.stat().st_nlink
    if names > 1:  # the job tidies by writing a new file and renaming it onto this name: the other names
        # would keep the old records while this one moves on, and a job through another name takes
        # another lock. A symbolic link reaches the one file (caption/settings/paths.py)
        raise OutputRefused(f"`output={path}` has {names} names (hard links), and the job replaces the file when it "
                            "tidies it, which would leave the other names with the old records: give it one "
                            "name (a symbolic link is fine), choose another output=, " + keep)
    data = path.read_bytes()
    foreign = _first_foreign_line(data)
    end = data.rfind(b"\n") + 1
    if foreign is None and end < len(data) and not data[end:].startswith(RECORD_PREFIX):
        foreign = (data.count(b"\n") + 1, "not a caption record")
    if foreign is not None:
        line_no, why = foreign
        raise OutputRefused(f"`output={path}` holds something else (line {line_no}: {why}), and the job never "
                            f"changes a file that is not its own: choose another output=, {keep}")
    if not resume:
        raise OutputRefused(f"`output={path}` already holds caption records and resume=false would start afresh: "
                            f"set resume=true to continue it, choose another output=, {keep}")


def check_settings(path: Path, expected: Expected, settings: tuple[dict, dict], add_beside: bool) -> None:
    """Refuse (OutputRefused, one line naming what differs) to resume into records made with other
    settings than this job's, unless `add_beside`, or the file holds this job's own records of the same
    kind (task, adapter, whole clip or segment) beside them: it was added to beside them once, and that
    choice holds, so the job that made either resumes with its own command. Records of tasks or adapters
    this job does not run are not its business. `settings`: this job's for a whole clip's records, and a
    segment's."""
    path = Path(path)
    if add_beside or not path.exists() or path.stat().st_size == 0:
        return
    own: set = set()  # the kinds of record (task, adapter, segmented) this job's own records are of
    foreign: dict = {}  # kind -> [how many records of another settings, the first of them]
    with open(path, "rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a cut-off last line: RecordStore.open repairs it
                continue
            key = expected_key(record)
            if key in expected and not expected.owns(key, record):
                foreign.setdefault(key, [0, record])[0] += 1
            elif key in expected:
                own.add(key)
    # a kind this job has records of too was added to beside them once (add_beside=true): that choice holds
    # for the file; a kind it has none of (other segment settings, say) is still refused
    unshared = [found for key, found in foreign.items() if key not in own]
    if unshared:
        from caption.output.fingerprint import differences

        other, example = sum(n for n, _ in unshared), unshared[0][1]
        what = "; ".join(differences(example.get("settings"), settings[expected_key(example)[2]]))
        raise OutputRefused(f"`output={path}` holds {other} record(s) made with other settings than this job's "
                            f"({what}), and resuming would label them as this job's: choose another output=, add "
                            f"overwrite=true (the file is kept, renamed to {path.stem}.<time>{path.suffix}), or "
                            "add_beside=true to add this job's records beside them (each record names its settings)")


def check_summary(path: Path, overwrite: bool) -> None:
    """The summary file follows the output's rule: absent, empty, or a summary this job wrote."""
    path = Path(path)
    if overwrite or not path.exists() or path.stat().st_size == 0:
        return
    try:
        ours = {"videos_found", "output"} <= set(json.loads(path.read_text(encoding="utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError, OSError):
        ours = False
    if not ours:
        raise OutputRefused(f"`summary_path={path}` holds something else than a caption job summary, and the job "
                            "never changes a file that is not its own: choose another summary_path= (or output=), "
                            "or add overwrite=true (the file is then kept under a timestamped name)")


def keep_existing(path: Path) -> Path | None:
    """overwrite=true for a file other than the records (the summary): move it aside, return where."""
    path = Path(path)
    if path.exists() and path.stat().st_size > 0:
        kept = kept_name(path)
        with writing(path, "summary file", setting="summary_path"):
            os.replace(path, kept)
        return kept
    return None
