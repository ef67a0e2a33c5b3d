"""The generate stage: requests in, the engine's results out, and the clips refused before generation
passed through, in the order the record stage is to write them.

The engine pulls its requests (caption/engines/base.py RequestStream) from the requests stage
(caption/pipeline/requests.py), so a clip the requests stage refuses while the engine pulls waits in
that stage until the engine's next result: it comes out just before that result, as a Refusal; the
ones left come out when the engine is done. The supervisor (caption/pipeline/supervisor.py) owns the
engine and restarts it when it breaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from caption.pipeline.stage import Batch, Needs, Place, Stage
from caption.pipeline.supervisor import EngineSupervisor

if TYPE_CHECKING:
    from caption.engines.base import Result
    from caption.pipeline.record import Refusal
    from caption.pipeline.requests import RequestIntake
    from caption.settings.config import JobConfig
    from caption.summary.tally import JobTally


class GenerateStage(Stage):
    """The engine: loaded by setup (or the Place's, already loaded), restarted by its supervisor when it
    breaks; the cores and GPUs it holds are the ones the plan counts on."""

    name, worker, takes = "generate", "engine", "the RequestStream"
    gives = "a Result per request; the Refusals passed through"

    def __init__(self, job: JobConfig, place: Place):
        super().__init__(job, place)
        self.supervisor = EngineSupervisor(job, place.engine, place.trace_at)

    @classmethod
    def needs(cls, job: JobConfig) -> Needs:
        gpus = job.planned().tensor_parallel_size if job.gpu["device"] == "cuda" else 0
        return Needs(cpus=job.runner.engine_cpus, gpus=gpus)

    def setup(self) -> None:
        self.supervisor.start()

    def process(self, requests: RequestIntake, batch: Batch) -> Iterator[Result | Refusal]:
        return generate(requests, self.supervisor, batch.tally)

    def stats(self) -> dict[str, Any]:
        return self.supervisor.stats()

    def close(self) -> None:
        self.supervisor.close()


def generate(requests: RequestIntake, supervisor: EngineSupervisor, tally: JobTally) -> Iterator[Result | Refusal]:
    """Each result of the supervised engine, each preceded by the refusals found while it was pulled."""
    for result in supervisor.run(requests, tally):
        yield from requests.take_refusals()
        yield result
    yield from requests.take_refusals()
