"""Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration): the embedded model's family and the presets
qwen2_5_vl_{3b,7b,72b}[_awq].

Numbers a preset's `arch:` block leaves out are those of the released checkpoints' config.json as
transformers 5.19 serialises them (Qwen2_5_VLConfig / Qwen2_5_VLVisionConfig defaults): text
rope_theta 1e6 and mrope_section [16, 24, 24] for head_dim 128; vision 16 heads, window 112, full
attention every 8th block, 2 tokens per second.
"""

from __future__ import annotations

from vidcap_ko.families.base import Checkpoint, Family, no_video_text
from vidcap_ko.families.common import qwen

# transformers 5.19's Qwen2VLVideoProcessor: size = {shortest_edge, longest_edge} pixels per frame
VIDEO_PIXEL_DEFAULTS = (128 * 28 * 28, 28 * 28 * 768)
# Its `cap_pixels_per_frame` (video_processing_qwen2_vl.py) must be chosen by callers: True bounds a
# clip's pixels as Qwen's own qwen-vl-utils does, and is the default from transformers 5.22. Both
# engines pass it; video_tokens counts the same cap.
PROCESSOR_KWARGS = {"cap_pixels_per_frame": True}
MAX_VIDEO_TOKENS = 128000  # the processor's default budget under cap_pixels_per_frame


def capped_max_pixels(frames: int, factor: int, temporal: int, min_pixels: int, max_pixels: int,
                      max_video_tokens: int = MAX_VIDEO_TOKENS) -> int:
    """A frame's pixel limit under cap_pixels_per_frame=True (video_processing_qwen2_vl.py `resize`):
    an even share of 90% of `max_video_tokens` tokens' pixels, never below 1.05 x the minimum."""
    total = int(max_video_tokens * factor * factor * 0.9)
    return max(min(max_pixels, total * temporal // frames), int(min_pixels * 1.05))


def video_tokens(arch: dict, frames: int, width: int, height: int) -> int:
    factor, temporal = arch["patch_size"] * arch["spatial_merge_size"], arch["temporal_patch_size"]
    min_px, max_px = qwen.pixel_limits(arch, VIDEO_PIXEL_DEFAULTS)
    h, w = qwen.smart_resize(height, width, factor, min_px,
                              capped_max_pixels(frames, factor, temporal, min_px, max_px))
    return qwen.grid_tokens(arch, frames, h, w)


def vision_params(arch: dict) -> int:
    """Vision tower (RMSNorms, gated MLP) + merger (RMSNorm, 2-layer MLP into the LM), as transformers
    5.19 builds Qwen2_5_VisionTransformerPretrainedModel."""
    vh, vi, h, m2 = arch["vision_hidden_size"], arch["vision_intermediate_size"], arch["hidden_size"], \
        arch["spatial_merge_size"] ** 2
    block = 2 * vh + qwen.vision_attention_params(vh) + 2 * (vh * vi + vi) + (vi * vh + vh)
    merger = vh + (m2 * vh) ** 2 + m2 * vh + m2 * vh * h + h
    return qwen.patch_embed_params(arch) + arch["vision_depth"] * block + merger


def transformers_fix() -> bool:
    from vidcap_ko.families.common.qwen2_5_vl_positions import patch_transformers

    return patch_transformers()


# ------------------------------------------------------------------ random-weight checkpoints

BUILTIN = {
    # seconds to make and to run: ~3M parameters
    "tiny": dict(num_layers=2, hidden_size=256, num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=512,
                 vocab_size=None, tie_word_embeddings=False, attention_bias=True, max_position_embeddings=4096,
                 vision_depth=2, vision_hidden_size=128, vision_num_heads=2, vision_intermediate_size=256,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                 video_min_pixels=28 * 28, video_max_pixels=112 * 112),
    # a CPU-sized model (~155M parameters): big enough that matmuls, not overheads, dominate
    "cpu": dict(num_layers=12, hidden_size=1024, num_heads=16, num_kv_heads=4, head_dim=64,
                intermediate_size=2816, vocab_size=None, tie_word_embeddings=False, attention_bias=True,
                max_position_embeddings=32768, vision_depth=4, vision_hidden_size=512, vision_num_heads=8,
                vision_intermediate_size=1368, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                video_min_pixels=28 * 28, video_max_pixels=224 * 224),
}
JOB = {"tiny": dict(frames=8, frame_side=56, max_model_len=2048),
       "cpu": dict(frames=8, frame_side=112, max_model_len=4096)}


def mrope_section(head_dim: int) -> list[int]:
    """(time, height, width) split of head_dim/2 rotary frequencies, as [16, 24, 24] for 128."""
    section = [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16]
    assert sum(section) == head_dim // 2, f"head_dim {head_dim} does not split into M-RoPE sections"
    return section


def full_attention_blocks(depth: int) -> list[int]:
    """The released vision tower attends globally in every 8th block ([7, 15, 23, 31] of 32)."""
    return [i for i in range(depth) if i % 8 == 7] or [depth - 1]


def config(arch: dict, ids: dict):
    from transformers import Qwen2_5_VLConfig

    if arch["hidden_size"] != arch["num_heads"] * arch["head_dim"]:
        raise ValueError("Qwen2.5-VL needs hidden_size = num_heads x head_dim")
    if not arch.get("attention_bias", True):
        raise ValueError("Qwen2.5-VL's attention always carries q/k/v biases")
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": mrope_section(arch["head_dim"])}
    text = qwen.text_config(arch, ids, rope, max_window_layers=arch["num_layers"], use_sliding_window=False,
                             sliding_window=None)
    vision = qwen.vision_config(arch, window_size=112, tokens_per_second=2, hidden_act="silu",
                                 fullatt_block_indexes=full_attention_blocks(arch["vision_depth"]))
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=arch["tie_word_embeddings"],
                            **qwen.marker_ids(ids), architectures=[FAMILY.architecture])


def processor(tokenizer, arch: dict, chat_template: str):
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    common = dict(patch_size=arch["patch_size"], merge_size=arch["spatial_merge_size"],
                  temporal_patch_size=arch["temporal_patch_size"],
                  size={"shortest_edge": arch["video_min_pixels"], "longest_edge": arch["video_max_pixels"]})
    return Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**common),
                               # the uncapped sizing vLLM 0.32 also counts tokens with (and no warning)
                               video_processor=Qwen2VLVideoProcessor(**common, cap_pixels_per_frame=False),
                               tokenizer=tokenizer, chat_template=chat_template)


FAMILY = Family(
    name="qwen2_5_vl", architecture="Qwen2_5_VLForConditionalGeneration",
    prompt=qwen.chatml_prompt, video_placeholder=qwen.VIDEO_PAD, stop=qwen.STOP, processor_kwargs=PROCESSOR_KWARGS,
    vision_params=vision_params, video_tokens=video_tokens, size_multiple=qwen.size_multiple, video_text_tokens=no_video_text, vision_modules=("visual",),
    # t x second_per_grid x tokens_per_second, second_per_grid = temporal_patch_size / fps (vLLM
    # model_executor/models/qwen2_5_vl.py `iter_mm_grid_thw`)
    temporal_groups=qwen.temporal_groups,
    fps_scaled_positions=True,
    vllm_vision_on_turing=False,  # vLLM issue 29743: no vision-attention backend for sm75
    transformers_fix=transformers_fix,
    checkpoint=Checkpoint(builtin=BUILTIN, job=JOB, special_tokens=qwen.TOKENS, eos_tokens=qwen.EOS_TOKENS,
                          config=config, processor=processor),
    config_keys=qwen.CONFIG_KEYS,
)
