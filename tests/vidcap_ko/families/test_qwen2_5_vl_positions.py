"""Qwen2.5-VL M-RoPE positions as Qwen (and vLLM) place them; transformers 5.19 differs."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from vidcap_ko.families.common.qwen2_5_vl_positions import patch_transformers, reference_rope_index


def _model(tokens_per_second=25):
    return SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(
        spatial_merge_size=2, tokens_per_second=tokens_per_second)))


def test_positions_follow_qwens_worked_example():
    # Qwen2.5-VL's documented example: 3 temporal x 2 x 2 grid, fps 1, 25 tokens/s, temporal patch 2:
    # time ids 0, 50, 100; text after the video starts at the largest id + 1 = 101
    types = torch.tensor([[2] * 12 + [0] * 5])
    ids = torch.zeros_like(types)
    positions, deltas = reference_rope_index(_model(), ids, types, video_grid_thw=torch.tensor([[3, 4, 4]]),
                                             second_per_grid_ts=torch.tensor([2.0]))
    assert positions[0, 0, :12].tolist() == [0] * 4 + [50] * 4 + [100] * 4
    assert positions[1, 0, :12].tolist() == [0, 0, 1, 1] * 3
    assert positions[2, 0, :12].tolist() == [0, 1, 0, 1] * 3
    assert positions[:, 0, 12:].tolist() == [[101, 102, 103, 104, 105]] * 3
    assert deltas.item() == 106 - 17


def test_fractional_intervals_and_left_padding():
    types = torch.tensor([[0, 0, 0] + [2] * 8, [0] * 3 + [2] * 8])
    mask = torch.tensor([[0, 1, 1] + [1] * 8, [1] * 11])
    positions, _ = reference_rope_index(_model(tokens_per_second=2), torch.zeros_like(types), types,
                                        video_grid_thw=torch.tensor([[2, 4, 4], [2, 4, 4]]),
                                        second_per_grid_ts=torch.tensor([0.25, 0.75]), attention_mask=mask)
    assert positions[0, 0, 3:11].tolist() == [2] * 8  # 0.25 s x 2 tokens/s: both grids at step 0
    assert positions[0, 1, 3:11].tolist() == [3] * 4 + [4] * 4  # 1.5 steps -> floor(1.5) = 1
    assert positions[:, 0, 0].tolist() == [0, 0, 0]  # padding left untouched


def test_the_patch_is_applied_only_where_transformers_needs_it():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

    patched = patch_transformers()
    assert patch_transformers() == patched  # idempotent
    if patched:
        assert qwen.Qwen2_5_VLModel.get_rope_index is reference_rope_index
