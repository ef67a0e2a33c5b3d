"""The job's output: one JSONL record per (video, task, adapter), appended as results arrive.

Records are keyed by the clip's path, never by position, so arrival order does not matter and a
job that is stopped (even by kill -9) resumes where it was: records already written are kept,
a half-written last line is cut off, and only what has no record yet is run again. A file
never holds two records for one key: retrying errors first drops their old records.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

RecordKey = tuple[str, str, str | None]  # (video, task, adapter)


def record_key(record: dict) -> RecordKey:
    return record["video"], record.get("task", "caption"), record.get("adapter")


@dataclass
class RecordStore:
    path: Path
    ok: set[RecordKey] = field(default_factory=set)
    errors: set[RecordKey] = field(default_factory=set)
    repaired_bytes: int = 0
    _file: object = None

    @classmethod
    def open(cls, path: Path, resume: bool, retry_errors: bool = False) -> "RecordStore":
        """Open for appending; with resume, read what is there (without resume, start afresh)."""
        store = cls(Path(path))
        if resume and store.path.exists():
            store._load_existing()
            if retry_errors and store.errors:
                store._drop_error_records()
        elif store.path.exists():
            store.path.unlink()
        store._file = open(store.path, "a", encoding="utf-8")
        return store

    def _load_existing(self) -> None:
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a record cut off mid-write by a crash: drop it, it will be redone
            self.repaired_bytes = len(data) - end
            with open(self.path, "r+b") as f:
                f.truncate(end)
        for line_no, line in enumerate(data[:end].decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key = record_key(record)
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{self.path}:{line_no}: not a caption record; move the file away "
                                 "or run with resume=false to start a new one") from None
            (self.ok if record.get("status") == "ok" else self.errors).add(key)

    def _drop_error_records(self) -> None:
        """Rewrite the file without error records (atomically), so their retries replace them."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(self.path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
            for line in src:
                if line.strip() and json.loads(line).get("status") == "ok":
                    dst.write(line)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)
        self.errors.clear()

    def done(self, key: RecordKey) -> bool:
        return key in self.ok or key in self.errors

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        (self.ok if record["status"] == "ok" else self.errors).add(record_key(record))

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
