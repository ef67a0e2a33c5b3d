"""Records: keyed by clip, resumable after a crash, never two records for one key."""

from __future__ import annotations

import json

import pytest

from caption.output.checks import OutputRefused, check_summary
from caption.output.records_file import RecordStore


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
    assert store.done(("a.mp4", "caption", None, None)) and store.done(("b.mp4", "caption", None, None))
    assert not store.done(("c.mp4", "caption", None, None))
    store.write(_rec("c.mp4"))
    store.close()
    assert [r["video"] for r in _lines(path)] == ["a.mp4", "b.mp4", "c.mp4"]


def test_retry_errors_replaces_only_the_error_records_it_reran(tmp_path):
    path = tmp_path / "out.jsonl"
    store = RecordStore.open(path, resume=True)
    for record in (_rec("a.mp4"), _rec("b.mp4", "error"), _rec("c.mp4", "error", task="keywords")):
        store.write(record)
    store.close()
    store = RecordStore.open(path, resume=True, retry_errors=True)
    assert store.done(("a.mp4", "caption", None, None)) and not store.done(("b.mp4", "caption", None, None))
    store.write(_rec("b.mp4"))
    # until the job ends the old error and its retry are both in the file: the later line counts
    assert [(r["video"], r["status"]) for r in _lines(path)][-2:] == [("c.mp4", "error"), ("b.mp4", "ok")]
    store.close()
    records = _lines(path)  # c.mp4 was not run again (a limit, a stop): its error record stays
    assert [(r["video"], r["status"]) for r in records] == [("a.mp4", "ok"), ("c.mp4", "error"), ("b.mp4", "ok")]
    assert store.errors_kept() == [("c.mp4", "keywords", None, None)]


def test_a_retry_stopped_before_it_tidied_resumes_with_the_later_record(tmp_path):
    path = tmp_path / "out.jsonl"
    lines = [_rec("a.mp4", "error"), _rec("b.mp4"), _rec("a.mp4")]  # kill -9 after a.mp4's retry was written
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    store = RecordStore.open(path, resume=True)
    assert store.done(("a.mp4", "caption", None, None)) and not store.errors
    store.close()
    assert [(r["video"], r["status"]) for r in _lines(path)] == [("b.mp4", "ok"), ("a.mp4", "ok")]


USER_FILES = {
    "settings.json": b'{"lr": 0.1, "name": "mine"}',  # a user's JSON without a final newline
    "notes.txt": "내 메모\nshopping list\n".encode(),
    "other.jsonl": b'{"id": 1, "status": "ok"}\n{"id": 2}\n',  # JSONL, but not caption records
    "mixed.jsonl": (json.dumps(_rec("a.mp4")) + "\nnot a record\n").encode(),
    "records_then_text.jsonl": (json.dumps(_rec("a.mp4")) + "\n" + "tail of something else").encode(),
    "binary.bin": bytes(range(256)) * 4,
}
OPTIONS = [dict(resume=True), dict(resume=False), dict(resume=True, retry_errors=True),
           dict(resume=False, retry_errors=True)]


@pytest.mark.parametrize("name", sorted(USER_FILES))
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_a_file_that_is_not_ours_is_refused_and_keeps_every_byte(tmp_path, name, options):
    path = tmp_path / name
    path.write_bytes(USER_FILES[name])
    with pytest.raises(OutputRefused, match="never changes a file that is not its own"):
        RecordStore.open(path, **options)
    assert path.read_bytes() == USER_FILES[name]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_without_resume_an_existing_records_file_is_refused(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_rec("old.mp4")) + "\n")
    before = path.read_bytes()
    with pytest.raises(OutputRefused, match="resume=false would start afresh: set resume=true"):
        RecordStore.open(path, resume=False)
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", [json.dumps(_rec("old.mp4")).encode() + b"\n", USER_FILES["settings.json"]])
def test_overwrite_starts_afresh_and_keeps_the_old_file_beside_the_new(tmp_path, content):
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    store = RecordStore.open(path, resume=False, overwrite=True)
    store.write(_rec("new.mp4"))
    store.close()
    assert [r["video"] for r in _lines(path)] == ["new.mp4"]
    assert store.kept_as is not None and store.kept_as.parent == tmp_path
    assert store.kept_as.name.startswith("out.") and store.kept_as.suffix == ".jsonl"
    assert store.kept_as.read_bytes() == content


def test_empty_and_absent_files_are_ours_to_write(tmp_path):
    for path in (tmp_path / "absent.jsonl", tmp_path / "empty.jsonl"):
        if path.name == "empty.jsonl":
            path.write_bytes(b"")
        store = RecordStore.open(path, resume=False)
        store.write(_rec("a.mp4"))
        store.close()
        assert [r["video"] for r in _lines(path)] == ["a.mp4"]


def test_a_cut_off_first_record_is_repaired_but_a_foreign_tail_is_not(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"video": "a.mp4", "task": "cap')  # killed while writing the very first record
    store = RecordStore.open(path, resume=True)
    store.close()
    assert store.repaired_bytes > 0 and path.read_bytes() == b""


def test_file_names_that_are_not_utf8_round_trip_through_resume(tmp_path):
    import os

    name = os.fsdecode(b"clip_\xff\xfe.mp4")  # what os.listdir gives for a Latin-1 name
    path = tmp_path / "out.jsonl"
    store = RecordStore.open(path, resume=True)
    store.write(_rec(name))
    store.write(_rec("서울_야경.mp4"))
    store.close()
    store = RecordStore.open(path, resume=True)
    assert store.done((name, "caption", None, None)) and store.done(("서울_야경.mp4", "caption", None, None))
    store.close()
    assert "서울_야경.mp4" in path.read_text(encoding="utf-8")  # readable names stay readable


def test_a_summary_file_that_is_not_ours_is_refused(tmp_path):
    summary = tmp_path / "out.jsonl.summary.json"
    summary.write_text('{"my": "settings"}')
    with pytest.raises(OutputRefused, match="summary_path="):
        check_summary(summary, overwrite=False)
    check_summary(summary, overwrite=True)  # overwrite=true moves it aside instead (keep_existing)
    summary.write_text(json.dumps({"videos_found": 3, "output": "out.jsonl"}))
    check_summary(summary, overwrite=False)  # a summary this job wrote is its own to replace
