"""Records you can trust: each record names the file it was made from, one job writes an output at a time,
and resumes and retries say what the output really holds. Through the real `caption` command (and the
Python API), with real clips."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from tests.caption.in_process import run_caption, run_command
from tests.caption.processes import HELD, hold_a_decoder
from tests.caption.warm_process import WARM_ENV, start_warm
from vidcap_ko.exit_status import EXIT_FAILED_RECORDS, EXIT_OK, EXIT_OUTPUT_BUSY, EXIT_USAGE
from video_io.identity import compare, file_identity, fingerprint

ENV = WARM_ENV  # one environment, so one warm server per test process (tests/caption/warm_process.py)


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _caption(tmp_path, *overrides, run="run"):
    proc = run_caption([*overrides, "progress=false", "references=null", f"hydra.run.dir={tmp_path / run}"],
                       env=ENV, cwd=tmp_path)
    return proc.returncode, proc.stdout, proc.stderr


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("caption: plan warning")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


@pytest.fixture
def days(tmp_path, synth_dir):
    """Two cameras' days: the same file names, other clips."""
    for day, clips in (("day1", (0, 1)), ("day2", (2, 3))):
        (tmp_path / day).mkdir()
        for name, clip in zip(("C0001.MP4", "C0002.MP4"), clips):
            shutil.copy(synth_dir / f"clip_{clip:05d}.mp4", tmp_path / day / name)
    return tmp_path / "day1", tmp_path / "day2"


