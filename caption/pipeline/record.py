"""The record stage: a job's records, made here and nowhere else, each whole (vidcap_ko/record.py Record
says what each key holds), from what the generate stage gives (caption/pipeline/generate.py): an
engine's Result, or a Refusal (a clip that got no request). One record per (video, task, adapter); per
(video, segment, task, adapter) for a video split into segments. Its keys come in this order: `video`;
a segment's fields; task, adapter, status, caption, error, model, engine, settings_id and settings (how it
was made: caption/output/fingerprint.py); what the plan warned; what the decoder and the engine measured;
last the file it was made from (`source`, as its decoder read it: caption/output/provenance.py) and, for a
clip of a manifest, the row's other columns (`manifest`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, cast

from caption.output.provenance import SourceIdentities
from caption.pipeline.stage import Batch, Place, Stage
from vidcap_ko.record import Record, RecordKey, Reported, SegmentFields, Status

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
    fields: Reported = field(default_factory=lambda: Reported())


class RecordStage(Stage):
    """Each outcome's records, whole: what the engine or the decoder said, and the file it was made from."""

    name, worker, takes = "record", "engine", "Result or Refusal"
    gives = "a record per result; error records per refusal; each whole, with the file it was made from"

    def __init__(self, job: JobConfig, place: Place):
        super().__init__(job, place)
        self.extras: dict[str, dict[str, Any]] = {}

    def setup(self) -> None:
        manifest = self.job.files().manifest
        self.extras = manifest.extras if manifest is not None else {}  # input_list=: each row's other columns

    def process(self, outcomes: Iterable[Result | Refusal], batch: Batch) -> Iterator[Record]:
        """The records of the outcomes, in their order: a result's record, or a refusal's error records,
        one per (task, adapter) without a record yet (`batch.done(key)`: whether a key has one)."""
        sources = SourceIdentities(self.job.files().input_dir, batch.clips)
        for outcome in outcomes:
            if isinstance(outcome, Refusal):
                for record in error_records(self.job, batch.done, outcome.video, outcome.error, outcome.segment,
                                            outcome.fields):
                    yield self._whole(record, sources)
            else:
                yield self._whole(result_record(outcome, self.job), sources)

    def lost(self, video: str, error: str, batch: Batch) -> list[Record]:
        """The error records of a clip no engine gave records for (runner=ray: its actor died each time)."""
        sources = SourceIdentities(self.job.files().input_dir, batch.clips)
        return [self._whole(record, sources) for record in error_records(self.job, batch.done, video, error)]

    def _whole(self, record: Record, sources: SourceIdentities) -> Record:
        """The record with what the job's side knows, last: the file it was made from, its manifest row."""
        record["source"] = sources.of(record)
        if record["video"] in self.extras:  # to join the captions back to their table
            record["manifest"] = self.extras[record["video"]]
        return record


def record_keys(job: JobConfig, video: str, segments: int | None = None) -> list[RecordKey]:
    """One record per (video, task, adapter), adapter None being the base model; per segment too for a
    video split into `segments` (None: the whole clip)."""
    parts: list[int | None] = [None] if segments is None else list(range(segments))
    return [(video, task, adapter, part) for part in parts for adapter in job.variants() for task in job.options.tasks]


def segment_fields(segment: SegmentInfo | None) -> SegmentFields:
    """A segment's fields in its records (segment: video_io.segmenting.SegmentInfo, or None)."""
    if segment is None:
        return {}
    fields: SegmentFields = {"segment_index": segment.index, "segments": segment.count,
                             "start_s": round(segment.start_s, 6), "end_s": round(segment.end_s, 6)}
    fields.update(coverage_fields(segment))
    return fields


def coverage_fields(segment: SegmentInfo) -> SegmentFields:
    """What a segment covers (video_io/segmenting.py SegmentInfo): `shots` it spans ({index, start_s,
    end_s} each), `left_out`: the spans of the video no segment covers just before it (and after it,
    for the last segment), each with its reason; `coverage`: the video's seconds, its segments'
    seconds, its transitions' and what is left out in all. Together, a video's records name every
    second its segments leave out."""
    fields: SegmentFields = {}
    if segment.shots:
        fields["shots"] = [{"index": i, "start_s": a, "end_s": b} for i, a, b in segment.shots]
    if segment.coverage is not None:
        fields["left_out"] = list(segment.left_out)
        fields["coverage"] = dict(segment.coverage)
    return fields


