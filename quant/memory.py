"""Memory arithmetic for a vision-language model: weights, KV cache, video tokens, activation reserve.

Pure functions over plain numbers and the `arch:` block of a model preset (conf/model/*.yaml); nothing
here loads a model, a tokenizer or a processor, so a plan is made in milliseconds on any machine.

Units: bytes everywhere inside; GiB (2**30) in the plan and the tiers (`vram_gib`, conf/gpu/*.yaml,
as the driver reports it); GB (1e9) only where a model card counts parameters' bytes that way.
"""

from __future__ import annotations

import math

from vidcap_ko.families import get_family

GIB = 1024**3
GB = 1e9

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None


# ---------------------------------------------------------------------------------------------- weights

def bits_per_weight(method: str, bits: int = 4, group_size: int = 128, double_quant: bool = True) -> float:
    """Stored bits per quantized weight, quantization metadata included.

    awq/gptq: `bits` per weight + one fp16 scale and one `bits`-wide packed zero point per group
      (AutoAWQ GEMM and GPTQ layouts); 4-bit, group 128 -> 4.156. GPTQ's g_idx (one int32 per input
      channel) adds < 0.01 bit and is ignored.
    nf4 (bitsandbytes): 4 bits + one absmax per block of 64; fp32 absmax (+0.5 bit) or, with double
      quantization, an 8-bit absmax plus one fp32 constant per 256 blocks (+0.127 bit).
    int8 (bitsandbytes LLM.int8): 8 bits + one fp32 scale per output row (ignored, < 0.01 bit).
    """
    if method in ("awq", "gptq"):
        return bits + (16 + bits) / group_size
    if method == "nf4":
        return 4 + (8 / 64 + 32 / (64 * 256) if double_quant else 32 / 64)
    if method == "int8":
        return 8.0
    raise ValueError(f"no bit width for quantization method {method!r}")


def embedding_params(arch: dict) -> int:
    """Input embedding + LM head (one matrix when tied). Quantizers leave both in 16-bit."""
    return arch["vocab_size"] * arch["hidden_size"] * (1 if arch.get("tie_word_embeddings") else 2)


def _head_dim(arch: dict) -> int:
    return arch.get("head_dim") or arch["hidden_size"] // arch["num_heads"]


def lm_params(arch: dict) -> int:
    """Decoder-only LM (LLaMA / Qwen2 / Qwen3 layout): attention, gated MLP, RMSNorms, embeddings."""
    h, heads, kv, hd = arch["hidden_size"], arch["num_heads"], arch["num_kv_heads"], _head_dim(arch)
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    if arch.get("attention_bias"):       # Qwen2/2.5: biases on q, k, v
        attn += heads * hd + 2 * kv * hd
    if arch.get("qk_norm"):              # Qwen3: RMSNorm on q and k per head
        attn += 2 * hd
    layer = attn + 3 * h * arch["intermediate_size"] + 2 * h
    return arch["num_layers"] * layer + embedding_params(arch) + h


def param_counts(family: str, arch: dict) -> tuple[int, int]:
    """(language model, vision tower) parameters; explicit arch.params_lm / params_vision win. The vision
    tower's formula is the family's (vidcap_ko/families/<family>.py `vision_params`)."""
    lm = arch.get("params_lm") or lm_params(arch)
    vision = arch.get("params_vision") or get_family(family).vision_params(arch)
    return int(lm), int(vision)


def weight_bytes(family: str, arch: dict, dtype: str, method: str = "none", bits: int = 4,
                 group_size: int = 128, double_quant: bool = True) -> dict[str, float]:
    """Bytes of weights in memory, split into the LM and the vision tower.

    Quantized: the LM's linear layers at `bits_per_weight`; embeddings, LM head, norms and the whole
    vision tower stay in `dtype` (official Qwen AWQ releases list `visual` in modules_to_not_convert;
    for bitsandbytes the plan passes the vision modules and lm_head as llm_int8_skip_modules).
    """
    lm, vision = param_counts(family, arch)
    unquantized = dtype_bytes(dtype)
    if method == "none":
        lm_bytes = lm * unquantized
    else:
        embeddings = embedding_params(arch)
        linear = lm - embeddings
        lm_bytes = linear * bits_per_weight(method, bits, group_size, double_quant) / 8 + embeddings * unquantized
    vision_bytes = vision * unquantized
    return {"lm": lm_bytes, "vision": vision_bytes, "total": lm_bytes + vision_bytes}


# ---------------------------------------------------------------------------------------------- KV cache

