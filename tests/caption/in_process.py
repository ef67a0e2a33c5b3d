"""The project's commands run in the test's own process: `caption`'s real `main()` (Hydra, the run folder, the
quiet terminal, the exit statuses of caption/cli.py) and the other console scripts' (caption-report,
caption-meteor, ...), each seen as a terminal sees a process: what reached file descriptors 1 and 2, and
the exit status.

Why: a `caption` process spends ~15 s importing torch, transformers and vLLM before it has work (2 cores);
the test process has them imported already. Tests whose subject is the process itself (signals, kills, a
second job beside a running one, the console script's installed entry point) still start one
(tests/caption/processes.py); the rest call `run_caption`, which returns what `subprocess.run(...,
capture_output=True, text=True)` returns, so their assertions read the same.

Everything the command changes in its process is put back afterwards: the descriptors and sys streams,
the environment, the working folder, signal handlers, logging (Hydra configures it per run), warnings
filters, Hydra's global state and the job's interrupt flags.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent  # where the console scripts are: argv[0] as each has it
COMMANDS = {  # pyproject.toml [project.scripts]
    "caption": "caption.cli:main",
    "caption-meteor": "eval.cli:main",
    "caption-report": "caption.report.cli:main",
    "caption-export": "caption.export.cli:main",
    "caption-synth": "video_io.synth.cli:main",
    "caption-bench": "caption.bench.cli:main",
}


def run_caption(args, **kwargs) -> subprocess.CompletedProcess:
    """`caption *args` in this process (see run_command)."""
    return run_command("caption", args, **kwargs)


def run_command(name: str, args, *, cwd: str | os.PathLike | None = None, env: dict | None = None,
                **_ignored) -> subprocess.CompletedProcess:
    """The console script `name` with `args`, in this process; `env` replaces the environment for the run,
    as subprocess's does. What subprocess.run would also take (timeout, text, capture_output) is ignored:
    the output is always captured, as text."""
    import importlib

    module, function = COMMANDS[name].split(":")
    main = getattr(importlib.import_module(module), function)
    argv = [str(BIN / name), *map(str, args)]
    with _process_state_restored(), _terminal() as terminal:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = argv
        status = _exit_status(main)
    return subprocess.CompletedProcess(argv, status, terminal.stdout, terminal.stderr)


def _exit_status(main) -> int:
    """What the process would exit with: sys.exit's code, or 1 with the traceback for an uncaught error."""
    try:
        status = main()  # the scripts' own: None, or the status an entry point's sys.exit(main()) exits with
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # an uncaught error: Python prints the traceback and exits 1
        traceback.print_exc()
        return 1
    return status if isinstance(status, int) else 0


class _Captured:
    stdout = ""
    stderr = ""


@contextmanager
def _terminal():
    """Fds 1 and 2 (and sys.stdout/stderr on them) into files for the run; their text afterwards."""
    captured = _Captured()
    saved_streams = sys.stdout, sys.stderr
    saved_fds = os.dup(1), os.dup(2)
    files = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    for stream in saved_streams:
        stream.flush()
    for fd, file in zip((1, 2), files):
        os.dup2(file.fileno(), fd)
    # on fds 1 and 2 themselves, as a process's are: they follow the job's redirection (caption/summary/console.py)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)
    ours = sys.stdout, sys.stderr
    try:
        yield captured
    finally:
        _retarget_handlers(dict(zip(ours, saved_streams)))
        for stream in ours:
            try:
                stream.flush()
                stream.close()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = saved_streams
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        texts = []
        for file in files:
            file.seek(0)
            texts.append(file.read().decode("utf-8", errors="replace"))
            file.close()
        captured.stdout, captured.stderr = texts


@contextmanager
def _process_state_restored():
    from hydra.core.global_hydra import GlobalHydra

    from caption.outcome import interrupts
    from caption.summary.console import console

    environ, cwd, argv = dict(os.environ), os.getcwd(), list(sys.argv)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    loggers = _logging_state()
    filters = list(warnings.filters)
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        console.restore()
        interrupts.received, interrupts._shielded = False, 0
        GlobalHydra.instance().clear()
        warnings.filters[:] = filters
        _restore_logging(loggers)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        sys.argv = argv
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)


def _every_logger() -> list[logging.Logger]:
    manager = logging.Logger.manager
    return [logging.getLogger(), *(lg for lg in manager.loggerDict.values() if isinstance(lg, logging.Logger))]


def _retarget_handlers(streams: dict) -> None:
    """A library first imported during the run (vLLM's logger holds sys.stdout from its import on) writes
    to this process's streams afterwards, not to the run's closed ones."""
    for lg in _every_logger():
        for handler in lg.handlers:
            if type(handler) is not logging._StderrHandler and isinstance(handler, logging.StreamHandler) \
                    and handler.stream in streams:  # (the last-resort handler reads sys.stderr as it is)
                handler.setStream(streams[handler.stream])


def _logging_state() -> dict:
    return {lg: (list(lg.handlers), lg.level, lg.propagate, lg.disabled) for lg in _every_logger()}


def _restore_logging(state: dict) -> None:
    """Each logger's handlers, level and flags as they were. The level is set on the attribute and the level
    caches cleared once at the end: `Logger.setLevel` clears every logger's cache each time (logging/__init__.py,
    `Manager._clear_cache`), so setting them one by one is quadratic in the loggers a process holds (1,041
    once vLLM, transformers, Ray and boto are imported): 26 of the test workers' ~430 CPU-s over a whole run
    (py-spy on both workers), more than any test file but a dozen."""
    for lg in _every_logger():
        if lg not in state:  # made during the run (a library's first import): its own set-up stays
            continue
        handlers, level, propagate, disabled = state[lg]
        for handler in list(lg.handlers):
            if handler not in handlers:  # one the run added (Hydra's file and console handlers)
                lg.removeHandler(handler)
                try:
                    handler.close()
                except Exception:
                    pass
        for handler in handlers:
            if handler not in lg.handlers:
                lg.addHandler(handler)
        lg.level = level
        lg.propagate, lg.disabled = propagate, disabled
    logging.Logger.manager._clear_cache()
