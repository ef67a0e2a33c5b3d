"""METEOR of a finished job's captions against references, through caption-meteor's own code: what is
scored (the task, the references field, the clips that have a caption) is eval/scope.py's decision."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caption.config import JobConfig

log = logging.getLogger(__name__)


def score_captions(job: JobConfig) -> dict:
    """The summary's METEOR keys: per variant (the base model, each adapter) the corpus METEOR over the
    clips (or scenes) with an ok caption, and beside it how many are not captioned and how many failed:
    `meteor`, `meteor_n`, `meteor_missing`, `meteor_errors`, `meteor_field` for the base model, the same
    with `[<adapter>]` for an adapter, and all of them in `meteor_scores` (one entry per variant). Where
    nothing can be scored, `meteor_error` says why."""
    from eval.records import NONE_LABEL, InputError, read_predictions
    from eval.scope import scope_of, score_scope

    scores, entries = {}, []
    files = job.files()
    try:
        preds = read_predictions(files.output)
    except InputError as exc:
        return {"meteor_error": str(exc)}
    for adapter in job.variants():
        # this job's records only (a file may hold others beside them: add_beside=true)
        ids = {i for (task, a, _), i in job.settings_ids.items() if a == adapter}
        mine = [p for p in preds if p.settings_id in ids]
        try:
            scope = scope_of(mine, files.output, files.references, adapter=NONE_LABEL if adapter is None else adapter)
            scored = score_scope(scope)
        except InputError as exc:  # e.g. no caption task in this job: the job itself succeeded
            log.warning("METEOR not computed: %s", exc)
            return {"meteor_error": str(exc)}
        suffix = "" if adapter is None else f"[{adapter}]"
        counts = scope.counts()
        scores[f"meteor{suffix}"] = None if scored.meteor is None else round(scored.meteor, 4)
        for key in ("n", "missing", "errors"):
            scores[f"meteor_{key}{suffix}"] = counts[key]
        scores[f"meteor_field{suffix}"] = scope.field
        entries.append({"adapter": adapter, "field": scope.field, "meteor": scores[f"meteor{suffix}"], **counts})
    scores["meteor_scores"] = entries
    return scores


def meteor_lines(summary: dict, items: str) -> list[str]:
    """The summary's METEOR in words, one line per variant: the score, what it is over, and what is
    left out; or why there is none."""
    if summary.get("meteor_error"):
        return [f"not computed: {summary['meteor_error']}"]
    lines = []
    for entry in summary.get("meteor_scores") or []:
        who = "" if entry["adapter"] is None else f"adapter {entry['adapter']}: "
        score = "-" if entry["meteor"] is None else entry["meteor"]
        lines.append(f"{who}{score} over {entry['n']} captioned {items} of {entry['references']} "
                     f"({entry['missing']} not captioned, {entry['errors']} failed; field {entry['field']})")
    return lines