def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_value: float) -> float:
    """K and V for every layer: 2 x layers x KV heads x head_dim x bytes. Grouped-query attention
    stores only the KV heads, so e.g. LLaMA-3-8B (8 KV heads of 32) needs a quarter of LLaMA-7B's."""
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value


def arch_kv_bytes_per_token(arch: dict, kv_dtype: str) -> float:
    return kv_bytes_per_token(arch["num_layers"], arch["num_kv_heads"], _head_dim(arch), dtype_bytes(kv_dtype))


def kv_bytes(per_token: float, tokens: int, sequences: int = 1, block: int = 1) -> float:
    """KV cache for `sequences` of `tokens` each; `block` rounds each sequence up to whole blocks."""
    return per_token * (math.ceil(tokens / block) * block) * sequences


# ---------------------------------------------------------------------------------------------- video tokens

def frame_sizes_within(multiple: int, max_pixels: int, max_aspect: int = 200) -> list[tuple[int, int]]:
    """Every (height, width) a decoder that keeps aspect ratios may give under a per-frame pixel budget:
    sides multiples of `multiple`, area within `max_pixels`, at most `max_aspect` to 1 (the sizes
    video_io/sizing.py fit_size returns; the planner takes the worst case over them)."""
    blocks = max_pixels // (multiple * multiple)
    return [(a * multiple, b * multiple) for a in range(1, blocks + 1) for b in range(1, blocks // a + 1)
            if max(a, b) <= max_aspect * min(a, b)]


def vision_tokens(family: str, arch: dict, frames: int, width: int, height: int) -> int:
    """Video placeholder tokens one clip of `frames` frames of width x height becomes in the LM's
    sequence, by the family's own rule (vidcap_ko/families/<family>.py `video_tokens`)."""
    if frames < 1 or width < 1 or height < 1:
        raise ValueError(f"a clip needs frames, width and height >= 1, got {frames}, {width}x{height}")
    return get_family(family).video_tokens(arch, frames, width, height)


def kept_video_tokens(tokens: int, groups: int, rate: float) -> int:
    """Video tokens vLLM keeps of a clip's `tokens` in `groups` temporal groups at pruning rate `rate`:
    the share 1 - rate, never fewer than the first group's (vllm/multimodal/video_prune/evs.py
    compute_retained_tokens_count, which sizes the prompt's placeholders)."""
    if rate <= 0:
        return tokens
    return max(tokens // groups, int(tokens * (1 - rate)))


def video_text_tokens(family: str, arch: dict, frames: int) -> int:
    """Text the processor adds around a video beyond the prompt's own markers (Qwen3-VL timestamps)."""
    return get_family(family).video_text_tokens(arch, frames)


# ---------------------------------------------------------------------------------------------- reserve

def activation_bytes(arch: dict, tokens: int, act_bytes: int) -> float:
    """Peak LM activations for a forward pass over `tokens` tokens: residual, norm output and q/k/v/o
    (~4 x hidden) plus the gated MLP's two intermediate tensors (2 x intermediate) alive at once.
    A rough upper estimate; vLLM measures the real peak in its start-up profile run."""
    return tokens * (4 * arch["hidden_size"] + 2 * arch["intermediate_size"]) * act_bytes


def vision_activation_bytes(arch: dict, video_tokens: int, act_bytes: int, merge: int = 2) -> float:
    """The vision tower's peak over one clip: patches (merge^2 per video token) x its hidden widths."""
    patches = video_tokens * merge * merge
    return patches * (4 * arch["vision_hidden_size"] + 2 * arch["vision_intermediate_size"]) * act_bytes


def logits_bytes(arch: dict, sequences: int) -> float:
    """fp32 logits over the vocabulary for the last position of each running sequence (sampling)."""
    return sequences * arch["vocab_size"] * 4


def cap_utilization(tier_vram_gib: float, tier_utilization: float, device_vram_gib: float) -> float:
    """gpu_memory_utilization that gives vLLM on a bigger device the memory the tier would give it.

    vLLM budgets `utilization x device total`; to rehearse a 16 GB tier on an 80 GB device we want
    `device x u = tier x tier_utilization`. A device smaller than the tier cannot rehearse it.
    """
    if device_vram_gib <= 0 or tier_vram_gib <= 0:
        raise ValueError("device and tier memory must be > 0 GiB")
    if device_vram_gib < tier_vram_gib:
        raise ValueError(f"the device has {device_vram_gib:g} GiB, less than the tier's {tier_vram_gib:g} GiB")
    return tier_vram_gib * tier_utilization / device_vram_gib
