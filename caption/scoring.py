"""METEOR of a finished job's captions against references, through caption-meteor's own code."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def score_captions(job) -> dict:
    """{"meteor": ..., "meteor[<adapter>]": ...}: the caption task's corpus METEOR for the base model
    and each adapter, each against its own reference field (an adapter's `references_field`)."""
    from eval.cli import score_files
    from eval.records import InputError

    fields = {a.name: a.references_field for a in job.adapters}
    scores = {}
    for adapter in job.variants():
        field = fields.get(adapter, "references")
        # this job's records only (a file may hold others beside them: add_beside=true), whole clips' and segments'
        ids = tuple(i for i in (job.settings_ids.get(("caption", adapter, segmented)) for segmented in (False, True)) if i)
        try:
            result = score_files(job.output, job.references, adapter="none" if adapter is None else adapter,
                                 task="caption", field=field, settings_id=ids or None)
        except InputError as exc:  # e.g. no caption task in this job: the job itself succeeded
            log.warning("METEOR not computed: %s", exc)
            return {"meteor_error": str(exc)}
        scores["meteor" if adapter is None else f"meteor[{adapter}]"] = round(result["meteor"], 4)
        scores.setdefault("meteor_n", result["n"])
    return scores
