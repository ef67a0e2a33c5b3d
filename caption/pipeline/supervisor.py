"""The engine of one job (or one Ray actor): loaded once, restarted when it breaks mid-run."""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator

from caption.engines import build_engine
from caption.engines.base import Request, Result
from caption.outcome import EngineDied, EngineFailure
from video_io.workers import main_script_hidden


def load_engine(job):
    """The engine a planned job names, loaded from the plan's engine specification (a caller that keeps
    it passes it to run_job, e.g. the Python API across calls). vLLM may spawn its engine process: it
    must not run the caller's script again (video_io/workers.py main_script_hidden)."""
    with main_script_hidden():
        return build_engine(job.engine_spec)


class EngineSupervisor:
    """Owns the engine for one job: loads it, and restarts it when it breaks mid-run (at most
    `engine.max_restarts` times), handing the new engine the requests the old one had not started.
    An engine passed in by the caller is used as it is and never restarted or closed."""

    def __init__(self, job, engine=None):
        self.job, self.engine, self.owned = job, engine, engine is None
        self.restarts = 0

    def start(self) -> None:
        if self.engine is None:
            self.engine = load_engine(self.job)
        self.engine.reset_stats()  # a reused engine reports this job's counters only

    def run(self, requests: Iterable[Request], tally) -> Iterator[Result]:
        stream: Iterator[Request] = iter(requests)  # a RequestIntake keeps its ready() through restarts
        while True:
            try:
                yield from self.engine.run(stream)
                return
            except EngineFailure as failure:
                tally.engine_failures.append(str(failure))
                if not self.owned or self.restarts >= self.job.engine_options.max_restarts:
                    raise EngineDied(self._died_message(failure)) from None
                self.restarts += 1
                tally.engine_restarts = self.restarts
                self.engine.close()
                self.engine = load_engine(self.job)
                if hasattr(stream, "prepend"):
                    stream.prepend(failure.unsubmitted)
                else:
                    stream = itertools.chain(failure.unsubmitted, stream)

    def _died_message(self, failure: EngineFailure) -> str:
        plan, video = self.job.plan, self.job.decode
        if plan.server is not None:  # engine=server: nothing of the plan's to lower, the server is away
            return (f"{failure} after {self.restarts} restart(s) (engine.max_restarts="
                    f"{self.job.engine_options.max_restarts}, each after engine.retries tries): the records written "
                    "are whole; run the same command again once the server answers, and the job resumes")
        settings = plan.vllm if plan.vllm is not None else plan.hf
        return (f"the {self.job.engine} engine failed ({failure}) after {self.restarts} restart(s) "
                f"(engine.max_restarts={self.job.engine_options.max_restarts}). Plan: model {plan.model}, tier {plan.tier}, "
                f"{settings}, {video.sampling.num_frames} frames of {video.width}x{video.height}. If it ran out of "
                "memory, lower gpu.max_num_seqs, video.num_frames or the frame size (video.width/height)")

    def stats(self) -> dict:
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
