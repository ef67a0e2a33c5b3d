"""Decode the sampled frames of one clip: decord first (fast random access), PyAV as fallback.

decord here is the maintained `decord2` package (FFmpeg 8), which raises on corrupt files where
the 2021 decord wheel hung. PyAV decodes sequentially and is frame-accurate; `backend=auto`
uses it for codecs where decord returns the wrong frames (HEVC, MPEG-4 with B-frames) and when
decord refuses a file.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from video_io.sampling import SamplingSpec, sample_indices

BACKENDS = ("decord", "pyav", "auto")
# Codecs decord (decord2 3.4) seeks exactly in. Measured here: HEVC and MPEG-4 Part 2 with
# B-frames returned neighbouring frames (index 251 gave 252, 299 gave 252), so "auto" sends
# every other codec to PyAV, which is frame-accurate.
DECORD_EXACT_CODECS = frozenset({"h264", "vp8", "vp9", "av1", "libdav1d", "mjpeg"})


class DecodeError(Exception):
    """A clip that cannot be decoded; the message says why, for the error record."""


@dataclass
class Clip:
    """Sampled frames of one clip plus what a model needs to place them in time."""

    path: str
    frames: np.ndarray  # (T, H, W, 3) uint8 RGB
    indices: list[int]  # frame index in the source of each sampled frame
    source_fps: float
    total_frames: int
    duration: float
    backend: str
    decode_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

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


def _check_file(path: str) -> None:
    if not os.path.isfile(path):
        raise DecodeError(f"not a file: {path}")
    if os.path.getsize(path) == 0:
        raise DecodeError("empty file (0 bytes)")


def _decord(path: str, spec: DecodeSpec) -> Clip:
    import decord

    kwargs = {"num_threads": 1}
    if spec.width and spec.height:
        kwargs.update(width=spec.width, height=spec.height)
    try:
        reader = decord.VideoReader(path, ctx=decord.cpu(0), **kwargs)
        total = len(reader)
        if total == 0:
            raise DecodeError("no video frames")
        times = reader.get_frame_timestamp(np.arange(total))
        indices = sample_indices(times[:, 0], float(times[-1, 1]), spec.sampling)
        frames = reader.get_batch(indices).asnumpy()
        fps = float(reader.get_avg_fps())
    except DecodeError:
        raise
    except Exception as exc:  # decord raises DECORDError / RuntimeError with FFmpeg's message
        raise DecodeError(f"decord: {type(exc).__name__}: {str(exc).strip()[:300]}") from None
    return Clip(path, frames, indices, fps, total, float(times[-1, 1]), "decord")


def _probe_codec(path: str) -> str | None:
    """The first video stream's codec name, from the container header (no decoding)."""
    import av

    try:
        with av.open(path) as container:
            return container.streams.video[0].codec_context.name if container.streams.video else None
    except Exception:
        return None  # let the decoders report what is wrong


def _pyav(path: str, spec: DecodeSpec) -> Clip:
    """Two passes: packet timestamps (demux only) pick the frames, then decode up to the last
    one, converting only the frames picked. Frame-accurate for every codec FFmpeg decodes."""
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise DecodeError("no video stream")
            stream = container.streams.video[0]
            pts = sorted({p.pts for p in container.demux(stream) if p.pts is not None and p.size})
        if not pts:
            raise DecodeError("no video frames")
        base = stream.time_base or 1
        times = (np.asarray(pts, dtype=np.float64) - pts[0]) * float(base)
        step = float(np.median(np.diff(times))) if len(times) > 1 else 1 / 25.0
        duration = float(times[-1] + step)
        indices = sample_indices(times, duration, spec.sampling)
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else 1 / step
        wanted = {pts[i] for i in indices}
        images: dict[int, np.ndarray] = {}
        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for frame in container.decode(stream):
                if frame.pts in wanted and frame.pts not in images:
                    if spec.width and spec.height:
                        # bicubic, as FFmpeg's scale filter (and so decord) does by default
                        frame = frame.reformat(width=spec.width, height=spec.height, interpolation="BICUBIC")
                    images[frame.pts] = frame.to_ndarray(format="rgb24")
                    if len(images) == len(wanted):
                        break
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"pyav: {type(exc).__name__}: {str(exc).strip()[:300]}") from None
    missing = sorted(wanted - set(images))
    if missing:
        raise DecodeError(f"pyav: {len(missing)} of the sampled frames could not be decoded "
                          f"(file truncated or damaged after {len(images)} frames)")
    frames = np.stack([images[pts[i]] for i in indices])
    return Clip(path, frames, indices, fps, len(pts), duration, "pyav")


def decode_clip(path: str, spec: DecodeSpec = DecodeSpec()) -> Clip:
    """Decode the frames `spec` asks for; raises DecodeError with a reason a person can act on."""
    started = time.perf_counter()
    _check_file(path)
    notes: list[str] = []
    codec = _probe_codec(path) if spec.backend == "auto" else None
    if spec.backend == "pyav" or (codec is not None and codec not in DECORD_EXACT_CODECS):
        clip = _pyav(path, spec)
        if spec.backend == "auto":
            notes.append(f"{codec}: decoded with PyAV (decord seeks inexactly in this codec)")
    else:
        try:
            clip = _decord(path, spec)
        except DecodeError as decord_error:
            if spec.backend == "decord":
                raise
            try:
                clip = _pyav(path, spec)
            except DecodeError as pyav_error:
                raise DecodeError(f"{decord_error}; {pyav_error}") from None
            notes.append(f"decord failed, decoded with PyAV ({decord_error})")
    clip.decode_seconds = time.perf_counter() - started
    clip.notes.extend(notes)
    return clip
