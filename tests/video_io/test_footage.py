"""The real-size footage generator, on small short variants: deterministic, delivered as asked
(codec, rate, GOP, rotation, faststart), with moving, textured content."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from tests.video_io.clipmakers import mp4_boxes
from video_io.decode import DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.synth.footage import LONG_GOP, FootageSpec, draw_spec, main, write_footage

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_seed_same_pictures():
    from video_io.synth.footage import FootageScene

    spec = FootageSpec(640, 360, 30, 0.1, "hevc", gop=30)
    a, b = FootageScene(9, 0, spec), FootageScene(9, 0, spec)
    ga, gb = np.random.default_rng(a.grain_seed), np.random.default_rng(b.grain_seed)
    for i in (0, 2):
        fa, fb = a.frame(i, 3, ga), b.frame(i, 3, gb)
        assert fa.shape == (360 * 3 // 2, 640) and np.array_equal(fa, fb)


def test_same_seed_same_bytes(tmp_path):
    args = ["--n", "2", "--size", "96x64", "--seconds", "0.5", "--profile", "mixed", "--exact"]
    for name, seed in (("a", 4), ("b", 4), ("c", 5)):
        assert main(["--out", str(tmp_path / name), "--seed", str(seed), *args]) == 0
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert _digests(tmp_path / "a") != _digests(tmp_path / "c")
    records = [json.loads(line) for line in open(tmp_path / "a" / "references.jsonl", encoding="utf-8")]
    assert [r["video"] for r in records] == sorted(p.name for p in (tmp_path / "a").glob("*.mp4"))
    assert all(len(r["references"]) >= 3 and r["delivery"]["width"] == 96 for r in records)


def test_clips_made_in_several_processes_are_those_made_in_one(tmp_path, capsys):
    """In-process, and as `python -m video_io.synth.footage` (then the generator is __main__, which the
    spawned children are not told of)."""
    args = ["--n", "3", "--size", "96x64", "--seconds", "0.5", "--profile", "mixed", "--exact", "--seed", "2"]
    assert main(["--out", str(tmp_path / "one"), *args]) == 0
    assert main(["--out", str(tmp_path / "three"), "--workers", "3", *args]) == 0
    assert _digests(tmp_path / "one") == _digests(tmp_path / "three")  # references.jsonl too: in index order
    made = [line.split(":")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("footage_")]
    assert made == sorted(p.name for p in (tmp_path / "one").glob("*.mp4")) * 2
    module = subprocess.run([sys.executable, "-m", "video_io.synth.footage", "--out", str(tmp_path / "two"),
                             "--workers", "2", *args], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[2])
    assert module.returncode == 0, module.stderr
    assert _digests(tmp_path / "two") == _digests(tmp_path / "one")


def test_profiles_cover_what_cameras_and_libraries_deliver():
    specs = {p: [draw_spec(p, np.random.default_rng([0, i, 3])) for i in range(200)]
             for p in ("camera", "stock", "phone")}
    cam, stock, phone = specs["camera"], specs["stock"], specs["phone"]
    assert {(s.width, s.height) for s in cam + stock} == {(1920, 1080), (3840, 2160)}
    assert {s.fps for s in cam} == {24, 30, 60} and {s.fps for s in stock} == {24, 30}
    assert {s.codec for s in cam} == {s.codec for s in stock} == {"h264", "hevc"}
    assert all(s.gop in (s.fps, 2 * s.fps) for s in cam + phone) and all(s.gop == LONG_GOP for s in stock)
    assert all(s.faststart for s in stock) and not any(s.faststart for s in cam)
    assert {(s.width, s.height, s.rotation) for s in phone} == {(1080, 1920, 0), (1920, 1080, 90)}
    assert all(10 <= s.seconds <= 60 for s in cam + stock + phone)


@pytest.mark.parametrize("spec", [
    FootageSpec(128, 72, 30, 2.0, "h264", gop=30),
    FootageSpec(128, 72, 24, 2.0, "hevc", gop=LONG_GOP, faststart=True),
    FootageSpec(128, 72, 60, 1.0, "hevc", gop=30, rotation=90),
])
def test_a_clip_is_delivered_as_specified(tmp_path, spec):
    path = tmp_path / "f.mp4"
    record = write_footage(path, seed=1, index=0, spec=spec)
    assert record["delivery"]["codec"] == spec.codec
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == spec.codec
        assert (stream.codec_context.width, stream.codec_context.height) == (spec.width, spec.height)
        assert float(stream.average_rate) == spec.fps
        keys = [i for i, p in enumerate(sorted((p for p in container.demux(stream) if p.size), key=lambda p: p.pts))
                if p.is_keyframe]
    assert len(keys) == -(-spec.n_frames // spec.gop)  # one keyframe per GOP, no more
    boxes = [kind for kind, _, _ in mp4_boxes(path.read_bytes())]
    assert (boxes.index(b"moov") < boxes.index(b"mdat")) == spec.faststart
    clip = decode_clip(str(path), DecodeSpec(EIGHT_FRAMES))
    shown = (spec.height, spec.width) if spec.rotation else (spec.width, spec.height)
    assert clip.frames.shape[1:3] == (shown[1], shown[0])
    assert clip.total_frames == spec.n_frames
    frames = clip.frames.astype(np.int16)
    assert np.abs(frames[-1] - frames[0]).mean() > 2  # the camera pans and the object moves
    assert frames[0, :, :, 1].std() > 10  # a scene, not a flat colour


def test_sizes_that_yuv420_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="height divisible by 4"):
        FootageSpec(1920, 1082, 30, 10, "h264", gop=30)
    with pytest.raises(SystemExit):
        main(["--out", "/tmp/unused", "--n", "1", "--size", "97x64"])


def test_mbps_sets_the_average_bitrate(tmp_path):
    """--mbps delivers the same pictures at a chosen rate (web and stock downloads are lighter than a
    camera's): each file's size follows its rate, and a bad rate is refused."""
    sizes = {}
    for mbps in (0.2, 0.8):
        out = tmp_path / str(mbps)
        assert main(["--out", str(out), "--n", "1", "--size", "320x180", "--seconds", "2", "--fps", "30",
                     "--codec", "h264", "--gop", "30", "--mbps", str(mbps)]) == 0
        [path] = out.glob("*.mp4")
        sizes[mbps] = path.stat().st_size * 8 / 2 / 1e6  # Mbit/s over the 2 s
        assert json.loads((out / "references.jsonl").read_text())["delivery"]["mbps"] == mbps
    assert 0.1 < sizes[0.2] < 0.3 and 0.6 < sizes[0.8] < 1.0, sizes
    with pytest.raises(ValueError, match="mbps must be > 0"):
        FootageSpec(320, 180, 30, 2, "h264", gop=30, mbps=0)
