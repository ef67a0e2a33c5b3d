"""`caption`: the Hydra entry point. Compose the config, run the job, report, exit with a status a
scheduler can use (caption/outcome.py lists them; docs/robustness.md too).

    caption input_dir=clips/ output=captions.jsonl [engine=hf] [video=fps] [gpu=cpu]

Interruption: the first SIGINT (Ctrl-C) or SIGTERM stops the job where it is, at any moment from
start-up on: records already written stay, the ones in flight are dropped (a re-run does them),
the summary says what was left undone, and the exit status is 130. A second signal exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from caption.outcome import JobInterrupted, interrupts, quiet_unraisable_interrupts, stop_if_raised_by_an_interrupt

# Only light modules before the signal handlers are in place (main): an interrupt while the heavy
# ones import (hydra, numpy, torch: seconds on a busy machine) is then a clean stop, not a traceback.
from caption.summary.console import console
from vidcap_ko.exit_status import (
    EXIT_BUG,
    EXIT_ENGINE_DIED,
    EXIT_INPUT_GONE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT_BUSY,
    EXIT_USAGE,
    EXIT_WRITE_FAILED,
)

LOG_FILE = "caption.log"  # in the run's folder: everything the terminal does not show


def _on_signal(signum, frame) -> None:
    terminal = console.err.fileno()  # fd 2 may be the log by now (caption/summary/console.py)
    if interrupts.received:  # the second one: the user means it
        os.write(terminal, b"\ncaption: interrupted again, exiting now\n")
        os._exit(EXIT_INTERRUPTED)
    interrupts.received = True
    os.write(terminal, f"\ncaption: {signal.Signals(signum).name} received, stopping (again to exit at once)\n".encode())
    if not interrupts.shielded:  # closing down and writing the summary go on; the summary says interrupted
        raise JobInterrupted()


def install_signal_handlers() -> None:
    quiet_unraisable_interrupts()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def _job(cfg) -> float | None:
    """The Hydra task: one job (one of a sweep's), from its composed config to its exit status."""
    from caption.job import run_job
    from caption.settings.unread import task_overrides
    from caption.sweep import in_multirun, run_dir
    from vidcap_ko.writing import writing

    # an earlier job of this sweep was interrupted: the sweep stops with it. Or the signal landed in Hydra's first
    # composition, which only asks whether this is a sweep and swallows any Exception (hydra/_internal/hydra.py
    # `get_mode`), such as omegaconf's clean-up error in its place, or where Python could not raise it at all
    interrupts.stop_if_received()
    folder = run_dir()
    if not cfg.get("verbose") and folder is not None:
        with writing(folder / LOG_FILE, "log file", setting="hydra.run.dir"):
            console.quiet(folder / LOG_FILE)
    try:
        summary = run_job(cfg, given=task_overrides())
    except Exception as exc:
        stop_if_raised_by_an_interrupt(exc)
        sys.exit(_say_why_it_ended(exc))
    finally:
        console.restore()
    status = summary.get("exit_status", EXIT_OK)
    if status in (EXIT_ENGINE_DIED, EXIT_WRITE_FAILED, EXIT_INPUT_GONE):
        print(f"caption: {summary.get('stop_reason')}", file=sys.stderr)
    if status != EXIT_OK and not in_multirun():  # a sweep goes on; its table shows each job
        sys.exit(status)
    # the return value is what a Hydra sweeper optimises / records
    return summary.get("videos_per_s")


def _say_why_it_ended(exc: Exception) -> int:
    """Says on the terminal why the job ended with `exc`: raised before its records were open, or a bug.
    Returns the exit status."""
    from caption.output.checks import OutputRefused
    from caption.output.lock import OutputBusy
    from caption.settings.config import ConfigError
    from vidcap_ko.writing import WriteFailed
    from video_io.store import StoreError

    if isinstance(exc, OutputBusy):  # another job writes this output: a scheduler may try again later
        print(f"caption: refused: {exc}", file=console.err)
        return EXIT_OUTPUT_BUSY
    if isinstance(exc, (ConfigError, OutputRefused)):
        kind = "invalid config" if isinstance(exc, ConfigError) else "refused"
        print(f"caption: {kind}: {exc}", file=console.err)
        return EXIT_USAGE
    if isinstance(exc, WriteFailed):  # before the job had its records open, e.g. a read-only output folder
        print(f"caption: {exc}", file=console.err)
        return EXIT_WRITE_FAILED
    if isinstance(exc, StoreError):  # the store of input_dir= does not answer, or refuses the credentials
        print(f"caption: input unreachable: {exc}", file=console.err)
        return EXIT_INPUT_GONE
    trace = traceback.format_exc()  # a bug: the whole traceback on the terminal and in the log
    print(trace, file=sys.stderr)
    print(f"{trace}caption: unexpected error (exit {EXIT_BUG}); please report it with the log above",
          file=console.err)
    return EXIT_BUG


def main() -> None:
    if {"--help", "-h"} & set(sys.argv[1:]):  # ours, from the schema and the presets (Hydra's: --hydra-help)
        from caption.settings.config import CONF_DIR
        from caption.settings.help import help_text

        sys.stdout.write(help_text(CONF_DIR))
        return
    install_signal_handlers()
    # Hydra's own errors (a bad override, a run folder it cannot make) come to us instead of its report,
    # which prints a traceback and exits 1: they are the user's to fix (2) or the machine's (5)
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        try:
            _compose_and_run()
        except Exception as exc:  # e.g. a signal inside a class body while hydra imports: Python's RuntimeError
            stop_if_raised_by_an_interrupt(exc)  # "Error calling __set_name__", raised from the interrupt
            raise
    except JobInterrupted:  # before the job had its records open, or while it closed them
        print("caption: interrupted; records already written are kept: run the same command again to resume",
              file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


def _compose_and_run() -> None:
    import hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from caption.settings.config import CONF_DIR
    from caption.settings.overrides import paths_as_typed
    from vidcap_ko.writing import WriteFailed

    sys.argv[1:] = paths_as_typed(sys.argv[1:])  # `"input_dir=/data/내 영상"` as typed (caption/settings/overrides.py)
    app = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(_job)
    try:
        app()
    except WriteFailed as exc:  # caption.log, a sweep table
        stop_if_raised_by_an_interrupt(exc)
        print(f"caption: {exc}", file=sys.stderr)
        sys.exit(EXIT_WRITE_FAILED)
    except (HydraException, OmegaConfBaseException) as exc:  # composing the config: the user's to fix
        stop_if_raised_by_an_interrupt(exc)
        from caption.settings.help import explain_composition_error

        print(f"caption: invalid config: {explain_composition_error(exc)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except OSError as exc:  # Hydra writing its files into the run folder (after the Hydra errors: some are OSErrors)
        stop_if_raised_by_an_interrupt(exc)
        print(f"caption: {WriteFailed(exc.filename or 'run folder', exc, 'run folder', 'hydra.run.dir')}",
              file=sys.stderr)
        sys.exit(EXIT_WRITE_FAILED)


if __name__ == "__main__":
    main()
