"""LLaVA-NeXT-Video (LlavaNextVideoForConditionalGeneration): a LLaMA LM + a CLIP vision tower; the
preset llava_next_video_7b.

Numbers a preset's `arch:` block leaves out follow llava-hf/LLaVA-NeXT-Video-7B-hf's config.json (the
source conf/model/llava_next_video_7b.yaml cites): LLaMA rms_norm_eps 1e-5, linear RoPE scaling (the
preset's max_position_embeddings is the scaled length), CLIP quick-GELU with its CLS token, features
from the second-to-last layer, average pooling of stride 2 per frame.

Two traps (measured on these machines, 2026-11): transformers 5.19 saves the CLIP tower without its
`vision_model.` prefix and vLLM 0.32 then fails, so keys are written as the released checkpoints name
them; vLLM's LlavaNextVideoPooler divides by image_size // patch_size**2, so image_size must be at least
patch_size**2.
"""

from __future__ import annotations

import math

from vidcap_ko.families.base import Checkpoint, Family, no_video_text


def prompt(system: str, instruction: str) -> str:
    return f"{system} USER: <video>\n{instruction} ASSISTANT:"


def video_tokens(arch: dict, frames: int, width: int, height: int) -> int:
    """Every frame is resized and centre-cropped to the CLIP tower's image_size (336), giving
    (336/14)^2 = 576 patches, average-pooled with stride `spatial_pool_stride` (2) to ceil(24/2)^2 = 144
    tokens per frame whatever the input size; no temporal merge (vLLM
    model_executor/models/llava_next_video.py, pooled_grid_length)."""
    pooled = math.ceil(arch["image_size"] // arch["patch_size"] / arch["spatial_pool_stride"])
    return frames * pooled * pooled


def size_multiple(arch: dict) -> int:
    """The CLIP patch: frames are resized and cropped to image_size (a multiple of it) anyway."""
    return arch["patch_size"]


def vision_params(arch: dict) -> int:
    """CLIP ViT (patch + class + position embeddings, pre-LayerNorm, blocks of 2 LayerNorms, q/k/v/o
    and an MLP) + the 2-layer projector + image_newline, as transformers 5.19 builds them."""
    vh, vi, h, p, size = (arch["vision_hidden_size"], arch["vision_intermediate_size"], arch["hidden_size"],
                          arch["patch_size"], arch["image_size"])
    embed = 3 * p * p * vh + vh + ((size // p) ** 2 + 1) * vh
    block = 4 * vh + 4 * (vh * vh + vh) + (vh * vi + vi) + (vi * vh + vh)
    return embed + 4 * vh + arch["vision_depth"] * block + (vh * h + h) + (h * h + h) + h


# ------------------------------------------------------------------ random-weight checkpoints

TOKENS = ("<image>", "<video>", "<s>", "</s>", "<|endoftext|>")
ROPE_FACTOR = 2.0  # linear RoPE scaling of the released LM (4096 positions x 2)

BUILTIN = {
    # seconds to make and to run: ~3M parameters; 64x64 frames of 8x8 patches pool to 16 tokens
    "tiny": dict(num_layers=2, hidden_size=256, num_heads=4, num_kv_heads=4, head_dim=64, intermediate_size=512,
                 vocab_size=None, tie_word_embeddings=False, attention_bias=False, max_position_embeddings=8192,
                 vision_depth=2, vision_hidden_size=128, vision_num_heads=2, vision_intermediate_size=512,
                 patch_size=8, image_size=64, spatial_pool_stride=2),
    # a CPU-sized model (~175M parameters), like Vicuna-7B in proportion (no grouped-query attention)
    "cpu": dict(num_layers=12, hidden_size=1024, num_heads=16, num_kv_heads=16, head_dim=64,
                intermediate_size=2816, vocab_size=None, tie_word_embeddings=False, attention_bias=False,
                max_position_embeddings=8192, vision_depth=4, vision_hidden_size=512, vision_num_heads=8,
                vision_intermediate_size=2048, patch_size=14, image_size=224, spatial_pool_stride=2),
}


# what the job feeds it (caption-make-model writes these into the checkpoint's job preset)
JOB = {"tiny": dict(frames=8, frame_side=64, max_model_len=2048),
       "cpu": dict(frames=8, frame_side=224, max_model_len=4096)}


def chat_template(system_prompt: str) -> str:
    """`{system} USER: <video>\\n{text} ASSISTANT:`, the layout of `prompt`."""
    system = system_prompt.replace("'", "\\'")
    return (
        "{%- for message in messages -%}"
        "{%- if loop.first and message['role'] != 'system' -%}{{ '" + system + " ' }}{%- endif -%}"
        "{%- if message['role'] == 'system' -%}"
        "{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{{ message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text')"
        " | join('') }}{%- endif -%}{{ ' ' }}"
        "{%- else -%}{{ message['role'].upper() + ': ' }}"
        "{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{%- for part in message['content'] -%}"
        "{%- if part['type'] == 'video' -%}{{ '<video>\\n' }}"
        "{%- elif part['type'] == 'image' -%}{{ '<image>\\n' }}"
        "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
        "{%- endfor -%}{%- endif -%}"
        "{%- if message['role'] == 'assistant' -%}{{ '</s>' }}{%- endif -%}{{ ' ' }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ 'ASSISTANT:' }}{%- endif -%}"
    )


def config(arch: dict, ids: dict):
    from transformers import LlavaNextVideoConfig

    size, patch = arch["image_size"], arch["patch_size"]
    if size < patch * patch or size % patch:
        raise ValueError(f"image_size {size} must be a multiple of patch_size {patch} and >= patch_size**2 "
                         "(vLLM's LlavaNextVideoPooler divides by image_size // patch_size**2)")
    if arch["hidden_size"] != arch["num_heads"] * arch["head_dim"]:
        raise ValueError("LLaMA needs hidden_size = num_heads x head_dim")
    text = dict(
        model_type="llama", vocab_size=arch["vocab_size"], hidden_size=arch["hidden_size"],
        intermediate_size=arch["intermediate_size"], num_hidden_layers=arch["num_layers"],
        num_attention_heads=arch["num_heads"], num_key_value_heads=arch["num_kv_heads"],
        max_position_embeddings=int(arch["max_position_embeddings"] / ROPE_FACTOR), rms_norm_eps=1e-5,
        hidden_act="silu", attention_bias=arch.get("attention_bias", False), tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "factor": ROPE_FACTOR, "rope_theta": 10000.0},
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"])
    vision = dict(
        model_type="clip_vision_model", hidden_size=arch["vision_hidden_size"],
        intermediate_size=arch["vision_intermediate_size"], num_hidden_layers=arch["vision_depth"],
        num_attention_heads=arch.get("vision_num_heads", 16), patch_size=patch, image_size=size,
        hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=arch["hidden_size"])
    pinpoints = [[size, 2 * size], [2 * size, size], [2 * size, 2 * size], [3 * size, size], [size, 3 * size]]
    return LlavaNextVideoConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False,
        image_token_index=ids["<image>"], video_token_index=ids["<video>"], projector_hidden_act="gelu",
        vision_feature_select_strategy="default", vision_feature_layer=-2, image_grid_pinpoints=pinpoints,
        spatial_pool_mode="average", spatial_pool_stride=arch["spatial_pool_stride"],
        image_seq_length=(size // patch) ** 2, video_seq_length=(size // patch // arch["spatial_pool_stride"]) ** 2 * 2,
        architectures=[FAMILY.architecture])


def processor(tokenizer, arch: dict, chat_template: str):
    from transformers import LlavaNextImageProcessor, LlavaNextVideoProcessor, LlavaNextVideoVideoProcessor

    size = arch["image_size"]
    pinpoints = [[size, 2 * size], [2 * size, size], [2 * size, 2 * size], [3 * size, size], [size, 3 * size]]
    frame = dict(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
    return LlavaNextVideoProcessor(
        video_processor=LlavaNextVideoVideoProcessor(**frame),
        image_processor=LlavaNextImageProcessor(**frame, image_grid_pinpoints=pinpoints),
        tokenizer=tokenizer, chat_template=chat_template, patch_size=arch["patch_size"],
        vision_feature_select_strategy="default", num_additional_image_tokens=1)


def release_key(key: str) -> str:
    """transformers 5.19 writes `vision_tower.embeddings...`; releases and vLLM use `vision_tower.vision_model.`"""
    if key.startswith("vision_tower.") and not key.startswith("vision_tower.vision_model."):
        return "vision_tower.vision_model." + key[len("vision_tower."):]
    return key


FAMILY = Family(
    name="llava_next_video", architecture="LlavaNextVideoForConditionalGeneration",
    prompt=prompt, video_placeholder="<video>", stop=("</s>",), processor_kwargs={},
    vision_params=vision_params, video_tokens=video_tokens, video_text_tokens=no_video_text,
    size_multiple=size_multiple,
    vision_modules=("vision_tower", "multi_modal_projector"),
    temporal_groups=None,  # vLLM 0.32 prunes only Qwen-VL families (supported_video_pruning_methods)
    fps_scaled_positions=False,  # 1-D RoPE: positions do not depend on time
    vllm_vision_on_turing=True,  # CLIP's plain attention runs on vLLM's Turing backends
    transformers_fix=None,
    checkpoint=Checkpoint(builtin=BUILTIN, job=JOB, special_tokens=TOKENS, eos_tokens=("</s>",), config=config,
                          processor=processor, chat_template=chat_template, bos_token="<s>", rename_key=release_key),
    # max_position_embeddings is left out: the preset counts it after the linear RoPE factor, config.json before
    config_keys={"num_layers": "text_config.num_hidden_layers", "hidden_size": "text_config.hidden_size",
                 "num_heads": "text_config.num_attention_heads", "num_kv_heads": "text_config.num_key_value_heads",
                 "intermediate_size": "text_config.intermediate_size", "vocab_size": "text_config.vocab_size",
                 "vision_depth": "vision_config.num_hidden_layers", "vision_hidden_size": "vision_config.hidden_size",
                 "patch_size": "vision_config.patch_size", "image_size": "vision_config.image_size"},
)
