"""Hostile files through the real job (Hydra config, decoder processes, vLLM): one record per
file, an error a person can act on or a caption, no traceback, no hang."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from caption.job import run_job
from tests.video_io.clipmakers import coded_frame, without_moov, write_audio_only, write_clip

pytestmark = pytest.mark.slow

# file -> what its error says (None: it must be captioned)
EXPECTED = {
    "good.mp4": None,
    "zero.mp4": "empty file (0 bytes)",
    "notes.mp4": "not a video: the file holds text",
    "random.mp4": "not a video FFmpeg can read",
    "truncated.mp4": "the file is truncated",
    "no_moov.mp4": "no MP4 index (moov atom missing)",
    "voice_memo.mp4": "no video stream (the file holds only: audio (aac))",
    "pipe.mp4": "not a regular file: it is a FIFO",
    "loop.mp4": "symlink loop",
    "one_frame.mp4": None,
    "three_frames.mp4": None,
    "uhd_hevc.mp4": None,
    "portrait_90x1600.mp4": None,
    "odd_63x65.mp4": None,
    "phone_rotated.mp4": None,
    "vfr.mp4": None,
    "vp9.webm": None,
    "av1.mkv": None,
    "서울 야경/남산타워.mp4": None,
}


@pytest.fixture
def hostile_folder(tmp_path):
    folder = tmp_path / "hostile"
    (folder / "서울 야경").mkdir(parents=True)
    good = write_clip(folder / "good.mp4", 40)
    data = good.read_bytes()
    (folder / "zero.mp4").write_bytes(b"")
    (folder / "notes.mp4").write_text("촬영 메모: 내일 오전 9시\n" * 30, encoding="utf-8")
    (folder / "random.mp4").write_bytes(np.random.default_rng(5).integers(0, 256, 30_000, np.uint8).tobytes())
    (folder / "truncated.mp4").write_bytes(data[: len(data) // 2])
    (folder / "no_moov.mp4").write_bytes(without_moov(data))
    write_audio_only(folder / "voice_memo.mp4")
    os.mkfifo(folder / "pipe.mp4")
    (folder / "loop.mp4").symlink_to("loop.mp4")
    (folder / "서울 야경" / "again").symlink_to("..")  # a folder loop: crawl must not follow it
    write_clip(folder / "one_frame.mp4", 1)
    write_clip(folder / "three_frames.mp4", 3)
    write_clip(folder / "uhd_hevc.mp4", 12, 3840, 2160, codec="libx265", fps=30)
    write_clip(folder / "portrait_90x1600.mp4", 20, 90, 1600)
    write_clip(folder / "odd_63x65.mp4", 12, 63, 65, pix_fmt="yuv444p")
    write_clip(folder / "phone_rotated.mp4", 12, 64, 48, rotation=90,
               frame_fn=lambda i: np.ascontiguousarray(np.rot90(coded_frame(i, 48, 64, top=(200, 0, 0)), -1)))
    write_clip(folder / "vfr.mp4", 60, times=[0.25 * i for i in range(10)] + [2.5 + 0.02 * i for i in range(50)])
    write_clip(folder / "vp9.webm", 20, codec="libvpx-vp9")
    write_clip(folder / "av1.mkv", 20, codec="libsvtav1")
    shutil.copy(good, folder / "서울 야경" / "남산타워.mp4")
    return folder


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_hostile_file_ends_as_one_record_with_a_reason(compose_config, hostile_folder, tmp_path,
                                                             vllm_engine):
    out = tmp_path / "captions.jsonl"
    cfg = compose_config([f"input_dir={hostile_folder}", f"output={out}", "progress=false",
                          "video.timeout_s=120"])
    summary = run_job(cfg, engine=vllm_engine)
    records = _records(out)
    assert sorted(r["video"] for r in records) == sorted(EXPECTED)  # one each: none lost, none twice
    by_video = {r["video"]: r for r in records}
    for video, reason in EXPECTED.items():
        r = by_video[video]
        assert "Traceback" not in json.dumps(r, ensure_ascii=False)
        if reason is None:
            assert r["status"] == "ok" and r["caption"] and r["frames"] == 8, (video, r)
        else:
            assert r["status"] == "error" and r["error"].startswith("decode: ") and reason in r["error"], (video, r)
            assert "/proc/self/fd" not in r["error"] and ".cc:" not in r["error"]
    for video in ("one_frame.mp4", "three_frames.mp4"):
        assert any("frames repeated" in note for note in by_video[video]["notes"])
    assert by_video["uhd_hevc.mp4"]["decoder"] == "pyav"
    assert any("turned upright" in note for note in by_video["phone_rotated.mp4"]["notes"])
    assert sorted(by_video["vfr.mp4"]["frame_indices"]) == by_video["vfr.mp4"]["frame_indices"]
    assert summary["videos_found"] == len(EXPECTED)
    assert summary["videos_failed"] == sum(reason is not None for reason in EXPECTED.values())


def test_a_file_name_that_is_not_utf8_gets_its_record(compose_config, tmp_path, vllm_engine):
    folder = tmp_path / "raw"
    folder.mkdir()
    raw_name = b"\xbf\xb5\xbb\xf3.mp4"  # '영상' in EUC-KR, as old Korean Windows tools wrote names
    write_clip(folder / "x.mp4", 20)
    os.rename(folder / "x.mp4", os.fsencode(str(folder)) + b"/" + raw_name)
    out = tmp_path / "captions.jsonl"
    run_job(compose_config([f"input_dir={folder}", f"output={out}", "progress=false"]), engine=vllm_engine)
    (record,) = _records(out)
    assert record["status"] == "ok" and os.fsencode(record["video"]) == raw_name
