"""A GPU tier (conf/gpu/*.yaml) as a validated, typed value.

The keys are quant/schema.py GpuSchema's: every tier preset sets each required one (null where it says
what null means), the presets being the one home of those values; quant/schema.py preset_values refuses
a key left out or one the schema does not know. Memory is in GiB throughout (vram_gib: what the driver reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from quant.cpu_kernels import has_native_bf16
from quant.errors import PlanError
from quant.schema import GpuSchema, preset_values

DEVICES = ("cuda", "cpu")
DTYPES = ("float32", "float16", "bfloat16")
CPU_DTYPES = (*DTYPES, "auto")  # auto: the model's bfloat16 where the CPU computes it natively, else float32
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class Tier:
    name: str
    device: str
    vram_gib: float                    # driver-reported total (0 on cpu); the quantization rule and
                                       #   gpu_memory_utilization read it
    dtype: str
    enforce_eager: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float | None
    enable_chunked_prefill: bool
    supports_bf16: bool
    compute_capability: str | None
    vllm_vision_ok: bool               # False: vLLM's vision attention fails here for some families (issue 29743)
    suggested_engine: str
    kv_cache_dtype: str
    cap_to_tier: bool                  # rehearse this tier on a bigger device
    cpu_kv_cache_gib: float | None     # cpu: VLLM_CPU_KVCACHE_SPACE, the whole KV budget
    ram_gib: float | None              # cpu: host memory for weights; None = not checked
    env: dict
    count: int                         # GPUs (cpu: engine replicas) on each machine
    tensor_parallel_size: int | None   # None: the planner picks it (quant.plan)
    block_size: int                    # KV-cache block (tokens): the planner counts in it, vLLM runs it
    kv_offload_gib: float | None       # vLLM's KV offloading to host memory; None: the planner decides, 0: off

    @property
    def is_gpu(self) -> bool:
        return self.device == "cuda"

    @classmethod
    def from_config(cls, cfg: dict) -> "Tier":
        """Validate a `gpu` group dict; raises PlanError naming the `gpu.<key>` to fix."""
        cfg = preset_values(GpuSchema, "gpu", cfg)
        name, device = str(_need(cfg, "name")), str(_need(cfg, "device"))
        if device not in DEVICES:
            raise PlanError(f"`gpu.device={device}` is not valid; choose one of: {', '.join(DEVICES)}")
        vram_gib, util = _memory(cfg, name, device)
        dtype, bf16, cc = _numbers(cfg, name, device)
        count, tp, block = _parallel(cfg, device)
        env = dict(cfg["env"] or {})
        cpu_kv = env.get("VLLM_CPU_KVCACHE_SPACE")
        return cls(
            name=name, device=device, vram_gib=vram_gib, dtype=dtype,
            enforce_eager=bool(cfg["enforce_eager"]),
            max_num_seqs=int(cfg["max_num_seqs"]), max_num_batched_tokens=int(cfg["max_num_batched_tokens"]),
            gpu_memory_utilization=None if util is None else float(util),
            enable_chunked_prefill=bool(cfg["enable_chunked_prefill"]),
            supports_bf16=bool(bf16), compute_capability=None if cc is None else str(cc),
            vllm_vision_ok=bool(cfg["vllm_vision_ok"]),
            suggested_engine=str(_need(cfg, "suggested_engine")), kv_cache_dtype=str(cfg["kv_cache_dtype"]),
            cap_to_tier=bool(cfg["cap_to_tier"]),
            cpu_kv_cache_gib=None if cpu_kv is None else float(cpu_kv),
            ram_gib=None if cfg.get("ram_gib") is None else float(cfg["ram_gib"]), env=env,
            count=count, tensor_parallel_size=tp, block_size=block, kv_offload_gib=_kv_offload(cfg, name, device),
        )


def _need(cfg: dict, key: str):
    if cfg.get(key) is None:
        raise PlanError(f"`gpu.{key}` is null in tier {cfg.get('name', '?')!r}: give it a value")
    return cfg[key]


def _memory(cfg: dict, name: str, device: str) -> tuple[float, float | None]:
    """(vram_gib, gpu_memory_utilization), checked for a cuda tier (0 GiB on cpu)."""
    vram_gib = float(cfg.get("vram_gib") or 0)
    if device == "cuda" and vram_gib <= 0:
        raise PlanError(f"`gpu.vram_gib` must be > 0 on a cuda tier ({name}), got {cfg.get('vram_gib')}: the "
                        "GPU's total memory in GiB, as nvidia-smi reports it (MiB / 1024)")
    util = cfg.get("gpu_memory_utilization")
    if device == "cuda" and (util is None or not 0 < float(util) <= 1):
        raise PlanError(f"`gpu.gpu_memory_utilization` must be in (0, 1] on a cuda tier ({name}), got {util}")
    return vram_gib, util


def _numbers(cfg: dict, name: str, device: str) -> tuple[str, bool, str | None]:
    """(dtype, bf16 support, compute capability), and the batch limits and KV dtype checked."""
    dtype = str(_need(cfg, "dtype"))
    allowed = CPU_DTYPES if device == "cpu" else DTYPES
    if dtype not in allowed:
        raise PlanError(f"`gpu.dtype={dtype}` is not valid on tier {name}; choose one of: {', '.join(allowed)}")
    cc = cfg.get("compute_capability")
    bf16 = cfg.get("supports_bf16")
    if bf16 is None:  # bf16 tensor cores arrived with Ampere (sm80); a CPU: this one's flags
        bf16 = has_native_bf16() if device == "cpu" else cc is not None and float(cc) >= 8.0
    if dtype == "bfloat16" and not bf16 and device == "cuda":  # a CPU emulates it (the plan warns)
        raise PlanError(f"`gpu.dtype=bfloat16` but tier {name} has no bf16 (compute capability {cc}): "
                        "set `gpu.dtype=float16`")
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if int(_need(cfg, key)) <= 0:
            raise PlanError(f"`gpu.{key}` must be > 0, got {cfg[key]}")
    kv_dtype = str(_need(cfg, "kv_cache_dtype"))
    if kv_dtype not in KV_CACHE_DTYPES:
        raise PlanError(f"`gpu.kv_cache_dtype={kv_dtype}` is not valid; choose one of: {', '.join(KV_CACHE_DTYPES)}")
    return dtype, bf16, cc


def _parallel(cfg: dict, device: str) -> tuple[int, int | None, int]:
    """(count, tensor_parallel_size or None, block_size), checked."""
    count = int(_need(cfg, "count"))
    if count <= 0:
        raise PlanError(f"`gpu.count` must be >= 1 (GPUs on each machine), got {cfg.get('count')}")
    tp = cfg.get("tensor_parallel_size")
    if tp is not None:
        tp = int(tp)
        if tp <= 0 or tp & (tp - 1) or tp > count:
            raise PlanError(f"`gpu.tensor_parallel_size={cfg.get('tensor_parallel_size')}` must be a power of two "
                            f"no larger than gpu.count={count} (or null: the planner picks it)")
        if tp > 1 and device == "cpu":
            raise PlanError("`gpu.tensor_parallel_size` > 1 needs GPUs: on the cpu tier each engine is one "
                            "process (gpu.count sets how many)")
    block = int(_need(cfg, "block_size"))
    if block <= 0 or (device == "cpu" and block % 32):
        raise PlanError(f"`gpu.block_size={cfg.get('block_size')}` must be a positive number of tokens"
                        + (", a multiple of 32 on the cpu tier (vLLM's CPU attention)" if device == "cpu" else ""))
    return count, tp, block


def _kv_offload(cfg: dict, name: str, device: str) -> float | None:
    """gpu.kv_offload_gib, checked: >= 0, and only where there is a GPU to offload from."""
    value = cfg.get("kv_offload_gib")
    if value is None:
        return None
    if float(value) < 0:
        raise PlanError(f"`gpu.kv_offload_gib={value}` must be >= 0 (0: off, null: the planner decides)")
    if device == "cpu" and float(value) > 0:
        raise PlanError(f"`gpu.kv_offload_gib={value}`: tier {name} has no GPU memory to offload from, its KV "
                        "cache already is host memory (gpu.env.VLLM_CPU_KVCACHE_SPACE sizes it): remove "
                        "gpu.kv_offload_gib")
    return float(value)
