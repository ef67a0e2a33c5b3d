"""`caption`: the Hydra entry point. Compose the config, run the job, report, exit with a status a
scheduler can use (caption/outcome.py lists them; the README too).

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

import hydra
from omegaconf import DictConfig

from caption.config import CONF_DIR, ConfigError
from caption.console import console
from caption.outcome import EXIT_BUG, EXIT_ENGINE_DIED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, JobInterrupted
from caption.records import OutputRefused
from caption.sweep import in_multirun, run_dir

LOG_FILE = "caption.log"  # in the run's folder: everything the terminal does not show


def _on_signal(signum, frame) -> None:
    terminal = console.err.fileno()  # fd 2 may be the log by now (caption/console.py)
    if getattr(_on_signal, "seen", False):  # the second one: the user means it
        os.write(terminal, b"\ncaption: interrupted again, exiting now\n")
        os._exit(EXIT_INTERRUPTED)
    _on_signal.seen = True
    os.write(terminal, f"\ncaption: {signal.Signals(signum).name} received, stopping (again to exit at once)\n".encode())
    raise JobInterrupted()


def install_signal_handlers() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _main(cfg: DictConfig) -> float | None:
    from caption.job import run_job

    folder = run_dir()
    if not cfg.get("verbose") and folder is not None:
        console.quiet(folder / LOG_FILE)
    try:
        summary = run_job(cfg)
    except (ConfigError, OutputRefused) as exc:
        kind = "invalid config" if isinstance(exc, ConfigError) else "refused"
        print(f"caption: {kind}: {exc}", file=console.err)
        sys.exit(EXIT_USAGE)
    except Exception:  # a bug: the whole traceback on the terminal and in the log
        trace = traceback.format_exc()
        print(trace, file=sys.stderr)
        print(f"{trace}caption: unexpected error (exit {EXIT_BUG}); please report it with the log above",
              file=console.err)
        sys.exit(EXIT_BUG)
    finally:
        console.restore()
    status = summary.get("exit_status", EXIT_OK)
    if status == EXIT_ENGINE_DIED:
        print(f"caption: {summary.get('stop_reason')}", file=sys.stderr)
    if status != EXIT_OK and not in_multirun():  # a sweep goes on; its table shows each job
        sys.exit(status)
    # the return value is what a Hydra sweeper optimises / records
    return summary.get("videos_per_s")


def main() -> None:
    install_signal_handlers()
    try:
        _main()
    except JobInterrupted:  # before the job had its records open, or while it closed them
        print("caption: interrupted; records already written are kept: run the same command again to resume",
              file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
