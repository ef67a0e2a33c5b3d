"""`caption-report RECORDS.jsonl --out report.html`: a review page for a caption job's records.

One self-contained HTML file (opens from disk, makes no request): per clip a strip of the frames
the model was given, every caption per task and adapter with its status or error, and METEOR per
caption when references are given; filter by status, sort by score, search captions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from caption.report import thumbs as T
from caption.report.data import ReportError, load_report_data, resolve_input_dir
from caption.report.page import DEFAULT_PAGE_SIZE, render_page
from vidcap_ko.exit_status import EXIT_WRITE_FAILED
from vidcap_ko.writing import WriteFailed, check_can_write, write_whole, writing
from video_io.footage_kind import REFERENCES_FILE  # what caption-synth writes; the job looks for it too
from video_io.store import clip_path, exists, input_there, local_file

PROG = "caption-report"
CHANGED = "changed since captioning"  # a clip whose file is not the one its records were made from


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="Write one self-contained HTML page (no network) to "
                                 "review a caption job's records: frames, captions, errors, METEOR.")
    ap.add_argument("records", type=Path, help="the caption job's JSONL records")
    ap.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    ap.add_argument("--references", help=f"references.jsonl for METEOR per caption (default: {REFERENCES_FILE} "
                                         "in the input folder if there is one; 'none': no scores)")
    ap.add_argument("--field", help="the list of references the base model's captions are scored on (default: "
                                    "references)")
    ap.add_argument("--adapter-field", action="append", default=[], metavar="ADAPTER=FIELD",
                    help="score this adapter's captions on another list (default: the references_field its "
                         "records name, as the job scores them)")
    ap.add_argument("--input-dir", help="the folder (or s3:// prefix) the records' video paths are relative to "
                                                   "(default: input_dir in RECORDS.summary.json, else RECORDS' folder)")
    ap.add_argument("--title", help="page title")
    ap.add_argument("--max-thumbs", type=int, default=T.DEFAULT_MAX_CLIPS,
                    help=f"clips that get thumbnails (default {T.DEFAULT_MAX_CLIPS}; -1: all, 0: none): failed "
                         "captions first, then the lowest METEOR, then path order; the rest get a placeholder")
    ap.add_argument("--thumb-frames", type=int, default=T.DEFAULT_FRAMES,
                    help=f"thumbnails per clip, spread over its sampled frames (default {T.DEFAULT_FRAMES})")
    ap.add_argument("--thumb-size", type=int, default=T.DEFAULT_SIZE,
                    help=f"thumbnail longest side in px (default {T.DEFAULT_SIZE})")
    ap.add_argument("--thumb-quality", type=int, default=T.DEFAULT_QUALITY, help="JPEG quality 1-95")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                    help="decoder processes for thumbnails (0: in this process, no timeout)")
    ap.add_argument("--timeout-s", type=float, default=T.DEFAULT_TIMEOUT_S, help="deadline per clip's thumbnails")
    ap.add_argument("--page-size", type=int, default=DEFAULT_PAGE_SIZE, help="clips per page")
    return ap


def _check_args(args) -> None:
    if args.thumb_frames < 1 or args.thumb_size < 16 or not 1 <= args.thumb_quality <= 95:
        raise ReportError("--thumb-frames must be >= 1, --thumb-size >= 16 and --thumb-quality 1..95")
    if args.page_size < 1 or args.timeout_s <= 0 or args.workers < 0:
        raise ReportError("--page-size must be >= 1, --timeout-s > 0 and --workers >= 0")
    for item in args.adapter_field:
        if "=" not in item:
            raise ReportError(f"--adapter-field {item!r}: expected ADAPTER=FIELD")


def thumbnail_priority(clip) -> tuple:
    """Which clips get thumbnails first when --max-thumbs leaves some out: the ones a reviewer opens
    first (failed captions, then the lowest METEOR), then path order."""
    scores = [r["meteor"] for r in clip.records if "meteor" in r]
    return (clip.status == "ok", min(scores) if scores else float("inf"))


def changed_since_captioning(records: list[dict], path: Path | str, input_dir: Path | str) -> str | None:
    """Check each record against the file at `path`: a record made from another file (its `source`) gets
    `changed` saying what differs, shown beside its caption. Returns why the clip gets no thumbnails:
    none of its records was made from the file there now (the frames would be another file's); None
    where one was (a file holding two settings' records, one made before the file was replaced)."""
    from video_io.identity import compare

    known: dict[str, str | None] = {}
    for record in records:
        source = json.dumps(record.get("source"), sort_keys=True)
        if source not in known:
            known[source] = compare(record.get("source"), path, input_dir)
        if known[source] is not None:
            record["changed"] = f"made from another file than the one there now: {known[source]}"
    if all(why is not None for why in known.values()):
        return f"{CHANGED}: {next(iter(known.values()))}"
    return None


def collect_thumbnails(clips, input_dir: Path | str, args, log=None) -> dict[str, dict]:
    """{clip key (ClipEntry.key): {"t": [...], "ti": [...]} or {"tn": why there are none}} for every clip
    (each segment of a long video its own, from its own frames)."""
    out, candidates = {}, []
    for clip in clips:
        path = clip_path(input_dir, clip.video)
        if not clip.frame_indices:
            reason = next((r.get("error") for r in clip.records if r.get("error")), None)
            out[clip.key] = {"tn": f"not decoded by the job: {reason}" if reason else
                               "no frame_indices in the records"}
        elif not exists(path):
            out[clip.key] = {"tn": f"clip file not found in {input_dir} (give --input-dir)"}
        elif (changed := changed_since_captioning(clip.records, path, input_dir)) is not None:
            out[clip.key] = {"tn": changed}  # another file's frames beside this caption would mislead
        else:
            current = next((r for r in clip.records if "changed" not in r and r.get("frame_indices")), None)
            if current is not None:  # the frames a record of the file there now was given
                clip.frame_indices = [int(i) for i in current["frame_indices"]]
                clip.decoder = current.get("decoder")
            candidates.append(clip)
    if args.max_thumbs >= 0 and len(candidates) > args.max_thumbs:
        candidates.sort(key=thumbnail_priority)  # stable: path order among equals
        for clip in candidates[args.max_thumbs:]:
            out[clip.key] = {"tn": f"thumbnails left out: {args.max_thumbs} clips get them (--max-thumbs), "
                                     "failed and lowest-scored first"}
        candidates = candidates[:args.max_thumbs]
    jobs = [T.ThumbJob(c.key, str(clip_path(input_dir, c.video)), tuple(T.pick_frames(c.frame_indices, args.thumb_frames)),
                       c.decoder or "auto") for c in candidates]
    started = time.perf_counter()
    for k, result in enumerate(T.run_thumbnails(jobs, args.thumb_size, args.thumb_quality, args.workers,
                                                args.timeout_s), 1):
        if result.error:
            out[result.video] = {"tn": f"no thumbnails: {result.error}"}
        else:
            out[result.video] = {"t": result.jpegs_b64, "ti": list(result.indices)}
        if log and (k % 200 == 0 or k == len(jobs)):
            log(f"thumbnails {k}/{len(jobs)} ({time.perf_counter() - started:.1f} s)")
    return out


def build_report(args, log=None) -> dict:
    """Write the page; returns what the CLI prints."""
    started = time.perf_counter()
    check_can_write(args.out, "review page", "--out")  # before scoring and decoding thumbnails
    input_dir, input_from = resolve_input_dir(args.records, args.input_dir)
    refs = args.references
    if refs is None and (beside := local_file(input_dir, REFERENCES_FILE)) is not None:
        refs = str(beside)
    elif refs is not None and refs.lower() == "none":
        refs = None
    adapter_fields = dict(item.split("=", 1) for item in args.adapter_field)
    data = load_report_data(args.records, Path(refs) if refs else None, args.field, adapter_fields)
    if not input_there(input_dir):
        data.notes.append(f"input folder {input_dir} ({input_from}) does not exist: no thumbnails; "
                          "give --input-dir")
    thumbs = collect_thumbnails(data.clips, input_dir, args, log)
    changed = sum(t.get("tn", "").startswith(CHANGED) for t in thumbs.values())
    if changed:
        data.notes.append(f"{changed} clip(s) {CHANGED}: the file under that name in {input_dir} is not the one "
                          "captioned, so no thumbnails are shown for them (each card says what differs)")
    stale = sum("changed" in r for c in data.clips if "tn" not in thumbs.get(c.key, {}) or
                not thumbs[c.key]["tn"].startswith(CHANGED) for r in c.records)
    if stale:  # records of other settings beside current ones (add_beside=true, then a file replaced)
        data.notes.append(f"{stale} record(s) of clips shown were made from another file than the one now under "
                          "their name (each says what differs beside its caption): caption them again with "
                          "recaption_changed=true")
    meta = {"title": args.title, "input_dir": str(input_dir), "input_dir_from": input_from,
            "references": str(refs) if refs else None,
            "thumbnail_clips": sum("t" in t for t in thumbs.values())}
    html = render_page(data, thumbs, meta, args.page_size)
    with writing(args.out, "review page", setting="--out"):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_whole(args.out, html.encode("utf-8"))  # a reader never sees half a page
    return {"out": str(args.out), "clips": len(data.clips), "records": data.n_records,
            "clips_with_thumbnails": meta["thumbnail_clips"], "bytes": args.out.stat().st_size,
            "corpus_meteor": {_variant(c): c["meteor"] for c in data.corpus},
            "corpus": data.corpus,
            "seconds": round(time.perf_counter() - started, 2)}


def _variant(corpus: dict) -> str:
    """A corpus score's name: its adapter ('none': the base model), and its settings where a file holds several."""
    name = corpus["adapter"] or "none"
    return f"{name} settings={corpus['settings']}" if corpus.get("settings") else name


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_args(args)
        result = build_report(args, log=lambda m: print(f"{PROG}: {m}", file=sys.stderr))
    except ReportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except WriteFailed as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    print(f"{PROG}: wrote {result['out']}: {result['clips']} clips, {result['records']} records, "
          f"{result['clips_with_thumbnails']} with thumbnails, {result['bytes'] / 1e6:.2f} MB, "
          f"{result['seconds']:.1f} s")
    for c in result["corpus"]:
        score = "-" if c["meteor"] is None else f"{c['meteor']:.4f}"
        print(f"{PROG}: corpus METEOR adapter={_variant(c)}: {score} over {c['n']} captioned of {c['references']} "
              f"({c['missing']} not captioned, {c['errors']} failed; field {c['field']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
