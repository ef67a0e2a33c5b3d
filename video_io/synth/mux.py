"""The encode loop every clip writer here shares (caption-synth, caption-footage, the tests' clip makers)."""

from __future__ import annotations

from typing import Iterable


def encode_all(container, stream, frames: Iterable) -> None:
    """Encode each PyAV frame (video or audio) on `stream`, mux its packets, then flush the encoder:
    an encoder holds frames back (B-frames, lookahead) until it is flushed with no frame."""
    for frame in frames:
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
