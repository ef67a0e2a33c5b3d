"""Qwen2.5-VL's 3-D (M-RoPE) position ids as Qwen defined them, for transformers 5.x.

Qwen2.5-VL places a video's tokens at (time, row, column) positions, time spaced by
`tokens_per_second x second_per_grid`, and the text after the video continues from the largest
position used so far + 1. transformers 5.19 restarts the text after a video at
`start + max(rows, columns)`, ignoring how far time went, while its own generation step
continues from the true maximum: the prompt and the generated tokens then disagree with each
other, with vLLM, and with how Qwen's checkpoints were trained (seen here: the same greedy
caption differed between the engines until this was fixed).

`patch_transformers()` swaps in this implementation, only when a probe shows the installed
transformers still has the bug, so it retires itself once transformers is fixed. The embedded
model is trained with these positions, and the transformers engine applies the same patch.
"""

from __future__ import annotations

import itertools

import torch


def reference_rope_index(self, input_ids, mm_token_type_ids, image_grid_thw=None, video_grid_thw=None,
                         second_per_grid_ts=None, attention_mask=None, **kwargs):
    """(position_ids (3, B, L), rope_deltas (B, 1)) with Qwen's placement (see module docstring)."""
    merge = self.config.vision_config.spatial_merge_size
    tokens_per_second = self.config.vision_config.tokens_per_second
    batch, length = input_ids.shape
    device = input_ids.device
    position_ids = torch.zeros(3, batch, length, dtype=input_ids.dtype, device=device)
    grids = {1: iter(image_grid_thw.tolist() if image_grid_thw is not None else ()),
             2: iter(video_grid_thw.tolist() if video_grid_thw is not None else ())}
    seconds = iter(second_per_grid_ts.tolist() if second_per_grid_ts is not None else ())
    deltas = []
    for row in range(batch):
        keep = attention_mask[row].bool() if attention_mask is not None else torch.ones(length, dtype=torch.bool)
        kinds = mm_token_type_ids[row][keep.to(mm_token_type_ids.device)].tolist()
        pieces, next_pos = [], 0
        for kind, group in itertools.groupby(kinds):
            count = len(list(group))
            if kind == 0:  # text: one position per token, the same on all three axes
                pieces.append(torch.arange(count, device=device).expand(3, -1) + next_pos)
                next_pos += count
                continue
            t, h, w = next(grids[kind])
            h, w = h // merge, w // merge
            assert t * h * w == count, "vision tokens do not match their grid"
            step = tokens_per_second * next(seconds, 1.0) if kind == 2 else 1.0
            times = (torch.arange(t, device=device, dtype=torch.float64) * step).long()
            grid = torch.stack([times.view(t, 1, 1).expand(t, h, w),
                                torch.arange(h, device=device).view(1, h, 1).expand(t, h, w),
                                torch.arange(w, device=device).view(1, 1, w).expand(t, h, w)]).reshape(3, -1)
            pieces.append(grid + next_pos)
            next_pos = int(pieces[-1].max()) + 1  # text resumes after the largest position used
        positions = torch.cat(pieces, dim=1)
        position_ids[:, row, keep.to(device)] = positions.to(position_ids.dtype)
        deltas.append(next_pos - len(kinds))
    return position_ids, torch.tensor(deltas, device=device).unsqueeze(1)


def _has_bug(model_cls) -> bool:
    """True when the installed get_rope_index starts text after a video too early."""
    from types import SimpleNamespace

    probe = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(
        spatial_merge_size=2, tokens_per_second=2, temporal_patch_size=2)))
    probe.get_vision_position_ids = getattr(model_cls, "get_vision_position_ids", None)
    if probe.get_vision_position_ids is not None:
        probe.get_vision_position_ids = probe.get_vision_position_ids.__get__(probe)
    ids = torch.zeros(1, 2 + 4 * 2 * 2 + 1, dtype=torch.long)  # text, 4x(2x2) video, text
    types = torch.tensor([[0, 0] + [2] * 16 + [0]])
    args = dict(input_ids=ids, mm_token_type_ids=types, video_grid_thw=torch.tensor([[4, 4, 4]]),
                second_per_grid_ts=torch.tensor([1.0]))
    try:
        installed, _ = model_cls.get_rope_index(probe, **args)
    except Exception:
        return True  # an incompatible signature: use ours
    expected, _ = reference_rope_index(probe, **args)
    return not torch.equal(installed, expected)


def patch_transformers() -> bool:
    """Use reference_rope_index in transformers' Qwen2.5-VL if needed; returns True if patched."""
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

    if getattr(qwen.Qwen2_5_VLModel.get_rope_index, "__vidcap_patch__", False):
        return True
    if not _has_bug(qwen.Qwen2_5_VLModel):
        return False
    reference_rope_index.__vidcap_patch__ = True  # type: ignore[attr-defined]
    qwen.Qwen2_5_VLModel.get_rope_index = reference_rope_index
    return True
