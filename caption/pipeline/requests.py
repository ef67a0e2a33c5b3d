"""The requests stage: decoded clips in, requests for the engine out, and a Refusal for each clip that
did not decode or that the engine cannot take (caption/pipeline/admission.py), which the generate stage
(caption/pipeline/generate.py) passes on to the record stage.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from caption.engines.base import Request, RequestStream
from caption.pipeline.admission import PositionLimits, refusal
from caption.pipeline.record import Refusal, record_keys
from caption.pipeline.stage import Batch, Place, Stage
from caption.prompts import build_prompt
from vidcap_ko.record import RecordKey, Reported
from video_io.decode import Clip
from video_io.decoder_process import DecodeResult

if TYPE_CHECKING:
    from caption.pipeline.decode import DecodedClips
    from caption.settings.config import JobConfig
    from caption.summary.tally import JobTally

_END = object()


class RequestsStage(Stage):
    """Runs beside the engine, which pulls its requests from this stage as it goes; it checks each clip
    against the model's position limits, read once from its checkpoint."""

    name, worker, takes = "requests", "engine", "DecodedClips"
    gives = ("a Request per (task, adapter), as the RequestStream the engine pulls; a Refusal per clip that "
             "did not decode or that the engine cannot take")

    def __init__(self, job: JobConfig, place: Place):
        super().__init__(job, place)
        self.limits: PositionLimits | None = None

    def setup(self) -> None:
        model = self.job.model
        self.limits = PositionLimits.from_checkpoint(model.path, model.family, model.max_model_len)

    def process(self, decoded: DecodedClips, batch: Batch) -> RequestIntake:
        if self.limits is None:
            raise RuntimeError("RequestsStage.process: call setup() first")
        return RequestIntake(decoded, batch.keys(), self.job, batch.done, batch.tally, self.limits)


def apply_ablation(clip: Clip, ablation: str) -> np.ndarray[Any, Any]:
    """Diagnostics that prove the model reads motion from frame order (see the model card)."""
    if ablation == "reverse":
        return clip.frames[::-1].copy()
    if ablation == "first_frame":
        return np.repeat(clip.frames[:1], len(clip.frames), axis=0)
    return clip.frames


class RequestIntake(RequestStream):
    """Decoded clips in, requests out: one request per (clip, task, adapter) still to do, for clips that
    decoded and that the engine can take; a Refusal for each of the others, kept until the generate
    stage takes it (take_refusals).

    `next()` waits on the decoders when nothing is ready (counted as the stage `decode_wait`); `ready()`
    says, without waiting, whether it would return at once, so that an engine with requests in flight
    takes only the clips already decoded instead of stopping its steps for the next ones."""

    def __init__(self, decoded: DecodedClips, keys: dict[str, str], job: JobConfig,
                 done: Callable[[RecordKey], bool], tally: JobTally, limits: PositionLimits):
        self.decoded = decoded
        self.keys, self.job, self.done, self.tally, self.limits = keys, job, done, tally, limits
        self.pending: deque[Request] = deque()
        self.refused: deque[Refusal] = deque()
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
            with self.tally.clock("decode_wait"):  # receiving finished clips from the decoders
                if not self.decoded.ready():
                    return False
            self._take(next(self.decoded, _END))
        return True

    def prepend(self, requests: Iterable[Request]) -> None:
        """Put requests back at the front (an engine's unsubmitted requests, after it broke)."""
        self.pending.extendleft(reversed(list(requests)))

    def take_refusals(self) -> list[Refusal]:
        """The refusals found so far and not yet taken, in the order they were found."""
        taken = list(self.refused)
        self.refused.clear()
        return taken

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
            self.refused.append(Refusal(key, f"decode: {result.error}", segment,
                                        _reported(round(result.seconds, 4), None, result.source)))
            return []
        self.tally.decode_s += clip.decode_seconds
        metadata = clip.metadata()
        budget = job.planned().tokens_per_request - job.planned().vision_tokens_per_clip
        why = refusal(len(clip.frames), metadata, self.limits, budget)
        if why is not None:
            self.refused.append(Refusal(key, f"refused before generation: {why}", segment,
                                        _reported(round(clip.decode_seconds, 4), clip.backend, result.source)))
            return []
        frames = apply_ablation(clip, job.ablation)
        context = {"decode_s": clip.decode_seconds, "indices": clip.indices, "times": clip.times, "seek": clip.seek,
                   "frames": len(frames), "backend": clip.backend, "notes": clip.notes,
                   "queued_at": time.perf_counter(), **({"scan_s": result.scan_s} if segment is not None else {}),
                   **({"fetched_bytes": clip.fetched_bytes} if clip.fetched_bytes is not None else {}),
                   **({"source": result.source} if result.source is not None else {})}  # the file the decoder read
        index = None if segment is None else segment.index
        # the requests hold the frames; nothing else here may keep them alive
        return [Request(key=video, task=task, adapter=adapter, prompt=build_prompt(job.model.family, task),
                        frames=frames, video_metadata=metadata, context=dict(context), segment=segment,
                        forced_output_tokens=(job.forced_lengths.draw(video, task, adapter, index)
                                              if job.forced_lengths is not None else None))
                for video, task, adapter, _ in record_keys(job, key) if not self.done((video, task, adapter, index))]


def _reported(decode_s: float, decoder: str | None, source: dict[str, Any] | None) -> Reported:
    """What a refused clip's records say was measured: decoding's seconds, the decoder (once it decoded),
    and the file the decoder read (None: it could not say)."""
    reported: Reported = {"decode_s": decode_s}
    if decoder is not None:
        reported["decoder"] = decoder
    if source is not None:
        reported["source"] = source
    return reported
