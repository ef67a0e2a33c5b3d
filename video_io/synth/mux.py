"""The encode loop every clip writer here shares (caption-synth, caption-footage, the tests' clip makers)."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Iterator

import numpy as np


def encode_all(container, stream, frames: Iterable) -> None:
    """Encode each PyAV frame (video or audio) on `stream`, mux its packets, then flush the encoder:
    an encoder holds frames back (B-frames, lookahead) until it is flushed with no frame."""
    for frame in frames:
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def timed_frames(pictures: Iterable[np.ndarray], fps: int, format: str = "yuv420p") -> Iterator:
    """PyAV video frames of `pictures` (arrays in `format`), frame i at i / fps: left unset, the
    timestamps give x264 garbage durations."""
    import av

    for i, picture in enumerate(pictures):
        frame = av.VideoFrame.from_ndarray(picture, format=format)
        frame.pts, frame.time_base = i, Fraction(1, fps)
        yield frame
