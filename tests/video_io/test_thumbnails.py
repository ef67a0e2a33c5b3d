"""Thumbnails show exactly the frames the job sampled, with either decoder; bad files raise DecodeError."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from video_io.decode import DecodeError, DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.thumbnails import jpeg_thumbnails, read_frames, thumbnail_size

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


def test_frames_are_the_ones_decode_clip_sampled(synth_dir):
    path = str(synth_dir / "clip_00002.mp4")
    clip = decode_clip(path, DecodeSpec(EIGHT_FRAMES, width=64, height=64, backend="decord"))
    frames = read_frames(path, clip.indices, max_side=64, backend="decord")
    assert frames.shape == clip.frames.shape == (8, 64, 64, 3)
    assert np.array_equal(frames, clip.frames)
    # and in the order asked: reversed indices give the reversed frames (the object moves)
    assert np.array_equal(read_frames(path, clip.indices[::-1], 64, "decord"), clip.frames[::-1])
    assert not np.array_equal(frames[0], frames[-1])
    # PyAV counts frames the same way (its scaler rounds a little differently from decord's).
    by_pyav = read_frames(path, clip.indices, 64, "pyav").astype(int)
    assert np.abs(by_pyav - clip.frames).mean() < 2
    others = [np.abs(by_pyav[k] - clip.frames[k + 1]).mean() for k in range(7)]
    assert min(others) > 2 * np.abs(by_pyav - clip.frames).mean()  # a neighbouring frame differs more


def test_jpegs_decode_to_the_frames(synth_dir):
    path = str(synth_dir / "clip_00000.mp4")
    jpegs = jpeg_thumbnails(path, [3, 30], max_side=96, quality=90)
    frames = read_frames(path, [3, 30], max_side=96)
    for data, frame in zip(jpegs, frames):
        image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert image.shape == frame.shape == (96, 96, 3)
        assert np.abs(image.astype(int) - frame).mean() < 4


def test_sizes_keep_the_aspect_ratio():
    assert thumbnail_size(1920, 1080, 96) == (96, 54)
    assert thumbnail_size(1080, 1920, 96) == (54, 96)
    assert thumbnail_size(64, 48, 96) == (64, 48)  # never upscaled


def test_bad_input_says_what_is_wrong(synth_dir, tmp_path):
    path = str(synth_dir / "clip_00000.mp4")
    with pytest.raises(DecodeError, match="frame index 500 is outside the clip's 32 frames"):
        read_frames(path, [1, 500])
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(DecodeError, match="empty file"):
        read_frames(str(tmp_path / "empty.mp4"), [0])
    (tmp_path / "text.mp4").write_text("not a video")
    with pytest.raises(DecodeError, match="not a video: the file holds text"):
        read_frames(str(tmp_path / "text.mp4"), [0])
    with pytest.raises(DecodeError, match="file not found"):
        read_frames(str(tmp_path / "missing.mp4"), [0])
    (tmp_path / "cut.mp4").write_bytes((synth_dir / "clip_00001.mp4").read_bytes()[:3000])
    with pytest.raises(DecodeError):
        read_frames(str(tmp_path / "cut.mp4"), [2, 30])


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_rotated_clips_give_upright_thumbnails_of_the_frames_the_job_sampled(tmp_path, rotation):
    from tests.video_io.clipmakers import coded_frame, read_code, write_clip

    k = rotation // 90

    def stored(i):  # shown 48x64 with a red top half; stored turned back, as phones do
        return np.ascontiguousarray(np.rot90(coded_frame(i, 48, 64, top=(220, 20, 20)), -k))

    w, h = (64, 48) if k % 2 else (48, 64)
    path = str(write_clip(tmp_path / "phone.mp4", 20, w, h, rotation=rotation, pix_fmt="yuv444p", frame_fn=stored))
    clip = decode_clip(path, DecodeSpec(EIGHT_FRAMES))
    for backend in ("auto", "decord", "pyav"):
        frames = read_frames(path, clip.indices, max_side=64, backend=backend)
        assert frames.shape == (8, 64, 48, 3)
        assert [read_code(f, top=True) for f in frames] == clip.indices
        assert all(np.abs(f[:28].reshape(-1, 3).mean(0) - (220, 20, 20)).max() < 30 for f in frames)


def test_thumbnails_decode_from_the_keyframe_before_each_frame_not_the_whole_clip(tmp_path):
    """A review page of thousands of clips: the last frame of a 300-frame clip with a keyframe every 25
    costs at most a GOP of decoding, as in the job, not the 300 frames before it."""
    from tests.video_io.clipmakers import read_code, write_clip
    from video_io.pyav_frames import decode_counters, frames_at
    from video_io.source import open_source

    path = str(write_clip(tmp_path / "long.mp4", 300, options={"g": "25"}))
    stats = decode_counters()
    with open_source(path) as source:
        frames = frames_at(source, [290, 10], stats=stats)
    assert [read_code(f) for f in frames] == [290, 10]
    assert stats["converted"] == 2 and stats["repeated"] == 0
    assert stats["decoded"] <= 2 * 25, stats

