"""`input_list=`: the videos named in a table instead of a folder to crawl, as teams keep their libraries:
a Parquet, CSV or JSONL file (local, or in object storage: video_io/store.py) with a column of URIs or
paths (`uri`, else `path`, else `url`), an optional `id` column that becomes each record's `video` (the
key resume and the review page go by), and other columns copied into each record's `manifest`, for
joining the captions back to the team's tables.

A row is refused, in one line each and never silently, where it names no video, repeats an id or a
video an earlier row holds (the first is kept), or mixes object URLs with local paths in one list. A row
whose video is missing is not refused here: its decoder says so in an error record, as for a file that
went away after a folder was listed (checking 30,000 objects first would cost 30,000 requests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from caption.settings.option import ConfigError
from video_io.store import StoreError, fetched_copy, is_url

URI_COLUMNS = ("uri", "path", "url")  # the first one the table has names the videos
ID_COLUMN = "id"
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "json", ".ndjson": "json",
           ".json": "json"}


@dataclass
class Manifest:
    """The videos a manifest names: (key, path or URL) pairs in its order, the folder or prefix they share
    (records' `source` names it, as a crawled folder's), each key's other columns, and a line per row left out."""

    videos: list[tuple[str, str]]
    input_dir: Path | str
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def read_manifest(where: str) -> Manifest:
    """The manifest at `where` (a local file or an object URL); ConfigError in one line where it cannot be
    read or names no video at all."""
    local = _local(where)
    table = _table(local, where)
    names = table.column_names
    uri_column = next((c for c in URI_COLUMNS if c in names), None)
    if uri_column is None:
        raise ConfigError(f"`input_list={where}` has no column of videos: name one {' or '.join(URI_COLUMNS)} "
                          f"(its columns: {', '.join(names) or 'none'})")
    rows = table.to_pylist()
    return _videos(where, rows, uri_column, ID_COLUMN if ID_COLUMN in names else None, Path(local).parent)


def _local(where: str) -> Path:
    if is_url(where):
        try:
            copy = fetched_copy(where)
        except StoreError as exc:
            raise ConfigError(f"`input_list`: {exc}") from None
        if copy is None:
            raise ConfigError(f"`input_list={where}`: the store holds no such object")
        return copy
    path = Path(where).expanduser()
    if not path.is_file():
        raise ConfigError(f"`input_list={where}` is not a file; point it at a Parquet, CSV or JSONL list of videos")
    return path


def _table(local: Path, where: str):
    kind = FORMATS.get(local.suffix.lower())
    if kind is None:
        raise ConfigError(f"`input_list={where}`: give a .parquet, .csv or .jsonl file (its name says which)")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(local)
        if kind == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(local)
        import pyarrow.json as pjson

        return pjson.read_json(local)
    except Exception as exc:  # pyarrow's ArrowInvalid and friends: the file's own fault, in its words
        raise ConfigError(f"`input_list={where}` cannot be read as {kind}: {' '.join(str(exc).split())[:300]}") from None


def _videos(where: str, rows: list[dict], uri_column: str, id_column: str | None, beside: Path) -> Manifest:
    refused: list[str] = []
    chosen: list[tuple[str | None, str, dict]] = []
    seen_ids: dict[str, int] = {}
    seen_videos: dict[str, int] = {}
    for number, row in enumerate(rows, 1):
        value = row.get(uri_column)
        video = str(value).strip() if value is not None else ""
        if not video:
            refused.append(f"row {number}: no {uri_column}: left out")
            continue
        if not is_url(video):  # a relative path is relative to the manifest, wherever the job runs from
            video = str((beside / Path(video).expanduser()).resolve())
        ident = None if id_column is None or row.get(id_column) is None else str(row[id_column])
        if ident is not None and ident in seen_ids:
            refused.append(f"row {number}: id {ident!r} is row {seen_ids[ident]}'s too: left out (the first is kept)")
            continue
        if video in seen_videos:
            refused.append(f"row {number}: {video} is row {seen_videos[video]}'s video too: left out (the first "
                           "is kept)")
            continue
        if ident is not None:
            seen_ids[ident] = number
        seen_videos[video] = number
        extras = {k: v for k, v in row.items() if k not in (uri_column, id_column)}
        chosen.append((ident, video, extras))
    if not chosen:
        raise ConfigError(f"`input_list={where}` names no video ({len(rows)} row(s))")
    stored = {is_url(video) for _, video, _ in chosen}
    if len(stored) > 1:
        raise ConfigError(f"`input_list={where}` mixes object URLs and local paths: list each kind in its own file")
    shared = _shared(video for _, video, _ in chosen)
    if is_url(shared) and shared.count("/") < 2 or str(shared).endswith(":/"):
        raise ConfigError(f"`input_list={where}` names objects in more than one bucket or store: list each in its "
                          "own file")
    videos, extras = [], {}
    for ident, video, extra in chosen:
        key = ident if ident is not None else video[len(str(shared)):].lstrip("/")
        videos.append((key, video))
        if extra:
            extras[key] = extra
    return Manifest(videos, shared, extras, refused)


def _shared(videos) -> Path | str:
    """The folder, or the store prefix, every video is under (a record's `source` names it)."""
    videos = list(videos)
    if is_url(videos[0]):
        parts = [v.split("/") for v in videos]
        common = os.path.commonprefix(parts)
        common = common[: min(len(common), min(len(p) for p in parts) - 1)]
        return "/".join(common)
    return Path(os.path.commonpath([str(PurePosixPath(v).parent) for v in videos]))