def test_a_files_identity_follows_its_bytes_not_its_name_or_folder(tmp_path, synth_dir):
    a = tmp_path / "a" / "C0001.MP4"
    a.parent.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", a)
    recorded = file_identity(a, a.parent)
    assert recorded["size"] == a.stat().st_size and recorded["input_dir"] == str(a.parent)
    assert compare(recorded, a, a.parent) is None
    os.utime(a, ns=(0, recorded["mtime_ns"] + 10**9))  # touched: same bytes
    assert compare(recorded, a, a.parent) is None
    moved = tmp_path / "b"
    a.parent.rename(moved)  # the folder moved (a remounted disk): same bytes
    assert compare(recorded, moved / "C0001.MP4", moved) is None
    data = bytearray((moved / "C0001.MP4").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte of the video data, same size and modification time
    (moved / "C0001.MP4").write_bytes(bytes(data))
    os.utime(moved / "C0001.MP4", ns=(0, recorded["mtime_ns"]))
    why = compare(recorded, moved / "C0001.MP4", moved)  # another folder: the bytes are read, and differ
    assert why is not None and why.startswith(f"it was {recorded['size']:,} bytes")
    shutil.copy(synth_dir / "clip_00001.mp4", moved / "C0001.MP4")
    assert "it is now" in compare(recorded, moved / "C0001.MP4", moved)
    os.mkfifo(tmp_path / "pipe.mp4")  # never blocks, never counts as a file
    assert file_identity(tmp_path / "pipe.mp4", tmp_path) is None
    assert fingerprint(a.parent.parent / "b" / "C0001.MP4") != recorded["fingerprint"]


def _run_job(compose_config, engine, *overrides) -> dict:
    """The job in this process, on the tests' shared engine (the command's refusals and exit statuses are
    checked through the command itself: those runs load no engine)."""
    from caption.job import run_job

    return run_job(compose_config([*overrides, "progress=false", "references=null", "video.workers=1"]), engine=engine)


@pytest.mark.slow
def test_another_file_under_a_known_name_is_refused_then_captioned_anew_on_request(tmp_path, days, compose_config,
                                                                                    vllm_engine, capsys):
    day1, day2 = days
    out = tmp_path / "days.jsonl"
    assert _run_job(compose_config, vllm_engine, f"input_dir={day1}", f"output={out}")["exit_status"] == EXIT_OK
    first = _records(out)
    assert {r["source"]["input_dir"] for r in first} == {str(day1)}
    assert all(r["source"] == file_identity(day1 / r["video"], day1) for r in first)

    before = out.read_bytes()
    code, out_text, err = _caption(tmp_path, f"input_dir={day2}", f"output={out}", run="run2")
    line = _one_line(err)
    assert code == EXIT_USAGE and line.startswith("caption: refused: `output=")
    assert "2 clip(s) made from another file under the same name: 'C0001.MP4'" in line
    assert str(day1) in line and str(day2) in line and "recaption_changed=true" in line
    assert out.read_bytes() == before and "summary" not in out_text  # refused before anything ran

    capsys.readouterr()
    again = _run_job(compose_config, vllm_engine, f"input_dir={day2}", f"output={out}", "recaption_changed=true")
    assert again["exit_status"] == EXIT_OK and again["videos_recaptioned_changed"] == 2
    assert "2 video(s) changed since their records were made" in capsys.readouterr().out
    now = _records(out)
    assert sorted(r["video"] for r in now) == ["C0001.MP4", "C0002.MP4"]  # one record per clip, day2's
    assert {r["source"]["input_dir"] for r in now} == {str(day2)}
    superseded = _records(tmp_path / "days.superseded.jsonl")  # day1's records, kept readable for audit
    assert [r["caption"] for r in superseded] == [r["caption"] for r in first]
    assert all(r["superseded_because"].startswith("it was") and r["superseded_at"] for r in superseded)

    # the review page and the subtitles check each file against its record
    page = tmp_path / "page.html"
    report = run_command("caption-report", [out, "--out", page, "--input-dir", day1, "--references", "none",
                                            "--workers", "0"], env=ENV)
    assert report.returncode == 0, report.stderr
    html = page.read_text(encoding="utf-8")
    assert html.count("changed since captioning: it was") == 2 and "2 clip(s) changed since captioning" in html
    export = run_command("caption-export", [out, "--format", "vtt", "--input-dir", day1, "--out", tmp_path / "vtt"],
                         env=ENV)
    assert export.returncode == EXIT_USAGE and "changed since captioning" in export.stderr
    assert not (tmp_path / "vtt").exists()
    export = run_command("caption-export", [out, "--format", "vtt", "--input-dir", day2, "--out", tmp_path / "vtt"],
                         env=ENV)
    assert export.returncode == 0 and len(list((tmp_path / "vtt").glob("*.vtt"))) == 2, export.stderr


@pytest.mark.slow
def test_a_moved_or_touched_folder_has_nothing_left_to_do(tmp_path, days, compose_config, vllm_engine):
    day1, _ = days
    out = tmp_path / "o.jsonl"
    assert _run_job(compose_config, vllm_engine, f"input_dir={day1}", f"output={out}")["exit_status"] == EXIT_OK
    moved = tmp_path / "mounted-elsewhere"
    day1.rename(moved)
    for clip in moved.iterdir():
        os.utime(clip)  # copied without keeping times
    code, out_text, err = _caption(tmp_path, f"input_dir={moved}", f"output={out}", run="run2")
    assert code == EXIT_OK and "(0 to caption, 2 already done)" in out_text, err[-2000:]


def _job(tmp_path, *overrides, run="run"):
    """A job in a process of its own, its imports done (tests/caption/warm_process.py): the second job meets
    its lock and its pid."""
    return start_warm("caption", [*overrides, "progress=false", "references=null", f"hydra.run.dir={tmp_path / run}"],
                      cwd=tmp_path, env=ENV)


def _wait_for_lock(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.01)
    raise AssertionError(f"no lock at {path} (exit {proc.poll()})")


@pytest.mark.slow
def test_a_second_job_on_the_same_output_is_refused_and_a_killed_one_leaves_no_lock(tmp_path, synth_dir,
                                                                                     compose_config, vllm_engine):
    out = tmp_path / "o.jsonl"
    args = (f"input_dir={synth_dir}", f"output={out}")
    first = _job(tmp_path, *args, HELD, run="run1")
    held = hold_a_decoder(first)  # it cannot finish while the second job starts
    holder = _wait_for_lock(tmp_path / "o.jsonl.lock", first)
    assert holder["pid"] == first.pid and holder["command"].startswith("caption input_dir=")
    code, out_text, err = _caption(tmp_path, *args, run="run2")
    line = _one_line(err)
    assert code == EXIT_OUTPUT_BUSY and f"being written by another job (pid {first.pid} on " in line
    assert "summary" not in out_text
    first.send_signal(signal.SIGKILL)  # the lock dies with its process
    first.communicate(timeout=60)
    os.kill(held, signal.SIGKILL)  # its decoder, stopped by the test, would outlive it
    assert (tmp_path / "o.jsonl.lock").exists()  # the file stays: the next job takes it over
    assert _run_job(compose_config, vllm_engine, *args)["exit_status"] == EXIT_OK
    videos = [r["video"] for r in _records(out)]
    assert sorted(videos) == sorted(set(videos)) and len(videos) == 6  # each clip once
    assert not (tmp_path / "o.jsonl.lock").exists()  # a job that ends removes it


def test_the_python_api_is_refused_before_an_engine_loads(tmp_path, synth_dir):
    from caption import Captioner, OutputBusy
    from caption.output.lock import OutputLock

    out = tmp_path / "o.jsonl"
    with OutputLock.acquire(out), Captioner(engine="hf") as captioner:  # another job (here: this process) holds it
        with pytest.raises(OutputBusy, match=f"pid {os.getpid()}"):
            next(captioner.caption(synth_dir, output=out))
        assert captioner.engine is None and not out.exists()


@pytest.fixture
def broken_three(tmp_path, synth_dir):
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", folder)
    for i in (1, 2, 3):
        (folder / f"bad{i}.mp4").write_text(f"not a video {i}")
    return folder


@pytest.mark.slow
def test_resumes_and_retries_say_what_the_output_holds(tmp_path, broken_three, compose_config, vllm_engine):
    out = tmp_path / "o.jsonl"
    args = (f"input_dir={broken_three}", f"output={out}")
    assert _run_job(compose_config, vllm_engine, *args)["exit_status"] == EXIT_FAILED_RECORDS
    code, out_text, _ = _caption(tmp_path, *args, run="run2")  # nothing to run, but errors remain
    assert code == EXIT_FAILED_RECORDS
    assert "3 video(s) already done hold error records: retry_errors=true runs them again" in out_text
    assert "3 error record(s) of 3 video(s) from earlier runs remain" in out_text
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["errors_from_earlier_runs"] == 3 and summary["exit_status"] == EXIT_FAILED_RECORDS
    assert [f["video"] for f in summary["failures_earlier"]] == ["bad1.mp4", "bad2.mp4", "bad3.mp4"]

    code, out_text, _ = _caption(tmp_path, *args, "retry_errors=true", "limit=1", run="run3")
    assert code == EXIT_FAILED_RECORDS and "2 more wait for a later run (limit)" in out_text
    records = _records(out)  # the two it did not reach keep their records: failed, not missing
    assert sorted((r["video"], r["status"]) for r in records) == [
        ("bad1.mp4", "error"), ("bad2.mp4", "error"), ("bad3.mp4", "error"), ("clip_00000.mp4", "ok")]
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["captions_failed"] == 1 and summary["errors_from_earlier_runs"] == 2

    (broken_three / "bad2.mp4").unlink()  # dealt with by hand: removed from the folder
    last = _run_job(compose_config, vllm_engine, *args, "retry_errors=true")
    assert last["exit_status"] == EXIT_FAILED_RECORDS  # bad1 and bad3 fail again; bad2 is not the job's concern
    assert last["captions_failed"] == 2 and last["errors_from_earlier_runs"] == 0


def _reexport(path, by) -> None:
    """A clip re-exported in place, as editors and sync tools do: a copy beside it renamed onto its name."""
    shutil.copy(by, f"{path}.partial")
    os.replace(f"{path}.partial", path)


@pytest.mark.slow
def test_clips_replaced_while_the_job_runs_keep_the_identity_of_the_bytes_captioned(tmp_path, synth_dir,
                                                                                     compose_config, hf_engine):
    """The issue's race: six clips, clips 1-5 re-exported once the first record is out. The decoders had
    read them all by then (one batch of six), so their records must name the old files, and a run with
    recaption_changed=true must caption the new ones: at the end every record is the caption of the file
    there now, as a fresh job over the same files writes it."""
    from caption.job import job_records

    folder, out = tmp_path / "clips", tmp_path / "o.jsonl"
    folder.mkdir()
    for i in range(6):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder / f"C{i:04d}.MP4")
    read = {p.name: file_identity(p, folder) for p in folder.iterdir()}
    args = [f"input_dir={folder}", f"output={out}", "engine=hf", "progress=false", "references=null"]
    size, hf_engine.batch_size = hf_engine.batch_size, 8  # one batch: every clip decoded before a record
    try:
        stream = job_records(compose_config(args), engine=hf_engine)
        next(stream)
        for i in range(1, 6):  # each gets the next clip's pictures (the last the first's)
            _reexport(folder / f"C{i:04d}.MP4", synth_dir / f"clip_{(i + 1) % 6:05d}.mp4")
        with pytest.raises(StopIteration):
            while True:
                next(stream)
        first = {r["video"]: r for r in _records(out)}
        assert len(first) == 6 and all(r["status"] == "ok" for r in first.values())
        assert all(r["source"] == read[video] for video, r in first.items())  # the files read, not those there now

        again = _run_job(compose_config, hf_engine, *args, "recaption_changed=true", "retry_errors=true")
        assert again["exit_status"] == EXIT_OK and again["videos_recaptioned_changed"] == 5
        fresh = _run_job(compose_config, hf_engine, *args[:1], f"output={tmp_path / 'fresh.jsonl'}", *args[2:])
        assert fresh["exit_status"] == EXIT_OK
    finally:
        hf_engine.batch_size = size
    now = {r["video"]: r for r in _records(out)}
    expected = {r["video"]: r for r in _records(tmp_path / "fresh.jsonl")}
    assert sorted(now) == sorted(expected)
    assert any(first[v]["caption"] != expected[v]["caption"] for v in expected)  # else the test proves nothing
    for video, record in now.items():
        assert record["caption"] == expected[video]["caption"]
        assert record["source"] == file_identity(folder / video, folder)


