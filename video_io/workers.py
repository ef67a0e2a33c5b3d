"""Decode clips in worker processes, with a deadline per clip.

A native decoder can hang inside C code holding the GIL, or crash the process: neither can be
caught in-process. Each worker here is a process of its own; a clip that overruns its deadline
gets its worker killed and replaced, a worker that dies is replaced, and either way the clip
comes back as an error result and the stream goes on.

Back-pressure: a worker gets a new clip only when the consumer has taken the previous result,
so at most `workers` decoded clips wait in memory however slow the consumer is.

A long video split into segments (video_io/segmenting.py) comes back as one result per segment,
in time order, each decoded on its own once the consumer has taken the one before (a decoded clip is
bigger than a pipe's buffer, so the worker waits in `send`): a video of a thousand segments holds one
segment's frames at a time. The worker first says which segments it found (SegmentPlan), and while
it looks for shots it says it is alive now and then; every message restarts the deadline, so a
minutes-long shot detection is not a hang, and a segment that hangs is. Should the worker die or
overrun, the video's segments not yet sent come back as error results, each with its times.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Iterable, Iterator

from video_io.decode import DecodeSpec, decode_clip
from video_io.decoder_process import (
    STARTUP_TIMEOUT_S,
    DecodeResult,
    DecoderProcess,
    SegmentPlan,
    decode_path,
    decoder_context,
    exit_reason,
)
from video_io.segmenting import SegmentSpec

# A clip whose decode takes longer gets an error, and its decoder process is killed and replaced: a
# 1080p clip decodes in well under a second here (docs/decoding.md "Cost"), a hanging file never ends.
DECODE_TIMEOUT_S = 60.0


class DecodePool:
    """`with DecodePool(spec, workers=2, timeout_s=60) as pool: for r in pool.imap(paths): ...`

    `workers` has no default: the job's is video.workers, resolved by the plan (caption/planning.py
    auto_decode_workers). Results arrive in completion order; each names its path (and, for a video
    `segments` splits, its segment: one result each, in time order). `workers=0` decodes in the calling process (no
    deadline: for debugging and tiny inputs only). `decode_fn` must be a module-level function
    (it is pickled to the worker) with decode_clip's signature; tests use it to inject hangs. `start_method`:
    multiprocessing's, default a fork server (video_io/decoder_process.py decoder_context).
    """

    def __init__(self, spec: DecodeSpec, workers: int, timeout_s: float = DECODE_TIMEOUT_S,
                 start_method: str | None = None, decode_fn=decode_clip, segments: SegmentSpec | None = None):
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if timeout_s <= 0:
            raise ValueError(f"decode timeout must be > 0 s, got {timeout_s}")
        self.spec, self.n_workers, self.timeout_s = spec, workers, timeout_s
        self.decode_fn, self.segments = decode_fn, segments
        self._ctx = decoder_context(start_method)
        self._workers: list[DecoderProcess] = []
        self.restarts = 0

    def __enter__(self) -> "DecodePool":
        self._workers = [DecoderProcess(self._ctx, self.spec, self.segments, self.decode_fn) for _ in range(self.n_workers)]
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def _replace(self, worker: DecoderProcess) -> None:
        worker.kill()
        self._workers[self._workers.index(worker)] = DecoderProcess(self._ctx, self.spec, self.segments, self.decode_fn)
        self.restarts += 1

    def imap(self, paths: Iterable[str]) -> "DecodeStream":
        """Decode `paths`; an iterator of results in completion order (DecodeStream)."""
        if self.n_workers and not self._workers:
            raise RuntimeError("use DecodePool as a context manager: `with DecodePool(...) as pool`")
        return DecodeStream(self, paths)


class DecodeStream:
    """The results of DecodePool.imap, in completion order. `next()` waits for a decoder; `ready()`
    says, without waiting, whether `next()` would return at once (a result is in, or the stream has
    ended), so a consumer with other work (an engine with requests in flight) takes only what is done.

    Each call hands every idle decoder its next path first: decoders work while the consumer does
    something else, each holding at most one finished clip until the consumer takes it."""

    def __init__(self, pool: DecodePool, paths: Iterable[str]):
        self.pool, self.todo = pool, iter(paths)
        self.exhausted = False  # every path handed out
        self.results: deque[DecodeResult] = deque()
        self._inline: Iterator | None = None  # workers=0: the messages of the path being decoded here

    def __iter__(self) -> "DecodeStream":
        return self

    def __next__(self) -> DecodeResult:
        if self.pool.n_workers == 0:  # in this process, no deadline
            return self._next_inline()
        while not self.results:
            self._hand_out()
            busy = self._busy()
            if not busy:
                if not self._await_a_decoder():
                    raise StopIteration
                continue
            deadline = min(w.started + self.pool.timeout_s for w in busy)
            self._collect(busy, max(0.0, deadline - time.perf_counter()))
        return self.results.popleft()

    def _next_inline(self) -> DecodeResult:
        pool = self.pool
        while True:
            if self._inline is None:
                path = next(self.todo)  # StopIteration ends the stream
                self._inline = decode_path(str(path), pool.spec, pool.segments, pool.decode_fn)
            for message in self._inline:
                if isinstance(message, DecodeResult):
                    return message
            self._inline = None

    def ready(self) -> bool:
        if self.pool.n_workers == 0 or self.results:
            return True
        self._hand_out()
        busy = self._busy()
        if not busy:
            return not self._starting()  # ended (next() raises StopIteration at once), or decoders starting
        self._collect(busy, 0.0)
        return bool(self.results)

    @contextmanager
    def meanwhile(self, ahead: int = 0) -> Iterator[None]:
        """While the caller waits on something else (the engine loading: seconds to minutes), a thread
        hands each decoder its first path as it comes up and takes up to `ahead` finished clips (what the
        engine takes at its start: a transformers batch, vLLM's first requests), handing out the next path
        as each comes in, so the first clips are decoded by the time the engine takes them. Then each
        decoder holds at most one more finished clip, as always. The thread is done before the block ends:
        the stream is the caller's again. A clip's deadline starts when it is given, as ever."""
        if self.pool.n_workers == 0:  # decoded in the caller's process, when asked: nothing to do meanwhile
            yield
            return
        stop = threading.Event()

        def decode_the_first_clips() -> None:
            try:
                while not stop.is_set():
                    self._hand_out()
                    busy = self._busy()
                    if len(self.results) < ahead and busy:
                        # a result in: its decoder gets the next path. No more than `ahead`: two decoders that
                        # finish together leave the second result in its pipe, as a decoder holds one anyway
                        self._collect(busy, 0.05, room=ahead - len(self.results))
                    elif not busy and (self.exhausted or not self._starting()):
                        return  # nothing left to decode, or no decoder left
                    elif len(self.results) >= ahead and not self._starting():
                        return  # the first clips are in, and every decoder has a path
                    else:
                        stop.wait(0.05)  # decoders starting
            except (OSError, EOFError):
                return  # a decoder that died starting: next() meets it and says so

        thread = threading.Thread(target=decode_the_first_clips, name="decoders-first-clips", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _starting(self) -> list[DecoderProcess]:
        """Idle decoders still starting, while paths remain to hand out."""
        return [] if self.exhausted else [w for w in self.pool._workers if w.path is None and not w.up]

    def _await_a_decoder(self) -> bool:
        """Nothing being decoded: wait for a starting decoder (False: none, the stream has ended)."""
        starting = self._starting()
        if not starting:
            return False
        wait([w.conn for w in starting], timeout=STARTUP_TIMEOUT_S)
        for worker in starting:
            worker.up = worker.has_started() or worker is starting[0]  # after the wait, one is given a clip anyway
        return True

    def _busy(self) -> list[DecoderProcess]:
        return [w for w in self.pool._workers if w.path is not None]

    def _hand_out(self) -> None:
        """Give every idle decoder its next path."""
        for worker in self.pool._workers:
            if worker.path is None and not self.exhausted and worker.has_started():
                path = next(self.todo, None)
                if path is None:
                    self.exhausted = True
                else:
                    worker.give(str(path))

    def _collect(self, busy: list[DecoderProcess], timeout: float, room: int | None = None) -> None:
        """Take the messages that arrive within `timeout` s, and stop once `room` results are in (None: no
        limit); a decoder that died or overran its deadline is replaced and its clip (or its video's
        segments not sent yet) becomes error results."""
        before, answered = len(self.results), wait([w.conn for w in busy], timeout=timeout)
        for conn in answered:
            if room is not None and len(self.results) - before >= room:
                break  # the rest stay in their pipes: each decoder holds one finished clip, as ever
            worker = next(w for w in busy if w.conn is conn)
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                worker.process.join(timeout=5)  # reap it, so its exit code is known
                self._lost(worker, f"decoder process died ({exit_reason(worker.process.exitcode)}): "
                                   "the decoder crashed on this file")
                continue
            worker.started = time.perf_counter()  # each message restarts the deadline
            if isinstance(message, SegmentPlan):
                worker.plan = message
            elif isinstance(message, DecodeResult):
                self.results.append(message)
                if message.segment is not None:
                    worker.next_segment = message.segment.index + 1
                if message.last:
                    worker.path, worker.plan = None, None
        now = time.perf_counter()
        overran = [w for w in busy if w.path is not None and w.conn not in answered  # an answer waiting is in time
                   and now - w.started > self.pool.timeout_s]
        for worker in overran:
            self._lost(worker, f"decode timed out after {self.pool.timeout_s:g}s (decoder killed): the file is "
                               "damaged, unreadable or too big for the time limit")

    def _lost(self, worker: DecoderProcess, error: str) -> None:
        """The worker died or hung on its path: error results for what it had not sent, then a new worker."""
        seconds = time.perf_counter() - worker.started
        plan = worker.plan
        if plan is None:
            self.results.append(DecodeResult(worker.path, None, error, seconds))
        else:
            count, first = len(plan.parts), worker.next_segment
            for index in range(first, count):
                part = plan.parts[index]
                why = error if index == first else f"not decoded: the decoder was lost on segment {first} ({error})"
                self.results.append(DecodeResult(worker.path, None, why, seconds if index == first else 0.0,
                                                 segment=part,
                                                 last=index == count - 1, scan_s=plan.scan_s))
        self.pool._replace(worker)
