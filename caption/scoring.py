"""METEOR of a finished job's captions against references, through caption-meteor's own code."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def score_captions(job) -> dict:
    """{"meteor": corpus score of the caption task, ...} per adapter found in the output."""
    from eval.cli import score_files
    from eval.records import InputError

    adapters = sorted({None, *job.adapter_names}) if getattr(job, "adapter_names", None) else [None]
    scores = {}
    for adapter in adapters:
        try:
            result = score_files(job.output, job.references, adapter="none" if adapter is None else adapter,
                                 task="caption")
        except InputError as exc:  # e.g. no caption task in this job: the job itself succeeded
            log.warning("METEOR not computed: %s", exc)
            return {"meteor_error": str(exc)}
        scores["meteor" if adapter is None else f"meteor[{adapter}]"] = round(result["meteor"], 4)
        scores.setdefault("meteor_n", result["n"])
    return scores
