"""What a METEOR score of a caption job's records is computed over: one decision for every place that
scores them (the job's summary and so its sweep row: caption/summary/scoring.py; the review page:
caption/report/data.py; `caption-meteor`: eval/cli.py).

- **The task.** References describe captions: the `caption` task is scored. Records of the job's other
  tasks (keywords, motion) have no references and are refused, in the words `no_references` gives,
  unless a references field is named for them. Records without task labels (files made elsewhere) are
  scored as they are.
- **The references field.** Named (`--field`, `--adapter-field`), it is used. Else the base model's
  captions are scored on `references`, and an adapter's on the field its adapter declares
  (`references_field` in conf/lora/: the job writes it into the adapter's records; for records from
  before that, the conf/lora/ preset that declares an adapter of that name).
- **The items.** Every reference (a clip, or a scene of a long video) that has an `ok` caption is
  scored. References with no record (not captioned: a trial run with `limit=`, a job still running) and
  those whose record is an error (failed) are counted beside the score, never scored as empty captions:
  a score over 2 captioned clips of 4 is the score of those 2.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

from eval.inputs import NONE_LABEL, InputError, Prediction, Reference, match, read_references
from vidcap_ko.record import TASKS

SCORED_TASK = "caption"  # the task references describe
BASE_FIELD = "references"  # the base model's list (caption-synth's references.jsonl)


def tasks_without_references() -> set[str]:
    """The caption job's tasks that references do not describe (the record format names the tasks)."""
    return set(TASKS) - {SCORED_TASK}


def no_references(tasks) -> str:
    """Why records of these tasks get no METEOR: the one sentence the job's summary, the review page and
    caption-meteor say."""
    named = ", ".join(sorted(tasks))
    return (f"METEOR is not computed for task {named}: references describe the caption task only; add caption "
            f"to the job's tasks (tasks=[caption,{named}]) to score captions")


def scored_task(labels: set[str], task: str | None, field_named: bool) -> str | None:
    """The task to score among the records' task labels (None: every record, they carry no labels we know),
    or InputError saying why there is none."""
    if task is None:
        if SCORED_TASK in labels:
            return SCORED_TASK
        task_labels = labels - {NONE_LABEL}
        if task_labels and task_labels <= tasks_without_references() and not field_named:
            raise InputError(no_references(task_labels))
        return None
    if task in tasks_without_references() and not field_named:
        raise InputError(no_references({task}))
    return task


@functools.lru_cache(maxsize=None)
def declared_fields() -> dict[str, str]:
    """adapter name -> the references field a conf/lora/ preset declares for it (names declared with two
    different fields are left out: the preset cannot be told)."""
    from vidcap_ko.settings import load_preset, options

    found: dict[str, set[str]] = {}
    for option in options("lora"):
        for adapter in load_preset("lora", option).get("adapters") or []:
            found.setdefault(str(adapter.get("name")), set()).add(str(adapter.get("references_field") or BASE_FIELD))
    return {name: fields.pop() for name, fields in found.items() if len(fields) == 1}


def references_field(adapter: str, preds: list[Prediction], named: str | None = None) -> str:
    """The references list `adapter`'s captions are scored on (module docstring: the references field)."""
    if named:
        return named
    if adapter == NONE_LABEL:
        return BASE_FIELD
    written = {p.references_field for p in preds if p.adapter == adapter and p.references_field}
    if len(written) == 1:
        return written.pop()
    return declared_fields().get(adapter, BASE_FIELD)


