"""The record format: what one line of a records file is, for every program that reads one.

The caption job writes records (caption/pipeline/record.py makes them, caption/output/records_file.py appends
them); eval/ scores them, caption-report shows them, caption-export turns them into subtitles and tables.
A record is a JSON object that starts with `video` (the clip's path inside the captioned folder), then
`task`, `adapter` and `status`; a segment of a long video adds `segment_index`. Its key is (video, task,
adapter, segment index or None): a later record of the same key and settings replaces an earlier one.
"""

from __future__ import annotations

from typing import Any

Record = dict[str, Any]  # one line of a records file, as json.loads reads it
RecordKey = tuple[str, str, "str | None", "int | None"]  # (video, task, adapter, segment index or None)
STATUSES = ("ok", "error")
# what a record's `task` may be: each is a named instruction of the job (caption/prompts.py INSTRUCTIONS_KO)
TASKS = ("caption", "keywords", "motion")
# Every record this project writes starts with these bytes (`video` is the first key)
RECORD_PREFIX = b'{"video": '


def record_key(record: Record) -> RecordKey:
    return record["video"], record.get("task", "caption"), record.get("adapter"), segment_index(record)


def segment_index(record: Record) -> int | None:
    """The record's segment, or None for a caption of the whole clip."""
    value = record.get("segment_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_record(value: object) -> bool:
    """A caption record as the job makes them (the other keys are the job's business)."""
    return (isinstance(value, dict) and isinstance(value.get("video"), str)
            and value.get("status") in STATUSES and isinstance(value.get("task", "caption"), str))


def settings_labels(records: list[Record]) -> dict[str, str]:
    """{settings_id: a short label of what its `settings` have that the file's other settings do not} for a
    file holding records made with several settings (add_beside=true): `frames=16 uniform; sampling=greedy`,
    only the keys whose values differ. A job's tasks and adapters share its `settings` (their ids differ by
    the prompt and the adapter), so they share a label. Empty where the file holds one `settings` only:
    nothing to tell apart."""
    made: dict[str, dict[str, Any]] = {}
    for record in records:
        sid, settings = record.get("settings_id"), record.get("settings")
        if isinstance(sid, str) and sid not in made:
            made[sid] = settings if isinstance(settings, dict) else {}
    if len({repr(sorted(settings.items())) for settings in made.values()}) < 2:
        return {}
    keys = list(dict.fromkeys(k for settings in made.values() for k in settings))
    differing = [k for k in keys if len({repr(s.get(k)) for s in made.values()}) > 1]
    return {sid: "; ".join(f"{k}={settings.get(k, '-')}" for k in differing) if settings else "settings not recorded"
            for sid, settings in made.items()}
