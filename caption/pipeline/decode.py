"""The decode stage: the clips to caption as decoded clips (video_io.decoder_process.DecodeResult: a clip's
frames, or why it has none), in the order they finish. Where they decode is the runner's business:
runner=local in this machine's decoder processes (video_io.workers.DecodePool.imap, a DecodeStream),
runner=ray in decoder actors, whose results reach each engine actor as a batch (AllDecoded). Either
way the next stage (caption/pipeline/requests.py) reads them through DecodedClips."""

from __future__ import annotations

from typing import Iterable, Iterator, Protocol

from video_io.workers import DecodePool, DecodeResult


class DecodedClips(Protocol):
    """Decoded clips as they finish: `next()` waits for a decoder; `ready()` says, without waiting,
    whether `next()` would return at once (a clip is decoded, or the stream has ended)."""

    def __iter__(self) -> Iterator[DecodeResult]: ...

    def __next__(self) -> DecodeResult: ...

    def ready(self) -> bool: ...


def decode_locally(pool: DecodePool, paths: Iterable[str]) -> DecodedClips:
    """runner=local: `paths` decoded by the pool's decoder processes, each handed out as one is idle."""
    return pool.imap(paths)


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
