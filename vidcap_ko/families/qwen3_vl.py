"""Qwen3-VL (Qwen3VLForConditionalGeneration): the preset qwen3_vl_8b.

Numbers a preset's `arch:` block leaves out follow Qwen/Qwen3-VL-8B-Instruct's config.json (the source
conf/model/qwen3_vl_8b.yaml cites): text rope_theta 5e6, interleaved M-RoPE with mrope_section
[24, 20, 20] for head_dim 128, rms_norm_eps 1e-6; vision 16 heads, GELU (tanh). Its processor writes
each frame group's timestamp into the prompt (transformers 5.19 processing_qwen3_vl.py).
"""

from __future__ import annotations

import math

from vidcap_ko.families.base import Checkpoint, Family
from vidcap_ko.families.common import qwen

# transformers 5.19's Qwen3VLVideoProcessor: size = {shortest_edge, longest_edge} over the whole clip
VIDEO_PIXEL_DEFAULTS = (128 * 32 * 32, 32 * 32 * 768)
# Qwen3-VL keeps the uncapped rule video_tokens counts (its capped rule is another formula, not
# modelled here): False, chosen on purpose (video_processing_qwen3_vl.py `cap_pixels_per_frame`).
PROCESSOR_KWARGS = {"cap_pixels_per_frame": False}
# "<t seconds>" plus vision start/end markers before each temporal group: ~6 tokens of text + 2
# markers; an estimate, not tokenized here
TEXT_TOKENS_PER_GROUP = 8


def video_tokens(arch: dict, frames: int, width: int, height: int) -> int:
    factor, temporal = arch["patch_size"] * arch["spatial_merge_size"], arch["temporal_patch_size"]
    if frames < temporal:
        raise ValueError(f"Qwen3-VL needs at least {temporal} frames per clip, got {frames}")
    min_px, max_px = qwen.pixel_limits(arch, VIDEO_PIXEL_DEFAULTS)
    h, w = qwen.smart_resize(height, width, factor, min_px, max_px, frames=frames, temporal=temporal)
    return qwen.grid_tokens(arch, frames, h, w)


def video_text_tokens(arch: dict, frames: int) -> int:
    return math.ceil(frames / arch["temporal_patch_size"]) * TEXT_TOKENS_PER_GROUP


def vision_params(arch: dict) -> int:
    """Vision tower (LayerNorms, plain MLP, learned position embeddings) + merger + one deepstack merger
    per deepstack layer, as transformers 5.19 builds Qwen3VLVisionModel."""
    vh, vi, h, m2 = arch["vision_hidden_size"], arch["vision_intermediate_size"], arch["hidden_size"], \
        arch["spatial_merge_size"] ** 2
    block = 4 * vh + qwen.vision_attention_params(vh) + (vh * vi + vi) + (vi * vh + vh)

    def merger(norm_dim: int) -> int:  # LayerNorm, fc1 (4vh -> 4vh), fc2 (4vh -> h)
        return 2 * norm_dim + (m2 * vh) ** 2 + m2 * vh + m2 * vh * h + h

    deepstack = len(arch.get("deepstack_visual_indexes") or ())
    return (qwen.patch_embed_params(arch) + vh + arch["num_position_embeddings"] * vh
            + arch["vision_depth"] * block + merger(vh) + deepstack * merger(m2 * vh))


# ------------------------------------------------------------------ random-weight checkpoints

