"""Decoded clips in, records out: requests for the engine, error records for the clips it cannot take.

`caption_clips` is what every runner runs on its decoded clips (runner=local in this process, runner=ray
in each engine actor): the same admission checks, prompts, engine restarts and records either way.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from caption.admission import PositionLimits, refusal
from caption.engines.base import Request
from caption.pipeline.record import error_records, record_keys, result_record
from caption.prompts import build_prompt
from vidcap_ko_outputs.record import Record, RecordKey
from video_io.decode import Clip
from video_io.workers import DecodeResult

if TYPE_CHECKING:
    from caption.config import JobConfig
    from caption.pipeline.supervisor import EngineSupervisor
    from caption.summary import JobTally

_END = object()


def caption_clips(decoded: Iterable[DecodeResult], keys: dict[str, str], job: JobConfig,
                  supervisor: EngineSupervisor, limits: PositionLimits, done: Callable[[RecordKey], bool],
                  tally: JobTally) -> Iterator[Record]:
    """Decoded clips in, records out: a record per result, and error records for clips that did not
    decode or that the engine cannot take. `done(key)`: whether a (video, task, adapter, segment) has its record;
    `supervisor`: the EngineSupervisor (caption/pipeline/supervisor.py) that owns the engine."""
    refused: deque[Record] = deque()
    requests = RequestIntake(decoded, keys, job, done, refused.append, tally, limits)
    for result in supervisor.run(requests, tally):
        while refused:
            yield refused.popleft()
        yield result_record(result, job)
    while refused:
        yield refused.popleft()


def apply_ablation(clip: Clip, ablation: str) -> np.ndarray[Any, Any]:
    """Diagnostics that prove the model reads motion from frame order (see the model card)."""
    if ablation == "reverse":
        return clip.frames[::-1].copy()
    if ablation == "first_frame":
        return np.repeat(clip.frames[:1], len(clip.frames), axis=0)
    return clip.frames


class RequestIntake:
    """Decoded clips in, requests out: one request per (clip, task, adapter) still to do, for clips that
    decoded and that the engine can take; error records for the others go to `emit`.

    `next()` waits on the decoders when nothing is ready (counted as the stage `decode_wait`); `ready()`
    says, without waiting, whether it would return at once, so that an engine with requests in flight
    takes only the clips already decoded instead of stopping its steps for the next ones (where the
    decoded stream cannot say, a list for instance, everything counts as ready)."""

    def __init__(self, decoded: Iterable[DecodeResult], keys: dict[str, str], job: JobConfig,
                 done: Callable[[RecordKey], bool], emit: Callable[[Record], None], tally: JobTally,
                 limits: PositionLimits):
        self.decoded = iter(decoded)
        self._decoded_ready = getattr(self.decoded, "ready", None)
        self.keys, self.job, self.done, self.emit, self.tally, self.limits = keys, job, done, emit, tally, limits
        self.pending: deque[Request] = deque()
        self.ended = False

    def __iter__(self) -> "RequestIntake":
        return self

    def __next__(self) -> Request:
        while not self.pending:
            if self.ended:
                raise StopIteration
            with self.tally.clock("decode_wait"):
                result = next(self.decoded, _END)
            self._take(result)
        return self.pending.popleft()

    def ready(self) -> bool:
        while not self.pending and not self.ended:
            if self._decoded_ready is not None:
                with self.tally.clock("decode_wait"):  # receiving finished clips from the decoders
                    if not self._decoded_ready():
                        return False
            self._take(next(self.decoded, _END))
        return True

    def prepend(self, requests: Iterable[Request]) -> None:
        """Put requests back at the front (an engine's unsubmitted requests, after it broke)."""
        self.pending.extendleft(reversed(list(requests)))

    def _take(self, result: DecodeResult | object) -> None:
        if not isinstance(result, DecodeResult):  # _END
            self.ended = True
        else:
            self.pending.extend(self._requests_of(result))

    def _requests_of(self, result: DecodeResult) -> list[Request]:
        job, key, segment = self.job, self.keys[result.path], result.segment
        if segment is not None and segment.index == 0:
            self.tally.scan_s += result.scan_s
        clip = result.clip
        if clip is None:  # not decoded: result.error says why
            for record in error_records(job, self.done, key, f"decode: {result.error}", segment,
                                        decode_s=round(result.seconds, 4)):
                self.emit(record)
            return []
        self.tally.decode_s += clip.decode_seconds
        metadata = clip.metadata()
        budget = job.planned().tokens_per_request - job.planned().vision_tokens_per_clip
        refused = refusal(len(clip.frames), metadata, self.limits, budget)
        if refused is not None:
            for record in error_records(job, self.done, key, f"refused before generation: {refused}", segment,
                                        decode_s=round(clip.decode_seconds, 4), decoder=clip.backend):
                self.emit(record)
            return []
        frames = apply_ablation(clip, job.ablation)
        context = {"decode_s": clip.decode_seconds, "indices": clip.indices, "times": clip.times, "seek": clip.seek,
                   "frames": len(frames), "backend": clip.backend, "notes": clip.notes,
                   "queued_at": time.perf_counter(), **({"scan_s": result.scan_s} if segment is not None else {})}
        index = None if segment is None else segment.index
        # the requests hold the frames; nothing else here may keep them alive
        return [Request(key=video, task=task, adapter=adapter, prompt=build_prompt(job.model.family, task),
                        frames=frames, video_metadata=metadata, context=dict(context), segment=segment,
                        forced_output_tokens=(job.forced_lengths.draw(video, task, adapter, index)
                                              if job.forced_lengths is not None else None))
                for video, task, adapter, _ in record_keys(job, key) if not self.done((video, task, adapter, index))]
