"""The decode stage: the clips to caption as decoded clips (video_io.decoder_process.DecodeResult: a clip's
frames, or why it has none), in the order they finish, from decoder processes with a deadline per clip
(video_io.workers.DecodePool). Where they decode is the runner's business: runner=local in this
machine's decoder processes, handed on as a stream (a DecodeStream); runner=ray in decoder actors, whose
results reach each engine actor as a batch (AllDecoded). Either way the next stage
(caption/pipeline/requests.py) reads them through DecodedClips."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Protocol

from caption.pipeline.stage import Batch, Needs, Place, Stage
from video_io.workers import DecodePool, DecodeResult

if TYPE_CHECKING:
    from caption.settings.config import JobConfig


class DecodedClips(Protocol):
    """Decoded clips as they finish: `next()` waits for a decoder; `ready()` says, without waiting,
    whether `next()` would return at once (a clip is decoded, or the stream has ended)."""

    def __iter__(self) -> Iterator[DecodeResult]: ...

    def __next__(self) -> DecodeResult: ...

    def ready(self) -> bool: ...


class DecodeStage(Stage):
    """Decoder processes (as many as the Place says), each clip decoded with the job's deadline."""

    name, worker, takes = "decode", "decoder", "the clips' paths"
    gives = "a DecodeResult per clip: its frames, or why it has none, as DecodedClips"

    def __init__(self, job: JobConfig, place: Place):
        super().__init__(job, place)
        self.pool: DecodePool | None = None

    @classmethod
    def needs(cls, job: JobConfig) -> Needs:
        return Needs(cpus=job.runner.decode_cpus)

    def setup(self) -> None:
        job = self.job
        self.pool = DecodePool(job.decode, self.place.decoders, job.decode_timeout_s, segments=job.segments).__enter__()

    def process(self, paths: Iterable[str], batch: Batch) -> DecodedClips:
        """The clips decoded as they finish, each handed to a decoder as one is idle."""
        if self.pool is None:
            raise RuntimeError("DecodeStage.process: call setup() first")
        return self.pool.imap(paths)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class AllDecoded:
    """Clips decoded already (runner=ray: a batch from the decoder actors): each is ready."""

    def __init__(self, results: Iterable[DecodeResult]):
        self.results = iter(results)

    def __iter__(self) -> AllDecoded:
        return self

    def __next__(self) -> DecodeResult:
        return next(self.results)

    def ready(self) -> bool:
        return True
