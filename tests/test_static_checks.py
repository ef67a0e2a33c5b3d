"""The static checks that keep the code's shape, run with the suite (so by `make test` and CI): ruff with the
rules chosen in pyproject.toml ([tool.ruff]) and mypy, strict on the job's config, pipeline and records
modules and lenient elsewhere ([tool.mypy]). Both are pinned in the `test` extra; each must find nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check(module: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    if f"No module named {module}" in done.stderr:
        pytest.fail(f"{module} is not installed in {sys.prefix}: `make setup` installs it (the test extra, "
                    "pyproject.toml)")
    return done


def test_ruff_finds_nothing():
    done = _check("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, f"ruff check . found problems (`ruff check --fix .` mends some):\n{done.stdout}"


def test_mypy_finds_nothing():
    done = _check("mypy")  # the files and settings are pyproject.toml's [tool.mypy]
    assert done.returncode == 0, f"mypy found problems:\n{done.stdout}{done.stderr}"
