"""Where decoding and generation run, chosen by `runner=`: this machine (local.py) or a Ray cluster
(ray.py). Every runner has the same small interface (base.py) and runs the same pipeline
(caption/pipeline/) on its decoded clips."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caption.engines.base import Engine
    from caption.runners.base import Runner
    from caption.settings.config import JobConfig


def make_runner(job: JobConfig, engine: Engine | None = None) -> Runner:
    """The runner `job.runner.name` names; `engine`: an already loaded engine (runner=local only)."""
    if job.runner.name == "ray":
        if engine is not None:
            raise ValueError("runner=ray loads its engines in Ray actors: it cannot take an engine")
        from caption.runners.ray import RayRunner

        return RayRunner(job)
    from caption.runners.local import LocalRunner

    return LocalRunner(job, engine)
