"""input_list=: the videos a Parquet, CSV or JSONL file names (caption/settings/manifest.py), local paths or objects in
a store (moto's S3 server on loopback), with ids that key the records and other columns carried into them;
rows that name no video or repeat one are left out in one line each."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from caption.settings.manifest import read_manifest
from caption.settings.option import ConfigError
from tests.support.s3_server import folder_files


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_each_format_names_the_same_videos_keyed_by_id_with_the_other_columns(tmp_path, synth_dir):
    rows = [{"id": f"shot-{i}", "path": str(synth_dir / f"clip_{i:05d}.mp4"), "camera": "A7S", "take": i}
            for i in range(3)]
    made = {"list.jsonl": _jsonl(tmp_path / "list.jsonl", rows)}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "list.parquet")
    made["list.parquet"] = tmp_path / "list.parquet"
    (tmp_path / "list.csv").write_text("id,path,camera,take\n" + "".join(
        f"{r['id']},{r['path']},{r['camera']},{r['take']}\n" for r in rows), encoding="utf-8")
    made["list.csv"] = tmp_path / "list.csv"
    for name, path in made.items():
        manifest = read_manifest(str(path))
        assert manifest.videos == [(r["id"], r["path"]) for r in rows], name
        assert manifest.input_dir == synth_dir and not manifest.refused
        assert manifest.extras["shot-1"] == {"camera": "A7S", "take": 1}, name


def test_rows_without_a_video_or_repeating_one_are_left_out_in_one_line_each(tmp_path, synth_dir):
    folder = tmp_path / "day1"
    shutil.copytree(synth_dir, folder)
    manifest = read_manifest(str(_jsonl(folder / "list.jsonl", [
        {"uri": "clip_00000.mp4"},  # relative to the list's folder
        {"uri": ""},
        {"uri": "clip_00001.mp4"},
        {"uri": str(folder / "clip_00000.mp4")},  # row 1's file again
    ])))
    assert manifest.videos == [("clip_00000.mp4", str(folder / "clip_00000.mp4")),
                               ("clip_00001.mp4", str(folder / "clip_00001.mp4"))]
    assert manifest.refused == ["row 2: no uri: left out",
                                f"row 4: {folder / 'clip_00000.mp4'} is row 1's video too: left out (the first is kept)"]
    ids = read_manifest(str(_jsonl(tmp_path / "ids.jsonl", [{"id": 7, "uri": str(folder / "clip_00000.mp4")},
                                                             {"id": 7, "uri": str(folder / "clip_00001.mp4")}])))
    assert ids.videos == [("7", str(folder / "clip_00000.mp4"))]
    assert ids.refused == ["row 2: id '7' is row 1's too: left out (the first is kept)"]


@pytest.mark.parametrize("rows, words", [
    ([{"file": "a.mp4"}], "has no column of videos: name one uri or path or url (its columns: file)"),
    ([{"uri": ""}], "names no video (1 row(s))"),
    ([{"uri": "s3://footage/a.mp4"}, {"uri": "/data/b.mp4"}], "mixes object URLs and local paths"),
])
def test_a_list_that_cannot_be_used_is_one_line(tmp_path, rows, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_manifest(str(_jsonl(tmp_path / "list.jsonl", rows)))
    with pytest.raises(ConfigError, match="is not a file"):
        read_manifest(str(tmp_path / "none.jsonl"))
    (tmp_path / "list.txt").write_text("a.mp4\n")
    with pytest.raises(ConfigError, match="give a .parquet, .csv or .jsonl file"):
        read_manifest(str(tmp_path / "list.txt"))


@pytest.mark.slow
def test_a_list_in_the_store_captions_its_objects_under_their_ids(s3, synth_dir, tmp_path, compose_config, vllm_engine,
                                                                 monkeypatch):
    from caption.job import run_job

    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3.bucket(folder_files(synth_dir, prefix="clips/"))
    rows = [{"id": f"asset-{i}", "uri": f"s3://{bucket}/clips/clip_{i:05d}.mp4", "shoot": "seoul-2026", "n": i}
            for i in (4, 1, 2)]
    rows.append({"id": "asset-9", "uri": f"s3://{bucket}/clips/clip_00099.mp4", "shoot": "seoul-2026", "n": 9})
    s3.put(bucket, "lists/today.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    out = tmp_path / "captions.jsonl"
    summary = run_job(compose_config([f"input_list=s3://{bucket}/lists/today.jsonl", f"output={out}",
                                      "progress=false", "video.workers=1"]), engine=vllm_engine)
    records = {r["video"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert sorted(records) == ["asset-1", "asset-2", "asset-4", "asset-9"]
    assert records["asset-4"]["manifest"] == {"shoot": "seoul-2026", "n": 4}
    assert records["asset-4"]["source"]["input_dir"] == f"s3://{bucket}/clips"
    assert all(records[k]["status"] == "ok" for k in ("asset-1", "asset-2", "asset-4"))
    missing = records["asset-9"]
    assert missing["status"] == "error" and "object not found" in missing["error"]
    assert summary["exit_status"] == 3 and summary["videos_found"] == 4
    direct = run_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'disk.jsonl'}", "progress=false",
                                     "references=null", "video.workers=1"]), engine=vllm_engine)
    assert direct["exit_status"] == 0
    disk = {r["video"]: r["caption"] for r in map(json.loads, (tmp_path / "disk.jsonl").read_text().splitlines())}
    assert records["asset-4"]["caption"] == disk["clip_00004.mp4"]


def test_a_list_in_the_store_edited_between_two_reads_is_read_anew(s3, monkeypatch):
    """The Python API reads a list per call in one process: a list edited in between is the new one."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3.bucket({"lists/today.jsonl": b'{"uri": "s3://x-footage/a.mp4"}\n'})
    assert [v for _, v in read_manifest(f"s3://{bucket}/lists/today.jsonl").videos] == ["s3://x-footage/a.mp4"]
    s3.put(bucket, "lists/today.jsonl", b'{"uri": "s3://x-footage/b.mp4"}\n')
    assert [v for _, v in read_manifest(f"s3://{bucket}/lists/today.jsonl").videos] == ["s3://x-footage/b.mp4"]
