"""Decode the sampled frames of one clip: decord first (fast random access), PyAV as fallback.

decord here is the maintained `decord2` package (FFmpeg 8), which raises on corrupt files where
the 2021 decord wheel hung. PyAV decodes sequentially and is frame-accurate; `backend=auto`
uses it for codecs where decord returns the wrong frames (HEVC, MPEG-4 with B-frames), for
rotated clips, and when decord refuses a file.

Both decoders scale every kept frame to the requested size as it is decoded (decord in its
FFmpeg filter graph, PyAV per frame), so a 4K clip never has a stack of full-size frames in
memory. Every Clip that leaves this module has checked metadata (Clip.__post_init__).
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field

import numpy as np

from video_io.sampling import SamplingSpec, sample_indices
from video_io.source import (UNKNOWN_CODEC, DecodeError, Probe, Source, display_rotation, library_reason,
                             open_source, probe)
from video_io.timing import MAX_FPS, MIN_FPS, clip_timing

__all__ = ["BACKENDS", "Clip", "DecodeError", "DecodeSpec", "decode_clip"]

BACKENDS = ("decord", "pyav", "auto")
# Codecs decord (decord2 3.4) seeks exactly in. Measured here: HEVC and MPEG-4 Part 2 with
# B-frames returned neighbouring frames (index 251 gave 252, 299 gave 252), so "auto" sends
# every other codec to PyAV, which is frame-accurate.
DECORD_EXACT_CODECS = frozenset({"h264", "vp8", "vp9", "av1", "libdav1d", "mjpeg"})


@dataclass
class Clip:
    """Sampled frames of one clip plus what a model needs to place them in time.

    Construction checks the metadata (the engine computes temporal positions from it): fps
    finite and plausible, duration > 0, every index inside the clip, one frame per index.
    """

    path: str
    frames: np.ndarray  # (T, H, W, 3) uint8 RGB, upright as a player shows them
    indices: list[int]  # frame index in the source of each sampled frame
    source_fps: float
    total_frames: int
    duration: float
    backend: str
    decode_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        problems = []
        if not (isinstance(self.source_fps, float) and math.isfinite(self.source_fps)
                and MIN_FPS <= self.source_fps <= MAX_FPS):
            problems.append(f"fps {self.source_fps!r} outside [{MIN_FPS}, {MAX_FPS}]")
        if not (math.isfinite(self.duration) and self.duration > 0):
            problems.append(f"duration {self.duration!r} s")
        if self.total_frames < 1:
            problems.append(f"total_frames {self.total_frames}")
        if not self.indices or any(not 0 <= i < self.total_frames for i in self.indices):
            problems.append(f"frame indices {self.indices} outside 0..{self.total_frames - 1}")
        f = self.frames
        if not (isinstance(f, np.ndarray) and f.dtype == np.uint8 and f.ndim == 4 and f.shape[3] == 3
                and f.shape[0] == len(self.indices) and f.shape[1] > 0 and f.shape[2] > 0):
            problems.append(f"frames {getattr(f, 'dtype', type(f))} {getattr(f, 'shape', '')} for "
                            f"{len(self.indices)} indices")
        if problems:
            raise DecodeError("decoder returned inconsistent clip metadata: " + "; ".join(problems))

    def metadata(self) -> dict:
        """Video metadata in the form transformers' and vLLM's video processors take."""
        return {
            "total_num_frames": self.total_frames,
            "fps": self.source_fps,
            "duration": self.duration,
            "frames_indices": list(self.indices),
            "video_backend": self.backend,
            "do_sample_frames": False,
        }


@dataclass(frozen=True)
class DecodeSpec:
    sampling: SamplingSpec = SamplingSpec()
    width: int | None = None  # resize target; None keeps the source size
    height: int | None = None
    backend: str = "auto"  # "auto": decord, then PyAV if decord fails

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"video backend must be one of {BACKENDS}, got {self.backend!r}")
        for side in (self.width, self.height):
            if side is not None and side < 2:
                raise ValueError(f"resize sides must be >= 2 px, got {self.width}x{self.height}")


def _coded_size(spec: DecodeSpec, rotation: int) -> tuple[int, int] | None:
    """The size to scale coded frames to, so that after turning them upright they are
    spec.width x spec.height."""
    if not (spec.width and spec.height):
        return None
    return (spec.height, spec.width) if rotation in (90, 270) else (spec.width, spec.height)


def turn_upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """Turn a decoded frame counter-clockwise by `rotation` degrees, as a player does."""
    return np.ascontiguousarray(np.rot90(image, k=rotation // 90)) if rotation else image


@dataclass
class _Decoded:
    frames: np.ndarray
    indices: list[int]
    times: np.ndarray  # start of every frame of the clip, seconds from the first
    rate: float | None  # the container's frame rate
    rotation: int = 0  # degrees the frames were turned to be upright
    notes: list[str] = field(default_factory=list)


def _decord(source: Source, spec: DecodeSpec) -> _Decoded:
    """Frames, indices and timing as decord reads them. Only for clips without rotation:
    decord2 turns rotated clips itself, inconsistently (180 degrees gave 4-channel frames)."""
    import decord

    kwargs = {"num_threads": 1}
    size = _coded_size(spec, 0)
    if size:
        kwargs.update(width=size[0], height=size[1])
    try:
        reader = decord.VideoReader(source.uri, ctx=decord.cpu(0), **kwargs)
        total = len(reader)
        if total == 0:
            raise DecodeError("no video frames")
        stamps = np.asarray(reader.get_frame_timestamp(np.arange(total)), dtype=np.float64)
        fps = float(reader.get_avg_fps())  # read while the reader is alive
        times = stamps[:, 0] - stamps[0, 0]
        if len(times) > 1 and not np.all(np.diff(times) > 0):
            raise DecodeError("decord: frame timestamps are not increasing")
        indices = sample_indices(times, _span(times), spec.sampling)
        frames = reader.get_batch(indices).asnumpy()
        del reader
    except DecodeError:
        raise
    except Exception as exc:  # decord raises DECORDError / RuntimeError with FFmpeg's message
        raise DecodeError(library_reason(exc, "decord")) from None
    return _Decoded(frames, indices, times, fps)


def _span(times: np.ndarray) -> float:
    """Start of the first frame to the end of the last (one typical frame step after its start)."""
    if len(times) < 2:
        return 0.0
    return float(times[-1] - times[0] + np.median(np.diff(times)))


def _pyav(source: Source, spec: DecodeSpec) -> _Decoded:
    """Two passes: packet timestamps (demux only) pick the frames, then decode them, scaling and
    converting only the frames picked. Frame-accurate for every codec FFmpeg decodes: frames
    are matched by timestamp. Every stream property is read while its container is open: read
    after `with` closes it, PyAV returns garbage (an fps of -0.654 for a 30 fps clip) or crashes."""
    import av

    try:
        with av.open(source.uri, metadata_errors="replace") as container:
            if not container.streams.video:
                raise DecodeError("no video stream")
            stream = container.streams.video[0]
            if stream.codec_context is None:
                raise DecodeError(UNKNOWN_CODEC)
            base = float(stream.time_base) if stream.time_base else None
            rate = stream.average_rate or stream.guessed_rate
            rate = float(rate) if rate else None
            pts, keys = set(), set()
            for packet in container.demux(stream):
                if packet.pts is not None and packet.size:
                    pts.add(packet.pts)
                    if packet.is_keyframe:
                        keys.add(packet.pts)
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(library_reason(exc, "pyav")) from None
    if not pts:
        raise DecodeError("no video frames: the video track's frame index is empty or damaged")
    if not base or not math.isfinite(base) or base <= 0:
        raise DecodeError(f"the video stream has no usable time base ({base!r}): damaged header")
    pts = sorted(pts)
    times = (np.asarray(pts, dtype=np.float64) - pts[0]) * base
    indices = sample_indices(times, _span(times), spec.sampling)
    wanted = sorted({pts[i] for i in indices})
    try:
        images, rotation, rejected = _decode_wanted(source.uri, spec, wanted, sorted(keys), seek=True)
        if len(images) < len(wanted):  # a seek that landed wrong (damaged index, MPEG-TS): go sequential
            images, rotation, rejected = _decode_wanted(source.uri, spec, wanted, [], seek=False)
    except Exception as exc:
        raise DecodeError("damaged video data: " + library_reason(exc, "pyav")) from None
    missing = len(wanted) - len(images)
    if missing:
        raise DecodeError(f"damaged video data: {missing} of the {len(wanted)} sampled frames could not "
                          f"be decoded ({rejected} packets rejected by the decoder); re-copy or re-export "
                          f"the file")
    notes = [f"{rejected} damaged packets skipped (none of the sampled frames)"] if rejected else []
    return _Decoded(np.stack([images[pts[i]] for i in indices]), indices, times, rate, rotation, notes)


def _decode_wanted(uri: str, spec: DecodeSpec, wanted: list[int], keys: list[int],
                   seek: bool) -> tuple[dict[int, np.ndarray], int, int]:
    """({pts: frame} for the `wanted` timestamps (ascending), rotation, packets rejected).

    With `seek`, jumps to the keyframe before each wanted frame when that keyframe lies beyond
    what has been decoded (8 frames of a 60 s clip then cost 8 GOPs, not the whole clip) and
    skips unwanted non-reference frames; otherwise decodes everything from the start. Packets
    the decoder rejects (damaged data) are skipped."""
    import av

    images: dict[int, np.ndarray] = {}
    rotation, size, rejected, last = None, None, 0, None
    wanted_set = set(wanted)
    with av.open(uri, metadata_errors="replace") as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for target in wanted:
            if target in images or (last is not None and last > target):
                continue  # already decoded, or passed (damaged): nothing better to find
            key = keys[bisect.bisect_right(keys, target) - 1] if seek and keys and keys[0] <= target else None
            if key is not None and (last is None or key > last):
                container.seek(key, stream=stream, backward=True)
            for packet in container.demux(stream):
                if seek:  # frames nothing refers to are not decoded unless wanted (about half of
                    # an H.264/HEVC stream with B-frames); the decoder reads this per packet
                    stream.codec_context.skip_frame = "DEFAULT" if packet.pts in wanted_set else "NONREF"
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError:
                    rejected += 1
                    continue
                for frame in frames:
                    if frame.pts is None:
                        continue
                    last = frame.pts
                    if rotation is None:
                        rotation = display_rotation(frame)
                        size = _coded_size(spec, rotation)
                    if frame.pts in wanted_set and frame.pts not in images:
                        images[frame.pts] = _small_rgb(frame, size, rotation)
                if last is not None and last >= target:
                    break
    return images, rotation or 0, rejected


def _small_rgb(frame, size: tuple[int, int] | None, rotation: int) -> np.ndarray:
    """One decoded frame scaled (bicubic, as FFmpeg's scale filter and so decord do by default)
    and converted to RGB in one swscale call, turned upright."""
    if size:
        frame = frame.reformat(width=size[0], height=size[1], format="rgb24", interpolation="BICUBIC")
    else:
        frame = frame.reformat(format="rgb24")
    return turn_upright(frame.to_ndarray(), rotation)


def _route(source: Source, spec: DecodeSpec) -> tuple[str, str | None]:
    """(backend, note): which decoder this clip goes to, and why when it is not the obvious one."""
    if spec.backend == "pyav":
        return "pyav", None
    try:
        info: Probe = probe(source, rotation=True)
    except DecodeError:
        if spec.backend == "decord":  # forced: let decord itself say what it makes of the file
            return "decord", None
        raise
    if info.rotation:
        if spec.backend == "decord":
            raise DecodeError(f"the clip is rotated {info.rotation} degrees (display matrix) and decord "
                              f"turns rotated clips wrongly; use the auto or pyav backend")
        return "pyav", None  # _pyav notes the rotation
    if spec.backend == "auto" and info.codec not in DECORD_EXACT_CODECS:
        return "pyav", f"{info.codec}: decoded with PyAV (decord seeks inexactly in this codec)"
    return "decord", None


def decode_clip(path: str, spec: DecodeSpec = DecodeSpec()) -> Clip:
    """Decode the frames `spec` asks for; raises DecodeError with a reason a person can act on."""
    started = time.perf_counter()
    with open_source(path) as source:
        try:
            clip = _decode_open(source, spec)
        except DecodeError as exc:
            if source.damage:  # a damaged MP4 whose index survived: what is wrong, not FFmpeg's words
                raise DecodeError(source.damage) from None
            raise
        if source.damage:
            clip.notes.append(f"{source.damage}: captioned from the frames present")
    clip.decode_seconds = time.perf_counter() - started
    return clip


def _decode_open(source: Source, spec: DecodeSpec) -> Clip:
    """Route, decode and check the timing of an opened file."""
    backend, note = _route(source, spec)
    notes = [note] if note else []
    if backend == "pyav":
        got = _pyav(source, spec)
    else:
        try:
            got = _decord(source, spec)
        except DecodeError as decord_error:
            if spec.backend == "decord":
                raise
            try:
                got = _pyav(source, spec)
                backend = "pyav"
            except DecodeError as pyav_error:  # PyAV's reason: it says which part is damaged
                raise DecodeError(f"{pyav_error} (decord failed too)") from None
            notes.append(f"decord failed, decoded with PyAV ({decord_error})")
    source.check_unchanged()
    notes.extend(got.notes)
    if got.rotation:
        notes.append(f"rotated {got.rotation} degrees (display matrix): turned upright")
    fps, duration, timing_notes = clip_timing(got.times, got.rate)
    notes.extend(timing_notes)
    indices = list(got.indices)
    if len(set(indices)) < len(indices):
        notes.append(f"{len(set(indices))} distinct frames for the {len(indices)} requested (the clip "
                     f"has {len(got.times)}): frames repeated")
    return Clip(source.path, got.frames, indices, fps, len(got.times), duration, backend, notes=notes)
