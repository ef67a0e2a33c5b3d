"""How a job ends: the exceptions that stop a job early, and the exit status a summary gives
(vidcap_ko/exit_status.py lists the statuses)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from vidcap_ko.exit_status import (
    EXIT_ENGINE_DIED,
    EXIT_FAILED_RECORDS,
    EXIT_INPUT_GONE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_WRITE_FAILED,
)


class JobInterrupted(BaseException):
    """Raised in the main thread by the first SIGINT/SIGTERM (a BaseException, like
    KeyboardInterrupt, so no library's `except Exception` swallows it)."""


class Interrupts:
    """What the signal handler (caption/cli.py) knows: whether a stop was asked for, and whether the
    job is in a stretch that must not be cut (closing the engine, writing the summary). There the
    handler only notes the signal; the job then ends as interrupted, with a summary that says so."""

    def __init__(self):
        self.received = False
        self._shielded = 0

    @property
    def shielded(self) -> bool:
        return self._shielded > 0

    def hold(self) -> None:
        """From now until release(), a signal is noted, not raised."""
        self._shielded += 1

    def release(self) -> None:
        self._shielded -= 1

    @contextmanager
    def shield(self):
        self.hold()
        try:
            yield
        finally:
            self.release()

    def stop_if_received(self) -> None:
        """Raise JobInterrupted if a signal was noted (the job's checks: a signal held while a record was written,
        swallowed by a library, or one Python could not raise: quiet_unraisable_interrupts)."""
        if self.received and not self.shielded:
            raise JobInterrupted()


interrupts = Interrupts()


def quiet_unraisable_interrupts() -> Callable[[Any], object]:
    """Leave to the job's checks an interruption Python could not raise; returns the hook this one replaces.
    Python runs a signal handler wherever the main thread is, and where that is a weakref callback or a
    __del__ (such as the import system's module-lock callback, `cb` in `_get_module_lock`, run after each
    import), the handler's exception cannot propagate: Python would print "Exception ignored in ..." with
    a traceback, and go on. The signal is noted (`interrupts.received`), and the job stops at its next
    check (caption/cli.py `_job`, once the engine is loaded, after each record: caption/job.py)."""
    previous = sys.unraisablehook

    def quiet_if_noted(unraisable: Any) -> None:
        if interrupts.received and isinstance(unraisable.exc_value, (JobInterrupted, KeyboardInterrupt)):
            return
        previous(unraisable)

    sys.unraisablehook = quiet_if_noted
    return previous


def interruption_behind(exc: BaseException) -> BaseException | None:
    """The JobInterrupted (or KeyboardInterrupt) that was unwinding when `exc` was raised, if one was. A
    signal that lands inside a library can leave its clean-up raising another error in the interrupt's
    place: omegaconf's ListConfig.append puts a None placeholder, catches only Exception, and its
    flag_override then fails on the None with AttributeError; vLLM's tokenizer pool (`_borrow_from_pool` in
    vllm/tokenizers/hf.py) puts back, in a `finally`, a tokenizer it had not yet taken, and raises
    UnboundLocalError. That error is the interruption, not a bug, a wrong config or a clip's failure."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, (JobInterrupted, KeyboardInterrupt)):
            return current
        seen.add(id(current))
        todo += [current.__cause__, current.__context__]
    return None


def stop_if_raised_by_an_interrupt(exc: BaseException) -> None:
    """Raise the interruption behind `exc` (`interruption_behind`) in its place: the stop that was asked for.
    Called wherever an error is turned into something that stays (an error record, an engine restarted, the
    job's exit status), so that a Ctrl-C is never written down as a clip that failed."""
    found = interruption_behind(exc)
    if found is not None:
        raise (KeyboardInterrupt() if isinstance(found, KeyboardInterrupt) else JobInterrupted()) from None


class EngineFailure(Exception):
    """The engine broke while requests were in flight. The engine has already yielded error
    results for those; `unsubmitted` are requests it had taken from the stream but not started."""

    def __init__(self, message: str, unsubmitted: list | None = None):
        super().__init__(message)
        self.unsubmitted = list(unsubmitted or [])


class EngineDied(Exception):
    """The engine failed more often than the job may restart it; the message says why and what to try."""


class EngineDidNotLoad(EngineDied):
    """The engine could not load its model at the job's start (a damaged weights file, a model type the
    installed transformers does not know, memory, a library not installed): nothing was captioned, and
    running again changes nothing until what the message names is mended."""


class FailFast(Exception):
    """fail_fast=true and a record came out as an error."""


class InputGone(Exception):
    """The folder being captioned is no longer the one listed at the start (unmounted, moved, deleted):
    the clips left would all fail for that, not for what they are."""


@contextmanager
def stops_recorded(tally):
    """However the job's run stops early, the tally says how (its `stopped` and `stop_reason`) and the job
    goes on to its summary: a signal, an engine dead past its restarts, fail_fast, a disk that refused a
    record (vidcap_ko/writing.py), the folder being captioned gone. A bug, or a caller that abandons the job's records, still propagates."""
    from vidcap_ko.writing import WriteFailed

    try:
        try:
            yield
        except (JobInterrupted, KeyboardInterrupt):  # KeyboardInterrupt: the Python API, without our handler
            tally.stopped = "interrupted"
        except EngineDied as exc:
            tally.stopped = "engine did not load" if isinstance(exc, EngineDidNotLoad) else "engine died"
            tally.stop_reason = str(exc)
        except FailFast:
            tally.stopped = "fail_fast"
        except InputGone as exc:
            tally.stopped, tally.stop_reason = "input gone", str(exc)
        except WriteFailed as exc:  # the disk, not the job: what is written stays whole, a re-run resumes
            written = tally.requests_ok + tally.requests_error
            tally.stopped = "write failed"
            tally.stop_reason = str(exc.again(tail=f"the {written} record(s) this run wrote are whole, and it "
                                                   "resumes after them"))
    except (JobInterrupted, KeyboardInterrupt):  # a first signal while one of the above was being handled
        tally.stopped = tally.stopped or "interrupted"


def exit_status(summary: dict) -> int:
    """The process exit status for a finished (or stopped) job's summary."""
    stopped = summary.get("stopped")
    if stopped == "interrupted":
        return EXIT_INTERRUPTED
    if stopped in ("engine died", "engine did not load"):
        return EXIT_ENGINE_DIED
    if stopped == "write failed":
        return EXIT_WRITE_FAILED
    if stopped == "input gone":
        return EXIT_INPUT_GONE
    if summary.get("captions_failed") or summary.get("errors_from_earlier_runs") or stopped == "fail_fast":
        return EXIT_FAILED_RECORDS
    return EXIT_OK
