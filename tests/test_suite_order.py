"""The suite's own scheduling (tests/conftest.py LONGEST_FIRST) names files that exist: a renamed or
removed one would silently drop back to the end of the run."""

from __future__ import annotations

from caption.settings.config import REPO_ROOT
from tests.conftest import LONGEST_FIRST


def test_the_longest_files_run_first_and_exist():
    assert all((REPO_ROOT / path).is_file() for path in LONGEST_FIRST), \
        [path for path in LONGEST_FIRST if not (REPO_ROOT / path).is_file()]
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
