"""Decode clips in worker processes, with a deadline per clip.

A native decoder can hang inside C code holding the GIL, or crash the process: neither can be
caught in-process. Each worker here is a process of its own; a clip that overruns its deadline
gets its worker killed and replaced, a worker that dies is replaced, and either way the clip
comes back as an error result and the stream goes on.

Back-pressure: a worker gets a new clip only when the consumer has taken the previous result,
so at most `workers` decoded clips wait in memory however slow the consumer is.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import time
import traceback
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Iterable

from video_io.decode import Clip, DecodeError, DecodeSpec, decode_clip


@dataclass
class DecodeResult:
    path: str
    clip: Clip | None
    error: str | None
    seconds: float
    peak_rss_mib: float | None = None  # decoder process's peak resident memory during this clip


    @property
    def ok(self) -> bool:
        return self.clip is not None


@contextmanager
def main_script_hidden():
    """Processes spawned in here do not run the parent's main script again.

    multiprocessing's spawn imports the parent's `__main__` in every child, by its file or module name
    (multiprocessing/spawn.py, get_preparation_data). A script that calls the job without an
    `if __name__ == "__main__":` guard would then run again in every decoder process (and in vLLM's
    engine process): its side effects twice, a broken pipe, a dead job. Nothing the children run lives
    in `__main__` (their targets are functions of installed modules), so the children are told of none."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__}
    main.__spec__ = None
    main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _decode_to_result(path: str, spec: DecodeSpec, decode_fn=decode_clip) -> DecodeResult:
    started = time.perf_counter()
    try:
        clip = decode_fn(path, spec)
        return DecodeResult(path, clip, None, time.perf_counter() - started)
    except DecodeError as exc:
        return DecodeResult(path, None, str(exc), time.perf_counter() - started)
    except Exception as exc:  # a bug or an unexpected library error: still one clip, not the job
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return DecodeResult(path, None, f"unexpected decoder error: {detail}", time.perf_counter() - started)


def _reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets VmHWM, so the next reading is this clip's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _worker_main(conn, spec: DecodeSpec, decode_fn) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent decides what stops (and
    # stops us through the pipe or a kill), a worker must not die with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            path = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if path is None:
            return
        _reset_peak_rss()
        result = _decode_to_result(path, spec, decode_fn)
        result.peak_rss_mib = _peak_rss_mib()
        conn.send(result)


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit code {code}"


class _Worker:
    def __init__(self, ctx, spec: DecodeSpec, decode_fn):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, spec, decode_fn), daemon=True)
        with main_script_hidden():
            self.process.start()
        child.close()
        self.path: str | None = None
        self.started = 0.0

    def give(self, path: str) -> None:
        self.path, self.started = path, time.perf_counter()
        self.conn.send(path)

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


# A clip whose decode takes longer gets an error, and its decoder process is killed and replaced: a
# 1080p clip decodes in well under a second here (README "Decoding"), a hanging file never ends.
DECODE_TIMEOUT_S = 60.0


class DecodePool:
    """`with DecodePool(spec, workers=2, timeout_s=60) as pool: for r in pool.imap(paths): ...`

    Results arrive in completion order; each names its path. `workers=0` decodes in the calling
    process (no deadline: for debugging and tiny inputs only). `decode_fn` must be a module-level
    function (workers are spawned) with decode_clip's signature; tests use it to inject hangs.
    """

    def __init__(self, spec: DecodeSpec, workers: int = 2, timeout_s: float = DECODE_TIMEOUT_S,
                 start_method: str = "spawn", decode_fn=decode_clip):
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if timeout_s <= 0:
            raise ValueError(f"decode timeout must be > 0 s, got {timeout_s}")
        self.spec, self.n_workers, self.timeout_s = spec, workers, timeout_s
        self.decode_fn = decode_fn
        self._ctx = mp.get_context(start_method)
        self._workers: list[_Worker] = []
        self.restarts = 0

    def __enter__(self) -> "DecodePool":
        self._workers = [_Worker(self._ctx, self.spec, self.decode_fn) for _ in range(self.n_workers)]
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._workers[self._workers.index(worker)] = _Worker(self._ctx, self.spec, self.decode_fn)
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

    def __iter__(self) -> "DecodeStream":
        return self

    def __next__(self) -> DecodeResult:
        if self.pool.n_workers == 0:  # in this process, no deadline
            path = next(self.todo)
            return _decode_to_result(str(path), self.pool.spec, self.pool.decode_fn)
        while not self.results:
            self._hand_out()
            busy = self._busy()
            if not busy:
                raise StopIteration
            deadline = min(w.started + self.pool.timeout_s for w in busy)
            self._collect(busy, max(0.0, deadline - time.perf_counter()))
        return self.results.popleft()

    def ready(self) -> bool:
        if self.pool.n_workers == 0 or self.results:
            return True
        self._hand_out()
        busy = self._busy()
        if not busy:
            return True  # ended: next() raises StopIteration at once
        self._collect(busy, 0.0)
        return bool(self.results)

    def _busy(self) -> list[_Worker]:
        return [w for w in self.pool._workers if w.path is not None]

    def _hand_out(self) -> None:
        """Give every idle decoder its next path."""
        for worker in self.pool._workers:
            if worker.path is None and not self.exhausted:
                path = next(self.todo, None)
                if path is None:
                    self.exhausted = True
                else:
                    worker.give(str(path))

    def _collect(self, busy: list[_Worker], timeout: float) -> None:
        """Take the results that arrive within `timeout` s; a decoder that died or overran its
        deadline is replaced and its clip becomes an error result."""
        pool = self.pool
        for conn in wait([w.conn for w in busy], timeout=timeout):
            worker = next(w for w in busy if w.conn is conn)
            try:
                self.results.append(conn.recv())
                worker.path = None
            except (EOFError, OSError):
                worker.process.join(timeout=5)  # reap it, so its exit code is known
                code = worker.process.exitcode
                self.results.append(DecodeResult(worker.path, None,
                                                 f"decoder process died ({_exit_reason(code)}): "
                                                 f"the decoder crashed on this file",
                                                 time.perf_counter() - worker.started))
                pool._replace(worker)
        now = time.perf_counter()
        for worker in [w for w in busy if w.path is not None and now - w.started > pool.timeout_s]:
            self.results.append(DecodeResult(worker.path, None,
                                             f"decode timed out after {pool.timeout_s:g}s (decoder killed): the "
                                             f"file is damaged, unreadable or too big for the time limit",
                                             now - worker.started))
            pool._replace(worker)
