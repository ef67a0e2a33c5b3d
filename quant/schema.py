"""The typed shape of the config groups the planner reads: `gpu` (a tier), `model` and `quant`.

Hydra validates every composed config against these while it composes (caption/settings/schema.py JobSchema
types its groups with them; quant/presets.py does the same for a single preset), so an unknown key
or a wrong type stops a job before anything loads, naming the key.

Where a value lives: a field whose default is MISSING is set by every preset of its group
(conf/<group>/*.yaml, the one home of those values, with the comments that say why); a field with a
default here is optional, and a preset sets it only to say something else. tests/test_config_defaults.py
checks that no preset repeats a default written here, nor a value its parent preset already gives.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

from omegaconf import MISSING

from vidcap_ko.settings import setting

# Keys read only where other settings hold. gpu.device and quant.method are the plan's: the tier gpu=auto
# resolved to, the method quant=auto chose.
ON_GPU = {"gpu.device": ("cuda",)}
ON_CPU = {"gpu.device": ("cpu",)}
QUANTIZED = {"quant.method": ("awq", "gptq", "nf4", "int8")}
PREQUANTIZED = {"quant.method": ("awq", "gptq")}


@dataclass
class GpuSchema:
    """A GPU tier (conf/gpu/<tier>.yaml) or, with gpu=auto, what the detected tier's keys are replaced
    with (null: the tier's own); quant/tiers.py Tier.from_config checks the values."""
    name: str = setting(MISSING, "the tier's name, as plans and summaries give it")
    device: Optional[str] = setting(MISSING, "cuda | cpu")
    vram_gib: Optional[float] = setting(MISSING, "total GPU memory as the driver reports it (GiB); null on cpu",
                                        ON_GPU)
    compute_capability: Optional[str] = setting(MISSING, "the GPU's compute capability, e.g. \"8.0\"", ON_GPU)
    supports_bf16: Optional[bool] = setting(MISSING, "bf16 arithmetic; null: from the compute capability, or "
                                                     "this CPU's flags")
    dtype: Optional[str] = setting(MISSING, "the dtype the engine computes in: float32 | float16 | bfloat16 "
                                            "(cpu: also auto)")
    enforce_eager: Optional[bool] = setting(MISSING, "vLLM: no CUDA graphs or torch.compile (less memory, a "
                                                     "faster start, slower steps)")
    max_num_seqs: Optional[int] = setting(MISSING, "requests one engine runs at once (its batch)")
    max_num_batched_tokens: Optional[int] = setting(MISSING, "vLLM: tokens one engine step takes at most")
    gpu_memory_utilization: Optional[float] = setting(MISSING, "cuda: the share of vram_gib vLLM may take", ON_GPU)
    enable_chunked_prefill: Optional[bool] = setting(MISSING, "vLLM: long prompts prefilled in chunks beside "
                                                              "running requests")
    vllm_vision_ok: Optional[bool] = setting(MISSING, "false: vLLM's vision attention fails here for some "
                                                      "families, which then run on transformers")
    suggested_engine: Optional[str] = setting(MISSING, "the engine engine=auto prefers on this tier: vllm | hf")
    kv_cache_dtype: Optional[str] = setting(MISSING, "vLLM's KV-cache dtype: auto (the model's) | fp8 | "
                                                     "fp8_e4m3 | fp8_e5m2")
    cap_to_tier: Optional[bool] = setting(MISSING, "true: rehearse this tier on a bigger GPU (its memory "
                                                   "share scaled down to this tier's)", ON_GPU)
    ram_gib: Optional[float] = setting(None, "cpu: host memory the weights must fit in; null: measured", ON_CPU)
    block_size: Optional[int] = setting(MISSING, "KV-cache block (tokens): the planner counts in it, vLLM runs it")
    count: Optional[int] = setting(MISSING, "GPUs on each machine (cpu: engine replicas)")
    tensor_parallel_size: Optional[int] = setting(MISSING, "GPUs per engine; null: the planner picks it")
    kv_offload_gib: Optional[float] = setting(None, "vLLM's KV offloading to host memory (GiB); null: the planner "
                                                    "decides (GPU tiers whose KV budget is short of a full batch), "
                                                    "0: off", ON_GPU)
    env: Dict[str, Optional[str]] = setting({}, "environment variables set before vLLM loads (e.g. "
                                                "VLLM_CPU_KVCACHE_SPACE)")


@dataclass
class ModelSchema:
    """A model preset (conf/model/*.yaml, or one caption-make-model writes)."""
    name: str = setting(MISSING, "the preset's name, as records give the model")
    family: str = setting(MISSING, "the model family: prompt, processor, frame sizes (vidcap_ko/families/<family>.py)")
    path: str = setting(MISSING, "a local checkpoint folder or a hub id", path=True)
    dtype: str = setting(MISSING, "the weights' dtype; the tier may lower it")
    max_model_len: int = setting(MISSING, "the longest prompt + caption, in tokens")
    frames: int = setting(MISSING, "frames per clip the model is made for (video.num_frames)")
    frame_width: int = setting(MISSING, "the frame width the model is made for (pixels)")
    frame_height: int = setting(MISSING, "the frame height the model is made for (pixels)")
    frame_pixels: Optional[int] = setting(None, "pixel budget per frame, aspect ratio kept; null: frame_width x "
                                                "frame_height")
    trained_on: Optional[str] = setting(None, "what the checkpoint knows, if narrower than real footage (the plan "
                                              "warns on other footage)")
    quantized: Optional[str] = setting(None, "awq | gptq: the preset is a quantized release")
    quantized_checkpoints: Dict[str, Any] = setting({}, "method -> {path, format}: quantized copies quant=<method> "
                                                        "loads")
    awq_preset: Optional[str] = setting(None, "the official AWQ release's preset, for quant=awq")
    base_preset: Optional[str] = setting(None, "a quantized release: the 16-bit preset it came from")
    arch: Dict[str, Any] = setting(MISSING, "the numbers the planner counts with (from config.json)")


@dataclass
class QuantSchema:
    """A quantization preset (conf/quant/*.yaml); quant/rules.py resolves it."""
    method: str = setting(MISSING, "auto | none | awq | gptq | nf4 | int8")
    priority: str = setting(MISSING, "quality | memory: what auto favours")
    bits: Optional[int] = setting(MISSING, "weight bits; null: the method's", QUANTIZED)
    group_size: Optional[int] = setting(MISSING, "AWQ/GPTQ: weights per quantization group", PREQUANTIZED)
    double_quant: bool = setting(MISSING, "nf4: quantize the block scales too", {"quant.method": ("nf4",)})
    checkpoint: Optional[str] = setting(MISSING, "pre-quantized weights (awq/gptq) when the model preset is not "
                                                 "one: a folder or a hub id", PREQUANTIZED, path=True)
    checkpoint_format: Optional[str] = setting(MISSING, "vLLM's name of that checkpoint's format, if not the "
                                                        "method (e.g. compressed-tensors)", PREQUANTIZED)


SCHEMAS = {"gpu": GpuSchema, "model": ModelSchema, "quant": QuantSchema}


def keys(schema) -> tuple[str, ...]:
    return tuple(f.name for f in fields(schema))


def required_keys(schema) -> tuple[str, ...]:
    """The keys every preset of the group sets (MISSING here)."""
    return tuple(f.name for f in fields(schema) if f.default is MISSING)


def preset_values(schema, group: str, values: dict) -> dict:
    """A `group` preset given as a plain dict (the planner's and the quant CLI's input), checked against
    its schema: a key the schema lacks, or one it leaves to the presets that is unset (or null where its
    type is not Optional), is a PlanError naming it; the keys left out get the schema's defaults."""
    import typing

    from quant.errors import PlanError

    known = keys(schema)
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise PlanError(f"`{group}.{unknown[0]}` is not a {group} setting; known: {', '.join(known)}")
    hints = typing.get_type_hints(schema)
    for key in required_keys(schema):
        value = values.get(key, "???")
        if value == "???" or (value is None and type(None) not in typing.get_args(hints[key])):
            raise PlanError(f"`{group}.{key}` is missing from {group} preset {values.get('name', '?')!r}: every "
                            f"conf/{group} preset sets it" + (" (null where null has a meaning)"
                                                              if group == "gpu" else ""))
    return {**optional_defaults(schema), **values}


def optional_defaults(schema) -> dict:
    """key -> default, for the keys a preset may leave out."""
    return {f.name: f.default_factory() if f.default is NO_DEFAULT else f.default
            for f in fields(schema) if f.default is not MISSING}
