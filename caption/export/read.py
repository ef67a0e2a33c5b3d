"""The records `caption-export` reads: the job's JSONL file, checked line by line, then the selection
a user asked for (task, adapter, settings), with one record per (video, segment) left.

A record of a long video names its segment (`segment_index`, and `start_s` / `end_s` in seconds of
the source video); a record without them is one caption for the whole clip. Where a file holds
several records for one (video, task, adapter, settings, segment) — a resumed or hand-merged file —
the one written last (the lowest in the file) wins, and the count of those replaced is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eval.inputs import NONE_LABEL, read_text
from vidcap_ko.record import NotRecords, Record, parse_records, settings_labels

DEFAULT_TASK = "caption"


class ExportError(Exception):
    """Bad input or a refused output; the message is one complete line (exit status 2)."""


@dataclass
class Loaded:
    """The usable records of a file (each with `_line`, its line number) and what was left out."""

    path: Path
    records: list[dict]
    replaced: int = 0  # records a later line of the same (video, task, adapter, settings, segment) replaced
    notes: list[str] = field(default_factory=list)  # e.g. a half-written last line


def segment_of(record: dict) -> int | None:
    """The record's segment index, or None for a caption of the whole clip."""
    value = record.get("segment_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def identity(record: dict) -> tuple:
    """What a later record of the same caption shares with it: video, task, adapter, settings and
    segment (its index, else its start time; neither: the whole clip)."""
    where = segment_of(record)
    if where is None and isinstance(record.get("start_s"), (int, float)):
        where = f"at {record['start_s']}"
    return (record["video"], label(record.get("task", DEFAULT_TASK)), label(record.get("adapter")),
            label(record.get("settings_id")), label(where))


def _parse(path: Path, text: str) -> tuple[list[Record], list[str]]:
    try:
        read = parse_records(text.split("\n"))
    except NotRecords as exc:
        what = (f"not a JSONL file of caption records ({exc.why})" if exc.why.startswith("malformed JSON")
                else exc.why)
        raise ExportError(f"{path}:{exc.line}: {what}") from None
    records = []
    for no, record in read.records:
        record["_line"] = no
        records.append(record)
    return records, [f"{path}:{note}" for note in read.notes]


def load(path: Path) -> Loaded:
    """Every record of the file, the latest per (video, task, adapter, settings, segment). Raises
    ExportError for a missing, unreadable, non-UTF-8, non-JSONL or empty file."""
    text = read_text(Path(path), ExportError, expected="the caption job's JSONL records")
    records, notes = _parse(Path(path), text)
    if not records:
        raise ExportError(f"{path}: no caption records (an empty file)")
    latest = {identity(record): record for record in records}  # a later line replaces an earlier one
    kept = sorted(latest.values(), key=lambda r: r["_line"])
    return Loaded(Path(path), kept, replaced=len(records) - len(kept), notes=notes)


def label(value) -> str:
    """How a task or adapter is named on the command line ('none': a record without one)."""
    return NONE_LABEL if value is None else str(value)


def select(loaded: Loaded, task: str | None, adapter: str | None, settings_id: str | None) -> list[dict]:
    """The records of one task / adapter / settings (None: any); ExportError when none match, naming
    what the file has."""
    chosen = [r for r in loaded.records
              if (task is None or label(r.get("task", DEFAULT_TASK)) == task)
              and (adapter is None or label(r.get("adapter")) == adapter)
              and (settings_id is None or label(r.get("settings_id")) == settings_id)]
    if not chosen:
        have = sorted({(label(r.get("task", DEFAULT_TASK)), label(r.get("adapter")), label(r.get("settings_id")))
                       for r in loaded.records})
        labels = settings_labels(loaded.records)
        listed = "; ".join(f"--task {t} --adapter {a} --settings {s}" + (f" ({labels[s]})" if s in labels else "")
                           for t, a, s in have[:6])
        raise ExportError(f"{loaded.path}: no record matches --task {task or 'any'} --adapter {adapter or 'any'}"
                          f"{f' --settings {settings_id}' if settings_id else ''}; the file has: {listed}"
                          f"{'; ...' if len(have) > 6 else ''}")
    return chosen


def one_settings(path: Path, records: list[dict], labels: dict[str, str]) -> None:
    """Subtitles show one caption per moment: refuse (ExportError) records made with several settings
    (a file the job added to with add_beside=true), naming the --settings that picks each and what it is
    (`labels`: vidcap_ko/record.py settings_labels of the whole file)."""
    made = sorted({label(r.get("settings_id")) for r in records})
    if len(made) > 1:
        same = "the same settings, another prompt or adapter weights"  # ids differ, `settings` do not
        choices = " or ".join(f"--settings {m} ({labels.get(m, same)})" for m in made)
        raise ExportError(f"{path}: the selected records were made with {len(made)} different settings; "
                          f"choose one with {choices}")
