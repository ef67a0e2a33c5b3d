"""Which frames of a clip to decode: uniform over the clip, or at a fixed rate in time.

Both work on frame timestamps, not on the average frame rate, so variable-frame-rate clips are
sampled evenly in time (an index-uniform pick is not time-uniform when the rate varies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("uniform", "fps")


@dataclass(frozen=True)
class SamplingSpec:
    mode: str = "uniform"  # "uniform": num_frames spread over the clip; "fps": a fixed rate
    # uniform: exactly this many frames. No default: what a model sees is its preset's (conf/model/ `frames`,
    # video.num_frames), and a number here would be a second answer nobody reads
    num_frames: int | None = None
    fps: float = 2.0  # fps mode: frames per second of video
    max_frames: int = 32  # fps mode: cap; longer clips are thinned uniformly
    min_frames: int = 2  # fps mode: short clips still give at least this many

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"video sampling mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "uniform" and self.num_frames is None:
            raise ValueError("uniform sampling needs num_frames (the model preset's `frames`)")
        if (self.num_frames is not None and self.num_frames < 1) or self.max_frames < 1 or self.min_frames < 1:
            raise ValueError("num_frames, max_frames and min_frames must be >= 1")
        if self.mode == "fps" and self.fps <= 0:
            raise ValueError(f"sampling fps must be > 0, got {self.fps}")
        if self.min_frames > self.max_frames:
            raise ValueError(f"min_frames ({self.min_frames}) > max_frames ({self.max_frames})")


# Ties (a target half-way between two frames, as when sampling every frame of a clip) go to the
# earlier frame. decord's timestamps are float32 (0.04 s reads 0.0399999991), so a tie is
# anything within this many seconds, else both decoders could pick different frames.
TIE_S = 1e-5


def _nearest(timestamps: np.ndarray, targets: np.ndarray) -> list[int]:
    """Index of the frame whose start time is closest to each target time."""
    right = np.clip(np.searchsorted(timestamps, targets), 1, len(timestamps) - 1)
    left = right - 1
    pick = np.where(targets - timestamps[left] <= timestamps[right] - targets + TIE_S, left, right)
    return [int(i) for i in pick]


def _segments(timestamps: np.ndarray, duration: float, spec: SamplingSpec,
              window: tuple[float, float] | None = None) -> tuple[float, float, int]:
    """(start, width, count): the clip, or the `window` (start, end) seconds of it (a segment of a long
    video), cut into `count` equal time segments, one sampled frame each."""
    if window is not None:
        start, length = float(window[0]), float(window[1]) - float(window[0])
    else:
        duration = max(float(duration), float(timestamps[-1]))
        start, length = float(timestamps[0]), duration - float(timestamps[0])
    if spec.mode == "uniform" and spec.num_frames is not None:  # __post_init__: uniform has it
        count = spec.num_frames
    else:  # the whole clip keeps its rule (its duration) exactly; a window counts its own length
        seconds = length if window is not None else duration
        count = int(np.clip(np.floor(seconds * spec.fps), spec.min_frames, spec.max_frames))
    return start, length / count, count


def segment_edges(timestamps: np.ndarray, duration: float, spec: SamplingSpec,
                  window: tuple[float, float] | None = None) -> np.ndarray:
    """The count + 1 edges (seconds) of the segments sample_indices takes one frame from (its centre)."""
    start, width, count = _segments(np.asarray(timestamps, dtype=np.float64), duration, spec, window)
    return start + np.arange(count + 1) * width


def sample_indices(timestamps: np.ndarray, duration: float, spec: SamplingSpec,
                   window: tuple[float, float] | None = None) -> list[int]:
    """Frame indices to decode, given each frame's start time (seconds, ascending); with `window`,
    from the frames of those (start, end) seconds only."""
    n = len(timestamps)
    if n == 0:
        raise ValueError("the clip has no frames")
    if n == 1:
        return [0] * (spec.num_frames if spec.mode == "uniform" and spec.num_frames else spec.min_frames)
    timestamps = np.asarray(timestamps, dtype=np.float64)
    start, width, count = _segments(timestamps, duration, spec, window)
    # centres of the segments: symmetric, never both ends of the clip
    return _nearest(timestamps, start + (np.arange(count) + 0.5) * width)
