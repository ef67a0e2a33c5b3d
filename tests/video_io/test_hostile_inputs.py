"""Hostile inputs at the decoder level: every file, however broken, ends as exactly one result,
either frames with checked metadata or a reason a person can act on; nothing hangs. (File-system
cases: test_hostile_files.py.)

Fixtures are written here with PyAV (tests/video_io/clipmakers.py); frames spell their own
index so a test can tell exactly which frames came back."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from tests.video_io.clipmakers import coded_frame, find_box, read_code, without_moov, write_audio_only, write_clip
from video_io.decode import Clip, DecodeError, DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec, sample_indices
from video_io.timing import clip_timing
from video_io.workers import DecodePool

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)

SMALL = DecodeSpec(EIGHT_FRAMES, width=56, height=56)


def _refused(path, match, spec=SMALL):
    with pytest.raises(DecodeError, match=match) as refused:
        decode_clip(str(path), spec)
    message = str(refused.value)
    assert "Traceback" not in message and "/proc/self/fd" not in message and ".cc:" not in message
    return message


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A 100-frame 64x64 H.264 clip, moov at the end (as PyAV's muxer writes it)."""
    return write_clip(tmp_path_factory.mktemp("good") / "good.mp4", 100)


# -- files that are not videos, or not whole ones ---------------------------------------------

@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_zero_bytes(tmp_path, backend):
    (tmp_path / "z.mp4").write_bytes(b"")
    _refused(tmp_path / "z.mp4", r"^empty file \(0 bytes\)$", DecodeSpec(EIGHT_FRAMES, backend=backend))


def test_text_named_mp4(tmp_path):
    (tmp_path / "t.mp4").write_text("회의록: 다음 주 촬영 일정\nshot list ...\n" * 20, encoding="utf-8")
    assert "holds text (starts with '회의록" in _refused(tmp_path / "t.mp4", "not a video")


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_random_bytes(tmp_path, backend):
    (tmp_path / "r.mp4").write_bytes(np.random.default_rng(3).integers(0, 256, 50_000, np.uint8).tobytes())
    _refused(tmp_path / "r.mp4", "not a video FFmpeg can read", DecodeSpec(EIGHT_FRAMES, backend=backend))


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.97])
def test_truncated(tmp_path, good, fraction, backend):
    data = good.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: int(len(data) * fraction)])
    message = _refused(tmp_path / "cut.mp4", "truncated", DecodeSpec(EIGHT_FRAMES, backend=backend))
    assert "re-copy" in message


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_moov_removed(tmp_path, good, backend):
    (tmp_path / "nomoov.mp4").write_bytes(without_moov(good.read_bytes()))
    _refused(tmp_path / "nomoov.mp4", r"no MP4 index \(moov atom missing\)", DecodeSpec(EIGHT_FRAMES, backend=backend))


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_audio_only(tmp_path, backend):
    write_audio_only(tmp_path / "voice.mp4")
    message = _refused(tmp_path / "voice.mp4", "^no video stream", DecodeSpec(EIGHT_FRAMES, backend=backend))
    assert "st_nb" not in message


def _patched(good, tmp_path, path, at, value):
    data = bytearray(good.read_bytes())
    offset, _ = find_box(bytes(data), path)
    data[offset + at:offset + at + len(value)] = value
    (tmp_path / "damaged.mp4").write_bytes(data)
    return tmp_path / "damaged.mp4"


@pytest.mark.parametrize("backend", ["auto", "pyav"])
def test_damaged_track_header(tmp_path, good, backend):
    """The media-info box renamed (found by fuzzing: PyAV then has no codec context)."""
    path = _patched(good, tmp_path, [b"moov", b"trak", b"mdia", b"minf"], 4, b"axoe")
    _refused(path, "video track's codec is not recognised", DecodeSpec(EIGHT_FRAMES, backend=backend))


