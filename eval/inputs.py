"""Reading caption predictions and reference files (JSONL) for ``caption-meteor``.

Every problem with the input raises :class:`InputError` whose message names
the file and line; the CLI prints it as one line and exits with status 2.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, cast

from vidcap_ko.record import STATUSES, NotRecords, Record, parse_records

__all__ = ["InputError", "Prediction", "Reference", "read_predictions", "read_references", "match"]

NONE_LABEL = "none"  # --adapter/--task value selecting records without that field


class InputError(Exception):
    """Bad input; the message is a complete one-line explanation."""


Span = tuple[float, float]  # (start_s, end_s): seconds of the source video


@dataclass
class Reference:
    video: str
    references: list[str]
    line: int
    span: Span | None = None  # references of one scene of a long video; None: of the whole clip

    @property
    def key(self) -> str:
        """What the scored item is called: the video, and the scene's times for a scene's references."""
        return self.video if self.span is None else f"{self.video} [{self.span[0]:g}-{self.span[1]:g} s]"


@dataclass
class Prediction:
    video: str
    caption: str | None
    status: str
    error: str | None
    line: int
    adapter: str = NONE_LABEL
    task: str = NONE_LABEL
    extra: dict = field(default_factory=dict)
    settings_id: str | None = None  # how the caption job made it (caption/output/fingerprint.py); None in older files
    span: Span | None = None  # a segment's caption (its start_s, end_s); None: the whole clip's
    references_field: str | None = None  # the references list its adapter declares (eval/scope.py)


def span_of(path, no, rec) -> Span | None:
    """(start_s, end_s) of a line that names them (a scene's references, a segment's record), else None."""
    if rec.get("start_s") is None and rec.get("end_s") is None:
        return None
    start, end = rec.get("start_s"), rec.get("end_s")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (start, end)) or not 0 <= start < end:
        raise InputError(f"{path}:{no}: 'start_s' and 'end_s' must be seconds with 0 <= start_s < end_s, "
                         f"got {start!r} and {end!r}")
    return float(start), float(end)


def _overlap(a: Span, b: Span) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


def read_text(path: Path, error: type[Exception] = InputError, expected: str = "a JSONL file") -> str:
    """The whole file as UTF-8 text; a missing, unreadable or non-UTF-8 file raises `error` with one
    line saying which and where (caption-report reads the job's records with it too)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line's JSON object (a prediction file's records, a references file's entries), with its line
    number; read as the job's records are (vidcap_ko/record.py), each field checked by its reader here.
    A half-written last line is an error here: a score over part of a file would read as the whole's."""
    try:
        read = parse_records(read_text(path).split("\n"), half_written_last=False, checked=False)
    except NotRecords as exc:
        raise InputError(f"{path}:{exc.line}: {exc.why}") from None
    for no, rec in read.records:
        if not isinstance(rec, dict):
            raise InputError(f"{path}:{no}: expected a JSON object, got {type(rec).__name__}")
        yield no, rec


def _video(path, no, rec) -> str:
    if "video" not in rec:
        raise InputError(f"{path}:{no}: missing field 'video'")
    v = rec["video"]
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{path}:{no}: field 'video' must be a non-empty string")
    return v.strip()


def _label(path, no, rec, name) -> str:
    v = rec.get(name)
    if v is None:
        return NONE_LABEL
    if isinstance(v, (str, int, float)):
        return str(v)
    raise InputError(f"{path}:{no}: field '{name}' must be a string or null")


def read_references(path: Path, field_name: str = "references",
                    hint: str = "choose the list with --field") -> list[Reference]:
    """One record per clip: ``{"video": ..., field_name: [str, ...], ...}``; or, for a long video, one per
    scene with its times: ``{"video": ..., "start_s": 0, "end_s": 6.5, field_name: [...]}`` (each
    segment's caption is then scored against the scene it overlaps most: see `match`)."""
    refs: list[Reference] = []
    seen: dict[str, int] = {}  # Reference.key -> its line
    per_scene: dict[str, bool] = {}  # video -> its references have times
    for no, rec in _records(path):
        video = _video(path, no, rec)
        if field_name not in rec:
            raise InputError(f"{path}:{no}: missing field '{field_name}' ({hint})")
        lst = rec[field_name]
        if not isinstance(lst, list):
            raise InputError(f"{path}:{no}: field '{field_name}' must be a list of strings")
        if not lst:
            raise InputError(f"{path}:{no}: empty reference list in '{field_name}' for video '{video}'")
        for k, r in enumerate(lst):
            if not isinstance(r, str) or not r.strip():
                raise InputError(f"{path}:{no}: reference {k} of '{video}' is empty or not a string")
        ref = Reference(video, list(lst), no, span_of(path, no, rec))
        if ref.key in seen:
            raise InputError(f"{path}:{no}: {ref.key!r} already listed on line {seen[ref.key]}")
        if per_scene.setdefault(video, ref.span is not None) != (ref.span is not None):
            raise InputError(f"{path}:{no}: video '{video}' has references for the whole clip and per scene; a "
                             "video's references are either one line, or one line per scene with start_s/end_s")
        seen[ref.key] = no
        refs.append(ref)
    if not refs:
        raise InputError(f"{path}: no reference records")
    return refs


def read_predictions(path: Path) -> list[Prediction]:
    """Caption job output: ``{"video", "caption", "status": ok|error, "error", ...}``. Where two lines are
    one caption (video, task, adapter, settings, segment: a retried clip's old error and its new record,
    while the job runs or after it was stopped before tidying; caption/output/records_file.py), the later counts."""
    preds = _read_predictions(path)
    latest = {(p.video, p.task, p.adapter, p.settings_id, p.span): p for p in preds}
    return [p for p in preds if latest[(p.video, p.task, p.adapter, p.settings_id, p.span)] is p]


def _read_predictions(path: Path) -> list[Prediction]:
    preds = []
    for no, fields in _records(path):
        rec = cast(Record, fields)  # a caption job's record (vidcap_ko/record.py), each field checked here
        video = _video(path, no, rec)
        if "status" not in rec:
            raise InputError(f"{path}:{no}: missing field 'status' (expected 'ok' or 'error')")
        status = rec["status"]
        if status not in STATUSES:
            raise InputError(f"{path}:{no}: field 'status' is {status!r}, expected 'ok' or 'error'")
        caption = rec.get("caption")
        if status == "ok":
            if "caption" not in rec:
                raise InputError(f"{path}:{no}: missing field 'caption' in a record with status 'ok'")
            if not isinstance(caption, str):
                raise InputError(f"{path}:{no}: field 'caption' must be a string when status is 'ok'")
        err = rec.get("error")
        sid, declared = rec.get("settings_id"), rec.get("references_field")
        preds.append(Prediction(
            video, caption if isinstance(caption, str) else None, status,
            None if err is None else str(err), no,
            _label(path, no, rec, "adapter"), _label(path, no, rec, "task"),
            settings_id=sid if isinstance(sid, str) else None, span=span_of(path, no, rec),
            references_field=declared if isinstance(declared, str) and declared else None,
        ))
    return preds


def _base(video: str) -> str:
    return posixpath.basename(video.replace("\\", "/"))


@dataclass
class Matched:
    by_video: dict[str, Prediction]  # reference key (Reference.key: the video, or a scene of it) -> its prediction
    extra: list[Prediction]  # predictions for videos not in REFS
    variants: list[tuple[str, str]]  # (adapter, task) pairs present after selection


def match(
    preds: list[Prediction],
    refs: list[Reference],
    pred_path: Path,
    adapter: str | None = None,
    task: str | None = None,
    settings_id: str | tuple[str, ...] | None = None,
) -> Matched:
    """Pair predictions with reference videos by the ``video`` key.

    A prediction's ``video`` (a path relative to the captioned folder) matches
    a reference ``video`` equal to it, or else the one reference with the same
    file name.  ``adapter``/``task`` keep only records with that label
    (``"none"`` selects records without the field); ``settings_id`` keeps only
    records made with those settings (a file the job added records to with
    ``add_beside=true`` holds several; several ids: any of them).  More than one
    record for a reference video after that selection is an error that says how
    to pick.

    A long video's records (one per segment, with start_s/end_s) match its
    per-scene references: each segment the scene it overlaps most; where several
    segments fall in one scene (a long shot cut in pieces), the one overlapping it
    most is scored and the others count as extra.  A segment of a video whose
    references are for the whole clip, or the reverse, is extra.
    """
    all_variants = sorted({(p.adapter, p.task) for p in preds})
    if adapter is not None:
        preds = [p for p in preds if p.adapter == adapter]
    if task is not None:
        preds = [p for p in preds if p.task == task]
    if settings_id is not None:
        ids = (settings_id,) if isinstance(settings_id, str) else tuple(settings_id)
        preds = [p for p in preds if p.settings_id in ids]
    if not preds and all_variants and (adapter is not None or task is not None):
        have = ", ".join(f"adapter={a} task={q}" for a, q in all_variants)
        raise InputError(f"{pred_path}: no record matches the selection; records have: {have}")

    chosen, pieces, extra = _pair(preds, refs)
    for video, ps in chosen.items():
        if len(ps) > 1:
            raise InputError(_ambiguity(pred_path, video, ps))
    for key, found in pieces.items():  # scenes: the segment covering most of the scene
        found.sort(key=lambda item: -item[0])
        best = [p for o, p in found if o == found[0][0]]
        if len({(p.adapter, p.task, p.settings_id) for p in best}) > 1 or len(best) > 1 and best[0].span == best[1].span:
            raise InputError(_ambiguity(pred_path, key, best))
        chosen[key] = [best[0]]
        extra += [p for _, p in found if p is not best[0]]

    if preds and not chosen:
        raise InputError(_no_match(pred_path, preds, refs))
    variants = sorted({(p.adapter, p.task) for ps in chosen.values() for p in ps})
    return Matched({v: ps[0] for v, ps in chosen.items()}, extra, variants)


def _pair(preds: list[Prediction], refs: list[Reference]):
    """Each prediction with its reference: {ref key: [predictions]} for whole clips, {ref key: [(overlap,
    prediction)]} for scenes, and the predictions no reference takes. A prediction's video matches a
    reference video equal to it, or else the one reference video with the same file name."""
    exact: dict[str, list[Reference]] = {}
    by_name: dict[str, dict[str, list[Reference]]] = {}
    for r in refs:
        exact.setdefault(r.video, []).append(r)
        by_name.setdefault(_base(r.video), {}).setdefault(r.video, []).append(r)
    chosen: dict[str, list[Prediction]] = {}
    pieces: dict[str, list[tuple[float, Prediction]]] = {}  # a scene's segments, with their overlap
    extra = []
    for p in preds:
        scenes = exact.get(p.video)
        if scenes is None:
            videos = by_name.get(_base(p.video), {})
            scenes = next(iter(videos.values())) if len(videos) == 1 else None
        ref, overlap = _scene_of(p, scenes or [])
        if ref is None:
            extra.append(p)
        elif ref.span is None:
            chosen.setdefault(ref.key, []).append(p)
        else:
            pieces.setdefault(ref.key, []).append((overlap, p))
    return chosen, pieces, extra


def _scene_of(p: Prediction, refs: list[Reference]) -> tuple[Reference | None, float]:
    """The reference a prediction is scored against: the whole clip's (both without times), or the scene
    a segment overlaps most (both with times); else None."""
    if p.span is None:
        return next((r for r in refs if r.span is None), None), 0.0
    scored = [(_overlap(p.span, r.span), r) for r in refs if r.span is not None]
    scored = [(o, r) for o, r in scored if o > 0]
    if not scored:
        return None, 0.0
    overlap, ref = max(scored, key=lambda item: item[0])
    return ref, overlap


def _no_match(pred_path: Path, preds: list[Prediction], refs: list[Reference]) -> str:
    """Why no record was paired with a reference: segments against whole clips (or the reverse), or
    other videos altogether."""
    videos = {r.video for r in refs} | {_base(r.video) for r in refs}
    named = [p for p in preds if p.video in videos or _base(p.video) in videos]
    if named and all(p.span is not None for p in named) and all(r.span is None for r in refs):
        return (f"{pred_path}: the records are segments of their videos (start_s/end_s: the job's video.segments) "
                f"and the references are for whole clips: score whole-clip captions (video.segments=none), or "
                f"give references per scene (lines with start_s and end_s)")
    if named and all(p.span is None for p in named) and all(r.span is not None for r in refs):
        return (f"{pred_path}: the records caption whole clips and the references are per scene (start_s/end_s): "
                f"caption the videos' segments (video.segments=scenes), or give references for whole clips")
    return (f"{pred_path}: no prediction matches a reference video (e.g. prediction '{preds[0].video}' vs "
            f"reference '{refs[0].video}'); are these the right files?")


def _ambiguity(pred_path: Path, video: str, ps: list[Prediction]) -> str:
    """Why several records for one reference video cannot be scored, and how to pick one."""
    lines = ", ".join(str(p.line) for p in ps)
    labels = sorted({(p.adapter, p.task) for p in ps})
    if len(labels) > 1:
        adapters = sorted({a for a, _ in labels})
        tasks = sorted({q for _, q in labels})
        if len(tasks) == 1:
            opts = " or ".join(f"--adapter {a}" for a in adapters)
        elif len(adapters) == 1:
            opts = " or ".join(f"--task {q}" for q in tasks)
        else:
            opts = " or ".join(f"'--adapter {a} --task {q}'" for a, q in labels)
        return (f"{pred_path}:{ps[1].line}: {len(ps)} records for video '{video}' (lines {lines}) from "
                f"different adapters/tasks; select one with {opts}")
    made = sorted({p.settings_id for p in ps if p.settings_id})
    if len(made) > 1:
        return (f"{pred_path}:{ps[1].line}: {len(ps)} records for video '{video}' (lines {lines}) made with "
                f"different settings; select one with {' or '.join(f'--settings {m}' for m in made)}")
    return (f"{pred_path}:{ps[1].line}: {len(ps)} records for video '{video}' (lines {lines}) with the "
            f"same adapter/task; remove the duplicates")
