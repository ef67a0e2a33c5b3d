"""What Qwen2.5-VL and Qwen3-VL share: the ChatML prompt, their tokens, the vision-config numbers
and smart_resize, the processors' rule for a frame's size."""

from __future__ import annotations

import math

TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>",
          "<|image_pad|>", "<|video_pad|>")
VIDEO_PAD = "<|video_pad|>"
STOP = ("<|im_end|>",)
EOS_TOKENS = ("<|im_end|>", "<|endoftext|>")


# preset `arch:` keys -> config.json (vidcap_ko.families.base.Family.config_keys)
CONFIG_KEYS = {"num_layers": "text_config.num_hidden_layers", "hidden_size": "text_config.hidden_size",
               "num_heads": "text_config.num_attention_heads", "num_kv_heads": "text_config.num_key_value_heads",
               "intermediate_size": "text_config.intermediate_size", "vocab_size": "text_config.vocab_size",
               "max_position_embeddings": "text_config.max_position_embeddings",
               "vision_depth": "vision_config.depth", "vision_hidden_size": "vision_config.hidden_size",
               "patch_size": "vision_config.patch_size"}


def chatml_prompt(system: str, instruction: str) -> str:
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n<|vision_start|>{VIDEO_PAD}<|vision_end|>{instruction}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int,
                 frames: int = 1, temporal: int = 1) -> tuple[int, int]:
    """Qwen's smart_resize: sides rounded to multiples of `factor`, the pixel count kept within
    [min_pixels, max_pixels]. Qwen2/2.5-VL bound one frame (frames = temporal = 1); Qwen3-VL bounds
    the whole clip, frames x height x width (transformers 5.19 video_processing_qwen2_vl.py and
    video_processing_qwen3_vl.py `smart_resize`)."""
    if height < factor or width < factor:  # Qwen3-VL scales tiny frames up first; Qwen2 frames are never this small
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    t_bar = round(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def grid_tokens(arch: dict, frames: int, height: int, width: int) -> int:
    """Placeholder tokens of a clip already resized: frames grouped `temporal_patch_size` at a time
    (an odd count padded with the last frame), each group (H / patch / merge) x (W / patch / merge)."""
    factor = arch["patch_size"] * arch["spatial_merge_size"]
    return temporal_groups(arch, frames) * (height // factor) * (width // factor)


def temporal_groups(arch: dict, frames: int) -> int:
    """The clip's temporal groups: frames taken `temporal_patch_size` at a time (the grid's T)."""
    return math.ceil(frames / arch["temporal_patch_size"])


def size_multiple(arch: dict) -> int:
    """Patch x merge: the processor resizes frames to multiples of it, so the decoder gives them so."""
    return arch["patch_size"] * arch["spatial_merge_size"]


def pixel_limits(arch: dict, defaults: tuple[int, int]) -> tuple[int, int]:
    return arch.get("video_min_pixels") or defaults[0], arch.get("video_max_pixels") or defaults[1]


def text_config(arch: dict, ids: dict, rope_parameters: dict, **family_keys) -> dict:
    """The language-model numbers Qwen2.5-VL and Qwen3-VL configs share, plus the family's own keys."""
    return dict(vocab_size=arch["vocab_size"], hidden_size=arch["hidden_size"],
                intermediate_size=arch["intermediate_size"], num_hidden_layers=arch["num_layers"],
                num_attention_heads=arch["num_heads"], num_key_value_heads=arch["num_kv_heads"],
                max_position_embeddings=arch["max_position_embeddings"], rms_norm_eps=1e-6, hidden_act="silu",
                tie_word_embeddings=arch["tie_word_embeddings"], rope_parameters=rope_parameters,
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<pad>"],
                **family_keys)


def vision_config(arch: dict, **family_keys) -> dict:
    """The vision-tower numbers Qwen2.5-VL and Qwen3-VL configs share, plus the family's own keys."""
    return dict(depth=arch["vision_depth"], hidden_size=arch["vision_hidden_size"],
                intermediate_size=arch["vision_intermediate_size"], num_heads=arch.get("vision_num_heads", 16),
                patch_size=arch["patch_size"], spatial_merge_size=arch["spatial_merge_size"],
                temporal_patch_size=arch["temporal_patch_size"], out_hidden_size=arch["hidden_size"],
                in_channels=3, **family_keys)


def marker_ids(ids: dict) -> dict:
    """Qwen VL configs' image/video placeholder and vision start/end token ids."""
    return dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids[VIDEO_PAD],
                vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])


def vision_attention_params(vh: int) -> int:
    """A Qwen vision block's fused qkv and output projection, with biases."""
    return (3 * vh * vh + 3 * vh) + (vh * vh + vh)


def patch_embed_params(arch: dict) -> int:
    """The 3-D patch embedding (no bias): RGB x temporal x patch x patch -> vision hidden."""
    p = arch["patch_size"]
    return 3 * arch["temporal_patch_size"] * p * p * arch["vision_hidden_size"]
