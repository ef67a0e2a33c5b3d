"""runner=local: every stage of the pipeline (caption/pipeline/__init__.py STAGES) in this process, the
decode stage with its decoder processes (video.workers) on this machine, the engine fed as a stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from caption.pipeline import build_stages
from caption.pipeline.stage import Batch, Place, run_stages
from caption.runners.base import Todo, Written

if TYPE_CHECKING:
    from caption.engines.base import Engine
    from caption.settings.config import JobConfig
    from caption.summary.tally import JobTally
    from vidcap_ko.record import Record


class LocalRunner:
    def __init__(self, job: JobConfig, engine: Engine | None = None):
        self.job = job
        place = Place(decoders=job.decode_workers, engine=engine)
        self.decoders, self.beside_engine = build_stages(job, "decoder", place), build_stages(job, "engine", place)
        self.batch: Batch | None = None
        self.decoded: Any = None  # the decoder stages' stream (video_io/workers.py DecodeStream)

    def start(self, todo: Todo, store: Written, tally: JobTally) -> None:
        self.batch = Batch(todo, store.done, tally)
        for stage in self.decoders:
            stage.setup()
        self.decoded = run_stages(self.decoders, [str(path) for _, path in todo], self.batch)
        # decoder processes start (a fork server's first, ~0.2 s: video_io/decoder_process.py) while the engine
        # loads, and decode the clips it takes at its start: the first batch is decoded, not waited for, when
        # the engine is ready
        # (on one H100 the first batch's wait was most of the 7B job's engine idle: docs/benchmarks.md)
        first_clips = self.job.engine_spec.first_clips if self.job.engine_spec is not None else 0
        with self.decoded.meanwhile(ahead=first_clips):
            for stage in self.beside_engine:
                stage.setup()

    def records(self) -> Iterator[Record]:
        if self.batch is None:
            raise RuntimeError("LocalRunner.records: call start() first")
        yield from run_stages(self.beside_engine, self.decoded, self.batch)

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"runner": "local"}
        for stage in (*self.decoders, *self.beside_engine):
            stats.update(stage.stats())
        return stats

    def close(self) -> None:
        for stage in (*self.beside_engine, *self.decoders):  # the engine first, as it may still read frames
            stage.close()