@pytest.mark.slow
def test_an_output_reached_through_a_link_is_one_output(tmp_path, broken_three, compose_config, hf_engine, capsys):
    """A symbolic link to the records file: the same lock as the file's name, tidies and renames act on the
    file and the link stays a link. A hard link (two names of one file) is refused: tidying replaces the
    file under one name only."""
    from caption.job import check_outputs
    from caption.output.checks import OutputRefused
    from caption.output.lock import OutputBusy, OutputLock
    from caption.planning import load_planned_job

    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(real.name)  # relative, dangling until the first record
    args = [f"input_dir={broken_three}", "engine=hf"]
    with OutputLock.acquire(real):  # a job writing real.jsonl
        with pytest.raises(OutputBusy, match="being written by another job"):
            check_outputs(load_planned_job(compose_config([*args, f"output={link}"])))

    assert _run_job(compose_config, hf_engine, *args, f"output={link}")["exit_status"] == EXIT_FAILED_RECORDS
    assert f"output={link} is a symbolic link: the job writes the file it leads to, {real}" in capsys.readouterr().out
    summary = _run_job(compose_config, hf_engine, *args, f"output={link}", "retry_errors=true")  # rewrites the file
    assert summary["exit_status"] == EXIT_FAILED_RECORDS and summary["output"] == str(real)
    assert link.is_symlink() and os.readlink(link) == real.name and real.is_file() and not real.is_symlink()
    assert sorted(r["video"] for r in _records(real)) == ["bad1.mp4", "bad2.mp4", "bad3.mp4", "clip_00000.mp4"]
    beside = {p.name for p in tmp_path.iterdir() if p.name.startswith(("real", "link"))}
    assert {"link.jsonl", "real.jsonl", "real.jsonl.summary.json"} <= beside  # the summary beside the file
    assert not any(name.endswith(".lock") or name.startswith("link.jsonl.") for name in beside)  # no lock left

    assert _run_job(compose_config, hf_engine, *args, f"output={link}", "overwrite=true")["exit_status"] == \
        EXIT_FAILED_RECORDS
    [kept] = tmp_path.glob("real.*-*.jsonl")  # the earlier records, renamed: the file's name, not the link's
    assert len(_records(kept)) == 4 and link.is_symlink() and os.readlink(link) == real.name

    os.link(real, tmp_path / "hard.jsonl")
    before = real.read_bytes()
    for name in ("hard.jsonl", "real.jsonl"):
        with pytest.raises(OutputRefused, match="has 2 names \\(hard links\\)"):
            check_outputs(load_planned_job(compose_config([*args, f"output={tmp_path / name}"])))
    assert real.read_bytes() == before
