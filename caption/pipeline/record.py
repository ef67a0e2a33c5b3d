"""The record stage: a job's records, made here and nowhere else, from what the generate stage gives
(caption/pipeline/generate.py): an engine's Result, or a Refusal (a clip that got no request). One
JSON object per (video, task, adapter) — per (video, segment, task, adapter) for a video split into
segments; the format's keys and what a reader may rely on are vidcap_ko/record.py's, which
eval/ and the tools read too.

Every record starts with `video`, then task, adapter, status (ok | error), caption, error, the model and
engine, and `settings` with its `settings_id` (how it was made: caption/output/fingerprint.py); an adapter's
record names the references list it is scored on (`references_field`). A segment's record adds
`segment_index`, `segments` (how many the video has: what tells a resumed job whether the video is
complete), `start_s` and `end_s` (seconds of the source video), and what it covers (`shots`,
`left_out`, `coverage`: coverage_fields); a whole clip's record has none of them, as before segments
existed. A result adds what the engine and the decoder report.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from vidcap_ko.record import Record, RecordKey

if TYPE_CHECKING:
    from caption.engines.base import Result
    from caption.settings.config import JobConfig
    from video_io.segmenting import SegmentInfo


@dataclass(frozen=True)
class Refusal:
    """A clip (or one segment of it) that gets no request: it did not decode, or the engine cannot take
    it (caption/pipeline/requests.py). Its records are error records saying why; `fields` adds what
    was measured (decode_s, the decoder)."""

    video: str  # the clip's key
    error: str
    segment: SegmentInfo | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def records(outcomes: Iterable[Result | Refusal], job: JobConfig,
            done: Callable[[RecordKey], bool]) -> Iterator[Record]:
    """The records of the generate stage's outcomes, in their order: a result's record, or a refusal's
    error records, one per (task, adapter) without a record yet (`done(key)`: whether a key has one)."""
    for outcome in outcomes:
        if isinstance(outcome, Refusal):
            yield from error_records(job, done, outcome.video, outcome.error, outcome.segment, **outcome.fields)
        else:
            yield result_record(outcome, job)


def record_keys(job: JobConfig, video: str, segments: int | None = None) -> list[RecordKey]:
    """One record per (video, task, adapter), adapter None being the base model; per segment too for a
    video split into `segments` (None: the whole clip)."""
    parts: list[int | None] = [None] if segments is None else list(range(segments))
    return [(video, task, adapter, part) for part in parts for adapter in job.variants() for task in job.options.tasks]


def segment_fields(segment: SegmentInfo | None) -> dict[str, Any]:
    """A segment's fields in its records (segment: video_io.segmenting.SegmentInfo, or None)."""
    if segment is None:
        return {}
    fields = {"segment_index": segment.index, "segments": segment.count,
              "start_s": round(segment.start_s, 6), "end_s": round(segment.end_s, 6)}
    return fields | coverage_fields(segment)


def coverage_fields(segment: SegmentInfo) -> dict[str, Any]:
    """What a segment covers (video_io/segmenting.py SegmentInfo): `shots` it spans ({index, start_s,
    end_s} each), `left_out`: the spans of the video no segment covers just before it (and after it,
    for the last segment), each with its reason; `coverage`: the video's seconds, its segments'
    seconds, its transitions' and what is left out in all. Together, a video's records name every
    second its segments leave out."""
    fields: dict[str, Any] = {}
    if segment.shots:
        fields["shots"] = [{"index": i, "start_s": a, "end_s": b} for i, a, b in segment.shots]
    if segment.coverage is not None:
        fields["left_out"] = list(segment.left_out)
        fields["coverage"] = dict(segment.coverage)
    return fields


def base_record(job: JobConfig, video: str, task: str, adapter: str | None,
                segment: SegmentInfo | None = None) -> Record:
    """The fields every record has; `settings` says how it was made (caption/output/fingerprint.py)."""
    segmented = segment is not None
    if job.settings_ids is None:
        raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
    return {"video": video, **segment_fields(segment), "task": task, "adapter": adapter, "status": None,
            "caption": None, "error": None, "model": job.model.name, "engine": job.engine,
            "settings_id": job.settings_ids[(task, adapter, segmented)],
            "settings": job.segment_settings if segmented else job.settings,
            **_references_field(job, adapter), **_warnings(job, video)}


def _warnings(job: JobConfig, video: str) -> dict[str, list[str]]:
    """What the plan warned about the captions, and about this clip's (caption/planning.py foreign_footage)."""
    warnings = list(job.caption_warnings)
    if job.foreign_footage is not None and job.foreign_footage.warns(video):
        warnings.append(job.foreign_footage.warning)
    return {"warnings": warnings} if warnings else {}


def _references_field(job: JobConfig, adapter: str | None) -> dict[str, str]:
    """An adapter's records name the references list its captions are scored on (its `references_field`),
    so caption-meteor and the review page score them as the job does (eval/scope.py)."""
    declared = {a.name: a.references_field for a in job.adapters}
    return {"references_field": declared[adapter]} if adapter in declared else {}


def error_records(job: JobConfig, done: Callable[[RecordKey], bool], key: str, error: str,
                  segment: SegmentInfo | None = None, **extra: Any) -> list[Record]:
    """The error records of a clip (or of one segment of it): one per (task, adapter) without a record yet."""
    index = None if segment is None else segment.index
    return [base_record(job, video, task, adapter, segment) | {"status": "error", "error": error} | extra
            for video, task, adapter, _ in record_keys(job, key) if not done((video, task, adapter, index))]


def result_record(result: Result, job: JobConfig) -> Record:
    """The record of an engine's Result (caption/engines/base.py): its caption or its error, and what
    the decoder and the engine measured."""
    r = result.request
    record = base_record(job, r.key, r.task, r.adapter, r.segment)
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
        "prompt_tokens": result.prompt_tokens, "video_tokens": result.video_tokens,
        "output_tokens": result.output_tokens,
        "finish_reason": result.finish_reason,
        "decode_s": round(r.context.get("decode_s", 0.0), 4), "generate_s": round(result.generate_s, 4),
    })
    if "scan_s" in r.context:  # finding the video's segments (shot detection), shared by its segments
        record["scan_s"] = round(r.context["scan_s"], 4)
    if "source" in r.context:  # the file the decoder read; the job adds its folder (caption/output/provenance.py)
        record["source"] = r.context["source"]
    optional = {"ttft_s": None if result.ttft_s is None else round(result.ttft_s, 4),
                "tpot_s": None if result.tpot_s is None else round(result.tpot_s, 5),
                # from the clip's frames reaching the engine side to this record
                "latency_s": round(time.perf_counter() - r.context["queued_at"], 4) if "queued_at" in r.context else None,
                "forced_output_tokens": r.forced_output_tokens,
                "fetched_bytes": r.context.get("fetched_bytes"),  # from an object store: what reading it cost
                "ablation": job.ablation if job.ablation != "none" else None,
                "notes": r.context.get("notes") or None, "flags": flags or None}
    record.update({k: v for k, v in optional.items() if v is not None})
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
