"""The helper that runs a command in the test's process (tests/caption/in_process.py) puts back what the
command changed: here, logging."""

from __future__ import annotations

import logging

from tests.caption.in_process import _logging_state, _restore_logging


def test_loggers_answer_with_the_levels_they_had_before_the_run():
    """A level the run set is undone, and so is what loggers had cached from it: `isEnabledFor` answers
    from a per-logger cache that only `Manager._clear_cache` empties."""
    parent, child = logging.getLogger("vidcap-test-restore"), logging.getLogger("vidcap-test-restore.child")
    parent.setLevel(logging.WARNING)
    state = _logging_state()
    parent.setLevel(logging.DEBUG)  # what a run may do (hydra.verbose=...)
    assert child.isEnabledFor(logging.DEBUG)  # cached now, in the child too
    _restore_logging(state)
    assert parent.level == logging.WARNING
    assert not child.isEnabledFor(logging.DEBUG) and not parent.isEnabledFor(logging.INFO)
