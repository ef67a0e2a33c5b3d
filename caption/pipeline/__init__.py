"""One clip's path from its frames to its records, as a list of stages (STAGES), in order. Each stage
is a class or function in a file of its own, with a declared interface (a typing.Protocol where the
next stage pulls); every runner composes the same list with `caption_clips`: runner=local in this
process (caption/runners/local.py), runner=ray in each engine actor (caption/runners/ray.py).
docs/architecture.md lists the same stages (tests/docs/test_architecture_doc.py checks it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from caption.pipeline.admission import PositionLimits
    from caption.pipeline.decode import DecodedClips
    from caption.pipeline.supervisor import EngineSupervisor
    from caption.settings.config import JobConfig
    from caption.summary.tally import JobTally
    from vidcap_ko.record import Record, RecordKey


@dataclass(frozen=True)
class Stage:
    name: str
    module: str  # the module it lives in
    entry: str  # the class or function of that module a runner composes
    takes: str
    gives: str


STAGES: tuple[Stage, ...] = (
    Stage("decode", "caption.pipeline.decode", "DecodedClips", takes="the clips' paths",
          gives="a DecodeResult per clip: its frames, or why it has none"),
    Stage("requests", "caption.pipeline.requests", "RequestIntake", takes="DecodedClips",
          gives="a Request per (task, adapter), as the RequestStream the engine pulls; a Refusal per clip that "
                "did not decode or that the engine cannot take"),
    Stage("generate", "caption.pipeline.generate", "generate", takes="the RequestStream",
          gives="a Result per request; the Refusals passed through"),
    Stage("record", "caption.pipeline.record", "records", takes="Result or Refusal",
          gives="a record per result; error records per refusal"),
)


def caption_clips(decoded: DecodedClips, keys: dict[str, str], job: JobConfig, supervisor: EngineSupervisor,
                  limits: PositionLimits, done: Callable[[RecordKey], bool], tally: JobTally) -> Iterator[Record]:
    """The stages after decoding, composed: decoded clips in, records out. `keys`: each clip's path ->
    its key; `done(key)`: whether a (video, task, adapter, segment) has its record; `supervisor` owns the
    engine (caption/pipeline/supervisor.py); `tally` counts the job's figures."""
    from caption.pipeline.generate import generate
    from caption.pipeline.record import records
    from caption.pipeline.requests import RequestIntake

    requests = RequestIntake(decoded, keys, job, done, tally, limits)
    return records(generate(requests, supervisor, tally), job, done)