def base_record(job: JobConfig, video: str, task: str, adapter: str | None, segment: SegmentInfo | None = None,
                *, status: Status, caption: str | None = None, error: str | None = None) -> Record:
    """The fields every record has; `settings` says how it was made (caption/output/fingerprint.py)."""
    segmented = segment is not None
    if job.settings_ids is None:
        raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
    settings = job.segment_settings if segmented else job.settings
    if settings is None:
        raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
    fields: Record = {"video": video, "task": task, "adapter": adapter, "status": status, "caption": caption,
                      "error": error, "model": job.model.name, "engine": job.engine,
                      "settings_id": job.settings_ids[(task, adapter, segmented)], "settings": settings}
    # a segment's fields right after `video`, where records have always had them (mypy does not follow a
    # TypedDict made of partial ones with **: the parts are typed, their union is a Record)
    record = cast(Record, {"video": video, **segment_fields(segment), **fields})
    # an adapter's records name the references list its captions are scored on (its `references_field`),
    # so caption-meteor and the review page score them as the job does (eval/scope.py)
    declared = {a.name: a.references_field for a in job.adapters}
    if adapter in declared:
        record["references_field"] = declared[adapter]
    warnings = _warnings(job, video)
    if warnings:
        record["warnings"] = warnings
    return record


def _warnings(job: JobConfig, video: str) -> list[str]:
    """What the plan warned about the captions, and about this clip's (caption/planning.py foreign_footage)."""
    warnings = list(job.caption_warnings)
    if job.foreign_footage is not None and job.foreign_footage.warns(video):
        warnings.append(job.foreign_footage.warning)
    return warnings


def error_records(job: JobConfig, done: Callable[[RecordKey], bool], key: str, error: str,
                  segment: SegmentInfo | None = None, reported: Reported | None = None) -> list[Record]:
    """The error records of a clip (or of one segment of it): one per (task, adapter) without a record yet,
    each with what was `reported` before it failed."""
    index = None if segment is None else segment.index
    made = []
    for video, task, adapter, _ in record_keys(job, key):
        if not done((video, task, adapter, index)):
            record = base_record(job, video, task, adapter, segment, status="error", error=error)
            made.append(_with(record, reported or {}))
    return made


def result_record(result: Result, job: JobConfig) -> Record:
    """The record of an engine's Result (caption/engines/base.py): its caption or its error, and what
    the decoder and the engine measured."""
    r = result.request
    caption, flags = (None, []) if result.error else clean_caption(result.text)
    record = base_record(job, r.key, r.task, r.adapter, r.segment, status="error" if result.error else "ok",
                         caption=caption, error=f"generate: {result.error}" if result.error else None)
    return _with(record, _reported(result, job, flags))


def _with(record: Record, reported: Reported) -> Record:
    """The record with what was reported, after its own keys (a Record and a Reported together are a
    Record: mypy's extra checks take TypedDict.update only from the same type)."""
    return cast(Record, {**record, **reported})


def _reported(result: Result, job: JobConfig, flags: list[str]) -> Reported:
    """What the decoder (in the request's context) and the engine said of a result."""
    r, context = result.request, result.request.context
    reported: Reported = {
        "frames": context["frames"] if "frames" in context else len(r.frames),
        "frame_indices": context.get("indices"), "frame_times": context.get("times"), "seek": context.get("seek"),
        "decoder": context.get("backend"),
        "prompt_tokens": result.prompt_tokens, "video_tokens": result.video_tokens,
        "output_tokens": result.output_tokens, "finish_reason": result.finish_reason,
        "decode_s": round(context.get("decode_s", 0.0), 4), "generate_s": round(result.generate_s, 4)}
    if "scan_s" in context:  # finding the video's segments (shot detection), shared by its segments
        reported["scan_s"] = round(context["scan_s"], 4)
    if "source" in context:  # the file the decoder read (the record stage adds its folder)
        reported["source"] = context["source"]
    if result.ttft_s is not None:
        reported["ttft_s"] = round(result.ttft_s, 4)
    if result.tpot_s is not None:
        reported["tpot_s"] = round(result.tpot_s, 5)
    if "queued_at" in context:  # from the clip's frames reaching the engine side to this record
        reported["latency_s"] = round(time.perf_counter() - context["queued_at"], 4)
    if r.forced_output_tokens is not None:
        reported["forced_output_tokens"] = r.forced_output_tokens
    if context.get("fetched_bytes") is not None:  # from an object store: what reading it cost
        reported["fetched_bytes"] = context["fetched_bytes"]
    if job.ablation != "none":
        reported["ablation"] = job.ablation
    if context.get("notes"):
        reported["notes"] = context["notes"]
    if flags:
        reported["flags"] = flags
    return reported


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
