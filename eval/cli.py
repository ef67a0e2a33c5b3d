"""``caption-meteor PRED.jsonl REFS.jsonl``: corpus METEOR of a caption run.

PRED is the caption job's JSONL output (one record per video with ``video``,
``caption``, ``status`` ok|error, ``error``, optionally ``adapter``/``task``);
REFS is ``references.jsonl`` (``video``, ``references``: list of captions).
Records are matched by ``video`` (exact path, else file name), never by
position.  Every reference video is scored: a video whose record has status
``error``, or that has no record, is scored as an empty caption (0) and is
counted and listed.  Predictions for videos not in REFS are reported as
``extra``.  Prints a table; the last line is JSON::

    {"meteor": <corpus>, "n": <scored>, "missing": <no record>, "errors": <status error>, "extra": <not in REFS>}

Bad input (missing file, malformed JSON, missing fields, empty references,
ambiguous records) prints one line naming file and line, and exits with 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

from eval.meteor import Scorer
from eval.records import InputError, match, read_predictions, read_references
from eval.tokenize_ko import TOKENIZERS, get_tokenizer

PROG = "caption-meteor"
LIST_MAX = 5  # how many video names to show in the table per category


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Score captions against reference captions with METEOR 1.5 "
        "(language-independent parameters, Korean morpheme tokenization).",
    )
    ap.add_argument("pred", type=Path, help="caption job output (JSONL)")
    ap.add_argument("refs", type=Path, help="references.jsonl")
    ap.add_argument("--tokenizer", choices=sorted(TOKENIZERS), default="kiwi",
                    help="kiwi: Korean morphemes (default); whitespace: text is already tokenized")
    ap.add_argument("--field", default="references",
                    help="which list of references in REFS to use (default: references)")
    ap.add_argument("--adapter", help="score only PRED records with this 'adapter' ('none': records without one)")
    ap.add_argument("--task", help="score only PRED records with this 'task' ('none': records without one); "
                                   "default: 'caption' when the records carry tasks")
    ap.add_argument("--settings", metavar="ID", help="score only PRED records with this 'settings_id' (a file "
                                                     "holding records made with several settings)")
    ap.add_argument("--per-item", type=Path, metavar="CSV", help="write per-video segment scores to CSV")
    return ap


def _names(items, limit=LIST_MAX) -> str:
    items = list(items)
    if not items:
        return ""
    shown = ", ".join(items[:limit])
    return f"  ({shown}{', ...' if len(items) > limit else ''})"


def score_files(pred: Path, refs_path: Path, tokenizer: str = "kiwi", field: str = "references",
                adapter: str | None = None, task: str | None = None, per_item: Path | None = None,
                settings_id: str | tuple[str, ...] | None = None) -> dict:
    """Corpus METEOR of a caption job's records against references.jsonl (what the CLI prints).

    Returns the CLI's JSON result plus `table` (the printed rows) and `summary` (P, R, ...)."""
    refs = read_references(refs_path, field)
    preds = read_predictions(pred)
    if task is None and any(p.task == "caption" for p in preds):
        task = "caption"  # a job run with several tasks: references describe the caption task
    m = match(preds, refs, pred, adapter, task, settings_id)

    hyps, statuses = _hypotheses(refs, m)
    hyp_toks, result, seconds = _score(tokenizer, hyps, refs)

    missing = [r.key for r, s in zip(refs, statuses) if s == "missing"]
    errors = [r.key for r, s in zip(refs, statuses) if s == "error"]
    summary = result.summary()
    rows = _table(refs, statuses, missing, errors, m, tokenizer, field, summary, seconds)
    if per_item:
        write_per_item(per_item, refs, statuses, m, hyp_toks, result)
        rows.append(("per-item scores", str(per_item)))
    return {"meteor": summary["meteor"], "n": len(refs), "missing": len(missing),
            "errors": len(errors), "extra": len(m.extra), "table": rows, "summary": summary}


def _hypotheses(refs, m) -> tuple[list[str], list[str]]:
    """Each reference video's caption ("" for an error record or a missing one) and its status."""
    hyps, statuses = [], []
    for r in refs:
        p = m.by_video.get(r.key)
        status = "missing" if p is None else "error" if p.status == "error" else "ok"
        statuses.append(status)
        hyps.append(p.caption if status == "ok" else "")
    return hyps, statuses


