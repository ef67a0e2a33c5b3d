"""Records: keyed by clip, resumable after a crash, never two records for one key."""

from __future__ import annotations

import json

import pytest

from caption.records import RecordStore


def _rec(video, status="ok", task="caption"):
    return {"video": video, "task": task, "adapter": None, "status": status,
            "caption": "캡션" if status == "ok" else None, "error": None if status == "ok" else "boom"}


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_resume_keeps_records_and_repairs_a_cut_off_line(tmp_path):
    path = tmp_path / "out.jsonl"
    store = RecordStore.open(path, resume=True)
    store.write(_rec("a.mp4"))
    store.write(_rec("b.mp4", status="error"))
    store.close()
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"video": "c.mp4", "task": "capt')  # kill -9 in the middle of a write
    store = RecordStore.open(path, resume=True)
    assert store.repaired_bytes > 0
    assert store.done(("a.mp4", "caption", None)) and store.done(("b.mp4", "caption", None))
    assert not store.done(("c.mp4", "caption", None))
    store.write(_rec("c.mp4"))
    store.close()
    assert [r["video"] for r in _lines(path)] == ["a.mp4", "b.mp4", "c.mp4"]


def test_retry_errors_replaces_error_records(tmp_path):
    path = tmp_path / "out.jsonl"
    store = RecordStore.open(path, resume=True)
    for record in (_rec("a.mp4"), _rec("b.mp4", "error"), _rec("c.mp4", "error", task="keywords")):
        store.write(record)
    store.close()
    store = RecordStore.open(path, resume=True, retry_errors=True)
    assert store.done(("a.mp4", "caption", None)) and not store.done(("b.mp4", "caption", None))
    store.write(_rec("b.mp4"))
    store.close()
    records = _lines(path)
    assert [(r["video"], r["status"]) for r in records] == [("a.mp4", "ok"), ("b.mp4", "ok")]


def test_without_resume_the_file_starts_afresh(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_rec("old.mp4")) + "\n")
    store = RecordStore.open(path, resume=False)
    store.close()
    assert path.read_text() == ""


def test_a_foreign_file_is_not_silently_appended_to(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text("this is my shopping list\n")
    with pytest.raises(ValueError, match="out.jsonl:1: not a caption record"):
        RecordStore.open(path, resume=True)
