"""What the review page shows: the job's records grouped per clip, where the clips are, METEOR.

METEOR comes from eval/ (the same matching, tokenization and scorer as `caption-meteor`, and the same
decision of what is scored: eval/scope.py), so the page's corpus score for a variant equals what
`caption-meteor --adapter A` prints and what the job's summary says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from eval.inputs import read_text
from vidcap_ko.record import NotRecords, Record, parse_records, record_key, segment_index, settings_labels
from video_io.store import is_url

SUMMARY_SUFFIX = ".summary.json"  # the job saves its summary as <output>.summary.json (caption/settings/config.py)
SCORED_TASK = "caption"  # references describe the caption task (as caption/summary/scoring.py scores it)
# Record fields the page shows for each caption; the rest of a record stays in the JSONL file.
# model and engine are the same for a whole job's file: the header lists them once.
# settings_label: in a file holding several settings, what this record's have that the others do not;
# changed: where the file under the video's name is not the one this record was made from, what differs
SHOWN_FIELDS = ("task", "adapter", "status", "caption", "error", "finish_reason", "output_tokens",
                "generate_s", "ablation", "flags", "settings_id", "settings_label", "changed")


class ReportError(Exception):
    """Bad input; the message is a complete one-line explanation naming the file."""


@dataclass
class ClipEntry:
    """A clip's records, or one segment's of a long video (shown after the video's earlier segments)."""

    video: str
    records: list[dict] = field(default_factory=list)  # one per (task, adapter), in file order
    frame_indices: list[int] | None = None
    decoder: str | None = None
    notes: list[str] = field(default_factory=list)
    segment: tuple[int, float, float] | None = None  # (index, start_s, end_s) of a long video's segment

    @property
    def key(self) -> str:
        """The entry's own name (its thumbnails' key): the video, with the segment's index for a segment."""
        return self.video if self.segment is None else f"{self.video} [segment {self.segment[0]}]"

    @property
    def title(self) -> str:
        """What the page calls the entry: the video, with the segment's times for a segment, in tenths of a
        second as the page shows every time (records keep them to the microsecond: `[0-2.94167 s]` read as
        noise). Two segments may share a title, never a key."""
        if self.segment is None:
            return self.video
        _, start, end = self.segment
        return f"{self.video} [{start:.1f}-{end:.1f} s]"

    @property
    def status(self) -> str:
        return "ok" if all(r.get("status") == "ok" for r in self.records) else "error"


@dataclass
class ReportData:
    records_path: Path
    clips: list[ClipEntry]
    notes: list[str] = field(default_factory=list)  # about the input as a whole (shown in the header)
    corpus: list[dict] = field(default_factory=list)  # per scored variant: adapter, field, meteor, n
    n_records: int = 0
    # what the job warned about (its summary's plan and run warnings, the records' own): a banner on top
    warnings: list[str] = field(default_factory=list)


def read_records(path: Path) -> tuple[list[Record], list[str]]:
    """The job's records, and notes about lines left out (a half-written last line of a running job)."""
    text = read_text(path, ReportError, expected="the caption job's JSONL records")
    try:
        read = parse_records(text.split("\n"))
    except NotRecords as exc:
        raise ReportError(f"{path}:{exc.line}: {exc.why}") from None
    records: list[Record] = []
    notes, seen = [f"{path}:{note}" for note in read.notes], {}
    for no, record in read.records:
        # records made with other settings (add_beside=true) are other captions, not repeats
        key = (*record_key(record), record.get("settings_id"))
        record["_line"] = no
        if key in seen:  # caption/output/checks.py never writes this; a hand-merged file might
            notes.append(f"{path}:{no}: a second record for {key[0]} task={key[1]} adapter={key[2]} "
                         f"replaces line {records[seen[key]]['_line']}")
            records[seen[key]] = record
            continue
        seen[key] = len(records)
        records.append(record)
    if not records:
        raise ReportError(f"{path}: no caption records")
    return records, notes


def resolve_input_dir(records_path: Path, input_dir: Path | str | None) -> tuple[Path | str, str]:
    """--input-dir, else the job summary's input_dir, else the records file's folder (and why). An
    object-store URL stays a str (video_io/store.py)."""
    if input_dir is not None:
        return (str(input_dir) if is_url(str(input_dir)) else Path(input_dir)), "--input-dir"
    summary_path = Path(str(records_path) + SUMMARY_SUFFIX)
    if summary_path.is_file():
        try:
            saved = json.loads(summary_path.read_text(encoding="utf-8")).get("input_dir")
        except (OSError, ValueError, AttributeError):
            saved = None
        if saved:
            return (saved if is_url(saved) else Path(saved)), f"input_dir in {summary_path.name}"
    return Path(records_path).resolve().parent, "the records file's folder"


def group_clips(records: list[dict]) -> list[ClipEntry]:
    """One entry per video, sorted by path, and per segment of a long video, in time order after the
    video's whole-clip entry if it has one; frames come from the first record that has them."""
    clips: dict[tuple, ClipEntry] = {}
    for record in records:
        index = segment_index(record)
        where = None if index is None else (index, float(record.get("start_s") or 0), float(record.get("end_s") or 0))
        clip = clips.setdefault((record["video"], -1 if index is None else index), ClipEntry(record["video"], segment=where))
        clip.records.append(record)
        if clip.frame_indices is None and record.get("frame_indices"):
            clip.frame_indices = [int(i) for i in record["frame_indices"]]
            clip.decoder = record.get("decoder")
        for note in record.get("notes") or []:
            if note not in clip.notes:
                clip.notes.append(note)
    for clip in clips.values():
        clip.records.sort(key=lambda r: (str(r.get("task")), str(r.get("adapter") or "")))
    return [clips[k] for k in sorted(clips)]


def add_meteor(data: ReportData, refs_path: Path, field_name: str | None = None,
               adapter_fields: dict[str, str] | None = None, tokenizer: str = "kiwi") -> None:
    """Per-caption METEOR (record['meteor']) and the corpus score of each adapter (and of each settings,
    where the file holds records made with several), over what eval/scope.py scores: the caption task's
    ok captions, on the base model's list (`field_name`, default references) or the one an adapter
    declares (`adapter_fields[adapter]` names another), with the clips not captioned and failed beside it,
    as the job's summary and caption-meteor score them."""
    from eval.inputs import NONE_LABEL, InputError
    from eval.meteor import Scorer
    from eval.scope import scope_of, score_scope

    adapter_fields = dict(adapter_fields or {})
    records = [r for c in data.clips for r in c.records]
    preds = [_prediction(data.records_path, r) for r in records]
    by_line = {r["_line"]: r for r in records}
    groups = _settings_groups(records)
    scorer = Scorer(tokenizer=tokenizer)
    for (adapter, made), lines in groups.items():
        label = NONE_LABEL if adapter is None else str(adapter)
        mine = [p for p in preds if p.line in lines]
        named = adapter_fields.get(label) or (field_name if adapter is None else None)
        several = sum(a == adapter for a, _ in groups) > 1
        try:
            scored = score_scope(scope_of(mine, data.records_path, refs_path, adapter=label, field_name=named),
                                 tokenizer, scorer)
        except InputError as exc:
            data.notes.append(f"METEOR for adapter={label} not computed: {exc}")
            continue
        scope = scored.scope
        for (ref, p), segment in zip(scope.scored, scored.segments):
            by_line[p.line]["meteor"] = round(segment.score, 4)
            by_line[p.line]["best_reference"] = ref.references[segment.best_ref]
        data.corpus.append({"adapter": adapter, "field": scope.field,
                            "meteor": None if scored.meteor is None else round(scored.meteor, 4),
                            **scope.counts(), "settings": made if several else None})


def _prediction(path: Path, record: dict):
    """A record as eval/ reads one (eval/inputs.py Prediction)."""
    from eval.inputs import NONE_LABEL, Prediction, span_of

    declared = record.get("references_field")
    return Prediction(record["video"], record.get("caption"), record["status"], record.get("error"),
                      record["_line"], NONE_LABEL if record.get("adapter") is None else str(record["adapter"]),
                      record.get("task") or NONE_LABEL, settings_id=record.get("settings_id"),
                      span=span_of(path, record["_line"], record),
                      references_field=declared if isinstance(declared, str) and declared else None)


def _settings_groups(records: list[dict]) -> dict[tuple, set[int]]:
    """(adapter, settings) -> the lines of its records: one group per adapter and per way the records were
    made (their `settings`, which every task of a job shares), each scored on its own, so records added
    beside others (add_beside=true) are not taken for duplicates. A group is named by the settings_id of
    its caption records (or of any, where it has none)."""
    made: dict[tuple, list[dict]] = {}
    for r in records:
        key = (r.get("adapter"), json.dumps(r.get("settings"), sort_keys=True, default=str))
        made.setdefault(key, []).append(r)
    groups = {}
    for (adapter, _), rs in sorted(made.items(), key=lambda item: (item[0][0] is not None, str(item[0][0]))):
        named = next((r for r in rs if r.get("task", SCORED_TASK) == SCORED_TASK), rs[0]).get("settings_id")
        groups[(adapter, named)] = {r["_line"] for r in rs}
    return groups


def job_warnings(records_path: Path, records: list[dict]) -> list[str]:
    """The warnings of the job that wrote the records: its summary's, then any its records carry."""
    warnings: list[str] = []
    summary_path = Path(str(records_path) + SUMMARY_SUFFIX)
    if summary_path.is_file():
        try:
            saved = json.loads(summary_path.read_text(encoding="utf-8"))
            warnings += [*(saved.get("plan_warnings") or []), *(saved.get("run_warnings") or [])]
        except (OSError, ValueError, AttributeError):
            pass
    for record in records:
        warnings += record.get("warnings") or []
    return [str(w) for w in dict.fromkeys(warnings)]


def load_report_data(records_path: Path, refs_path: Path | None = None, field_name: str | None = None,
                     adapter_fields: dict[str, str] | None = None) -> ReportData:
    records, notes = read_records(records_path)
    labels = settings_labels(records)  # empty for one settings: nothing to tell apart
    for record in records:
        if record.get("settings_id") in labels:
            record["settings_label"] = labels[record["settings_id"]]
    data = ReportData(Path(records_path), group_clips(records), notes, n_records=len(records),
                      warnings=job_warnings(records_path, records))
    if refs_path is not None:
        add_meteor(data, Path(refs_path), field_name, adapter_fields)
    return data


def shown_record(record: dict) -> dict:
    """What the page needs of one record (a 10,000-clip page stays small)."""
    out = {k: record[k] for k in SHOWN_FIELDS if record.get(k) is not None}
    for k in ("meteor", "best_reference"):
        if k in record:
            out[k] = record[k]
    return out
