"""One decoder process (video_io/workers.py runs a pool of them): what runs in it (decode_path, one
result per clip or per segment, signs of life while it looks for shots, its peak memory) and the job's
handle on it (DecoderProcess)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from video_io.decode import Clip, DecodeError, DecodeSpec, decode_clip
from video_io.identity import Identity, OpenedFile, OpenedObject
from video_io.segmenting import SegmentInfo, SegmentSpec, plan_video, segment_infos
from video_io.source import object_checked_by_caller


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
    # the file the frames were read from, as the decoder opened it (video_io/identity.py OpenedFile); None
    # where no decoder said (one that died or hung: the job takes the file's identity when it writes)
    source: Identity | None = None

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
    its SegmentPlan and then one result per segment, frames sampled inside the segment (its window).

    Each result names the file it was read from (`source`: its identity when opened, before any byte was
    decoded). A file that is not that file any more once the frames are out (replaced or written to while
    it was read) gives no frames but an error saying so, as do the segments after it: what was read may
    be either file's bytes, and no record may name one file for the other's frames."""
    started = time.perf_counter()
    opened = OpenedFile.open(path)
    source = None if opened is None else opened.identity
    plan = None
    if segments is not None and segments.mode != "none":
        try:
            with _opened_as(opened, path):
                plan = plan_video(path, segments, progress)
        except Exception as exc:  # DecodeError: why the file cannot be read; else a library's surprise
            detail = str(exc) if isinstance(exc, DecodeError) else \
                f"unexpected decoder error: {traceback.format_exception_only(type(exc), exc)[-1].strip()}"
            yield DecodeResult(path, None, f"finding its segments: {detail}", time.perf_counter() - started,
                               source=source)
            return
    if plan is None:
        with _opened_as(opened, path):
            result = _decode_to_result(path, spec, decode_fn)
        yield _checked(result, opened)
        return
    scan_s = time.perf_counter() - started
    parts = segment_infos(plan)
    yield SegmentPlan(path, parts, scan_s)
    changed = None if opened is None else opened.changed(path)  # the shots were found in this file?
    for index, part in enumerate(parts):
        if changed is None:
            with _opened_as(opened, path):
                result = _decode_to_result(path, replace(spec, window=(part.start_s, part.end_s)), decode_fn)
            result = _checked(result, opened)
            changed = None if result.ok or opened is None else opened.changed(path)
        else:  # changed while an earlier segment (or the search for shots) read it: not read again
            result = DecodeResult(path, None, _changed_error(changed), 0.0, source=source)
        result.segment = part
        result.last, result.scan_s = index == len(parts) - 1, scan_s
        yield result


def _opened_as(opened: OpenedFile | None, path: str) -> AbstractContextManager[None]:
    """For an object: the decoder opens it from the HEAD `opened` took, and leaves the check after decoding
    to _checked (video_io/source.py object_checked_by_caller)."""
    if isinstance(opened, OpenedObject):
        return object_checked_by_caller(path, opened.info)
    return nullcontext()


def _checked(result: DecodeResult, opened: OpenedFile | None) -> DecodeResult:
    """`result` naming the file opened, or an error where the path leads elsewhere now (module docstring
    of video_io/identity.py): checked after the frames are out, so nothing read after the check."""
    if opened is None:
        return result
    result.source = opened.identity
    changed = opened.changed(result.path)
    if changed is not None:
        result.clip, result.error = None, _changed_error(changed)
    return result


def _changed_error(changed: str) -> str:
    return (f"the file changed while it was read ({changed}): no caption is kept for frames that may be "
            "either file's; run the job again to caption the file there now")


# What a decoder process runs, imported once by the fork server rather than by every decoder: a spawned
# decoder spends ~0.3 CPU-s starting an interpreter and importing these (PyAV with its first clip), one forked
# from the server is ready in milliseconds (`caption-bench decoder-start`, docs/decoding.md "How many
# decoders"); a job pays that per decoder, and again for each one replacing a decoder killed on a bad file.
PRELOADED = ["video_io.decoder_process", "av"]


