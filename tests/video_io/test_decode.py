"""Decoding with decord (decord2) and PyAV; bad files raise DecodeError with a reason."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from video_io.crawl import crawl_videos
from video_io.decode import DecodeError, DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


@pytest.mark.parametrize("backend", ["decord", "pyav"])
def test_both_decoders_decode_sampled_resized_frames(synth_dir, backend):
    spec = DecodeSpec(EIGHT_FRAMES, width=56, height=56, backend=backend, seek="exact")
    clip = decode_clip(str(synth_dir / "clip_00000.mp4"), spec)
    assert clip.backend == backend
    assert clip.frames.shape == (8, 56, 56, 3) and clip.frames.dtype == np.uint8
    assert clip.indices == [2, 6, 10, 14, 18, 22, 26, 30]  # the centres of 8 segments of 4 frames
    # the default (seek=auto): the clip's one keyframe (0) in the first segment, the others' first frames
    fast = decode_clip(str(synth_dir / "clip_00000.mp4"), dataclasses.replace(spec, seek="auto"))
    assert fast.indices == [0, 4, 8, 12, 16, 20, 24, 28] and fast.seek == "nearby"
    assert clip.total_frames == 32 and clip.source_fps == 8.0 and clip.duration == pytest.approx(4.0)
    meta = clip.metadata()
    assert meta["frames_indices"] == clip.indices and meta["do_sample_frames"] is False


def test_pyav_backend_gives_the_same_frames_at_source_size(synth_dir):
    path = str(synth_dir / "clip_00001.mp4")
    a = decode_clip(path, DecodeSpec(EIGHT_FRAMES, backend="decord"))
    b = decode_clip(path, DecodeSpec(EIGHT_FRAMES, backend="pyav"))
    assert a.indices == b.indices and np.array_equal(a.frames, b.frames)


def test_fps_sampling(synth_dir):
    spec = DecodeSpec(sampling=SamplingSpec("fps", fps=4.0, max_frames=32))
    clip = decode_clip(str(synth_dir / "clip_00000.mp4"), spec)
    assert len(clip.indices) == 16


@pytest.mark.parametrize("content, reason", [
    (b"", "empty file"), (b"this is not a video\n" * 50, "holds text"),
    (bytes(range(256)) * 40, "Invalid data"),
])
def test_bad_files_raise_decode_error(tmp_path, content, reason):
    path = tmp_path / "bad.mp4"
    path.write_bytes(content)
    with pytest.raises(DecodeError, match=reason):
        decode_clip(str(path), DecodeSpec(EIGHT_FRAMES))


def test_truncated_file_is_refused_or_decoded_partially_never_crashes(tmp_path, synth_dir):
    data = (synth_dir / "clip_00003.mp4").read_bytes()
    path = tmp_path / "cut.mp4"
    path.write_bytes(data[: len(data) // 2])
    try:
        clip = decode_clip(str(path), DecodeSpec(EIGHT_FRAMES))
        assert clip.frames.shape[0] == 8
    except DecodeError as exc:
        assert str(exc)


def test_missing_file(tmp_path):
    with pytest.raises(DecodeError, match="file not found: deleted or moved"):
        decode_clip(str(tmp_path / "nope.mp4"), DecodeSpec(EIGHT_FRAMES))


def test_a_file_no_decoder_can_open_gets_one_plain_reason(tmp_path):
    path = tmp_path / "x.mp4"
    path.write_bytes(b"\x00" * 4096)
    for backend in ("auto", "pyav", "decord"):
        with pytest.raises(DecodeError, match="not a video FFmpeg can read") as refused:
            decode_clip(str(path), DecodeSpec(EIGHT_FRAMES, backend=backend))
        assert "/proc/self/fd" not in str(refused.value) and "pyav:" not in str(refused.value)


def test_crawl_is_recursive_sorted_and_keyed_by_relative_path(tmp_path, synth_dir):
    (tmp_path / "b" / "deep").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", tmp_path / "b" / "deep" / "z.MP4")
    shutil.copy(synth_dir / "clip_00001.mp4", tmp_path / "a.mkv")
    shutil.copy(synth_dir / "clip_00002.mp4", tmp_path / ".hidden" / "c.mp4")
    (tmp_path / "notes.txt").write_text("not a video")
    assert [key for key, _ in crawl_videos(tmp_path)] == ["a.mkv", "b/deep/z.MP4"]
    with pytest.raises(FileNotFoundError):
        crawl_videos(tmp_path / "absent")


def _coded_frame(i: int) -> np.ndarray:
    """A 64x64 frame whose 4x4 grid of black/white blocks spells its index in binary."""
    image = np.zeros((64, 64, 3), np.uint8)
    for bit in range(9):
        if i >> bit & 1:
            r, c = divmod(bit, 4)
            image[r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] = 255
    return image


def _read_code(image: np.ndarray) -> int:
    return sum(1 << bit for bit in range(9) if image[(bit // 4) * 16 + 8, (bit % 4) * 16 + 8].mean() > 128)


def _write_coded_clip(path, codec: str, n: int = 150):
    from fractions import Fraction

    import av

    options = {"libx265": {"x265-params": "keyint=50:bframes=3:log-level=none"},
               "libx264": {"g": "50", "bf": "3"}, "mpeg4": {"g": "50", "bf": "3"}}[codec]
    container = av.open(str(path), "w")
    stream = container.add_stream(codec, rate=25)
    stream.width = stream.height = 64
    stream.pix_fmt = "yuv420p"
    stream.codec_context.options = options
    for i in range(n):
        frame = av.VideoFrame.from_ndarray(_coded_frame(i), format="rgb24")
        frame.pts, frame.time_base = i, Fraction(1, 25)
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()


@pytest.mark.parametrize("codec", ["libx264", "libx265", "mpeg4"])
def test_auto_backend_returns_exactly_the_sampled_frames(tmp_path, codec):
    """B-frame codecs: decord returns neighbouring frames for HEVC/MPEG-4; auto must not."""
    path = tmp_path / f"coded_{codec}.mp4"
    _write_coded_clip(path, codec)
    clip = decode_clip(str(path), DecodeSpec(sampling=SamplingSpec("uniform", num_frames=12)))
    assert [_read_code(f) for f in clip.frames] == clip.indices
    assert clip.backend == "pyav"
    pyav = decode_clip(str(path), DecodeSpec(SamplingSpec("uniform", num_frames=12), backend="pyav"))
    assert [_read_code(f) for f in pyav.frames] == pyav.indices == clip.indices
