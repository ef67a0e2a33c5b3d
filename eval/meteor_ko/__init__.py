"""Hugging Face ``evaluate`` metric module: ``evaluate.load(<path to this folder>)``.

The folder holds ``meteor_ko.py`` (an ``evaluate.Metric``); it is a package
only so that the folder ships with the installed project.  Use
:func:`module_path` to get the path to pass to ``evaluate.load``.
"""

from pathlib import Path


def module_path() -> str:
    """Path of this folder, for ``evaluate.load(module_path())``."""
    return str(Path(__file__).resolve().parent)
