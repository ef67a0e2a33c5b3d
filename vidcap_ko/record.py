"""The record format: what one line of a records file is, for every program that reads one.

The caption job makes records (caption/pipeline/record.py, whole: nothing is added to one after it is
made) and appends them (caption/output/records_file.py); eval/ scores them, caption-report shows them,
caption-export turns them into subtitles and tables, and a resumed job reads them back. Each of them reads
a file through `parse_records` and holds each line as a `Record`. A record is a JSON object that starts with
`video` (its bytes start with RECORD_PREFIX); its key is (video, task, adapter, segment index or None),
and a later record of the same key and settings replaces an earlier one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Required, Sequence, TypedDict, cast

Status = Literal["ok", "error"]


class SegmentFields(TypedDict, total=False):
    """A segment of a long video (video.segment) says which, and what it covers; a whole clip's record
    has none of these keys."""

    segment_index: int
    segments: int  # how many the video has: what tells a resumed job whether the video is complete
    start_s: float  # its seconds of the source video
    end_s: float
    shots: list[dict[str, Any]]  # the shots it spans: {index, start_s, end_s} each
    left_out: list[dict[str, Any]]  # spans of the video no segment covers, just before this one, each with its reason
    coverage: dict[str, Any]  # the video's seconds, its segments', its transitions' and what is left out


class Reported(TypedDict, total=False):
    """What the decoder and the engine reported (an error record has what was measured before it failed)."""

    frames: int  # the frames the engine was given
    frame_indices: list[int] | None
    frame_times: list[float] | None  # seconds from the first frame, of the frames used
    seek: str | None  # keyframe, nearby or exact (video_io/decode.py)
    decoder: str | None  # the decoding backend: pyav, decord or nvdec
    prompt_tokens: int | None
    video_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    decode_s: float  # seconds: decoding the clip
    generate_s: float
    scan_s: float  # finding a long video's segments (shot detection), shared by its segments
    ttft_s: float  # time to the first token
    tpot_s: float  # time per output token after it
    latency_s: float  # from the clip's frames reaching the engine's side to this record
    forced_output_tokens: int  # the output length a benchmark forced (caption/settings/forced_lengths.py)
    fetched_bytes: int  # from an object store: what reading the clip cost
    ablation: str  # a diagnostic that changed the frames (caption/pipeline/requests.py apply_ablation)
    notes: list[str]  # the decoder's notes on the clip
    flags: list[str]  # what was cleaned out of an ok caption (undecodable characters)
    # the file it was made from (video_io/identity.py): input_dir, size, mtime_ns or etag, fingerprint...;
    # None where nothing could say (the file was gone); absent in records written before it existed
    source: dict[str, Any] | None


class Record(SegmentFields, Reported, total=False):
    """One line of a records file: every key a record may have, and what it holds. The keys marked
    Required are in every record the job writes; a reader must not rely on them in a file it did not
    check (`is_record` says what every reader relies on: `video` and `status`)."""

    video: Required[str]  # the clip's path inside the captioned folder (its key in a manifest or a store)
    task: Required[str]  # the instruction: one of TASKS
    adapter: Required[str | None]  # the LoRA adapter's name; None: the base model
    status: Required[Status]
    caption: Required[str | None]  # None when status is error
    error: Required[str | None]  # why there is no caption: "<stage>: <reason>"; None when status is ok
    model: Required[str]  # the model preset's name
    engine: Required[str]  # vllm, hf or server
    settings_id: Required[str]  # how it was made, as an id (caption/output/fingerprint.py)
    settings: Required[dict[str, Any]]  # how it was made: the settings that change a caption
    references_field: str  # an adapter's record: the references list its captions are scored on
    warnings: list[str]  # what the plan warned about the captions, and about this clip
    manifest: dict[str, Any]  # input_list=: the row's other columns, to join captions back to their table
    superseded_at: str  # in <output>.superseded.jsonl (recaption_changed=true): when it was moved there, UTC
    superseded_because: str  # and what differs in the file now under its name
    _line: int  # where a reader found it in its file (from 1): caption-report and caption-export; never written


RecordKey = tuple[str, str, "str | None", "int | None"]  # (video, task, adapter, segment index or None)
STATUSES = ("ok", "error")
# what a record's `task` may be: each is a named instruction of the job (caption/prompts.py INSTRUCTIONS_KO)
TASKS = ("caption", "keywords", "motion")
# Every record this project writes starts with these bytes (`video` is the first key)
RECORD_PREFIX = b'{"video": '
NOT_A_RECORD = "not a caption record (needs 'video' and 'status' ok|error)"


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


class NotRecords(ValueError):
    """A line of a records file that is not a record: `line` (from 1) and what it is (`why`, one line)."""

    def __init__(self, line: int, why: str):
        super().__init__(f"line {line}: {why}")
        self.line, self.why = line, why


@dataclass
class ReadRecords:
    """A records file as read: each record with its line (from 1), and notes on lines left out."""

    records: list[tuple[int, Record]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_records(lines: Sequence[str | bytes], half_written_last: bool = True, checked: bool = True) -> ReadRecords:
    """The records of a file's lines (its text split at newlines; blank lines skipped). A last line that
    is the start of a record but no JSON (no newline after it: a job still writing, or killed mid-record)
    is left out with a note where `half_written_last`; anything else that is not JSON raises NotRecords, as
    does a line that is not a record (`is_record`) where `checked`."""
    read = ReadRecords()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else bytes(line)
            if half_written_last and no == len(lines) and raw.startswith(RECORD_PREFIX):
                read.notes.append(f"{no}: half-written last record left out")
                continue
            raise NotRecords(no, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
        if checked and not is_record(value):
            raise NotRecords(no, NOT_A_RECORD)
        read.records.append((no, cast(Record, value)))
    return read


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
