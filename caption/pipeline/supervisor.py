"""The engine of one job (or one Ray actor): loaded once, restarted when it breaks mid-run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from caption.engines import build_engine
from caption.engines.base import Engine, Request, Result, request_stream
from caption.outcome import EngineDied, EngineFailure
from video_io.decoder_process import main_script_hidden

if TYPE_CHECKING:
    from caption.config import JobConfig
    from caption.summary import JobTally


def load_engine(job: JobConfig) -> Engine:
    """The engine a planned job names, loaded from the plan's engine specification (a caller that keeps
    it passes it to run_job, e.g. the Python API across calls). vLLM may spawn its engine process: it
    must not run the caller's script again (video_io/decoder_process.py main_script_hidden)."""
    with main_script_hidden():
        if job.engine_spec is None:
            raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
        return build_engine(job.engine_spec)


class EngineSupervisor:
    """Owns the engine for one job: loads it, and restarts it when it breaks mid-run (at most
    `engine.max_restarts` times), handing the new engine the requests the old one had not started.
    An engine passed in by the caller is used as it is and never restarted or closed."""

    def __init__(self, job: JobConfig, engine: Engine | None = None):
        self.job, self.owned = job, engine is None
        self.engine: Engine | None = engine
        self.restarts = 0

    def start(self) -> None:
        self._running().reset_stats()  # a reused engine reports this job's counters only

    def _running(self) -> Engine:
        """The engine, loaded first if it is not yet."""
        if self.engine is None:
            self.engine = load_engine(self.job)
        return self.engine

    def run(self, requests: Iterable[Request], tally: JobTally) -> Iterator[Result]:
        stream = request_stream(requests)  # one stream through restarts: a new engine pulls where the old one stopped
        while True:
            try:
                yield from self._running().run(stream)
                return
            except EngineFailure as failure:
                tally.engine_failures.append(str(failure))
                if not self.owned or self.restarts >= self.job.engine_options.max_restarts:
                    raise EngineDied(self._died_message(failure)) from None
                self.restarts += 1
                tally.engine_restarts = self.restarts
                self._running().close()
                self.engine = load_engine(self.job)
                stream.prepend(failure.unsubmitted)

    def _died_message(self, failure: EngineFailure) -> str:
        plan, video = self.job.planned(), self.job.decode
        if plan.server is not None:  # engine=server: nothing of the plan's to lower, the server is away
            return (f"{failure} after {self.restarts} restart(s) (engine.max_restarts="
                    f"{self.job.engine_options.max_restarts}, each after engine.retries tries): the records written "
                    "are whole; run the same command again once the server answers, and the job resumes")
        settings = plan.vllm if plan.vllm is not None else plan.hf
        return (f"the {self.job.engine} engine failed ({failure}) after {self.restarts} restart(s) "
                f"(engine.max_restarts={self.job.engine_options.max_restarts}). Plan: model {plan.model}, tier {plan.tier}, "
                f"{settings}, {video.sampling.num_frames} frames of {video.width}x{video.height}. If it ran out of "
                "memory, lower gpu.max_num_seqs, video.num_frames or the frame size (video.width/height)")

    def stats(self) -> dict[str, Any]:
        if self.engine is None:
            return {}
        try:
            return self.engine.stats()
        except Exception:  # a broken engine may not answer; the job's own counts still stand
            return {}

    def close(self) -> None:
        if self.owned and self.engine is not None:
            self.engine.close()
        self.engine = None
