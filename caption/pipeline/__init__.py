"""One clip's path from its file to its records, as a list of stages (STAGES), in order: each a class
(caption/pipeline/stage.py Stage) in a file of its own that declares what a copy of it needs where it
runs and turns a batch's items into the next stage's. Every runner runs this list and decides only
where: runner=local all of it in this process (caption/runners/local.py), runner=ray the decoder stages
in decoder actors and the others in engine actors (caption/runners/ray.py).
docs/architecture.md lists the same stages (tests/docs/test_architecture_doc.py checks it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from caption.pipeline.decode import DecodeStage
from caption.pipeline.generate import GenerateStage
from caption.pipeline.record import RecordStage
from caption.pipeline.requests import RequestsStage
from caption.pipeline.stage import Place, Stage, Worker, on_worker

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

STAGES: tuple[type[Stage], ...] = (DecodeStage, RequestsStage, GenerateStage, RecordStage)


def build_stages(job: JobConfig, worker: Worker, place: Place) -> list[Stage]:
    """The stages that run on `worker`, in their order, built for `place` (not set up yet)."""
    return [stage(job, place) for stage in on_worker(STAGES, worker)]
