"""caption-export: records written in the job's own format (caption/pipeline/record.py) become WebVTT and
SRT files that real parsers (webvtt-py, srt) read back with the same times and Korean text, a CSV the
csv module reads back, and Parquet that `datasets` loads; bad input and existing outputs are refused in
one line (exit 2), a full or read-only disk is one line (exit 5) that leaves no file behind."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tomllib
from collections import defaultdict
from datetime import timedelta
from types import SimpleNamespace

import pytest
import srt
import webvtt

from caption.export.cli import main as export_main
from caption.export.cues import MIN_CUE_S
from caption.export.tables import NAMES
from caption.pipeline.record import base_record
from caption.settings.config import REPO_ROOT
from vidcap_ko.exit_status import EXIT_USAGE, EXIT_WRITE_FAILED

JOB = SimpleNamespace(model=SimpleNamespace(name="vidcap-ko-tiny"), engine="vllm", caption_warnings=[], foreign_footage=None, adapters=(),
                      settings_ids=defaultdict(lambda: "3f0c9a1b27de"),
                      settings={"model": "vidcap-ko-tiny", "sampling": "greedy", "frames": "8 uniform"})
NIGHT = "seoul/night_01.mp4"
# (segment_index, start_s, end_s, caption) of a long video, as the job writes segment records
SEGMENTS = [(0, 0.0, 10.0, "서울의 밤거리에 비가 내린다."),
            (1, 10.0, 20.5, "자동차 한 대가 젖은 도로 위를 오른쪽으로 지나간다."),
            (2, 20.5, 3725.25, "우산을 쓴 사람들이 횡단보도를 건넌다.")]  # past an hour: HH matters
WAVES_TIMES = [0.0, 1.5, 3.0, 4.5]


def record(video, caption=None, error=None, task="caption", adapter=None, **extra):
    """A record as the job makes it (caption/pipeline/record.py), with a result's fields."""
    return base_record(JOB, video, task, adapter, status="error" if error else "ok", caption=caption,
                       error=error) | extra


def segment(k, start, end, caption, video=NIGHT, **extra):
    return record(video, caption, segment_index=k, start_s=start, end_s=end, frames=4, **extra)


def write_jsonl(path, records, tail=""):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + tail, encoding="utf-8")
    return path


@pytest.fixture
def records_file(tmp_path):
    """Segments out of order (segment 1 written twice: the later line wins), a whole-clip record with
    frame times only, an error record, another adapter's record, and a half-written last line."""
    records = [segment(1, 10.0, 20.5, "지워질 옛 캡션"), segment(*SEGMENTS[2]), segment(*SEGMENTS[0]),
               segment(*SEGMENTS[1]),
               record("beach/waves.mp4", "파도가 모래사장으로 밀려온다.", frames=4, frame_times=WAVES_TIMES),
               record("broken.mp4", error="decode: no MP4 index (moov atom missing)"),
               record(NIGHT, "다른 어댑터의 캡션", adapter="detailed", frame_times=[0.0, 2.0])]
    return write_jsonl(tmp_path / "captions.jsonl", records, tail='{"video": "cut.mp4", "task": "cap')


def export(capsys, *argv):
    code = export_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def vtt_seconds(stamp: str) -> float:
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


EXPECTED = {  # subtitle file -> [(start, end, text)]: the base model's caption task
    "seoul/night_01": [(start, end, text) for _, start, end, text in SEGMENTS],
    "beach/waves": [(0.0, WAVES_TIMES[-1], "파도가 모래사장으로 밀려온다.")],
}


def test_webvtt_reads_back_with_the_same_times_and_text(capsys, records_file, tmp_path):
    code, out, err = export(capsys, records_file, "--format", "vtt")
    assert code == 0, err
    folder = tmp_path / "captions-vtt"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "beach/waves.vtt", "seoul/night_01.vtt"]  # no file for the error-only clip
    for name, cues in EXPECTED.items():
        text = (folder / f"{name}.vtt").read_text(encoding="utf-8")
        assert text.startswith("WEBVTT\n\n")
        parsed = webvtt.read(str(folder / f"{name}.vtt"))
        assert [(vtt_seconds(c.start), vtt_seconds(c.end), c.text) for c in parsed] == cues
    assert "01:02:05.250" in (folder / "seoul/night_01.vtt").read_text(encoding="utf-8")
    assert "1 error record(s) left out (first: broken.mp4: decode: no MP4 index" in out
    assert "1 record(s) replaced by a later line" in out
    assert "half-written last record left out" in err


