"""Hostile files at the file-system level: special files, unreadable files, symlink loops,
names that are not UTF-8, files deleted or replaced while the job runs. Each ends as exactly
one decode result with a plain reason, and nothing blocks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.video_io.clipmakers import write_clip
from video_io import decode as decode_module
from video_io.crawl import crawl_videos
from video_io.decode import DecodeError, DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.workers import DecodePool

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)

SMALL = DecodeSpec(EIGHT_FRAMES, width=56, height=56)


def _refused(path, match, spec=SMALL):
    with pytest.raises(DecodeError, match=match) as refused:
        decode_clip(str(path), spec)
    return str(refused.value)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return write_clip(tmp_path_factory.mktemp("good") / "good.mp4", 100)


def test_a_fifo_named_mp4_is_refused_without_blocking(tmp_path, good):
    os.mkfifo(tmp_path / "pipe.mp4")
    shutil.copy(good, tmp_path / "after.mp4")
    paths = [str(tmp_path / "pipe.mp4"), str(tmp_path / "after.mp4")]
    with DecodePool(SMALL, workers=1, timeout_s=60) as pool:
        results = {r.path: r for r in pool.imap(paths)}
        assert pool.restarts == 0  # refused, not timed out
    assert results[paths[0]].error == "not a regular file: it is a FIFO (named pipe); only video files are decoded"
    assert results[paths[1]].ok


def test_an_unreadable_file_is_refused(tmp_path, good):
    """Root reads anything (CAP_DAC_OVERRIDE), so as root the decoder runs in a subprocess
    whose capability bounding set lacks the two that bypass file permissions."""
    path = tmp_path / "secret.mp4"
    shutil.copy(good, path)
    path.chmod(0)
    code = ("import sys; from video_io.decode import decode_clip, DecodeError, DecodeSpec\n"
            "from video_io.sampling import SamplingSpec\n"
            "try: decode_clip(sys.argv[1], DecodeSpec(SamplingSpec(num_frames=8)))\nexcept DecodeError as e: print(e)\n")
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without util-linux setpriv: cannot make a file unreadable")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    run = subprocess.run([*prefix, sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=120, env=os.environ | {"PYTHONPATH": os.getcwd()})
    assert run.stdout.strip() == "permission denied: the job's user cannot read this file", run.stderr


def test_symlinks_never_loop_and_broken_links_say_so(tmp_path, good):
    root = tmp_path / "footage"
    (root / "day1").mkdir(parents=True)
    outside = tmp_path / "mount"
    outside.mkdir()
    shutil.copy(good, root / "day1" / "a.mp4")
    shutil.copy(good, outside / "b.mp4")
    (root / "day1" / "up").symlink_to("..")  # a loop
    (root / "again").symlink_to("day1")  # a second way into the tree
    (root / "ext").symlink_to(outside)  # a mount linked in: followed
    (root / "self.mp4").symlink_to("self.mp4")
    (root / "gone.mp4").symlink_to("nowhere.mp4")
    keys = [key for key, _ in crawl_videos(root)]
    assert keys == ["day1/a.mp4", "ext/b.mp4", "gone.mp4", "self.mp4"]
    _refused(root / "self.mp4", "^symlink loop")
    _refused(root / "gone.mp4", "^broken symlink: it points to 'nowhere.mp4'")


def test_korean_and_non_utf8_names_decode_through_the_pool(tmp_path, good):
    raw = os.fsencode(str(tmp_path)) + b"/\xbf\xb5\xbb\xf3_euc-kr.mp4"  # '영상' in EUC-KR: not UTF-8
    shutil.copy(good, raw)
    shutil.copy(good, tmp_path / "부산 해운대 야경.mp4")
    found = crawl_videos(tmp_path)
    assert [key for key, _ in found] == ["부산 해운대 야경.mp4", "\udcbf\udcb5\udcbb\udcf3_euc-kr.mp4"]
    with DecodePool(SMALL, workers=1, timeout_s=60) as pool:
        results = list(pool.imap([str(path) for _, path in found]))
    assert sorted(r.path for r in results) == sorted(str(path) for _, path in found)
    assert all(r.ok and r.clip.frames.shape == (8, 56, 56, 3) for r in results), [r.error for r in results]


def test_files_deleted_or_replaced_after_the_crawl(tmp_path, good):
    shutil.copy(good, tmp_path / "deleted.mp4")
    shutil.copy(good, tmp_path / "replaced.mp4")
    paths = [str(path) for _, path in crawl_videos(tmp_path)]
    os.remove(tmp_path / "deleted.mp4")
    (tmp_path / "staging").mkdir()
    write_clip(tmp_path / "staging" / "replaced.mp4", 40)
    os.replace(tmp_path / "staging" / "replaced.mp4", tmp_path / "replaced.mp4")
    with DecodePool(SMALL, workers=1, timeout_s=60) as pool:
        results = {os.path.basename(r.path): r for r in pool.imap(paths)}
    assert results["deleted.mp4"].error == "file not found: deleted or moved after the folder was listed"
    assert results["replaced.mp4"].ok and results["replaced.mp4"].clip.total_frames == 40  # the new file


@pytest.mark.parametrize("how", ["replaced", "rewritten"])
def test_a_file_that_changes_while_it_is_decoded_is_refused(tmp_path, good, monkeypatch, how):
    """The file really changes between the decoder's passes (the hook only picks the moment)."""
    path = tmp_path / "clip.mp4"
    shutil.copy(good, path)
    real_pyav = decode_module._pyav

    def change_then_decode(source, spec, **options):
        if how == "replaced":
            (tmp_path / "staging").mkdir()
            write_clip(tmp_path / "staging" / "clip.mp4", 10)
            os.replace(tmp_path / "staging" / "clip.mp4", path)
        else:
            with open(path, "ab") as f:
                f.write(b"\0" * 100)
        return real_pyav(source, spec, **options)

    monkeypatch.setattr(decode_module, "_pyav", change_then_decode)
    _refused(path, "the file changed while it was being decoded", DecodeSpec(EIGHT_FRAMES, backend="pyav"))
