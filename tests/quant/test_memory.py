"""Planner arithmetic against worked numbers, processor rules and a real checkpoint's parameter count."""

from __future__ import annotations

import numpy as np
import pytest

from quant import memory
from quant.memory import GB, GIB
from quant.presets import load_model
from vidcap_ko.families import qwen3_vl
from vidcap_ko.families.common.qwen import smart_resize


def test_kv_cache_matches_the_design_documents_worked_numbers():
    # LLaMA-3-8B: 32 layers, 8 KV heads (GQA), head 128, bf16, 8,192 tokens -> 1.07 GB
    llama3_8b = memory.kv_bytes(memory.kv_bytes_per_token(32, 8, 128, 2), 8192)
    assert round(llama3_8b / GB, 2) == 1.07
    # LLaMA-3-70B: 80 layers, same heads -> 2.68 GB
    assert round(memory.kv_bytes(memory.kv_bytes_per_token(80, 8, 128, 2), 8192) / GB, 2) == 2.68
    # LLaMA-7B: 32 layers, 32 heads (no GQA), fp16, 2,048 tokens -> 1.07 GB a sequence, ~34 GB at batch 32
    per_token = memory.kv_bytes_per_token(32, 32, 128, 2)
    assert round(memory.kv_bytes(per_token, 2048) / GB, 2) == 1.07
    assert round(memory.kv_bytes(per_token, 2048, sequences=32) / GB) == 34


def test_grouped_query_attention_stores_only_the_kv_heads():
    assert memory.kv_bytes_per_token(32, 8, 128, 2) * 4 == memory.kv_bytes_per_token(32, 32, 128, 2)
    qwen7b = load_model("qwen2_5_vl_7b")["arch"]
    assert memory.arch_kv_bytes_per_token(qwen7b, "bfloat16") == 2 * 28 * 4 * 128 * 2 == 57344
    assert memory.arch_kv_bytes_per_token(qwen7b, "fp8") == 57344 / 2


def test_kv_blocks_round_a_sequence_up():
    assert memory.kv_bytes(10, 17, block=16) == 10 * 32
    assert memory.kv_bytes(10, 16, block=16) == 10 * 16


@pytest.mark.parametrize("frames, width, height, tokens", [
    (16, 448, 448, 8 * 16 * 16),      # 448 = 16 x 28: 256 tokens per 2-frame group
    (15, 448, 448, 8 * 16 * 16),      # an odd count is padded with the last frame
    (16, 320, 240, 8 * 11 * 9),       # 320 -> 308, 240 -> 252 (nearest multiples of 28)
    (8, 56, 56, 4 * 2 * 2),           # the embedded model's size: 16 video tokens
    (2, 3840, 2160, 1 * 137 * 77),    # 4K stays within the 12.8 MP per-frame limit of the 7B's processor
])
def test_qwen2_5_vl_video_tokens(frames, width, height, tokens):
    arch = load_model("qwen2_5_vl_7b")["arch"]
    assert memory.vision_tokens("qwen2_5_vl", arch, frames, width, height) == tokens


def test_qwen2_processor_limits_resize_frames():
    arch = dict(load_model("qwen2_5_vl_7b")["arch"], video_min_pixels=None, video_max_pixels=None)
    # transformers' video defaults: max 28*28*768 px per frame shrinks 4K to 560x1008 = 20 x 36 tokens
    assert smart_resize(2160, 3840, 28, 128 * 28 * 28, 28 * 28 * 768) == (560, 1008)
    assert memory.vision_tokens("qwen2_5_vl", arch, 2, 3840, 2160) == 20 * 36
    # and min 128*28*28 px blows a 56x56 frame up to 336x336: 144 tokens, not 4
    assert memory.vision_tokens("qwen2_5_vl", arch, 2, 56, 56) == 12 * 12


def test_qwen3_vl_video_tokens_bound_the_whole_clip():
    arch = load_model("qwen3_vl_8b")["arch"]
    assert memory.vision_tokens("qwen3_vl", arch, 16, 448, 448) == 8 * 14 * 14   # patch 16 x merge 2 = 32
    assert memory.video_text_tokens("qwen3_vl", arch, 16) == 8 * qwen3_vl.TEXT_TOKENS_PER_GROUP
    # 64 frames of 1080p exceed 25.2 MP in total: each frame shrinks to 448x832
    assert memory.vision_tokens("qwen3_vl", arch, 64, 1920, 1080) == 32 * 14 * 26
    with pytest.raises(ValueError, match="at least 2 frames"):
        memory.vision_tokens("qwen3_vl", arch, 1, 448, 448)


def test_llava_next_video_tokens_ignore_the_input_size():
    arch = load_model("llava_next_video_7b")["arch"]
    assert memory.vision_tokens("llava_next_video", arch, 16, 336, 336) == 16 * 144
    assert memory.vision_tokens("llava_next_video", arch, 8, 1920, 1080) == 8 * 144


def test_parameter_formula_counts_the_embedded_checkpoint_exactly():
    from pathlib import Path

    from safetensors import safe_open

    checkpoint = Path(__file__).resolve().parents[2] / "assets/models/vidcap-ko-tiny/model.safetensors"
    counts = {"lm": 0, "vision": 0}
    with safe_open(str(checkpoint), framework="numpy") as f:
        for key in f.keys():
            count = int(np.prod(f.get_slice(key).get_shape()))
            counts["vision" if key.startswith("visual.") else "lm"] += count
    arch = load_model("vidcap_ko_tiny")["arch"]
    assert memory.param_counts("qwen2_5_vl", arch) == (counts["lm"], counts["vision"])
    assert sum(counts.values()) == arch["params_card"]


def test_bits_per_weight_include_quantization_metadata():
    assert memory.bits_per_weight("awq", 4, 128) == pytest.approx(4 + 20 / 128)
    assert memory.bits_per_weight("nf4", double_quant=False) == 4.5
    assert memory.bits_per_weight("nf4", double_quant=True) == pytest.approx(4.127, abs=1e-3)
    assert memory.bits_per_weight("int8") == 8


def test_weights_of_the_7b_by_method():
    model = load_model("qwen2_5_vl_7b")
    sizes = {m: memory.weight_bytes("qwen2_5_vl", model["arch"], "bfloat16", m)["total"] / GB
             for m in ("none", "int8", "awq", "nf4")}
    assert sizes["none"] == pytest.approx(2 * 8.292, rel=0.01)
    # AWQ release: 4-bit LM linears + 16-bit embeddings, LM head and vision tower: ~6.9 GB
    assert 6.8 < sizes["awq"] < 7.0
    assert sizes["nf4"] < sizes["awq"] < sizes["int8"] < sizes["none"]
    # the vision tower is the same 1.35 GB in every case
    vision = {m: memory.weight_bytes("qwen2_5_vl", model["arch"], "bfloat16", m)["vision"] for m in sizes}
    assert len(set(vision.values())) == 1 and round(vision["awq"] / GB, 2) == 1.35


def test_cap_to_tier_utilization():
    # a 15 GiB T4 at 0.85 rehearsed on a 79.6 GiB H100: vLLM must use 12.75 GiB of it
    util = memory.cap_utilization(15.0, 0.85, 79.6)
    assert util == pytest.approx(12.75 / 79.6) and util * 79.6 * GIB == pytest.approx(12.75 * GIB)
    assert memory.cap_utilization(22.5, 0.9, 22.5) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="less than the tier"):
        memory.cap_utilization(39.5, 0.9, 22.5)
