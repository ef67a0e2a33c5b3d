"""The thumbnails video_io/scenes.py finds shots in: one small picture per decoded frame (luma and both
chroma planes as block means on a grid of CELLS on the short side), decoded with PyAV, non-reference
frames left undecoded where the frame rate allows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from video_io.source import DecodeError, first_video_stream, open_source

SKIP_NONREF_FPS = 20.0  # frame rates from which non-reference frames are left undecoded (skip="auto")
CELLS = 24  # thumbnail cells on the short side
PROGRESS_FRAMES = 256  # read_thumbnails calls its `progress` every this many frames (~1-2 s of 1080p work)


@dataclass(frozen=True)
class Thumbnails:
    """One thumbnail per decoded frame: times (s from the first frame), features (N, 3, rows, cols)
    uint8: the luma cells and both chroma planes' (about 3 KB a frame: 200-330 MB for an hour at 30 fps)."""

    times: np.ndarray
    features: np.ndarray
    duration_s: float


# --- decoding --------------------------------------------------------------------------------------

def _grid(height: int, width: int, cells: int = CELLS) -> tuple[int, int]:
    """(rows, cols) of a picture's thumbnail: `cells` on the short side, square cells."""
    side = max(1, min(height, width) // cells)
    return max(1, height // side), max(1, min(width // side, cells * 3))


def plane_thumbnail(plane: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Block means of a (H, W) uint8 plane on a rows x cols grid, each from a sparse grid of its pixels
    (about 4x4 per cell: a low-pass picture that a small pan or grain barely moves)."""
    height, width = plane.shape
    cell_h, cell_w = height // rows, width // cols
    sub = max(1, min(cell_h, cell_w) // 4)
    kh, kw = max(1, cell_h // sub), max(1, cell_w // sub)
    blocks = plane[:rows * cell_h, :cols * cell_w].reshape(rows, cell_h, cols, cell_w)
    return blocks[:, :kh * sub:sub, :, :kw * sub:sub].mean(axis=(1, 3), dtype=np.float32)


def _planes(frame) -> list[np.ndarray]:
    """Y, U, V of an 8-bit 4:2:0 frame as views of its buffers (any other format converted first)."""
    if frame.format.name not in ("yuv420p", "yuvj420p"):
        frame = frame.reformat(format="yuv420p")
    out = []
    for plane in frame.planes:
        rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
        out.append(rows[:, :plane.width])
    return out


def frame_features(frame, rows: int, cols: int) -> np.ndarray:
    """A frame's thumbnail (3, rows, cols) uint8: luma cells, then both chroma planes' cells."""
    y, u, v = _planes(frame)
    cells = np.stack([plane_thumbnail(y, rows, cols), plane_thumbnail(u, rows, cols), plane_thumbnail(v, rows, cols)])
    return np.rint(cells).astype(np.uint8)


def read_thumbnails(path: str, threads: int = 0, skip: str = "auto", progress: Callable[[], None] | None = None) -> Thumbnails:
    """Decode the first video stream of `path` into thumbnails. `threads`: decoder threads (0: FFmpeg's
    choice); `skip`: "auto" leaves non-reference frames undecoded from SKIP_NONREF_FPS on, "nonref"
    always, "none" never; `progress`: called every PROGRESS_FRAMES frames (a worker's sign of life).
    Raises DecodeError saying why a file cannot be read."""
    with open_source(path) as source, first_video_stream(source.uri) as (container, stream):
        return _decode(container, stream, threads, skip, progress)


def _decode(container, stream, threads: int, skip: str, progress: Callable[[], None] | None = None) -> Thumbnails:
    import av

    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else 0.0
    if skip not in ("auto", "nonref", "none"):
        raise ValueError(f"skip must be auto, nonref or none, got {skip!r}")
    if threads:
        stream.thread_count = threads
    stream.thread_type = "AUTO" if threads != 1 else "SLICE"
    if skip == "nonref" or (skip == "auto" and fps >= SKIP_NONREF_FPS):
        stream.codec_context.skip_frame = "NONREF"
    base = float(stream.time_base)
    times, features, grid = [], [], None
    for packet in container.demux(stream):
        try:
            frames = packet.decode()
        except av.error.InvalidDataError:  # a damaged packet: its frame is missing, the rest is read
            continue
        for frame in frames:
            if frame.pts is None:
                continue
            if grid is None:
                grid = _grid(frame.height, frame.width)
            times.append(frame.pts * base)
            features.append(frame_features(frame, *grid))
            if progress is not None and len(times) % PROGRESS_FRAMES == 0:
                progress()
    if not times:
        raise DecodeError("no video frames could be decoded: the video track is empty or damaged")
    order = np.argsort(times, kind="stable")
    t = np.asarray(times, np.float64)[order]
    t0 = t[0]
    step = 1 / fps if fps > 0 else (float(np.median(np.diff(t))) if len(t) > 1 else 0.0)
    header = stream.duration * base if stream.duration else None
    duration = max(float(t[-1] - t0) + step, header or 0.0)
    return Thumbnails(t - t0, np.stack(features)[order], duration)
