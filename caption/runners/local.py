"""runner=local: decoding in worker processes of this machine (video.workers), generation in one engine
in this process, fed as a stream: the pipeline's stages (caption/pipeline/__init__.py STAGES)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from caption.pipeline import caption_clips
from caption.pipeline.admission import PositionLimits
from caption.pipeline.decode import decode_locally
from caption.pipeline.supervisor import EngineSupervisor
from caption.runners.base import Todo, Written
from video_io.workers import DecodePool, DecodeStream

if TYPE_CHECKING:
    from caption.engines.base import Engine
    from caption.settings.config import JobConfig


class LocalRunner:
    def __init__(self, job: JobConfig, engine: Engine | None = None):
        self.job, self.supervisor = job, EngineSupervisor(job, engine)
        self.pool: DecodePool | None = None
        self.decoded: DecodeStream | None = None
        self.paths: dict[str, str] = {}

    def start(self, todo: Todo) -> None:
        job = self.job
        # decoder processes start (spawned: seconds of imports each) while the engine loads, and decode the
        # clips it takes at its start: the first batch is decoded, not waited for, when the engine is ready
        # (on one H100 the first batch's wait was most of the 7B job's engine idle: docs/benchmarks.md)
        self.pool = DecodePool(job.decode, job.decode_workers, job.decode_timeout_s, segments=job.segments).__enter__()
        self.paths = {str(path): key for key, path in todo}
        self.decoded = decode_locally(self.pool, self.paths)
        first_clips = job.engine_spec.first_clips if job.engine_spec is not None else 0
        with self.decoded.meanwhile(ahead=first_clips):
            self.supervisor.start()

    def records(self, todo: Todo, store: Written, tally) -> Iterator[dict]:
        job = self.job
        if self.decoded is None or set(self.paths) != {str(path) for _, path in todo}:
            raise RuntimeError("LocalRunner.records: call start() with the same clips first")
        limits = PositionLimits.from_checkpoint(job.model.path, job.model.family, job.model.max_model_len)
        yield from caption_clips(self.decoded, self.paths, job, self.supervisor, limits, store.done, tally)

    def stats(self) -> dict:
        return {"runner": "local", **self.supervisor.stats()}

    def close(self) -> None:
        self.supervisor.close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None