def _score(tokenizer: str, hyps: list[str], refs) -> tuple[list, object, tuple[float, float, float]]:
    """(hypothesis tokens, corpus result, seconds to load / tokenize / score): the same code path as
    eval.meteor.meteor_score (Scorer.tokenize + Scorer.corpus)."""
    scorer = Scorer(tokenizer=tokenizer)
    try:
        tl = time.perf_counter()
        get_tokenizer(tokenizer).load()
        t0 = time.perf_counter()
        hyp_toks, ref_toks = scorer.tokenize(hyps, [r.references for r in refs])
    except (RuntimeError, ImportError, OSError) as exc:
        raise InputError(f"cannot run the {tokenizer} tokenizer: {exc}") from None
    t1 = time.perf_counter()
    result = scorer.corpus(hyp_toks, ref_toks)
    return hyp_toks, result, (t0 - tl, t1 - t0, time.perf_counter() - t1)


def _table(refs, statuses, missing, errors, m, tokenizer, field, summary, seconds) -> list[tuple[str, str]]:
    """The rows the CLI prints."""
    rows = [
        ("reference videos", f"{len(refs)}"),
        ("predictions matched (ok)", f"{statuses.count('ok')}"),
        ("scored (n)", f"{len(refs)}"),
        ("missing predictions", f"{len(missing)}{_names(missing)}"),
        ("error records", f"{len(errors)}{_names(errors)}"),
        ("extra predictions", f"{len(m.extra)}{_names(p.video for p in m.extra)}"),
    ]
    if len(m.variants) > 1 or m.variants and m.variants[0] != ("none", "none"):
        rows.append(("adapter/task", "; ".join(f"{a}/{q}" for a, q in m.variants)))
    return rows + [
        ("tokenizer", f"{tokenizer} (field '{field}')"),
        ("precision", f"{summary['precision']:.4f}"),
        ("recall", f"{summary['recall']:.4f}"),
        ("fmean", f"{summary['fmean']:.4f}"),
        ("fragmentation penalty", f"{summary['fragmentation_penalty']:.4f}"),
        ("corpus METEOR", f"{summary['meteor']:.4f}"),
        ("mean segment METEOR", f"{summary['mean_segment_meteor']:.4f}"),
        ("time load / tokenize / score", " / ".join(f"{s:.2f} s" for s in seconds)),
    ]


def run(args) -> dict:
    scored = score_files(args.pred, args.refs, args.tokenizer, args.field, args.adapter, args.task, args.per_item,
                         args.settings)
    width = max(len(k) for k, _ in scored["table"])
    for k, v in scored["table"]:
        print(f"{k:<{width}}  {v}")
    return {k: scored[k] for k in ("meteor", "n", "missing", "errors", "extra")}


def write_per_item(path: Path, refs, statuses, m, hyp_toks, result) -> None:
    try:
        fh = open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"{path}: cannot write per-item CSV ({exc.strerror or exc})") from None
    with fh:
        w = csv.writer(fh)
        w.writerow(["video", "status", "meteor", "precision", "recall", "fragmentation_penalty", "chunks",
                    "hyp_tokens", "ref_tokens", "matched_tokens", "best_reference", "adapter", "task",
                    "caption", "error"])
        for r, status, toks, seg in zip(refs, statuses, hyp_toks, result.segments):
            st = seg.stats
            p = m.by_video.get(r.key)
            w.writerow([
                r.key, status, f"{st.score:.6f}", _num(st.precision), _num(st.recall),
                _num(st.frag_penalty), int(st.chunks), len(toks), int(st.ref_len), int(st.test_matched),
                seg.best_ref, p.adapter if p else "", p.task if p else "",
                (p.caption or "") if p else "", (p.error or "") if p else "",
            ])


def _num(x: float) -> str:
    return f"{x:.6f}" if x == x and abs(x) != float("inf") else ""


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out = run(args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("CAPTION_METEOR_DEBUG"):
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc} "
              f"(set CAPTION_METEOR_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
    print(json.dumps(out, ensure_ascii=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
