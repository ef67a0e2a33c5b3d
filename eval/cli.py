"""``caption-meteor PRED.jsonl REFS.jsonl``: corpus METEOR of a caption run.

PRED is the caption job's JSONL output (one record per video with ``video``,
``caption``, ``status`` ok|error, ``error``, optionally ``adapter``/``task``);
REFS is ``references.jsonl`` (``video``, ``references``: list of captions).
Records are matched by ``video`` (exact path, else file name), never by
position.  What is scored is what the job's summary and the review page score
(eval/scope.py): the references that have an ``ok`` caption, of the caption
task, on the references field the records' adapter declares; references with
no record (not captioned) or an error record (failed) are counted and listed
beside the score.  Predictions for videos not in REFS are reported as
``extra``.  Prints a table; the last line is JSON::

    {"meteor": <corpus, null if nothing is captioned>, "n": <scored>, "missing": <no record>,
     "errors": <error record>, "extra": <not in REFS>, "extra_captioned": <of them ok>,
     "references": <reference items>, "field": <list used>}

Bad input (missing file, malformed JSON, missing fields, empty references,
ambiguous records, a task without references) prints one line naming file and
line, and exits with 2; a ``--per-item`` file that cannot be written, with 5.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

from eval.inputs import InputError, read_predictions
from eval.scope import scope_of, score_scope
from eval.tokenize_ko import TOKENIZERS
from vidcap_ko.exit_status import EXIT_WRITE_FAILED
from vidcap_ko.writing import WriteFailed, check_can_write, writing

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
    ap.add_argument("--field", help="which list of references in REFS to use (default: references for the base "
                                    "model's captions, an adapter's declared references_field for its own)")
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


def score_files(pred: Path, refs_path: Path, tokenizer: str = "kiwi", field: str | None = None,
                adapter: str | None = None, task: str | None = None, per_item: Path | None = None,
                settings_id: str | tuple[str, ...] | None = None) -> dict:
    """Corpus METEOR of a caption job's records against references.jsonl (what the CLI prints), over
    the references that have an ok caption (eval/scope.py decides the task, the field and the items).

    Returns the CLI's JSON result plus `table` (the printed rows) and `summary` (P, R, ...)."""
    if per_item:  # before the tokenizer loads and the scoring runs
        check_can_write(per_item, "per-item CSV", "--per-item")
    scope = scope_of(read_predictions(pred), pred, refs_path, adapter=adapter, task=task, field_name=field,
                     settings_id=settings_id)
    scored = score_scope(scope, tokenizer)
    rows = _table(scored, tokenizer)
    if per_item:
        write_per_item(per_item, scored)
        rows.append(("per-item scores", str(per_item)))
    return {"meteor": scored.meteor, **scope.counts(), "field": scope.field, "table": rows,
            "summary": scored.summary}


def _table(scored, tokenizer) -> list[tuple[str, str]]:
    """The rows the CLI prints."""
    scope, summary = scored.scope, scored.summary
    rows = [
        ("reference videos", f"{len(scope.references)}"),
        ("scored (n): ok captions", f"{len(scope.scored)}"),
        ("not captioned (no record)", f"{len(scope.missing)}{_names(scope.missing)}"),
        ("failed (error records)", f"{len(scope.errors)}{_names(key for key, _ in scope.errors)}"),
        ("extra predictions", f"{len(scope.extra)}{_names(p.video for p in scope.extra)}"),
    ]
    if len(scope.variants) > 1 or scope.variants and scope.variants[0] != ("none", "none"):
        rows.append(("adapter/task", "; ".join(f"{a}/{q}" for a, q in scope.variants)))
    rows.append(("tokenizer", f"{tokenizer} (field '{scope.field}')"))
    if summary is None:
        return rows + [("corpus METEOR", "- (no reference has an ok caption)")]
    return rows + [
        ("precision", f"{summary['precision']:.4f}"),
        ("recall", f"{summary['recall']:.4f}"),
        ("fmean", f"{summary['fmean']:.4f}"),
        ("fragmentation penalty", f"{summary['fragmentation_penalty']:.4f}"),
        ("corpus METEOR", f"{summary['meteor']:.4f} over {scope.over('references')}"),
        ("mean segment METEOR", f"{summary['mean_segment_meteor']:.4f}"),
        ("time load / tokenize / score", " / ".join(f"{s:.2f} s" for s in scored.seconds)),
    ]


def run(args) -> dict:
    scored = score_files(args.pred, args.refs, args.tokenizer, args.field, args.adapter, args.task, args.per_item,
                         args.settings)
    width = max(len(k) for k, _ in scored["table"])
    for k, v in scored["table"]:
        print(f"{k:<{width}}  {v}")
    return {k: scored[k] for k in ("meteor", "n", "missing", "errors", "extra", "extra_captioned", "references", "field")}


def write_per_item(path: Path, scored) -> None:
    """One row per reference item: its score where it has an ok caption, else its status (missing, error)."""
    scope = scored.scope
    by_key = {ref.key: (p, seg, toks) for (ref, p), seg, toks in zip(scope.scored, scored.segments,
                                                                    scored.hyp_tokens)}
    failed = dict(scope.errors)
    with writing(path, "per-item CSV", setting="--per-item"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["video", "status", "meteor", "precision", "recall", "fragmentation_penalty", "chunks",
                        "hyp_tokens", "ref_tokens", "matched_tokens", "best_reference", "adapter", "task",
                        "caption", "error"])
            for r in scope.references:
                if r.key in by_key:
                    p, seg, toks = by_key[r.key]
                    st = seg.stats
                    w.writerow([r.key, "ok", f"{st.score:.6f}", _num(st.precision), _num(st.recall),
                                _num(st.frag_penalty), int(st.chunks), len(toks), int(st.ref_len),
                                int(st.test_matched), seg.best_ref, p.adapter, p.task, p.caption or "", ""])
                else:
                    p = failed.get(r.key)
                    w.writerow([r.key, "error" if p else "missing", "", "", "", "", "", "", "", "", "",
                                p.adapter if p else "", p.task if p else "", "", (p.error or "") if p else ""])


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
    except WriteFailed as exc:  # --per-item: a disk that refuses it (vidcap_ko/writing.py)
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
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