@dataclass
class Scope:
    """One score's items: which references are scored with which caption, and what is left out."""
    adapter: str | None  # the adapter label scored (None: no selection)
    task: str | None
    field: str
    references: list[Reference]  # every reference item (a clip, or a scene)
    scored: list[tuple[Reference, Prediction]] = field(default_factory=list)  # items with an ok caption
    missing: list[str] = field(default_factory=list)  # reference keys with no record (not captioned)
    errors: list[tuple[str, Prediction]] = field(default_factory=list)  # reference keys whose record is an error
    extra: list[Prediction] = field(default_factory=list)  # records for videos the references do not have
    variants: list[tuple[str, str]] = field(default_factory=list)  # (adapter, task) pairs scored

    def counts(self) -> dict:
        """The figures printed beside the score: scored (n), not captioned (missing), failed (errors), and
        the records the references have no item for (extra; extra_captioned: those with a caption)."""
        return {"n": len(self.scored), "missing": len(self.missing), "errors": len(self.errors),
                "extra": len(self.extra), "extra_captioned": sum(p.status == "ok" for p in self.extra),
                "references": len(self.references)}

    def over(self, items: str = "clips") -> str:
        """The score's scope in words: "2 captioned clips of 4 (2 not captioned, 0 failed)", and the captions
        it leaves out for want of references ("; 8 more captioned, no references: not scored")."""
        c = self.counts()
        return (f"{c['n']} captioned {items} of {c['references']} ({c['missing']} not captioned, "
                f"{c['errors']} failed{unscored(c)})")


def unscored(counts: dict) -> str:
    """The captions a score leaves out because the references have no item for them, in words ('' if none):
    a folder mixing clips with references and clips without, or a file holding other clips' records."""
    n = counts.get("extra_captioned") or 0
    return f"; {n} more captioned, no references: not scored" if n else ""


def scope_of(preds: list[Prediction], pred_path: Path, refs_path: Path, *, adapter: str | None = None,
             task: str | None = None, field_name: str | None = None,
             settings_id: str | tuple[str, ...] | None = None) -> Scope:
    """What METEOR of these records against `refs_path` is computed over (module docstring); InputError
    with one line where it cannot be computed (no references for the task, ambiguous records...)."""
    task = scored_task({p.task for p in preds}, task, bool(field_name))
    chosen = [p for p in preds if (adapter is None or p.adapter == adapter) and (task is None or p.task == task)]
    adapters = {p.adapter for p in chosen}
    label = adapter if adapter is not None else (adapters.pop() if len(adapters) == 1 else NONE_LABEL)
    fname = references_field(label, chosen, field_name)
    declared = not field_name and label != NONE_LABEL
    refs = read_references(refs_path, fname, hint=f"the list adapter {label} declares as its references_field; name "
                           f"another with --field, or --adapter-field {label}=LIST on caption-report" if declared
                           else "choose the list with --field")
    m = match(preds, refs, pred_path, adapter, task, settings_id)
    scope = Scope(adapter, task, fname, refs, variants=m.variants, extra=m.extra)
    for ref in refs:
        p = m.by_video.get(ref.key)
        if p is None:
            scope.missing.append(ref.key)
        elif p.status != "ok":
            scope.errors.append((ref.key, p))
        else:
            scope.scored.append((ref, p))
    return scope


@dataclass
class Scored:
    """METEOR over a Scope's scored items: None where nothing was captioned."""
    scope: Scope
    meteor: float | None
    summary: dict | None  # eval.meteor CorpusResult.summary(): precision, recall, ...
    segments: list  # per scored item, in Scope.scored order (eval.meteor.SegmentResult)
    hyp_tokens: list
    seconds: tuple[float, float, float]  # load the tokenizer / tokenize / score


def score_scope(scope: Scope, tokenizer: str = "kiwi", scorer=None) -> Scored:
    """Corpus METEOR of the scope's scored items (eval.meteor: Scorer.tokenize + Scorer.corpus)."""
    from eval.meteor import Scorer
    from eval.tokenize_ko import get_tokenizer

    if not scope.scored:
        return Scored(scope, None, None, [], [], (0.0, 0.0, 0.0))
    scorer = scorer or Scorer(tokenizer=tokenizer)
    try:
        tl = time.perf_counter()
        get_tokenizer(tokenizer).load()
        t0 = time.perf_counter()
        hyp_toks, ref_toks = scorer.tokenize([p.caption or "" for _, p in scope.scored],
                                             [r.references for r, _ in scope.scored])
    except (RuntimeError, ImportError, OSError) as exc:
        raise InputError(f"cannot run the {tokenizer} tokenizer: {exc}") from None
    t1 = time.perf_counter()
    result = scorer.corpus(hyp_toks, ref_toks)
    return Scored(scope, result.score, result.summary(), result.segments, hyp_toks,
                  (t0 - tl, t1 - t0, time.perf_counter() - t1))
