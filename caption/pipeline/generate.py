"""The generate stage: requests in, the engine's results out, and the clips refused before generation
passed through, in the order the record stage is to write them.

The engine pulls its requests (caption/engines/base.py RequestStream) from the requests stage
(caption/pipeline/requests.py), so a clip the requests stage refuses while the engine pulls waits in
that stage until the engine's next result: it comes out just before that result, as a Refusal; the
ones left come out when the engine is done. The supervisor (caption/pipeline/supervisor.py) owns the
engine and restarts it when it breaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from caption.engines.base import Result
    from caption.pipeline.record import Refusal
    from caption.pipeline.requests import RequestIntake
    from caption.pipeline.supervisor import EngineSupervisor
    from caption.summary.tally import JobTally


def generate(requests: RequestIntake, supervisor: EngineSupervisor, tally: JobTally) -> Iterator[Result | Refusal]:
    """Each result of the supervised engine, each preceded by the refusals found while it was pulled."""
    for result in supervisor.run(requests, tally):
        yield from requests.take_refusals()
        yield result
    yield from requests.take_refusals()