def test_srt_reads_back_with_the_same_times_and_text(capsys, records_file, tmp_path):
    out_dir = tmp_path / "subs"
    code, _, err = export(capsys, records_file, "--format", "srt", "--out", out_dir)
    assert code == 0, err
    for name, cues in EXPECTED.items():
        parsed = list(srt.parse((out_dir / f"{name}.srt").read_text(encoding="utf-8"), ignore_errors=False))
        assert [s.index for s in parsed] == list(range(1, len(cues) + 1))
        assert [(s.start, s.end, s.content) for s in parsed] == [
            (timedelta(seconds=a), timedelta(seconds=b), t) for a, b, t in cues]


def test_another_adapter_and_a_clip_file_give_the_cue_its_duration(capsys, tmp_path, synth_dir):
    """--adapter picks the adapter's records; a whole-clip cue found as a file in --input-dir ends at the
    duration PyAV reads from the file's header, not at its last sampled frame."""
    import av

    clip = sorted(p.name for p in synth_dir.glob("*.mp4"))[0]
    with av.open(str(synth_dir / clip)) as container:
        stream = container.streams.video[0]
        duration = round(float(stream.duration * stream.time_base), 3)
    path = write_jsonl(tmp_path / "c.jsonl", [record(clip, "기본 모델", frame_times=[0.0, 0.5]),
                                              record(clip, "어댑터 캡션", adapter="detailed", frame_times=[0.0, 0.5])])
    code, _, err = export(capsys, path, "--format", "srt", "--adapter", "detailed", "--input-dir", synth_dir)
    assert code == 0, err
    (sub,) = srt.parse((tmp_path / "c-srt" / clip).with_suffix(".srt").read_text(encoding="utf-8"))
    assert (sub.start, sub.end.total_seconds(), sub.content) == (timedelta(0), duration, "어댑터 캡션")
    assert duration > 0.5 and "the video file: 1" in err


def test_overlapping_and_zero_length_segments_become_one_caption_at_a_time(capsys, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [segment(0, 0.0, 12.0, "첫째"), segment(1, 10.0, 20.0, "둘째"),
                                              segment(2, 20.0, 20.0, "셋째")])
    code, _, err = export(capsys, path, "--format", "srt")
    assert code == 0, err
    parsed = srt.parse((tmp_path / "c-srt" / "seoul" / "night_01.srt").read_text(encoding="utf-8"))
    assert [(s.start.total_seconds(), s.end.total_seconds(), s.content) for s in parsed] == [
        (0.0, 10.0, "첫째"), (10.0, 20.0, "둘째"), (20.0, 20.0 + MIN_CUE_S, "셋째")]


def test_csv_has_one_row_per_record_with_the_korean_text_intact(capsys, records_file, tmp_path):
    code, out, err = export(capsys, records_file, "--format", "csv")
    assert code == 0, err
    with open(tmp_path / "captions.csv", encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == NAMES
        rows = list(reader)
    assert [(r["video"], r["adapter"], r["segment_index"], r["start_s"], r["end_s"], r["status"], r["caption"])
            for r in rows] == [
        ("beach/waves.mp4", "", "", "", "", "ok", "파도가 모래사장으로 밀려온다."),
        ("broken.mp4", "", "", "", "", "error", ""),
        (NIGHT, "", "0", "0.0", "10.0", "ok", SEGMENTS[0][3]),
        (NIGHT, "", "1", "10.0", "20.5", "ok", SEGMENTS[1][3]),
        (NIGHT, "", "2", "20.5", "3725.25", "ok", SEGMENTS[2][3]),
        (NIGHT, "detailed", "", "", "", "ok", "다른 어댑터의 캡션")]
    assert rows[1]["error"] == "decode: no MP4 index (moov atom missing)"
    assert json.loads(rows[0]["frame_times"]) == WAVES_TIMES
    assert json.loads(rows[0]["settings"]) == JOB.settings and rows[0]["settings_id"] == "3f0c9a1b27de"
    assert "6 row(s)" in out and "1 error record(s) included as rows" in out


def test_parquet_loads_with_datasets_as_the_same_typed_rows(capsys, records_file, tmp_path):
    from datasets import load_dataset

    code, _, err = export(capsys, records_file, "--format", "parquet", "--task", "caption")
    assert code == 0, err
    ds = load_dataset("parquet", data_files=str(tmp_path / "captions.parquet"), split="train",
                      cache_dir=str(tmp_path / "hf-cache"))
    assert tuple(ds.column_names) == NAMES and ds.num_rows == 6
    assert (ds.features["segment_index"].dtype, ds.features["start_s"].dtype) == ("int64", "float64")
    rows = ds.to_list()
    assert [(r["video"], r["adapter"], r["segment_index"], r["start_s"], r["end_s"], r["caption"]) for r in rows] == [
        ("beach/waves.mp4", None, None, None, None, "파도가 모래사장으로 밀려온다."),
        ("broken.mp4", None, None, None, None, None),
        *[(NIGHT, None, k, a, b, t) for k, a, b, t in SEGMENTS],
        (NIGHT, "detailed", None, None, None, "다른 어댑터의 캡션")]
    assert rows[0]["frame_times"] == WAVES_TIMES and rows[1]["error"].startswith("decode: ")


def test_records_made_with_several_settings_need_a_choice(capsys, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [record("a.mp4", "첫 설정", settings_id="aaaa", frame_times=[0, 1.0]),
                                              record("a.mp4", "둘째 설정", settings_id="bbbb", frame_times=[0, 1.0])])
    code, _, err = export(capsys, path, "--format", "vtt")
    # the same `settings`, other ids (another prompt or adapter): each choice says so, with its id
    assert code == EXIT_USAGE and "--settings aaaa (the same settings, another prompt or adapter weights) or " \
        "--settings bbbb (the same settings" in err
    code, _, err = export(capsys, path, "--format", "vtt", "--settings", "bbbb")
    assert code == 0, err
    assert [c.text for c in webvtt.read(str(tmp_path / "c-vtt" / "a.vtt"))] == ["둘째 설정"]


@pytest.mark.parametrize("content, why", [(None, "file not found"), ("", "no caption records"),
                                          ("video,caption\na.mp4,바다\n", "not a JSONL file"),
                                          ('{"name": "settings"}\n', "not a caption record")])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, content, why):
    path = tmp_path / "records.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = export(capsys, path, "--format", "srt")
    assert code == EXIT_USAGE and why in err and str(path) in err
    assert len(err.strip().splitlines()) == 1 and not out and not (tmp_path / "records-srt").exists()