@pytest.mark.parametrize("backend", ["auto", "pyav"])
def test_sample_table_claiming_billions_of_entries(tmp_path, good, backend):
    path = _patched(good, tmp_path, [b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stts"], 12,
                    (0xFFFFFFF0).to_bytes(4, "big"))
    _refused(path, "damaged sample table", DecodeSpec(EIGHT_FRAMES, backend=backend))


@pytest.mark.parametrize("backend", ["auto", "pyav"])
def test_a_header_version_ffmpeg_does_not_implement(tmp_path, good, backend):
    """Found by fuzzing: a damaged media header (mdhd) version gives FFmpeg's PATCHWELCOME."""
    path = _patched(good, tmp_path, [b"moov", b"trak", b"mdia", b"mdhd"], 8, b"\x07")
    _refused(path, "damaged or unsupported file: FFmpeg met a header version", DecodeSpec(EIGHT_FRAMES, backend=backend))


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_metadata_that_is_not_utf8_does_not_stop_decoding(tmp_path, backend):
    import av

    path = tmp_path / "tagged.mp4"
    container = av.open(str(path), "w")
    container.metadata["title"] = "QQQQQQQQ"
    stream = container.add_stream("libx264", rate=25)
    stream.width = stream.height = 64
    for i in range(10):
        frame = av.VideoFrame.from_ndarray(coded_frame(i), format="rgb24")
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    data = path.read_bytes()
    assert data.count(b"QQQQQQQQ") == 1
    path.write_bytes(data.replace(b"QQQQQQQQ", b"\xff\xfe\xc3Q\xe2\x82QQ"))  # what a bit flip leaves
    clip = decode_clip(str(path), DecodeSpec(EIGHT_FRAMES, backend=backend))
    assert [read_code(f) for f in clip.frames] == clip.indices


# -- tiny, huge and odd pictures --------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("backend", ["auto", "pyav"])
def test_one_and_three_frame_clips_repeat_frames_and_say_so(tmp_path, n, backend):
    write_clip(tmp_path / "short.mp4", n)
    clip = decode_clip(str(tmp_path / "short.mp4"), DecodeSpec(EIGHT_FRAMES, width=56, height=56, backend=backend))
    assert clip.frames.shape == (8, 56, 56, 3) and clip.total_frames == n
    assert [read_code(f) for f in clip.frames] == clip.indices
    assert sorted(set(clip.indices)) == list(range(n))
    assert any("frames repeated" in note and f"has {n}" in note for note in clip.notes)
    assert clip.source_fps == 25.0 and clip.duration == pytest.approx(n / 25, abs=1e-3)


def test_a_clip_with_enough_frames_has_no_repeat_note(good):
    assert not any("repeated" in note for note in decode_clip(str(good), SMALL).notes)


def _write_big_clips(folder: Path) -> dict:
    write_clip(folder / "tiny.mp4", 32)
    write_clip(folder / "4k_h264.mp4", 32, 3840, 2160, fps=30)
    write_clip(folder / "4k_hevc.mp4", 32, 3840, 2160, codec="libx265", fps=30)
    write_clip(folder / "portrait.mp4", 32, 90, 1600)
    return {}


@pytest.fixture(scope="module")
def big_clips(tmp_path_factory):
    """Kept between runs (tests/support/made_once.py): the two 4K encodes cost ~9 CPU-s a run."""
    from tests.support.made_once import made_once
    from tests.video_io import clipmakers
    from video_io.synth import mux

    folder, _ = made_once(tmp_path_factory, "big-clips", _write_big_clips,
                          made_by=[Path(__file__), Path(clipmakers.__file__), Path(mux.__file__)])
    return {name: folder / f"{name}.mp4" for name in ("tiny", "4k_h264", "4k_hevc", "portrait")}


# 32 full-size 4K RGB frames are 760 MiB (measured: decoding at source size peaked at 1.7-2.9 GiB);
# scaled per frame as they are decoded, the decoder process peaked at 170-220 MiB here.
# What decoding 32 frames may add to a decoder process, beyond what the process holds decoding a tiny clip
# (its imports: ~60 MiB here, ~250 MiB where a sitecustomize imports torch in every process, as the
# AVX2 rehearsal in shared/tools/force-avx2 does). Without scaling as it decodes: 1.7-2.9 GiB.
DECODE_RSS_BOUND_MIB = 300


@pytest.fixture(scope="module")
def decoder_baseline_mib(tmp_path_factory):
    tiny = write_clip(tmp_path_factory.mktemp("tiny") / "tiny.mp4", 8)
    peaks = []
    for backend in ("decord", "pyav"):
        spec = DecodeSpec(sampling=SamplingSpec("uniform", num_frames=8), width=56, height=56, backend=backend)
        with DecodePool(spec, workers=1, timeout_s=60) as pool:
            (result,) = list(pool.imap([str(tiny)]))
        peaks.append(result.peak_rss_mib)
    return max(peaks)


@pytest.mark.parametrize("backend", ["decord", "pyav"])
@pytest.mark.parametrize("name", ["4k_h264", "4k_hevc", "portrait"])
def test_large_and_portrait_clips_decode_at_reduced_size_with_bounded_memory(big_clips, name, backend,
                                                                           decoder_baseline_mib):
    spec = DecodeSpec(sampling=SamplingSpec("uniform", num_frames=32), width=56, height=56, backend=backend)
    with DecodePool(spec, workers=1, timeout_s=300) as pool:  # a fresh decoder: its own peak
        (result,) = list(pool.imap([str(big_clips[name])]))
    assert result.ok, result.error
    clip = result.clip
    assert clip.frames.shape == (32, 56, 56, 3)
    assert [read_code(f) for f in clip.frames] == clip.indices == list(range(32))
    assert result.peak_rss_mib is not None
    assert result.peak_rss_mib - decoder_baseline_mib < DECODE_RSS_BOUND_MIB, (result.peak_rss_mib, decoder_baseline_mib)


def test_odd_dimensions(tmp_path):
    write_clip(tmp_path / "odd.mp4", 10, 63, 65, pix_fmt="yuv444p")  # 4:2:0 cannot have odd sides
    for spec in (DecodeSpec(EIGHT_FRAMES), SMALL, DecodeSpec(EIGHT_FRAMES, backend="pyav")):
        clip = decode_clip(str(tmp_path / "odd.mp4"), spec)
        assert clip.frames.shape[1:3] == ((65, 63) if spec.width is None else (56, 56))
        assert [read_code(f) for f in clip.frames] == clip.indices


# -- rotation, timing, codecs -----------------------------------------------------------------

RED = (220, 20, 20)


@pytest.mark.parametrize("rotation", [90, 180, 270])
@pytest.mark.parametrize("backend", ["auto", "pyav"])
def test_rotated_clips_come_out_upright(tmp_path, rotation, backend):
    """A phone clip: stored sideways, with a display matrix that turns it upright. What a
    player shows is 48 wide x 64 tall, top half red; the bottom half spells the frame index."""
    shown_w, shown_h = 48, 64
    k = rotation // 90

    def stored(i):  # the picture as the camera sensor wrote it: the shown one turned back
        return np.ascontiguousarray(np.rot90(coded_frame(i, shown_w, shown_h, top=RED), -k))

    sw, sh = (shown_h, shown_w) if k % 2 else (shown_w, shown_h)
    write_clip(tmp_path / "phone.mp4", 20, sw, sh, rotation=rotation, pix_fmt="yuv444p", frame_fn=stored)
    for spec in (DecodeSpec(EIGHT_FRAMES, backend=backend), DecodeSpec(EIGHT_FRAMES, width=24, height=40, backend=backend)):
        clip = decode_clip(str(tmp_path / "phone.mp4"), spec)
        h, w = clip.frames.shape[1:3]
        assert (w, h) == ((shown_w, shown_h) if spec.width is None else (24, 40))
        for frame, index in zip(clip.frames, clip.indices):
            top = frame[: h // 2 - 2].reshape(-1, 3).mean(axis=0)
            assert np.abs(top - RED).max() < 30, (rotation, top)
            assert read_code(frame, top=True) == index
    assert any(f"rotated {rotation} degrees (display matrix): turned upright" in n for n in clip.notes)


def test_forced_decord_refuses_rotated_clips(tmp_path):
    write_clip(tmp_path / "r.mp4", 5, 64, 48, rotation=180)
    _refused(tmp_path / "r.mp4", "rotated 180 degrees .* use the auto or pyav backend", DecodeSpec(EIGHT_FRAMES, backend="decord"))


@pytest.mark.parametrize("backend", ["auto", "decord", "pyav"])
def test_variable_frame_rate_is_sampled_uniformly_in_time(tmp_path, backend):
    # 4 s at 5 fps, then 2 s at 50 fps: index-uniform sampling would spend most picks on the end
    times = [0.2 * i for i in range(20)] + [4 + 0.02 * i for i in range(100)]
    write_clip(tmp_path / "vfr.mp4", len(times), times=times)
    clip = decode_clip(str(tmp_path / "vfr.mp4"), DecodeSpec(EIGHT_FRAMES, backend=backend, seek="exact"))
    assert [read_code(f) for f in clip.frames] == clip.indices
    assert clip.indices == sample_indices(np.array(times), 6.0, EIGHT_FRAMES)
    # seek=auto: one frame in each 0.75-s segment of time (not of frame count)
    fast = decode_clip(str(tmp_path / "vfr.mp4"), DecodeSpec(EIGHT_FRAMES, backend=backend))
    assert all(0.75 * k <= times[i] < 0.75 * (k + 1) for k, i in enumerate(fast.indices)), fast.indices
    targets = (np.arange(8) + 0.5) * 6.0 / 8
    picked = np.array(times)[clip.indices]
    assert np.all(np.abs(picked - targets) <= 0.1 + 1e-9), picked  # within half the local step
    assert sum(t < 4 for t in picked) == 5  # 4 of 6 seconds, so 5 of 8 picks (not 1 of 8)
    assert clip.total_frames == 120 and clip.duration == pytest.approx(6.0, abs=0.03)
    assert abs(clip.source_fps * clip.duration - clip.total_frames) <= 1


@pytest.mark.parametrize("codec, ext, backend", [
    ("libx265", "mp4", "auto"), ("libvpx-vp9", "webm", "auto"), ("libvpx-vp9", "webm", "decord"),
    ("libvpx-vp9", "mp4", "auto"), ("libsvtav1", "mp4", "auto"), ("libsvtav1", "mp4", "decord"),
    ("libsvtav1", "mkv", "auto"), ("mpeg4", "avi", "auto"),
])
def test_codecs_decode_exactly_the_sampled_frames(tmp_path, codec, ext, backend):
    policy = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    path = write_clip(tmp_path / f"c.{ext}", 100, codec=codec)
    # the encoder leaves the test process's scheduling as it was (libsvtav1 as root: SCHED_FIFO 99)
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == policy
    spec = DecodeSpec(sampling=SamplingSpec("uniform", num_frames=12), width=56, height=56, backend=backend)
    clip = decode_clip(str(path), spec)
    assert clip.backend == ("pyav" if backend == "auto" else backend)
    assert [read_code(f) for f in clip.frames] == clip.indices
    assert clip.total_frames == 100 and clip.source_fps == 25.0


def test_pyav_fps_is_read_while_the_container_is_open(tmp_path):
    """Read after the container closed, average_rate of a 30 fps 4K HEVC clip came back as
    -0.654, 79927.958, 19279.707 and 30.0 on four calls, sometimes SIGSEGV; here, on small clips,
    None or a crash. In a worker, so a crash is a failed result rather than a dead test run."""
    paths = [str(write_clip(tmp_path / "h.mp4", 30, 128, 96, codec="libx265", fps=30)),
             str(write_clip(tmp_path / "three.mp4", 3, fps=30))]
    with DecodePool(DecodeSpec(EIGHT_FRAMES, backend="pyav"), workers=1, timeout_s=60) as pool:
        results = list(pool.imap(paths * 4))
    assert all(r.ok for r in results), [r.error for r in results]
    assert {r.clip.source_fps for r in results} == {30.0}
    assert not [n for r in results for n in r.clip.notes if "frame rate" in n]


# -- metadata that must never leave video_io --------------------------------------------------

@pytest.mark.parametrize("container_fps", [-0.654, 79927.958, 19279.707, 0.0, math.nan, math.inf, None])
def test_garbage_container_fps_is_replaced_from_the_timestamps(container_fps):
    fps, duration, notes = clip_timing(np.arange(300) / 30.0, container_fps)
    assert fps == pytest.approx(30.0) and duration == pytest.approx(10.0)
    assert len(notes) == 1 and "using 30.000 fps" in notes[0]


def test_a_container_fps_that_disagrees_with_the_timestamps_loses():
    fps, duration, notes = clip_timing(np.arange(100) / 25.0, 50.0)
    assert fps == pytest.approx(25.0) and "says 50 frame rate" in notes[0]
    assert clip_timing(np.arange(100) / 25.0, 25.0) == (25.0, pytest.approx(4.0), [])


def test_timing_that_cannot_be_trusted_is_refused():
    with pytest.raises(DecodeError, match="no usable frame rate"):
        clip_timing(np.array([0.0]), math.nan)  # one frame and no rate: no duration either
    with pytest.raises(DecodeError, match="not finite and increasing"):
        clip_timing(np.array([0.0, 0.04, 0.04]), 25.0)
    with pytest.raises(DecodeError, match="no usable frame rate"):
        clip_timing(np.array([0.0, 1e6]), -1.0)  # one frame per 11 days


@pytest.mark.parametrize("change", [
    {"source_fps": -0.654}, {"source_fps": math.nan}, {"source_fps": 79927.958}, {"duration": 0.0},
    {"indices": [0, 1, 32]}, {"indices": [-1, 0, 1]}, {"total_frames": 0},
    {"frames": np.zeros((2, 8, 8, 3), np.uint8)}, {"frames": np.zeros((3, 8, 8, 3), np.float32)},
])
def test_a_clip_with_bad_metadata_cannot_be_made(change):
    fields = dict(path="x.mp4", frames=np.zeros((3, 8, 8, 3), np.uint8), indices=[0, 1, 2],
                  source_fps=30.0, total_frames=32, duration=32 / 30, backend="pyav")
    Clip(**fields)
    with pytest.raises(DecodeError, match="inconsistent clip metadata"):
        Clip(**(fields | change))


@pytest.mark.parametrize("codec, ext, gop", [("libx265", "mp4", 25), ("libx265", "mkv", 25),
                                             ("libx264", "ts", 25), ("libx265", "mp4", 250)])
def test_pyav_seeks_to_keyframes_and_still_returns_exactly_the_sampled_frames(tmp_path, codec, ext, gop):
    """PyAV jumps to the keyframe before each sampled frame (a long clip costs a few GOPs, not
    every frame); MPEG-TS seeks are inexact, which the sequential fallback covers."""
    from video_io.pyav_frames import decode_wanted

    gop_option = {"libx264": {"g": str(gop)}, "libx265": {"x265-params": f"keyint={gop}:bframes=2:log-level=none"}}
    path = write_clip(tmp_path / f"long.{ext}", 300, codec=codec, options=gop_option[codec])
    spec = DecodeSpec(sampling=SamplingSpec("uniform", num_frames=12), width=56, height=56, backend="pyav")
    clip = decode_clip(str(path), spec)
    assert [read_code(f) for f in clip.frames] == clip.indices and clip.total_frames == 300
    import av

    with av.open(str(path)) as container:
        packets = [p for p in container.demux(video=0) if p.size]
        pts = sorted(p.pts for p in packets)
        keys = sorted(p.pts for p in packets if p.is_keyframe)
    wanted = [pts[i] for i in clip.indices]
    size_for = lambda turn, w, h: (56, 56)  # noqa: E731
    seeking, _, _ = decode_wanted(str(path), size_for, wanted, keys, seek=True)
    sequential, _, _ = decode_wanted(str(path), size_for, wanted, [], seek=False)
    assert sorted(sequential) == wanted
    if ext != "ts":
        assert sorted(seeking) == wanted and all(np.array_equal(seeking[p], sequential[p]) for p in wanted)
