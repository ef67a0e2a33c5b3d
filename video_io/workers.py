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

import multiprocessing as mp
import signal
import sys
import threading
import time
import traceback
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from typing import Callable, Iterable, Iterator

from video_io.decode import Clip, DecodeError, DecodeSpec, decode_clip
from video_io.segmenting import SegmentInfo, SegmentSpec, plan_video, segment_infos


@dataclass
class DecodeResult:
    path: str
    clip: Clip | None
    error: str | None
    seconds: float
    peak_rss_mib: float | None = None  # decoder process's peak resident memory during this clip
    segment: SegmentInfo | None = None  # one segment of a long video; None: the whole clip
    last: bool = True  # the path's last result (a segmented video sends one per segment)
    scan_s: float = 0.0  # seconds spent finding the video's segments (on each of its segments' results)

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


@dataclass
class SegmentPlan:
    """A worker's first message for a segmented video: the segments it is about to decode."""

    path: str
    parts: list[SegmentInfo]  # each with its shots and what is left out before it
    scan_s: float


ALIVE = "alive"  # a worker's sign of life: once started, then while it looks for a long video's shots
STARTUP_TIMEOUT_S = 120.0  # the longest a decoder process may take to start before it is given a clip anyway


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


def decode_path(path: str, spec: DecodeSpec, segments: SegmentSpec | None = None, decode_fn=decode_clip,
                progress: Callable[[], None] | None = None) -> Iterator[DecodeResult | SegmentPlan]:
    """What a worker sends for one path: the whole clip's result; or, for a video `segments` splits,
    its SegmentPlan and then one result per segment, frames sampled inside the segment (its window)."""
    started = time.perf_counter()
    plan = None
    if segments is not None and segments.mode != "none":
        try:
            plan = plan_video(path, segments, progress)
        except Exception as exc:  # DecodeError: why the file cannot be read; else a library's surprise
            detail = str(exc) if isinstance(exc, DecodeError) else \
                f"unexpected decoder error: {traceback.format_exception_only(type(exc), exc)[-1].strip()}"
            yield DecodeResult(path, None, f"finding its segments: {detail}", time.perf_counter() - started)
            return
    if plan is None:
        yield _decode_to_result(path, spec, decode_fn)
        return
    scan_s = time.perf_counter() - started
    parts = segment_infos(plan)
    yield SegmentPlan(path, parts, scan_s)
    for index, part in enumerate(parts):
        result = _decode_to_result(path, replace(spec, window=(part.start_s, part.end_s)), decode_fn)
        result.segment = part
        result.last, result.scan_s = index == len(parts) - 1, scan_s
        yield result


DECODER_PROCESS_NAME = "vidcap-decoder"  # what `ps -e`, `top` and /proc/<pid>/comm call a decoder process


