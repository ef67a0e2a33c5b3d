"""CSV and Parquet of caption records: one row per record, the same flat columns in both.

CSV is UTF-8 (Korean text as is, no byte-order mark), a header row, empty cells for missing values,
and lists and the `settings` object as JSON text. Parquet has the same columns, typed (strings,
int64, float64, a list of float64 for `frame_times`), and loads with
`datasets.load_dataset("parquet", data_files=..., split="train")`.
"""

from __future__ import annotations

import csv
import io
import json

from caption.export.read import DEFAULT_TASK, segment_of

# (column, type: str | int | float | "times" | "json", how to take it from a record)
COLUMNS = (
    ("video", str, lambda r: r["video"]),
    ("task", str, lambda r: r.get("task", DEFAULT_TASK)),
    ("adapter", str, lambda r: r.get("adapter")),
    ("segment_index", int, segment_of),
    ("start_s", float, lambda r: r.get("start_s")),
    ("end_s", float, lambda r: r.get("end_s")),
    ("status", str, lambda r: r["status"]),
    ("caption", str, lambda r: r.get("caption")),
    ("error", str, lambda r: r.get("error")),
    ("engine", str, lambda r: r.get("engine")),
    ("model", str, lambda r: r.get("model")),
    ("settings_id", str, lambda r: r.get("settings_id")),
    # what the record's settings have that the file's other settings do not (add_beside=true files)
    ("settings_label", str, lambda r: r.get("_settings_label")),
    ("frames", int, lambda r: r.get("frames")),
    ("frame_times", "times", lambda r: r.get("frame_times")),
    ("finish_reason", str, lambda r: r.get("finish_reason")),
    ("output_tokens", int, lambda r: r.get("output_tokens")),
    ("generate_s", float, lambda r: r.get("generate_s")),
    ("flags", "json", lambda r: r.get("flags")),
    ("settings", "json", lambda r: r.get("settings")),
    ("source", "json", lambda r: r.get("source")),  # the file it was made from: video_io/identity.py
    # what differs where the file under the video's name now is not that file (empty: the same, or not found)
    ("changed_since_captioning", str, lambda r: r.get("_changed")),
    ("line", int, lambda r: r.get("_line")),  # where the record is in the records file
)
NAMES = tuple(name for name, _, _ in COLUMNS)


def _typed(kind, value):
    """The value as its column's type, or None where the record has none (or another kind of value)."""
    if value is None:
        return None
    if kind is str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if kind == "times":
        return [float(t) for t in value if isinstance(t, (int, float))] if isinstance(value, list) else None
    return json.dumps(value, ensure_ascii=False)


def rows(records: list[dict], labels: dict[str, str] | None = None, changed: dict[int, str] | None = None) -> list[dict]:
    """One row per record, sorted by video, task, adapter, settings and segment. `labels`: each settings_id's
    label (vidcap_ko/record.py settings_labels); `changed`: record line -> what differs in its file."""
    labels, changed = labels or {}, changed or {}

    def order(r):
        return (r["video"], str(r.get("task", DEFAULT_TASK)), str(r.get("adapter") or ""),
                str(r.get("settings_id") or ""), segment_of(r) if segment_of(r) is not None else -1)

    def row(r):
        known = {"_settings_label": labels.get(r.get("settings_id")), "_changed": changed.get(r.get("_line"))}
        return {name: _typed(kind, take({**r, **known})) for name, kind, take in COLUMNS}

    return [row(r) for r in sorted(records, key=order)]


def csv_bytes(table: list[dict]) -> bytes:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(NAMES)
    for row in table:
        writer.writerow(["" if row[n] is None else json.dumps(row[n]) if isinstance(row[n], list) else row[n]
                         for n in NAMES])
    return buffer.getvalue().encode("utf-8")


def parquet_bytes(table: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {str: pa.string(), int: pa.int64(), float: pa.float64(), "times": pa.list_(pa.float64()),
             "json": pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind, _ in COLUMNS])
    arrow = pa.Table.from_pylist(table, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(arrow, sink)
    return sink.getvalue().to_pybytes()


FORMATS = {"csv": csv_bytes, "parquet": parquet_bytes}
