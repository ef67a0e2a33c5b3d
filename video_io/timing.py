"""A clip's frame rate and duration, made consistent with its frame timestamps.

The engine places frames in time from the fps in the video metadata (Qwen2.5-VL/Qwen3-VL
M-RoPE positions); a garbage fps there crashed vLLM's rotary embedding and killed the whole job
(measured on these machines, 2026-11). So a container's frame rate is used only
when it is finite, plausible and agrees with the timestamps; otherwise the timestamps decide.
"""

from __future__ import annotations

import math

import numpy as np

from video_io.source import DecodeError

# Plausible frame rates: below, a "video" is a slide show of one frame per 10 s; above, no camera
# records. Outside this range the M-RoPE positions the engine derives grow out of its tables.
MIN_FPS, MAX_FPS = 0.1, 1000.0
# Container rate and timestamps agree when the frame count they imply over the clip's duration
# differs by at most one frame or this fraction of the frames, whichever is larger.
FPS_TOLERANCE = 0.05


def _plausible(rate) -> bool:
    return rate is not None and math.isfinite(rate) and MIN_FPS <= rate <= MAX_FPS


def consistent(fps: float, n_frames: int, duration: float) -> bool:
    return abs(fps * duration - n_frames) <= max(1.0, FPS_TOLERANCE * n_frames)


def clip_timing(times: np.ndarray, container_fps: float | None) -> tuple[float, float, list[str]]:
    """(fps, duration, notes) for frames starting at `times` (seconds from the first frame,
    ascending, unique). Duration runs to the end of the last frame (one typical frame step after
    its start). Raises DecodeError when neither the container nor the timestamps give a rate."""
    times = np.asarray(times, dtype=np.float64)
    n = len(times)
    if n == 0:
        raise DecodeError("no video frames")
    if not np.all(np.isfinite(times)) or (n > 1 and not np.all(np.diff(times) > 0)):
        raise DecodeError("frame timestamps are not finite and increasing: damaged file")
    container_fps = float(container_fps) if container_fps is not None else None
    if n > 1:
        step = float(np.median(np.diff(times)))
        duration = float(times[-1] - times[0]) + step
        stamped_fps = n / duration
    else:  # one frame: only the container can say how long it lasts
        stamped_fps = None
        duration = 1.0 / container_fps if _plausible(container_fps) else math.nan
    notes: list[str] = []
    if _plausible(container_fps) and (stamped_fps is None or consistent(container_fps, n, duration)):
        return container_fps, duration, notes
    if not _plausible(stamped_fps):
        raise DecodeError(f"no usable frame rate: the container says {container_fps!r} fps and the "
                          f"timestamps {n} frames in {duration:.6g}s; the file's timing is damaged")
    said = "gives no" if container_fps is None else f"says {container_fps:.6g}"
    notes.append(f"the container {said} frame rate, the timestamps {n} frames in "
                 f"{duration:.3f}s: using {stamped_fps:.3f} fps")
    return stamped_fps, duration, notes
