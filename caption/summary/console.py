"""What reaches the person at the terminal, and what goes to the run's log file.

A job's terminal shows its own lines only: the plan, the progress bar, the summary and errors.
Everything else printed in the process (vLLM's and transformers' logs, Python warnings, notices
that native libraries write straight to file descriptors 1 and 2, decoder processes' output) goes
to `caption.log` in the run's folder. That takes redirecting the descriptors themselves: vLLM's
log handler holds `sys.stdout` from its import on, and C code never sees Python's streams. The
job's own lines go to copies of the terminal's descriptors made before the redirect.
`verbose=true` leaves the descriptors alone, so everything shows as it comes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class Console:
    def __init__(self):
        self.log_path: Path | None = None
        self._saved: tuple[int, int] | None = None
        self._streams: tuple = ()

    @property
    def out(self):
        return self._streams[0] if self._streams else sys.stdout

    @property
    def err(self):
        return self._streams[1] if self._streams else sys.stderr

    @property
    def quiet_log(self) -> Path | None:
        """The log fds 1 and 2 write to now; None while they reach the terminal."""
        return self.log_path if self._saved is not None else None

    def quiet(self, log_path: Path, lines_to_terminal: bool = True) -> None:
        """From now on fds 1 and 2 write to `log_path`; `err` still reaches the terminal, and `out` too
        unless `lines_to_terminal` is false (the Python API: the plan and summary go to the log)."""
        if self._saved is not None:
            self.restore()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self._streams = (os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8"),
                         os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8"))
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        self.log_path = log_path
        if not lines_to_terminal:
            self._streams[0].close()
            self._streams = (os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8"), self._streams[1])

    def warn(self, line: str) -> None:
        """A warning: on the terminal, and in caption.log too when the terminal is quiet."""
        print(line, file=self.err)
        if self._saved is not None:
            print(line, file=sys.stderr, flush=True)

    def restore(self) -> None:
        """Point fds 1 and 2 back at the terminal (end of a job; the next job of a sweep quiets again)."""
        if self._saved is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        for stream in self._streams:
            stream.close()
        self._saved, self._streams = None, ()


console = Console()


def quiet_steps(steps, quiet):
    """The generator `steps` with library output quieted only while it runs: `quiet()` (e.g.
    console.quiet(log)) before each step, console.restore() before its item reaches the caller, so what
    the caller prints between items reaches its terminal (the Python API's `for record in
    captioner.caption(...): print(...)`). A caller that stops early closes `steps` quietly too.
    `quiet=None` (verbose) runs the steps as they are. Returns what `steps` returns."""
    if quiet is None:
        return (yield from steps)
    finished = False
    try:
        while True:
            quiet()
            try:
                item = next(steps)
            except StopIteration as done:
                finished = True
                return done.value
            finally:
                console.restore()
            yield item
    finally:  # the caller stopped early (or a step failed): the job shuts its decoders and engine down
        if not finished:
            try:
                quiet()
            except Exception:  # no log to quiet into (the reason is on its way up): close it as it is
                pass
            try:
                steps.close()
            finally:
                console.restore()