def test_an_existing_output_is_refused_unless_overwrite(capsys, records_file, tmp_path):
    users = tmp_path / "captions.csv"
    users.write_text("the user's own table\n", encoding="utf-8")
    code, _, err = export(capsys, records_file, "--format", "csv")
    assert code == EXIT_USAGE and "already exists" in err and "--overwrite" in err
    assert users.read_text(encoding="utf-8") == "the user's own table\n"
    subs = tmp_path / "subs"
    (subs / "beach").mkdir(parents=True)
    (subs / "beach" / "waves.vtt").write_text("WEBVTT\n", encoding="utf-8")
    code, _, err = export(capsys, records_file, "--format", "vtt", "--out", subs)
    assert code == EXIT_USAGE and "waves.vtt" in err and not (subs / "seoul").exists()  # nothing written
    code, _, err = export(capsys, records_file, "--format", "csv", "--overwrite")
    assert code == 0, err
    assert users.read_text(encoding="utf-8").startswith("video,task,adapter,")
    assert not list(tmp_path.glob("*.partial"))


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs under tmp_path (root can mount; CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a test filesystem needs root (CI runs as root)")
    point = tmp_path / "disk"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)], check=True)
    yield point
    subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_full_or_read_only_disk_is_one_line_exit_5_and_leaves_no_file(capsys, records_file, small_disk):
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # fill it to the last byte
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    code, _, err = export(capsys, records_file, "--format", "vtt", "--out", small_disk / "subs")
    assert code == EXIT_WRITE_FAILED and "Traceback" not in err
    assert err.startswith("caption-export: cannot write the WebVTT file ") and "no space left" in err
    assert len(err.strip().splitlines()) == 1
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == ["filler"]  # nothing half-written
    (small_disk / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    code, _, err = export(capsys, records_file, "--format", "parquet", "--out", small_disk / "c.parquet")
    assert code == EXIT_WRITE_FAILED and "read-only" in err and len(err.strip().splitlines()) == 1


def test_the_console_entry(tmp_path, records_file):
    """`caption-export` is declared, and `python -m caption.export` runs the same main."""
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["caption-export"] == "caption.export.cli:main"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "caption.export", str(records_file), "--format", "vtt"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("caption-export: wrote 2 WebVTT file(s), 4 cue(s)")
    assert webvtt.read(str(tmp_path / "captions-vtt" / "beach" / "waves.vtt"))[0].text == "파도가 모래사장으로 밀려온다."
    missing = subprocess.run([sys.executable, "-m", "caption.export", str(tmp_path / "nope.jsonl"), "--format", "csv"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert missing.returncode == EXIT_USAGE and "Traceback" not in missing.stderr and "nope.jsonl" in missing.stderr
