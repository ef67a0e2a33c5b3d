"""Decode the sampled frames of one clip: PyAV by default, decord on request.

`backend=auto` is PyAV: frame-accurate for every codec FFmpeg decodes (frames matched by
timestamp), it turns rotated clips upright, and it is the faster decoder here in every seek mode
(docs/decoding.md "Cost": 1080p H.264, 8 frames, one core: keyframe 0.25 s against decord's 0.46 s,
exact 1.44 s against 2.27 s). `backend=decord` (the maintained `decord2` package, FFmpeg 8) stays
for comparison; it returns neighbouring frames in HEVC and MPEG-4 with B-frames and refuses
rotated clips (DECORD_EXACT_CODECS). `backend=nvdec` is the PyAV path with the GPU's decoder
(video_io/nvdec.py): the same frames, seeks and records, the pictures reconstructed by NVDEC.

Both decoders scale every kept frame to the requested size as it is decoded (decord in its
FFmpeg filter graph, PyAV per frame), so a 4K clip never has a stack of full-size frames in
memory. The size keeps the clip's aspect ratio (video_io/sizing.py) unless an exact width and
height are asked for. Every Clip that leaves this module has checked metadata (Clip.__post_init__).

Seek modes (DecodeSpec.seek, video_io/seek.py): "exact", "keyframe" and "auto" (the default); a
record's `seek` says which frames it got.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from video_io.pyav_frames import decode_counters, decode_sampled, indexed_timeline, packet_index
from video_io.sampling import TIE_S, SamplingSpec
from video_io.seek import SEEK_MODES, pick_frames
from video_io.sizing import fit_size
from video_io.source import DecodeError, Probe, Source, first_video_stream, library_reason, open_source, probe
from video_io.timing import MAX_FPS, MIN_FPS, clip_timing

__all__ = ["BACKENDS", "Clip", "DecodeError", "DecodeSpec", "decode_clip"]

BACKENDS = ("decord", "pyav", "auto", "nvdec")
# Codecs decord (decord2 3.4) seeks exactly in. Measured here: HEVC and MPEG-4 Part 2 with
# B-frames returned neighbouring frames (index 251 gave 252, 299 gave 252); video_io/thumbnails.py
# sends those to PyAV.
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
    times: list[float] = field(default_factory=list)  # start of each sampled frame, s from the first frame
    seek: str = "exact"  # how the frames were found: "exact", "keyframe" or "nearby" (module docstring)
    # PyAV only: frames the decoder output, frames output more than once, frames converted to RGB
    decode_stats: dict = field(default_factory=dict)
    # DecodeSpec.window: the segment's frames [first, end) in the source. The model is told of the segment
    # as a clip of its own (metadata()): its frame count, duration and indices. Told of the whole file,
    # Qwen's processor takes the sampling rate as samples / whole-file frames x fps (transformers
    # video_utils.py VideoMetadata.sampled_fps) and spaces the frames in time as if they spanned the file
    segment_frames: tuple[int, int] | None = None
    fetched_bytes: int | None = None  # an object in a store: the bytes its range requests fetched (video_io/store.py)

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
        """Video metadata in the form transformers' and vLLM's video processors take (of the segment
        alone, for a segment of a long video)."""
        first, end = self.segment_frames or (0, self.total_frames)
        return {
            "total_num_frames": end - first,
            "fps": self.source_fps,
            "duration": self.duration if self.segment_frames is None else (end - first) / self.source_fps,
            "frames_indices": [i - first for i in self.indices],
            "video_backend": self.backend,
            "do_sample_frames": False,
        }


@dataclass(frozen=True)
class DecodeSpec:
    sampling: SamplingSpec  # which frames: no default, as SamplingSpec says
    width: int | None = None  # exactly this size (both set); None: aspect-preserving within max_pixels
    height: int | None = None
    backend: str = "auto"  # "auto": PyAV (module docstring); "decord" or "pyav" to force one; "nvdec": PyAV
    # decoding on the GPU (video_io/nvdec.py)
    max_pixels: int | None = None  # pixel budget per frame (aspect kept); None with no width/height: source size
    size_multiple: int = 28  # both sides a multiple of this (the model's patch x merge)
    seek: str = "auto"  # "exact", "keyframe" or "auto" (module docstring)
    # only the frames starting in these (start, end) seconds of the file: one segment of a long video
    # (video_io/scenes.py finds them); the frames' times stay the file's
    window: tuple[float, float] | None = None

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"video backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.seek not in SEEK_MODES:
            raise ValueError(f"video seek must be one of {SEEK_MODES}, got {self.seek!r}")
        if (self.width is None) != (self.height is None):
            raise ValueError(f"set both video width and height (an exact size) or neither, got "
                             f"{self.width}x{self.height}")
        for side in (self.width, self.height):
            if side is not None and side < 2:
                raise ValueError(f"resize sides must be >= 2 px, got {self.width}x{self.height}")
        if self.size_multiple < 1:
            raise ValueError(f"size_multiple must be >= 1, got {self.size_multiple}")
        if self.window is not None and not 0 <= self.window[0] < self.window[1]:
            raise ValueError(f"a window is (start, end) seconds with 0 <= start < end, got {self.window}")
        if self.max_pixels is not None and self.max_pixels < self.size_multiple ** 2:
            raise ValueError(f"max_pixels ({self.max_pixels}) is below one {self.size_multiple}x"
                             f"{self.size_multiple} block")

    def upright_size(self, width: int, height: int) -> tuple[int, int] | None:
        """(width, height) to give an upright `width` x `height` frame; None keeps it."""
        if self.width and self.height:
            return self.width, self.height
        if self.max_pixels:
            h, w = fit_size(height, width, self.size_multiple, self.max_pixels)
            return w, h
        return None


def _coded_size(spec: DecodeSpec, rotation: int, coded_w: int, coded_h: int) -> tuple[int, int] | None:
    """The size to scale coded frames to, so that after turning them upright they have the size
    spec asks for."""
    turned = rotation in (90, 270)
    size = spec.upright_size(*((coded_h, coded_w) if turned else (coded_w, coded_h)))
    if size is None:
        return None
    return (size[1], size[0]) if turned else size


@dataclass
class _Decoded:
    frames: np.ndarray
    indices: list[int]
    times: np.ndarray  # start of every frame of the clip, seconds from the first
    rate: float | None  # the container's frame rate
    rotation: int = 0  # degrees the frames were turned to be upright
    notes: list[str] = field(default_factory=list)
    seek: str = "exact"
    stats: dict = field(default_factory=dict)


def _decord(source: Source, spec: DecodeSpec, info: Probe | None) -> _Decoded:
    """Frames, indices and timing as decord reads them. Only for clips without rotation:
    decord2 turns rotated clips itself, inconsistently (180 degrees gave 4-channel frames)."""
    import decord

    kwargs = {"num_threads": 1}
    size = _coded_size(spec, 0, info.width, info.height) if info else ((spec.width, spec.height) if spec.width else None)
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
        keys = [int(k) for k in reader.get_key_indices()] if spec.seek != "exact" else []
        indices, seek, note = pick_frames(times, keys, spec.sampling, spec.window, spec.seek)
        frames = reader.get_batch(indices).asnumpy()
        del reader
    except DecodeError:
        raise
    except Exception as exc:  # decord raises DECORDError / RuntimeError with FFmpeg's message
        raise DecodeError(library_reason(exc, "decord")) from None
    return _Decoded(frames, indices, times, fps, notes=[note] if note else [], seek=seek)


def _pyav(source: Source, spec: DecodeSpec, on_gpu: bool = False) -> _Decoded:
    """Two passes: packet timestamps (demux only) pick the frames, then decode them, scaling and
    converting only the frames picked. Frame-accurate for every codec FFmpeg decodes: frames
    are matched by timestamp. Every stream property is read while its container is open: read
    after `with` closes it, PyAV returns garbage (an fps of -0.654 for a 30 fps clip) or crashes.

    An object in a store takes its timestamps from the MP4's index instead where it can (indexed_timeline):
    demuxing would fetch the whole object, and seeking to the frames picked fetches only what is decoded
    there. Where that pass fails (its timestamps were not the packets'), the demuxing one runs."""
    if source.fetched is not None:
        try:
            got = _pyav_pass(source, spec, on_gpu, indexed=True)
            if got is not None:
                return got
        except DecodeError:
            pass  # the pass below reads every packet, and says what is wrong if anything is
    got = _pyav_pass(source, spec, on_gpu, indexed=False)
    assert got is not None
    return got


def _pyav_pass(source: Source, spec: DecodeSpec, on_gpu: bool, indexed: bool) -> _Decoded | None:
    with first_video_stream(source.uri) as (container, stream):
        base = float(stream.time_base) if stream.time_base else None
        rate = stream.average_rate or stream.guessed_rate
        rate = float(rate) if rate else None
        timeline = indexed_timeline(container, stream, source.pread, source.size) if indexed else \
            packet_index(container, stream)
        if timeline is None:
            return None
        pts, key_list = timeline
    if not pts:
        raise DecodeError("no video frames: the video track's frame index is empty or damaged")
    if not base or not math.isfinite(base) or base <= 0:
        raise DecodeError(f"the video stream has no usable time base ({base!r}): damaged header")
    times = (np.asarray(pts, dtype=np.float64) - pts[0]) * base
    index_of = {p: i for i, p in enumerate(pts)}
    indices, seek, note = pick_frames(times, [index_of[k] for k in key_list if k in index_of], spec.sampling, spec.window,
                                     spec.seek)
    wanted = sorted({pts[i] for i in indices})
    stats = decode_counters()
    images, rotation, rejected = decode_sampled(source.uri, lambda turn, w, h: _coded_size(spec, turn, w, h),
                                                wanted, key_list, seek, stats, on_gpu=on_gpu)
    notes = [note] if note else []
    if rejected:
        notes.append(f"{rejected} damaged packets skipped (none of the sampled frames)")
    return _Decoded(np.stack([images[pts[i]] for i in indices]), indices, times, rate, rotation, notes,
                    seek, stats)


def _route(source: Source, spec: DecodeSpec) -> tuple[str, Probe | None]:
    """(backend, probe): PyAV unless decord or NVDEC is asked for; decord refuses a rotated clip."""
    if spec.backend == "nvdec":
        return "nvdec", None
    if spec.backend != "decord":
        return "pyav", None
    try:
        info: Probe = probe(source, rotation=True)
    except DecodeError:  # let decord itself say what it makes of the file
        return "decord", None
    if info.rotation:
        raise DecodeError(f"the clip is rotated {info.rotation} degrees (display matrix) and decord "
                          f"turns rotated clips wrongly; use the auto or pyav backend")
    return "decord", info


def decode_clip(path: str, spec: DecodeSpec) -> Clip:
    """Decode the frames `spec` asks for; raises DecodeError with a reason a person can act on."""
    started = time.perf_counter()
    with open_source(path) as source:
        try:
            clip = _decode_open(source, spec)
        except DecodeError:
            source.check_unchanged()  # a file or object changed under the decoder: that, not what it made of it
            if source.damage:  # a damaged MP4 whose index survived: what is wrong, not FFmpeg's words
                raise DecodeError(source.damage) from None
            raise
        if source.damage:
            clip.notes.append(f"{source.damage}: captioned from the frames present")
        clip.fetched_bytes = source.fetched
    clip.decode_seconds = time.perf_counter() - started
    return clip


def _decode_open(source: Source, spec: DecodeSpec) -> Clip:
    """Route, decode and check the timing of an opened file."""
    backend, info = _route(source, spec)
    notes: list[str] = []
    if backend == "decord":
        got = _decord(source, spec, info)
    else:
        got = _pyav(source, spec, on_gpu=backend == "nvdec")
        if backend == "nvdec" and not got.stats["on_gpu"]:  # the record names the decoder that made the frames
            backend = "pyav"
            notes.append("NVDEC cannot decode this stream (its codec or profile): decoded on the CPU")
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
    times = [round(float(got.times[i]), 6) for i in indices]
    segment = None
    if spec.window is not None:
        first, end = (int(np.searchsorted(got.times, edge - TIE_S)) for edge in spec.window)
        segment = (min(first, min(indices)), max(end, max(indices) + 1))
    return Clip(source.path, got.frames, indices, fps, len(got.times), duration, backend, notes=notes,
                times=times, seek=got.seek, decode_stats=dict(got.stats), segment_frames=segment)
