"""The typed shape of the config groups the planner reads: `gpu` (a tier), `model` and `quant`.

Hydra validates every composed config against these while it composes (caption/schema.py JobSchema
types its groups with them; quant/presets.py does the same for a single preset), so an unknown key
or a wrong type stops a job before anything loads, naming the key.

Where a value lives: a field whose default is MISSING is set by every preset of its group
(conf/<group>/*.yaml, the one home of those values, with the comments that say why); a field with a
default here is optional, and a preset sets it only to say something else. tests/test_config_defaults.py
checks that no preset repeats a default written here, nor a value its parent preset already gives.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional

from omegaconf import MISSING

# Keys read only where other settings hold (`read_when`: caption/schema.py preset_key says how; the job
# refuses such a key given where it would do nothing). gpu.device and quant.method are the plan's: the
# tier gpu=auto resolved to, the method quant=auto chose.
ON_GPU = {"read_when": {"gpu.device": ("cuda",)}}
ON_CPU = {"read_when": {"gpu.device": ("cpu",)}}
QUANTIZED = {"read_when": {"quant.method": ("awq", "gptq", "nf4", "int8")}}
PREQUANTIZED = {"read_when": {"quant.method": ("awq", "gptq")}}


@dataclass
class GpuSchema:
    """A GPU tier (conf/gpu/<tier>.yaml) or, with gpu=auto, what the detected tier's keys are replaced
    with (null: the tier's own); quant/tiers.py Tier.from_config checks the values."""
    name: str = MISSING
    device: Optional[str] = MISSING  # cuda | cpu
    vram_gib: Optional[float] = field(default=MISSING, metadata=ON_GPU)  # total memory as the driver reports it (GiB); null on cpu
    compute_capability: Optional[str] = field(default=MISSING, metadata=ON_GPU)
    supports_bf16: Optional[bool] = MISSING           # null: from the compute capability, or this CPU's flags
    dtype: Optional[str] = MISSING
    enforce_eager: Optional[bool] = MISSING
    max_num_seqs: Optional[int] = MISSING
    max_num_batched_tokens: Optional[int] = MISSING
    gpu_memory_utilization: Optional[float] = field(default=MISSING, metadata=ON_GPU)  # cuda: the share of vram_gib vLLM may take
    enable_chunked_prefill: Optional[bool] = MISSING
    vllm_vision_ok: Optional[bool] = MISSING
    suggested_engine: Optional[str] = MISSING
    kv_cache_dtype: Optional[str] = MISSING
    cap_to_tier: Optional[bool] = field(default=MISSING, metadata=ON_GPU)
    ram_gib: Optional[float] = field(default=None, metadata=ON_CPU)  # cpu: host memory the weights must fit in; null: measured
    block_size: Optional[int] = MISSING
    count: Optional[int] = MISSING
    tensor_parallel_size: Optional[int] = MISSING  # null: the planner picks it
    # vLLM's native KV offloading to host memory (GiB); null: the planner decides (GPU tiers whose KV
    # budget is short of a full batch), 0: off. Not on the cpu tier, whose KV cache is host memory
    kv_offload_gib: Optional[float] = field(default=None, metadata=ON_GPU)
    env: Dict[str, Optional[str]] = field(default_factory=dict)


@dataclass
class ModelSchema:
    """A model preset (conf/model/*.yaml, or one caption-make-model writes)."""
    name: str = MISSING
    family: str = MISSING  # families/<family>.py
    path: str = field(default=MISSING, metadata={"path": True})  # a local folder or a hub id
    dtype: str = MISSING  # the weights' dtype; the tier may lower it
    max_model_len: int = MISSING
    frames: int = MISSING  # frames per clip the model is made for
    frame_width: int = MISSING
    frame_height: int = MISSING
    frame_pixels: Optional[int] = None  # pixel budget per frame; null: frame_width x frame_height
    trained_on: Optional[str] = None  # what the checkpoint knows, if narrower than real footage
    quantized: Optional[str] = None  # awq | gptq: the preset is a quantized release
    quantized_checkpoints: Dict[str, Any] = field(default_factory=dict)  # method -> {path, format}
    awq_preset: Optional[str] = None  # the official AWQ release's preset, for quant=awq
    base_preset: Optional[str] = None  # a quantized release: the 16-bit preset it came from
    arch: Dict[str, Any] = MISSING  # the numbers the planner counts with (config.json)


@dataclass
class QuantSchema:
    """A quantization preset (conf/quant/*.yaml); quant/rules.py resolves it."""
    method: str = MISSING  # auto | none | awq | gptq | nf4 | int8
    priority: str = MISSING  # quality | memory: what auto favours
    bits: Optional[int] = field(default=MISSING, metadata=QUANTIZED)  # null: the method's
    group_size: Optional[int] = field(default=MISSING, metadata=PREQUANTIZED)  # AWQ/GPTQ group
    double_quant: bool = field(default=MISSING, metadata={"read_when": {"quant.method": ("nf4",)}})  # nf4: quantize the block scales too
    checkpoint: Optional[str] = field(default=MISSING, metadata={**PREQUANTIZED, "path": True})  # pre-quantized weights (awq/gptq) when the model preset is not one
    checkpoint_format: Optional[str] = field(default=MISSING, metadata=PREQUANTIZED)  # vLLM's name of that checkpoint's format, if not the method


SCHEMAS = {"gpu": GpuSchema, "model": ModelSchema, "quant": QuantSchema}


def keys(schema) -> tuple[str, ...]:
    return tuple(f.name for f in fields(schema))


def required_keys(schema) -> tuple[str, ...]:
    """The keys every preset of the group sets (MISSING here)."""
    return tuple(f.name for f in fields(schema) if f.default is MISSING)


def optional_defaults(schema) -> dict:
    """key -> default, for the keys a preset may leave out."""
    return {f.name: f.default_factory() if f.default is NO_DEFAULT else f.default
            for f in fields(schema) if f.default is not MISSING}