def _name_process(name: str) -> None:
    """Give this process a name of its own (Linux prctl PR_SET_NAME), so a user sees which processes
    decode; elsewhere, or where it fails, the process keeps its interpreter's name."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # 15: PR_SET_NAME (linux/prctl.h)
    except (OSError, AttributeError):
        pass


def _worker_main(conn, spec: DecodeSpec, segments: SegmentSpec | None, decode_fn) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent decides what stops (and
    # stops us through the pipe or a kill), a worker must not die with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn.send(ALIVE)  # started: from now on a clip's time is its own (_Worker.has_started)
    _name_process(DECODER_PROCESS_NAME)  # after: a process with this name is one the job gives clips to
    beat = [0.0]

    def alive() -> None:  # at most one a second: the parent only needs to know the worker moves
        if time.perf_counter() - beat[0] >= 1.0:
            conn.send(ALIVE)
            beat[0] = time.perf_counter()

    while True:
        try:
            path = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if path is None:
            return
        _reset_peak_rss()
        for message in decode_path(path, spec, segments, decode_fn, alive):
            if isinstance(message, DecodeResult):
                message.peak_rss_mib = _peak_rss_mib()
            conn.send(message)
            _reset_peak_rss()


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit code {code}"


class _Worker:
    def __init__(self, ctx, spec: DecodeSpec, segments: SegmentSpec | None, decode_fn):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, spec, segments, decode_fn), daemon=True)
        with main_script_hidden():
            self.process.start()
        child.close()
        self.path: str | None = None
        self.started = 0.0  # when the worker was given its path, or last sent something
        self.plan: SegmentPlan | None = None  # the segments of the video it is decoding, once found
        self.next_segment = 0  # the first of them not sent yet
        self.up = False  # whether it said it is ready (its first ALIVE)

    def give(self, path: str) -> None:
        self.path, self.started, self.plan, self.next_segment = path, time.perf_counter(), None, 0
        try:
            self.conn.send(path)
        except OSError:  # it died starting: the stream finds it dead, and the clip gets the error
            pass

    def has_started(self, timeout: float = 0.0) -> bool:
        """Whether it is ready for a clip, waiting up to `timeout` s for the ALIVE it sends once started. A
        clip's deadline starts when it is given: a process still starting (spawned, importing numpy and
        PyAV: seconds on a busy machine) is given none. One that died starting counts as started: the clip
        it is then given finds it dead and gets the error."""
        if not self.up:
            try:
                if self.conn.poll(timeout):
                    self.conn.recv()
                    self.up = True
            except (EOFError, OSError):
                self.up = True
        return self.up

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
# 1080p clip decodes in well under a second here (docs/decoding.md "Cost"), a hanging file never ends.
DECODE_TIMEOUT_S = 60.0


class DecodePool:
    """`with DecodePool(spec, workers=2, timeout_s=60) as pool: for r in pool.imap(paths): ...`

    `workers` has no default: the job's is video.workers, resolved by the plan (caption/planning.py
    auto_decode_workers). Results arrive in completion order; each names its path (and, for a video
    `segments` splits, its segment: one result each, in time order). `workers=0` decodes in the calling process (no
    deadline: for debugging and tiny inputs only). `decode_fn` must be a module-level function
    (workers are spawned) with decode_clip's signature; tests use it to inject hangs.
    """

    def __init__(self, spec: DecodeSpec, workers: int, timeout_s: float = DECODE_TIMEOUT_S,
                 start_method: str = "spawn", decode_fn=decode_clip, segments: SegmentSpec | None = None):
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if timeout_s <= 0:
            raise ValueError(f"decode timeout must be > 0 s, got {timeout_s}")
        self.spec, self.n_workers, self.timeout_s = spec, workers, timeout_s
        self.decode_fn, self.segments = decode_fn, segments
        self._ctx = mp.get_context(start_method)
        self._workers: list[_Worker] = []
        self.restarts = 0

    def __enter__(self) -> "DecodePool":
        self._workers = [_Worker(self._ctx, self.spec, self.segments, self.decode_fn) for _ in range(self.n_workers)]
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._workers[self._workers.index(worker)] = _Worker(self._ctx, self.spec, self.segments, self.decode_fn)
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
    def meanwhile(self) -> Iterator[None]:
        """While the caller waits on something else (the engine loading: seconds to minutes), a thread
        hands each decoder its first path as it comes up, so the first clips are decoded by the time the
        engine takes them. The thread stops once every decoder has one (each then holds at most one
        finished clip, as always) and is done before the block ends: the stream is the caller's again.
        A clip's deadline starts when it is given, as ever."""
        if self.pool.n_workers == 0:  # decoded in the caller's process, when asked: nothing to do meanwhile
            yield
            return
        stop = threading.Event()

        def hand_out_first_paths() -> None:
            try:
                while not stop.is_set():
                    self._hand_out()
                    if self.exhausted or not self._starting():
                        return  # every decoder has a path, or there are none left
                    stop.wait(0.05)
            except (OSError, EOFError):
                return  # a decoder that died starting: next() meets it and says so

        thread = threading.Thread(target=hand_out_first_paths, name="decoders-first-paths", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _starting(self) -> list[_Worker]:
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

    def _busy(self) -> list[_Worker]:
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

    def _collect(self, busy: list[_Worker], timeout: float) -> None:
        """Take the messages that arrive within `timeout` s; a decoder that died or overran its
        deadline is replaced and its clip (or its video's segments not sent yet) becomes error results."""
        for conn in wait([w.conn for w in busy], timeout=timeout):
            worker = next(w for w in busy if w.conn is conn)
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                worker.process.join(timeout=5)  # reap it, so its exit code is known
                self._lost(worker, f"decoder process died ({_exit_reason(worker.process.exitcode)}): "
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
        for worker in [w for w in busy if w.path is not None and now - w.started > self.pool.timeout_s]:
            self._lost(worker, f"decode timed out after {self.pool.timeout_s:g}s (decoder killed): the file is "
                               "damaged, unreadable or too big for the time limit")

    def _lost(self, worker: _Worker, error: str) -> None:
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
