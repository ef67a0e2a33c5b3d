"""Thumbnails for the review page, made in worker processes with a deadline per clip.

A native decoder can hang or crash (see video_io/workers.py): here that costs the clip its
thumbnails (it gets a placeholder and the reason), never the report.
"""

from __future__ import annotations

import base64
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from typing import Iterator

DEFAULT_MAX_CLIPS = 1000  # clips that get thumbnails; the rest get a placeholder (see cli.py --max-thumbs)
DEFAULT_FRAMES = 8  # thumbnails per clip, spread over its sampled frames (the job samples 8 by default)
DEFAULT_SIZE = 96  # longest side, px
DEFAULT_QUALITY = 70  # JPEG quality: ~1.5-3 KB per 96-px frame
DEFAULT_TIMEOUT_S = 30.0
# a fresh worker is an interpreter importing the decoders: seconds on a busy machine, more where a
# site-wide hook imports torch into every process. That is the pool's start, not a clip's decode
WORKER_START_S = 300.0
# once every clip is answered the workers are asked to end and given this long to do it before they are
# terminated as a hung pool is
WORKER_EXIT_S = 30.0


@dataclass(frozen=True)
class ThumbJob:
    video: str
    path: str
    indices: tuple[int, ...]
    backend: str


@dataclass
class ThumbResult:
    video: str
    indices: tuple[int, ...]
    jpegs_b64: list[str] | None
    error: str | None


def pick_frames(indices: list[int], n: int) -> list[int]:
    """n of the sampled frames, evenly spread, first and last included."""
    if n >= len(indices):
        return list(indices)
    if n == 1:
        return [indices[len(indices) // 2]]
    return [indices[round(k * (len(indices) - 1) / (n - 1))] for k in range(n)]


def make_thumbnails(job: ThumbJob, max_side: int, quality: int) -> ThumbResult:
    """Module-level so that spawned workers can run it."""
    from video_io.decode import DecodeError
    from video_io.thumbnails import jpeg_thumbnails

    backend = job.backend if job.backend in ("decord", "pyav") else "auto"
    try:
        jpegs = jpeg_thumbnails(job.path, list(job.indices), max_side, quality, backend)
    except DecodeError as exc:
        return ThumbResult(job.video, job.indices, None, str(exc))
    except Exception as exc:  # an unexpected library error: still one clip, not the report
        return ThumbResult(job.video, job.indices, None, f"unexpected decoder error: {type(exc).__name__}: {exc}")
    return ThumbResult(job.video, job.indices, [base64.b64encode(j).decode("ascii") for j in jpegs], None)


def run_thumbnails(jobs: list[ThumbJob], max_side: int = DEFAULT_SIZE, quality: int = DEFAULT_QUALITY,
                   workers: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
                   fn=make_thumbnails) -> Iterator[ThumbResult]:
    """One result per job, each naming its video. workers=0 runs in this process (no deadline).
    `fn` (make_thumbnails' signature, module-level) lets tests inject decoders that hang or crash.

    A clip still unfinished `timeout_s` after the report started waiting for it is given up on; its
    pool is killed and the clips not done yet go on in a fresh one. The wait starts once the pool's
    workers are up (each answers first), so a slow start is not a hung clip."""
    if workers <= 0:
        for job in jobs:
            yield fn(job, max_side, quality)
        return
    # spawned: no forked native-library state, and the environment as it is now (an object store's
    # credentials). Unlike the job's decoders (video_io/decoder_process.py decoder_context), a report starts
    # its pool once, so a fork server would save only the start-up of `workers` processes
    ctx = mp.get_context("spawn")
    pending = list(jobs)
    while pending:
        todo, pending = pending, []
        size = min(workers, len(todo))
        before = {child.pid for child in mp.active_children()}
        with ctx.Pool(size) as pool:
            try:
                pool.map_async(_worker_up, range(size), chunksize=1).get(timeout=WORKER_START_S)
            except mp.TimeoutError:
                for job in todo:
                    yield ThumbResult(job.video, job.indices, None,
                                      f"no thumbnails: the decoder processes did not start in {WORKER_START_S:g}s")
                return
            futures = [pool.apply_async(fn, (job, max_side, quality)) for job in todo]
            for k, (job, future) in enumerate(zip(todo, futures)):
                try:
                    yield future.get(timeout=timeout_s)
                except mp.TimeoutError:
                    yield ThumbResult(job.video, job.indices, None,
                                      f"no thumbnails after {timeout_s:g}s (decoder hung or died; killed)")
                    for later, fut in zip(todo[k + 1:], futures[k + 1:]):
                        if fut.ready():
                            yield fut.get()
                        else:
                            pending.append(later)
                    pool.terminate()
                    break
            else:
                _let_workers_end(pool, before)


def _let_workers_end(pool, before: set[int | None]) -> None:
    """Every clip is answered: the workers end by themselves instead of by the SIGTERM of Pool.terminate,
    which the pool's exit sends. A worker with a SIGTERM handler of its own (coverage.py's `sigterm = true`
    gives every process one) ran it only if the signal reached its main thread, waiting for the next task in
    a semaphore: delivered to another of its threads, the handler never ran, the worker never ended, and
    the pool's exit waited for it for ever (docs/development.md). Public API only: active_children() also
    reaps the workers that ended, so terminate() has nothing left to signal."""
    pool.close()
    deadline = time.monotonic() + WORKER_EXIT_S
    while any(child.pid not in before for child in mp.active_children()) and time.monotonic() < deadline:
        time.sleep(0.02)


def _worker_up(_: int) -> int:
    return os.getpid()
