"""Test inputs made once a run, however many test processes need them.

`make test` runs two pytest-xdist workers, and a session or module fixture is made once per worker: an input
that two files on different workers both need (the real-footage reel: ~13 CPU-s of decoding and x264) was
made twice. The workers of one run share a folder (their base temps are `popen-gw<N>` under the run's own
`pytest-<N>`), so the first that needs an input makes it there under a lock and the others wait for it and
read it. Without xdist the folder is the run's base temp.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Callable


def _run_folder(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name: str, make: Callable[[Path], dict]) -> tuple[Path, dict]:
    """(the folder `make(folder)` filled, what it returned), made by the first test process of the run that
    asks for `name`; `make`'s result must be JSON. Treat the folder as read-only: other processes read it."""
    root = _run_folder(tmp_path_factory) / "made-once"
    root.mkdir(exist_ok=True)
    folder, result = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a process that held it dies
        if not result.exists():  # the result is written last: a folder without it was left by a failed make
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            made = make(folder)
            partial = result.with_suffix(".part")
            partial.write_text(json.dumps(made), encoding="utf-8")
            partial.rename(result)
    return folder, json.loads(result.read_text(encoding="utf-8"))
