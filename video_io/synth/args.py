"""Command-line values the synthetic-footage commands share (caption-synth, caption-footage,
caption-synth-long)."""

from __future__ import annotations

import argparse


def frame_size(text: str) -> tuple[int, int]:
    """`--size WxH` as (width, height)."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size must look like 112x112 (WxH), got {text!r}") from None
    return width, height
