"""A sick machine loses nothing and says so: a disk that fills up mid-run, a read-only output and an
unwritable run folder each end the real `caption` command with one line naming the file, exit status 5
and no traceback; every record written stays whole, and once the fault is cleared the same command
completes every clip exactly once.

The filesystems are real: small tmpfs mounts, filled up or remounted read-only (root can mount; CI runs
as root)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from caption.output.records_file import RecordStore
from caption.summary.tally import save_summary
from tests.caption.in_process import run_caption
from vidcap_ko.exit_status import EXIT_WRITE_FAILED
from vidcap_ko.writing import WriteFailed, check_writable

CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
PAGE = 4096  # tmpfs gives out space a page at a time


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount_tmpfs(name, kib) -> a fresh tmpfs of that size under tmp_path (unmounted afterwards)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a test filesystem needs root (CI runs as root)")
    mounted = []

    def _mount(name: str, kib: int) -> Path:
        point = tmp_path / name
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield _mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def remount(point: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(point)], check=True)


def fill(disk: Path, leave_pages: int) -> Path:
    """Fill `disk` so that `leave_pages` pages stay free; returns the filler file."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * (free - leave_pages * PAGE))
    assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize == leave_pages * PAGE
    return filler


def caption(cwd: Path, *overrides: str, run_dir: Path | None = None) -> subprocess.CompletedProcess:
    run = run_dir or cwd / "run"
    return run_caption([*overrides, "progress=false", "engine=hf", "references=null", f"hydra.run.dir={run}"],
                       env=ENV, cwd=cwd)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]  # each line whole


def assert_one_line_fault(done: subprocess.CompletedProcess, path: Path, cause: str) -> str:
    """Exit status 5, no traceback, and the last line on stderr names the file and the cause."""
    assert done.returncode == EXIT_WRITE_FAILED, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("caption: cannot write the ") and str(path) in last and cause in last, last
    assert "then run the same command again" in last
    return last


@pytest.fixture(scope="module")
def sixteen_clips(tmp_path_factory):
    from video_io.synth.dataset import SynthSpec, generate_dataset

    folder = tmp_path_factory.mktemp("clips16")
    generate_dataset(folder, n=16, seed=31, spec=SynthSpec())
    return folder


def test_a_record_the_disk_cuts_short_is_cut_back_to_the_last_whole_one(mount_tmpfs):
    disk = mount_tmpfs("disk", 64)
    fill(disk, leave_pages=1)
    store = RecordStore.open(disk / "out.jsonl", resume=True)
    record = {"video": "a.mp4", "task": "caption", "adapter": None, "status": "ok", "caption": "가" * 300}
    written = 0
    with pytest.raises(WriteFailed) as failed:
        for i in range(100):
            store.write({**record, "video": f"{i}.mp4"})
            written += 1
    store.close()  # after the failure: no second error
    assert failed.value.cause.errno == errno.ENOSPC and failed.value.path == disk / "out.jsonl"
    assert 0 < written < 100 and len(records(disk / "out.jsonl")) == written  # nothing partial left
    assert (disk / "out.jsonl").read_bytes().endswith(b"}\n")


def test_a_summary_is_written_whole_or_not_at_all(mount_tmpfs):
    disk = mount_tmpfs("disk", 64)
    fill(disk, leave_pages=0)
    with pytest.raises(WriteFailed, match="cannot write the summary file .*no space left on its disk"):
        save_summary({"videos_found": 1, "output": "x", "pad": "x" * 10_000}, disk / "s.json")
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no half summary, no temporary file


def test_a_read_only_folder_is_found_before_anything_loads(mount_tmpfs):
    disk = mount_tmpfs("disk", 64)
    remount(disk, "ro")
    with pytest.raises(WriteFailed) as failed:
        check_writable(disk, "output folder")
    assert failed.value.cause.errno == errno.EROFS
    assert "its filesystem is read-only (EROFS)" in str(failed.value)


def test_threads_checking_one_folder_at_once_all_pass_and_leave_no_probe(tmp_path):
    """Threads of one process (jobs a Python program starts side by side) may check the same folder at the
    same moment; each call's probe is its own file, so none finds another's and reports a fault the disk
    does not have."""
    threads, rounds = 16, 25
    start = threading.Barrier(threads)

    def check_many() -> None:
        start.wait()  # all at once: the collision needs two probes alive together
        for _ in range(rounds):
            check_writable(tmp_path, "output folder")

    with ThreadPoolExecutor(threads) as pool:
        calls = [pool.submit(check_many) for _ in range(threads)]
    failures = [str(call.exception()) for call in calls if call.exception()]
    assert not failures, failures[:3]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_disk_that_fills_up_mid_run_stops_the_job_in_one_line_and_a_rerun_completes(
        tmp_path, mount_tmpfs, sixteen_clips):
    disk = mount_tmpfs("disk", 128)
    filler = fill(disk, leave_pages=2)  # room for ~10 records of ~800 bytes, not 16
    out = disk / "out.jsonl"
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}")
    last = assert_one_line_fault(done, out, "no space left on its disk (ENOSPC)")
    kept = records(out)
    assert 0 < len(kept) < 16 and f"the {len(kept)} record(s) this run wrote are whole" in last
    assert "summary NOT saved" in done.stdout  # the summary shares the full disk
    filler.unlink()  # the user frees space
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}")
    assert done.returncode == 0, done.stderr[-3000:]
    after = records(out)
    assert after[:len(kept)] == kept  # the records written before stay as they were
    assert Counter(r["video"] for r in after) == {f"clip_{i:05d}.mp4": 1 for i in range(16)}
    assert all(r["status"] == "ok" for r in after)


@pytest.mark.slow
def test_a_read_only_output_is_refused_before_loading_and_a_rerun_completes(tmp_path, mount_tmpfs, sixteen_clips):
    disk = mount_tmpfs("disk", 256)
    out = disk / "out.jsonl"
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}", "limit=5")
    assert done.returncode == 0, done.stderr[-3000:]
    before = out.read_bytes()
    remount(disk, "ro")
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}")
    assert_one_line_fault(done, disk, "its filesystem is read-only (EROFS)")
    assert "model " not in done.stdout  # stopped before the plan's start lines, let alone a model
    assert out.read_bytes() == before
    remount(disk, "rw")
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert Counter(r["video"] for r in records(out)) == {f"clip_{i:05d}.mp4": 1 for i in range(16)}


@pytest.mark.slow
def test_an_unwritable_run_folder_is_one_line_and_a_writable_one_completes(tmp_path, mount_tmpfs, sixteen_clips):
    disk = mount_tmpfs("disk", 64)
    remount(disk, "ro")
    out = tmp_path / "out.jsonl"
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}", run_dir=disk / "run")
    last = assert_one_line_fault(done, disk / "run", "its filesystem is read-only (EROFS)")
    assert "hydra.run.dir" in last and not out.exists()
    done = caption(tmp_path, f"input_dir={sixteen_clips}", f"output={out}", run_dir=tmp_path / "run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert Counter(r["video"] for r in records(out)) == {f"clip_{i:05d}.mp4": 1 for i in range(16)}
