"""METEOR of a finished job's captions against references, through caption-meteor's own code: what is
scored (the task, the references field, the clips that have a caption) is eval/scope.py's decision."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

log = logging.getLogger(__name__)


def check_references(job: JobConfig, warn: bool = True) -> None:
    """Before any model loads: the references METEOR reads at the end are readable, with each list the
    job's captions are scored on (`references` for the base model, an adapter's `references_field`).
    Named by `references=`: ConfigError in one line. Found as <input_dir>/references.jsonl (auto): a
    warning, since the job's captions do not need it and the file is read only at the end (mended
    meanwhile, it is scored); `warn=False` leaves the warning to a later call."""
    from caption.settings.config import ConfigError
    from caption.summary.console import console
    from eval.inputs import InputError, read_references
    from eval.scope import BASE_FIELD, SCORED_TASK

    path = job.files().references
    if path is None or SCORED_TASK not in job.options.tasks:
        return
    declared = {a.name: a.references_field for a in job.adapters}
    for variant in job.variants():
        field = BASE_FIELD if variant is None else declared.get(variant, BASE_FIELD)
        who = "the base model's captions" if variant is None else f"adapter {variant}'s captions"
        try:
            read_references(path, field, hint=f"{who} are scored on this list")
        except InputError as exc:
            if job.options.references != "auto":
                raise ConfigError(f"`references`: {exc}; mend the file, or set references=null to caption "
                                  "without scoring") from None
            if warn:
                console.warn(f"caption: warning: METEOR will not be computed: {exc}; the file is read when the "
                             "job ends, so mending it meanwhile is enough (references=null: no scoring)")
            return


def score_captions(job: JobConfig) -> dict:
    """The summary's METEOR keys: per variant (the base model, each adapter) the corpus METEOR over the
    clips (or scenes) with an ok caption, and beside it how many are not captioned and how many failed:
    `meteor`, `meteor_n`, `meteor_missing`, `meteor_errors`, `meteor_field` for the base model, the same
    with `[<adapter>]` for an adapter, and all of them in `meteor_scores` (one entry per variant). Where
    nothing can be scored, `meteor_error` says why."""
    from eval.inputs import NONE_LABEL, InputError, read_predictions
    from eval.scope import scope_of, score_scope

    scores, entries = {}, []
    files = job.files()
    try:
        preds = read_predictions(files.output)
    except InputError as exc:
        return {"meteor_error": str(exc)}
    for adapter in job.variants():
        # this job's records only (a file may hold others beside them: add_beside=true)
        ids = job.expected_ids().own_ids(adapter=adapter)
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
    from eval.scope import unscored

    lines = []
    for entry in summary.get("meteor_scores") or []:
        who = "" if entry["adapter"] is None else f"adapter {entry['adapter']}: "
        score = "-" if entry["meteor"] is None else entry["meteor"]
        lines.append(f"{who}{score} over {entry['n']} captioned {items} of {entry['references']} "
                     f"({entry['missing']} not captioned, {entry['errors']} failed{unscored(entry)}; "
                     f"field {entry['field']})")
    return lines
