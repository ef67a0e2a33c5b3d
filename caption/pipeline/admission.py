"""Checks a request must pass before it reaches the engine.

vLLM 0.32 does not validate video metadata: a request whose temporal positions run past the model's
rotary-embedding table raises inside an engine step (`IndexError ... out of bounds` in
vllm/model_executor/layers/rotary_embedding/mrope.py) and takes every request in flight with it.
Such a request is refused here, with an error record, and the job goes on.

Qwen2-VL / Qwen2.5-VL (families with `fps_scaled_positions`) place the video's temporal index t at t x second_per_grid x tokens_per_second,
where second_per_grid = temporal_patch_size / fps (transformers' processing_qwen2_5_vl.py and vLLM's
model_executor/models/qwen2_5_vl.py `iter_mm_grid_thw`), so the fps in the metadata sets how far the
positions reach.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidcap_ko.families import get_family


@dataclass(frozen=True)
class PositionLimits:
    """What bounds a request's positions, read once from the checkpoint's config.json."""

    max_positions: int          # positions the model (and so the engine's rotary table) covers
    temporal_patch_size: int = 2
    tokens_per_second: float = 1.0
    fps_scaled: bool = False

    @classmethod
    def from_checkpoint(cls, model_path: str, family: str, max_model_len: int) -> "PositionLimits":
        try:
            config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = {}  # a hub id: no file to read here, keep the length bound only
        text = config.get("text_config") or config
        vision = config.get("vision_config") or {}
        limit = min(int(text.get("max_position_embeddings") or max_model_len), int(max_model_len))
        return cls(max_positions=limit, temporal_patch_size=int(vision.get("temporal_patch_size") or 2),
                   tokens_per_second=float(vision.get("tokens_per_second") or 1.0),
                   fps_scaled=get_family(family).fps_scaled_positions)


def refusal(frames_count: int, metadata: dict[str, Any], limits: PositionLimits, prompt_budget: int) -> str | None:
    """Why the engine cannot take this request, or None. `prompt_budget`: text tokens plus the
    longest output, as the plan counts them."""
    fps, duration = metadata.get("fps"), metadata.get("duration")
    total, indices = metadata.get("total_num_frames"), list(metadata.get("frames_indices") or [])
    if not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        return f"video metadata: fps {fps!r} is not a positive number"
    if not isinstance(duration, (int, float)) or not math.isfinite(duration) or duration <= 0:
        return f"video metadata: duration {duration!r} is not a positive number of seconds"
    if len(indices) != frames_count:
        return f"video metadata: {len(indices)} frame indices for {frames_count} frames"
    if total is None or total < 1 or any(i < 0 or i >= total for i in indices):
        return f"video metadata: frame indices {indices[:3]}... outside the clip's {total} frames"
    if limits.fps_scaled:
        grids = math.ceil(frames_count / limits.temporal_patch_size)
        reach = (grids - 1) * limits.temporal_patch_size / fps * limits.tokens_per_second
        if reach + prompt_budget >= limits.max_positions:
            return (f"video metadata: fps {fps:g} puts the video's temporal positions at {reach:.0f}, beyond the "
                    f"model's {limits.max_positions} positions (with {prompt_budget} for text and output); "
                    "the clip's frame rate is probably misreported")
    return None