def decoder_context(start_method: str | None = None):
    """The multiprocessing context decoders start in: `start_method`, or by default a fork server where the
    platform has one (Linux, macOS), else spawn. Never a plain fork of the job: the job's process holds the
    engine's threads (OpenMP, vLLM), which a forked child would inherit in whatever state they were.

    The fork server is started once per process, from a fresh interpreter (multiprocessing/forkserver.py), and
    kept until the process ends; the modules it preloads are set for that process (its first start keeps
    them)."""
    if start_method is None:
        start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if start_method == "forkserver" and not _fork_server_socket_fits():
        start_method = "spawn"
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(PRELOADED)
    return ctx


# The longest path a Unix socket may have: sun_path holds 108 bytes on Linux, 104 on macOS, its NUL included
# (<sys/un.h>). The fork server listens on <temporary folder>/pymp-XXXXXXXX/listener-XXXXXXXX
# (multiprocessing/util.py get_temp_dir, multiprocessing/connection.py arbitrary_address), so under a TMPDIR
# of more than ~75 characters it could not start, and a job ended with "OSError: AF_UNIX path too long".
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
LISTENER_NAME = len("/listener-XXXXXXXX")
SHORT_TEMPORARY_FOLDERS = ("/tmp", "/var/tmp")


def _fork_server_socket_fits() -> bool:
    """Whether the fork server's socket path fits. Where the temporary folder is too deep, multiprocessing's
    own folder for this process is made in the system's (/tmp) instead, as newer Pythons' multiprocessing
    does itself (https://github.com/python/cpython/issues/132124; Python 3.11's does not);
    the user's TMPDIR is kept for everything else. False where even that does not fit (a folder made earlier
    in this process, a system without /tmp): the caller spawns its decoders instead."""
    import tempfile
    from multiprocessing import util

    if len(tempfile.gettempdir()) + len("/pymp-XXXXXXXX") + LISTENER_NAME > SOCKET_PATH_MAX:
        for folder in SHORT_TEMPORARY_FOLDERS:
            if os.access(folder, os.W_OK | os.X_OK):
                chosen, tempfile.tempdir = tempfile.tempdir, folder  # mkdtemp's default folder, for this call
                try:
                    util.get_temp_dir()  # made there, and kept for the process; one made before is kept as it is
                finally:
                    tempfile.tempdir = chosen
                break
    return len(util.get_temp_dir()) + LISTENER_NAME <= SOCKET_PATH_MAX


@dataclass
class Inherited:
    """What a decoder spawned by the job would have inherited at its start and one forked from the fork
    server does not, since the server started earlier: the job's environment as it is now (an object store's
    credentials set since: video_io/store.py reads them), and the cores of the thread starting it. The folder
    and import path come with multiprocessing's own preparation (spawn.prepare)."""

    environment: dict[str, str]
    cores: set[int] | None

    @classmethod
    def now(cls) -> "Inherited":
        cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        return cls(dict(os.environ), cores)

    def take(self) -> None:
        if os.environ != self.environment:
            os.environ.clear()
            os.environ.update(self.environment)
        if self.cores is not None:
            try:
                os.sched_setaffinity(0, self.cores)
            except OSError:  # cores this process may not use (its cgroup changed meanwhile): it keeps the server's
                pass


DECODER_PROCESS_NAME = "vidcap-decoder"  # what `ps -e`, `top` and /proc/<pid>/comm call a decoder process


def _name_process(name: str) -> None:
    """Give this process a name of its own (Linux prctl PR_SET_NAME), so a user sees which processes
    decode; elsewhere, or where it fails, the process keeps its interpreter's name."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # 15: PR_SET_NAME (linux/prctl.h)
    except (OSError, AttributeError):
        pass


def _worker_main(conn, spec: DecodeSpec, segments: SegmentSpec | None, decode_fn, inherited: Inherited) -> None:
    inherited.take()
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


def exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit code {code}"


class DecoderProcess:
    """The job's handle on one decoder process: its pipe, the path it was given and when, and the
    segments of that path it has sent."""

    def __init__(self, ctx, spec: DecodeSpec, segments: SegmentSpec | None, decode_fn):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, spec, segments, decode_fn, Inherited.now()),
                                   daemon=True)
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
        clip's deadline starts when it is given: a process still starting (forked in milliseconds; spawned where
        there is no fork server, importing numpy and PyAV: seconds on a busy machine) is given none. One that
        died starting counts as started: the clip it is then given finds it dead and gets the error."""
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


