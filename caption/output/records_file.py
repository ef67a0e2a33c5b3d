"""The records file while a job writes it: what is done, appending each record, and tidying at the end.

A record stands for its key (video, task, adapter, segment) until a later record of the same key and
settings replaces it. The job appends and never edits a line in place, so every moment of the file is a
valid answer: when a retried clip's new record is written, the file holds the old error and the new
record for a while, and the later line is the one that counts (for a resumed job, `caption-export` and
`caption-report` alike). When the job ends, the file is tidied in one atomic rename: for each key only
the record that counts is kept, and the records of a file that changed since it was captioned
(recaption_changed=true) move to `<stem>.superseded.jsonl` beside it, where they stay readable.

What a job marks to do again is done only when its new record is written: a retry that stops early (or
that `limit` cut short) leaves the error records it did not reach exactly where they were.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from caption.output.checks import Expected, check_output, dumps_record, expected_key, kept_name
from vidcap_ko.record import Record, RecordKey, parse_records, record_key, segment_index
from vidcap_ko.writing import WriteFailed, write_whole, writing

LEGACY_SOURCE = "none recorded"  # RecordStore.sources for a record written before records had `source`


def superseded_path(path: Path) -> Path:
    """Where records of changed files go: `<stem>.superseded.jsonl` beside the records file."""
    return Path(path).with_name(f"{Path(path).stem}.superseded{Path(path).suffix or '.jsonl'}")


@dataclass
class RecordStore:
    path: Path
    ok: set[RecordKey] = field(default_factory=set)  # keys whose record stands and is ok
    errors: set[RecordKey] = field(default_factory=set)  # ... and is an error
    redo: dict[RecordKey, str] = field(default_factory=dict)  # key -> why it runs again (retry, file changed)
    segments: dict[str, int] = field(default_factory=dict)  # video -> its segment count, from its records
    sources: dict[str, list[object]] = field(default_factory=dict)  # video -> the `source` of its records (distinct)
    error_text: dict[str, str] = field(default_factory=dict)  # video -> the first error its records give
    repaired_bytes: int = 0
    kept_as: Path | None = None  # the earlier file, renamed, when overwrite=true started afresh
    tidy_warning: str | None = None  # why the file could not be tidied at the end (it stays valid)
    expected: Expected | None = None  # None: every record counts (tests, tools); else only this job's own
    _fd: int | None = None
    _size: int = 0  # bytes of whole records in the file: where a failed write is cut back to
    _size_at_open: int = 0  # lines before this offset are earlier runs'
    _failed: bool = False
    _replaced_videos: dict[str, str] = field(default_factory=dict)  # video -> why its earlier records go
    _untidy: bool = False  # a key has two records in the file (this run's retries, or a crash during one)
    _stale: Callable[[Record], bool] = lambda record: True  # recaption: another settings' record of another file

    @classmethod
    def open(cls, path: Path, resume: bool, retry_errors: bool = False, overwrite: bool = False,
             expected: Expected | None = None, checked: bool = False) -> "RecordStore":
        """Open for appending. Raises OutputRefused, before anything is changed, for a file that is
        not ours to write (caption/output/checks.py). With `expected`, a record counts as done only when it
        was made with this job's settings (its settings_id); others stay, untouched. retry_errors: this
        job's error records are to do again (each stays until its new record is written). `checked`: the
        caller already made check_output's checks while holding the output's lock."""
        store = cls(Path(path), expected=expected)
        if not checked:
            check_output(store.path, resume=resume, overwrite=overwrite)
        with writing(store.path, "records file"):
            if store.path.exists() and store.path.stat().st_size > 0:
                if overwrite:
                    store.kept_as = kept_name(store.path)
                    os.replace(store.path, store.kept_as)
                else:  # resume: check_output made sure every line is ours
                    store._load_existing()
                    if store._untidy:  # left by a job stopped mid-retry: tidy before appending
                        store.tidy()
            if retry_errors:
                store.redo_records(store.errors, "retry_errors=true")
            store._fd = os.open(store.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            store._size = store._size_at_open = os.fstat(store._fd).st_size
        return store

    def _load_existing(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a record cut off mid-write by a crash: drop it, it will be redone
            self.repaired_bytes = len(data) - end
            with open(self.path, "r+b") as f:
                f.truncate(end)
        # every line is a record: check_output refused the file otherwise, before this job took its lock
        for _, record in parse_records(data[:end].split(b"\n")[:-1], half_written_last=False).records:
            if self.counts(record):
                self._note(record)

    def _note(self, record: Record) -> None:
        key = record_key(record)
        self._untidy |= key in self.ok or key in self.errors or key in self.redo
        self.ok.discard(key)
        self.errors.discard(key)
        self.redo.pop(key, None)
        (self.ok if record["status"] == "ok" else self.errors).add(key)
        count = record.get("segments")
        if segment_index(record) is not None and isinstance(count, int):
            self.segments[record["video"]] = count
        source = record.get("source", LEGACY_SOURCE)
        known = self.sources.setdefault(record["video"], [])
        if source not in known:
            known.append(source)
        if record["status"] != "ok":
            self.error_text.setdefault(record["video"], record.get("error") or "unknown error")

    def counts(self, record: Record) -> bool:
        """Whether a record in the file is one of this job's (made with its settings)."""
        if self.expected is None:
            return True
        key = expected_key(record)
        return key in self.expected and self.expected.owns(key, record)

    def redo_records(self, keys: Iterable[RecordKey], why: str) -> None:
        """Run these keys again: not done until their new records are written, which replace them."""
        for key in list(keys):
            if key in self.ok or key in self.errors:
                self.ok.discard(key)
                self.errors.discard(key)
                self.redo[key] = why

    def recaption(self, changed: dict[str, str], stale: Callable[[Record], bool] = lambda record: True) -> None:
        """recaption_changed=true: the videos in `changed` (video -> what differs) are captioned anew; once
        a video has a new record, all its earlier records move to the superseded file: this job's, and
        those of other settings (a file added to with add_beside=true) that `stale` says were made from
        another file than the one there now (a record made from that file stays: it is still true)."""
        self._stale = stale
        for video, why in changed.items():
            self.redo_records([k for k in (*self.ok, *self.errors) if k[0] == video], f"file changed: {why}")
            self.segments.pop(video, None)  # the new file's segments are found anew
            self.sources.pop(video, None)
            self._replaced_videos[video] = why

    def done(self, key: RecordKey) -> bool:
        """Whether the key has a record that stands (ok, or an error this job does not run again)."""
        return key in self.ok or key in self.errors

    def errors_kept(self) -> list[RecordKey]:
        """Error records this job leaves standing: earlier runs' (not retried) and its own."""
        return sorted(self.errors | {k for k, why in self.redo.items() if why == "retry_errors=true"},
                      key=lambda k: (k[0], k[1], str(k[2]), -1 if k[3] is None else k[3]))

    def write(self, record: Record) -> None:
        """Append one record in one write. Where the disk takes only part of it (full, failing), the
        file is cut back to the last whole record and WriteFailed says why; should the cut fail too,
        the next open drops the partial line (_load_existing)."""
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not open for writing")
        data = dumps_record(record).encode("utf-8")
        written = 0
        try:
            while written < len(data):  # a regular file takes it in one call unless the disk fills
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            self._failed = True
            if written:
                try:
                    os.ftruncate(self._fd, self._size)
                except OSError:
                    pass
            raise WriteFailed(self.path, exc, "records file") from None
        self._size += len(data)
        self._forget_other_kind(record)
        self._note(record)

    def _forget_other_kind(self, record: Record) -> None:
        """A video retried whole that now comes in segments (or the reverse) replaces its earlier records
        of the other kind too: they are no longer this video's to redo."""
        video, task, adapter, index = record_key(record)
        for key in [k for k in self.redo if k[:3] == (video, task, adapter) and (k[3] is None) != (index is None)]:
            del self.redo[key]
            self._untidy = True

    def close(self) -> None:
        """Sync and close, then tidy (module docstring). After a failed write (the job is stopping for
        it) a failing sync is not reported again."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as exc:
            if not self._failed:
                raise WriteFailed(self.path, exc, "records file") from None
        finally:
            os.close(fd)
        if self._untidy or self._replaced_videos:
            try:
                self.tidy()
            except OSError as exc:  # the file is whole and valid as it is; the next run tidies it
                self.tidy_warning = (f"{self.path} was not tidied ({exc.strerror or exc}): it holds records that "
                                     "later lines replace; readers take the later ones, and the next run tidies it")

    def tidy(self) -> None:
        """Rewrite the file (atomically) with one record per key and settings, the one written last;
        earlier runs' records of recaptioned videos first go to the superseded file."""
        raw = self.path.read_bytes()
        lines, offset = [], 0
        for line in raw.split(b"\n")[:-1]:
            lines.append((offset, line + b"\n", json.loads(line.decode("utf-8"))))
            offset += len(line) + 1
        last = {(record_key(r), r.get("settings_id")): n for n, (_, _, r) in enumerate(lines)}
        moved, keep = [], []
        for n, (start, line, record) in enumerate(lines):
            earlier = start < self._size_at_open
            if earlier and record["video"] in self._replaced_videos and self._has_new_record(record["video"]) \
                    and (self.counts(record) or self._stale(record)):
                moved.append(record)
            elif last[(record_key(record), record.get("settings_id"))] == n and not self._dropped(record, earlier):
                keep.append(line)
        if moved:
            self._file_superseded(moved)
        write_whole(self.path, b"".join(keep), ".tmp")
        self._untidy = False

    def _has_new_record(self, video: str) -> bool:
        return any(k[0] == video for k in (*self.ok, *self.errors))

    def _dropped(self, record: Record, earlier: bool) -> bool:
        """An earlier run's record of this job whose key no longer stands nor runs again: a video retried
        whole that came back in segments, or the reverse (_forget_other_kind)."""
        key = record_key(record)
        return earlier and self.counts(record) and not self.done(key) and key not in self.redo

    def _file_superseded(self, records: list[Record]) -> None:
        """Append records of changed files to the superseded file, each saying when and why."""
        side = superseded_path(self.path)
        filed = set()
        if side.exists():
            for line in side.read_text(encoding="utf-8").splitlines():
                old = json.loads(line)
                filed.add((record_key(old), old.get("settings_id"), json.dumps(old.get("source"), sort_keys=True)))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(side, "ab") as f:
            for record in records:
                if (record_key(record), record.get("settings_id"), json.dumps(record.get("source"), sort_keys=True)) in filed:
                    continue  # filed already by a run stopped before it could tidy
                moved = record.copy()
                moved["superseded_at"], moved["superseded_because"] = stamp, self._replaced_videos[record["video"]]
                f.write(dumps_record(moved).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