BUILTIN = {
    # seconds to make and to run: ~3M parameters. head_dim 64: vLLM's CPU attention takes 32..512
    "tiny": dict(num_layers=2, hidden_size=256, num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=768,
                 vocab_size=None, tie_word_embeddings=False, attention_bias=False, qk_norm=True,
                 max_position_embeddings=4096, vision_depth=2, vision_hidden_size=128, vision_num_heads=2,
                 vision_intermediate_size=256, num_position_embeddings=256, deepstack_visual_indexes=[0],
                 patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                 video_min_pixels=4096, video_max_pixels=16 * 128 * 128),
    # a CPU-sized model (~165M parameters), proportioned like the 8B (MLP 3x hidden, untied head)
    "cpu": dict(num_layers=12, hidden_size=1024, num_heads=16, num_kv_heads=4, head_dim=64,
                intermediate_size=3072, vocab_size=None, tie_word_embeddings=False, attention_bias=False,
                qk_norm=True, max_position_embeddings=32768, vision_depth=4, vision_hidden_size=512,
                vision_num_heads=8, vision_intermediate_size=1920, num_position_embeddings=2304,
                deepstack_visual_indexes=[1, 2], patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                video_min_pixels=4096, video_max_pixels=32 * 224 * 224),
}
JOB = {"tiny": dict(frames=8, frame_side=64, max_model_len=2048),
       "cpu": dict(frames=8, frame_side=128, max_model_len=4096)}


def mrope_section(head_dim: int) -> list[int]:
    """head_dim/2 rotary frequencies split 6:5:5 over (time, height, width), as [24, 20, 20] for 128."""
    half = head_dim // 2
    section = [half * 3 // 8, half * 5 // 16, half * 5 // 16]
    section[0] += half - sum(section)
    return section


def config(arch: dict, ids: dict):
    from transformers import Qwen3VLConfig

    if not arch.get("qk_norm", True) or arch.get("attention_bias", False):
        raise ValueError("Qwen3-VL normalises q/k per head and has no attention biases")
    side = round(arch["num_position_embeddings"] ** 0.5)
    if side * side != arch["num_position_embeddings"]:
        raise ValueError("Qwen3-VL's vision num_position_embeddings must be a perfect square")
    rope = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": mrope_section(arch["head_dim"]),
            "mrope_interleaved": True}
    text = qwen.text_config(arch, ids, rope, head_dim=arch["head_dim"], attention_bias=False)
    vision = qwen.vision_config(arch, num_position_embeddings=arch["num_position_embeddings"],
                                 deepstack_visual_indexes=list(arch["deepstack_visual_indexes"]),
                                 hidden_act="gelu_pytorch_tanh")
    return Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=arch["tie_word_embeddings"],
                         **qwen.marker_ids(ids), architectures=[FAMILY.architecture])


def processor(tokenizer, arch: dict, chat_template: str):
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    common = dict(patch_size=arch["patch_size"], merge_size=arch["spatial_merge_size"],
                  temporal_patch_size=arch["temporal_patch_size"])
    # video limits are on the whole clip (frames x height x width), see conf/model/qwen3_vl_8b.yaml
    video_size = {"shortest_edge": arch["video_min_pixels"], "longest_edge": arch["video_max_pixels"]}
    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(**common, image_mean=[0.5] * 3, image_std=[0.5] * 3),
        video_processor=Qwen3VLVideoProcessor(**common, size=video_size, image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                              cap_pixels_per_frame=False),
        tokenizer=tokenizer, chat_template=chat_template)


FAMILY = Family(
    name="qwen3_vl", architecture="Qwen3VLForConditionalGeneration",
    prompt=qwen.chatml_prompt, video_placeholder=qwen.VIDEO_PAD, stop=qwen.STOP, processor_kwargs=PROCESSOR_KWARGS,
    vision_params=vision_params, video_tokens=video_tokens, size_multiple=qwen.size_multiple, video_text_tokens=video_text_tokens,
    vision_modules=("visual",),
    temporal_groups=qwen.temporal_groups,
    fps_scaled_positions=False,  # its processor writes timestamps as text instead (module docstring)
    vllm_vision_on_turing=False,  # vLLM issue 29743: no vision-attention backend for sm75
    transformers_fix=None,
    checkpoint=Checkpoint(builtin=BUILTIN, job=JOB, special_tokens=qwen.TOKENS, eos_tokens=qwen.EOS_TOKENS,
                          config=config, processor=processor),
    config_keys=qwen.CONFIG_KEYS,
)
