"""The plan: tier + model preset + quantization + engine -> engine settings, and whether it fits.

Made before anything loads, from one request's size (quant/request_size.py). Impossible combinations raise
PlanError (quant.rules); a combination that is possible but does not fit in memory comes back with
`fits=False` and reasons saying what to change (`Plan.raise_if_unfit()` turns that into a PlanError for
the job).

Memory model (GPU): vLLM may use `total x gpu_memory_utilization`. From that come the weights
(quant.memory.weight_bytes), a reserve, and what is left is KV cache. The reserve is an assumption:
  OVERHEAD_GIB for the CUDA context, non-torch allocations and fragmentation,
  + CUDA_GRAPH_GIB when vLLM captures CUDA graphs (enforce_eager false),
  + LM activations for one scheduler step of max_num_batched_tokens tokens,
  + fp32 logits for max_num_seqs sequences,
  + the vision tower's activations for max(one clip, max_num_batched_tokens) video tokens.
vLLM measures its real peak at start-up; this errs on the high side so a plan that fits here starts.
The transformers engine (engine=hf) has no paged cache: each sequence in a batch costs its KV cache plus
its prefill activations. CPU with vLLM: the KV budget is VLLM_CPU_KVCACHE_SPACE (gpu.env), and the engine
takes no more of it than the job can use (CPU_KV_SPARE).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from quant.errors import PlanError
from quant.memory import (
    GIB,
    activation_bytes,
    arch_kv_bytes_per_token,
    cap_utilization,
    dtype_bytes,
    kv_bytes,
    logits_bytes,
    vision_activation_bytes,
    weight_bytes,
)
from quant.parallel import choose_tensor_parallel
from quant.request_size import PROMPT_TEXT_TOKENS, Request, check_model_keys, model_arch, request_size
from quant.rules import BITSANDBYTES, PREQUANTIZED, check_combination, plan_dtype, resolve_engine, resolve_quant
from quant.tiers import Tier
from vidcap_ko.families import get_family

OVERHEAD_GIB = 1.0
CUDA_GRAPH_GIB = 0.5
MAX_MODEL_LEN_STEP = 256        # max_model_len is rounded up to this when the planner picks it
# vLLM on the CPU allocates its whole KV space as it starts and writes zeros over it (vllm/v1/worker/utils.py
# allocate_kv_cache, torch.zeros): ~0.25 s a GiB, 0.5 s of every start at the cpu tier's 2 GiB, and as much
# host memory held for the engine's life. Where that space is more than the job can ever fill (max_num_seqs
# requests of max_model_len tokens at once: the embedded model's 48 MiB), the engine takes this many times the
# most it can fill instead: a draft model's layers (spec=draft) share the pool, and the prefix cache keeps what
# finished requests leave in the blocks no running request holds.
CPU_KV_SPARE = 2


@dataclass
class Plan:
    model: str
    family: str
    tier: str
    engine: str
    dtype: str
    model_path: str | None              # what to load: quant.checkpoint if given, else model.path
    quantization: dict                  # method, bits, group_size, double_quant, priority, auto, why
    vllm: dict | None                   # keyword arguments for vllm.LLM (engine=vllm)
    hf: dict | None                     # dtype, device, max_batch_size, quantization_config, max_cache_len (engine=hf)
    memory_gib: dict                    # total, utilization, budget, weights, reserve, kv budget, ...
    kv_bytes_per_token: int
    sequences_fit: int | None           # concurrent requests the KV budget holds (None: not checked)
    vision_tokens_per_clip: int
    tokens_per_request: int             # prompt text + video (+ Qwen3 timestamps) + max_new_tokens
    fits: bool
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how a figure was reached (not a problem: no warning)
    warnings: list[str] = field(default_factory=list)
    engine_reason: str = ""             # why this engine (engine=auto picks one)
    tensor_parallel_size: int = 1       # GPUs each engine spans (vLLM tensor_parallel_size)
    replicas: int = 1                   # independent engines per machine: gpu.count / tensor_parallel_size
    engine_env: dict = field(default_factory=dict)  # vLLM's environment (gpu.env), exported before it loads
    kv_offload_gib: float | None = None  # vLLM's KV offloading to host memory (vllm kv_offloading_size); None: off
    server: dict | None = None          # engine=server: the server and the model it serves (quant/server_plan.py)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def refused(cls, model: dict, tier: dict, engine: str, reason: str) -> "Plan":
        """A plan for a combination that cannot run at all (for plan-only sweeps: a row saying why)."""
        return cls(model=str(model.get("name")), family=str(model.get("family")), tier=str(tier.get("name")),
                   engine=engine, dtype=str(tier.get("dtype")), model_path=None, quantization={},
                   vllm=None, hf=None, memory_gib={}, kv_bytes_per_token=0, sequences_fit=None,
                   vision_tokens_per_clip=0, tokens_per_request=0, fits=False, reasons=[reason])

    def raise_if_unfit(self) -> "Plan":
        if not self.fits:
            raise PlanError(f"{self.model} on {self.tier} ({self.engine}, {self.quantization['method']}) "
                            f"does not fit: {' '.join(self.reasons)}")
        return self


def _round_up(n: int, step: int) -> int:
    return math.ceil(n / step) * step


def _quant_config(choice, dtype: str, family: str) -> dict | None:
    """transformers BitsAndBytesConfig arguments; the family's vision modules and lm_head stay unquantized."""
    skip = [*get_family(family).vision_modules, "lm_head"]
    if choice.method == "nf4":
        return {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": choice.double_quant,
                "bnb_4bit_compute_dtype": dtype, "llm_int8_skip_modules": skip}
    if choice.method == "int8":
        return {"load_in_8bit": True, "llm_int8_skip_modules": skip}
    return None


def make_plan(model: dict, tier: dict | Tier, quant: dict, engine: str | dict, video: dict | None = None,
              *, max_new_tokens: int, prompt_text_tokens: int = PROMPT_TEXT_TOKENS, device_vram_gib: float | None = None,
              cap_to_tier: bool | None = None) -> Plan:
    """Plan one job from plain dicts (as `OmegaConf.to_container(cfg.<group>, resolve=True)` gives them).

    video: {frames|num_frames, width, height}; defaults to the model preset's frames and frame size.
    device_vram_gib: the actual GPU's total memory in GiB as its driver reports it (nvidia-smi's memory.total,
    the measure the tiers' vram_gib is in; caption/planning.py device_vram_gib), needed
    with cap_to_tier (argument, or `gpu.cap_to_tier`) to rehearse a small tier on a bigger GPU.

    GPUs per machine (`gpu.count`): each engine spans `tensor_parallel_size` of them (the user's
    `gpu.tensor_parallel_size`, else the smallest power of two whose share of the weights leaves KV
    cache for a full batch, the tier's max_num_seqs), and count / tensor_parallel_size engines run
    side by side (the plan's replicas).
    """
    check_model_keys(model)
    tier = tier if isinstance(tier, Tier) else Tier.from_config(tier)
    engine = str(engine.get("name")) if isinstance(engine, dict) else str(engine)
    args = (model, tier, quant, engine, video, max_new_tokens, prompt_text_tokens, device_vram_gib, cap_to_tier)
    return choose_tensor_parallel(lambda tp, preset=model: _plan_on(preset, *args[1:], tp=tp), tier, model)


@dataclass
class _Sizes:
    """Per GPU: the weights (total, lm, vision), KV bytes per token and per request, activation width."""
    weights: dict
    kv_tok: int
    kv_seq: int
    act: int


@dataclass
class _Budget:
    """The memory a plan works within: max_num_batched_tokens, the budget, the reserve, the KV budget."""
    batched: int
    total: float
    reserve: float
    kv: float


def _plan_on(model: dict, tier: Tier, quant: dict, engine: str, video: dict | None, max_new_tokens: int,
             prompt_text_tokens: int, device_vram_gib: float | None, cap_to_tier: bool | None, tp: int) -> Plan:
    """The plan for engines of `tp` GPUs each; memory figures are per GPU."""
    engine, engine_reason = resolve_engine(engine, quant, model, tier)
    arch, family = model_arch(model), str(model.get("family"))
    choice = resolve_quant(quant, model, tier, engine)
    warnings = check_combination(model, engine, choice, tier)
    dtype, dtype_warnings = plan_dtype(model, tier, choice, engine)
    warnings += dtype_warnings
    request = request_size(model, video, family, arch, engine, max_new_tokens, prompt_text_tokens)
    sizes = _sizes(family, arch, dtype, choice, tier, tp, request.need)
    max_len = _model_len(model, request, warnings)
    util, total_gib, cap = _device_memory(tier, device_vram_gib, cap_to_tier, warnings)
    max_len, budget, per_seq = _fit_model_len(tier, engine, arch, sizes, request, util, total_gib, max_len, warnings)
    seqs = None if math.isinf(budget.kv) else max(0, int(budget.kv // per_seq))
    fits, reasons = _fits(model, tier, engine, arch, family, dtype, choice, tp, request, sizes, budget, per_seq, seqs,
                          util, total_gib)
    max_num_seqs = tier.max_num_seqs if seqs is None or not fits else max(1, min(tier.max_num_seqs, seqs))
    cpu_kv = _cpu_kv_cache_bytes(tier, budget, sizes.kv_tok, max_len, max_num_seqs) \
        if engine == "vllm" and fits else None
    if fits:
        fit_line = " ".join(_fit_words(tier, engine, tp, request, sizes, budget, per_seq, seqs, max_num_seqs))
        if cpu_kv is not None and cpu_kv < int(budget.kv):
            fit_line += (f"; the engine takes {cpu_kv / 2**20:.0f} MiB of the KV space, {CPU_KV_SPARE}x what "
                         f"{max_num_seqs} requests of max_model_len {max_len} tokens can fill")
        reasons.append(fit_line)
    vllm, hf = _engine_settings(tier, engine, family, dtype, choice, tp, util, cap, seqs, max_num_seqs, budget.batched,
                                max_len)
    engine_env = dict(tier.env) if engine == "vllm" else {}
    if vllm is not None and cpu_kv is not None:
        # in bytes, so a space of a fraction of a GiB runs too: vLLM reads the variable as whole GiB
        # (int(), vllm/platforms/cpu.py), and over kv_cache_memory_bytes where it is set
        vllm["kv_cache_memory_bytes"] = cpu_kv
        engine_env.pop("VLLM_CPU_KVCACHE_SPACE")
    if hf is not None:  # a static KV cache's length (engine.compile_static_cache): the request memory is planned for
        hf["max_cache_len"] = request.need
    if vllm is not None and request.prune_rate:
        vllm["video_pruning_rate"] = request.prune_rate  # vLLM's EVS (the count above is its count)
    offload = _kv_offload(tier, engine, seqs, sizes.kv_seq, tp, request.notes) if fits else None
    if offload:
        vllm["kv_offloading_size"] = offload
    gib = lambda b: None if b is None or math.isinf(b) else round(b / GIB, 3)  # noqa: E731
    return Plan(
        model=str(model.get("name")), family=family, tier=tier.name, engine=engine, dtype=dtype,
        model_path=choice.checkpoint or model.get("path"),
        quantization={"method": choice.method, "bits": choice.bits, "group_size": choice.group_size,
                      "double_quant": choice.double_quant, "priority": choice.priority, "auto": choice.auto,
                      "checkpoint": choice.checkpoint, "why": choice.why},
        vllm=vllm, hf=hf,
        memory_gib={"total": total_gib, "utilization": None if util is None else round(util, 4),
                    "budget": gib(budget.total), "weights": gib(sizes.weights["total"]),
                    "weights_lm": gib(sizes.weights["lm"]), "weights_vision": gib(sizes.weights["vision"]),
                    "reserve": gib(budget.reserve), "kv_budget": gib(budget.kv), "kv_per_sequence": gib(sizes.kv_seq)},
        kv_bytes_per_token=int(sizes.kv_tok), sequences_fit=seqs, vision_tokens_per_clip=request.video_tokens,
        tokens_per_request=request.need, fits=fits, reasons=reasons, warnings=warnings, notes=request.notes,
        engine_reason=engine_reason, kv_offload_gib=offload, tensor_parallel_size=tp,
        replicas=max(1, tier.count // tp), engine_env=engine_env,
    )


def _sizes(family: str, arch: dict, dtype: str, choice, tier: Tier, tp: int, need: int) -> _Sizes:
    """Weights and KV cache per GPU: each of `tp` GPUs holds 1/tp of the weights and its share of the KV
    heads (replicated below one per GPU)."""
    weights = weight_bytes(family, arch, dtype, choice.method, choice.bits or 4, choice.group_size or 128,
                           choice.double_quant)
    kv_dtype = dtype if tier.kv_cache_dtype == "auto" else tier.kv_cache_dtype
    kv_tok = arch_kv_bytes_per_token(arch, kv_dtype)
    if tp > 1:
        weights = {part: size / tp for part, size in weights.items()}
        heads = int(arch["num_kv_heads"])
        kv_tok = kv_tok // heads * max(1, heads // tp)
    return _Sizes(weights, kv_tok, kv_bytes(kv_tok, need, block=tier.block_size), dtype_bytes(dtype))


def _model_len(model: dict, request: Request, warnings: list[str]) -> int:
    """max_model_len: the preset's, unless a request would not fit in it; never past the model's context."""
    max_len = int(model.get("max_model_len") or 0)
    if max_len < request.need:
        picked = _round_up(request.need, MAX_MODEL_LEN_STEP)
        if max_len:
            warnings.append(f"model.max_model_len={max_len} is below the {request.need} tokens a request needs: "
                            f"the plan uses {picked} (set model.max_model_len={picked})")
        max_len = picked
    return min(max_len, int(request.context)) if request.context else max_len


def _device_memory(tier: Tier, device_vram_gib: float | None, cap_to_tier: bool | None,
                   warnings: list[str]) -> tuple[float | None, float | None, bool]:
    """(memory utilization, total GiB, rehearsing a smaller tier): the tier's, or the fraction of a bigger
    device that gives the engine the tier's memory (gpu.cap_to_tier)."""
    util = tier.gpu_memory_utilization
    cap = tier.cap_to_tier if cap_to_tier is None else cap_to_tier
    total_gib = tier.vram_gib if tier.is_gpu else tier.ram_gib
    if tier.is_gpu and cap:
        if device_vram_gib is None:
            raise PlanError("`gpu.cap_to_tier=true` rehearses a tier on a bigger GPU and needs that GPU's memory: "
                            "none was found (nvidia-smi lists no GPU; from Python, pass device_vram_gib); "
                            "drop gpu.cap_to_tier to see the tier's own plan")
        try:
            util = cap_utilization(tier.vram_gib, util, device_vram_gib)
        except ValueError as exc:
            raise PlanError(f"cannot rehearse tier {tier.name} on this GPU: {exc}; pick a smaller tier "
                            "(gpu=...) or set `gpu.cap_to_tier=false`") from None
        total_gib = device_vram_gib
        warnings.append(f"rehearsing {tier.name} on a {device_vram_gib:g} GiB device: a memory fraction of "
                        f"{util:.4f} (vLLM gpu_memory_utilization, or torch's per-process fraction on engine=hf) "
                        f"gives the engine the tier's {tier.vram_gib:g} x {tier.gpu_memory_utilization} GiB; "
                        "memory fit is rehearsed, speed is not")
    elif tier.is_gpu and device_vram_gib and abs(device_vram_gib - tier.vram_gib) > 0.05 * tier.vram_gib:
        warnings.append(f"this GPU has {device_vram_gib:g} GiB, tier {tier.name} assumes {tier.vram_gib:g} GiB: "
                        "vLLM budgets from the real device; set gpu.cap_to_tier=true to rehearse the tier")
    return util, total_gib, cap


def _budget(tier: Tier, engine: str, arch: dict, sizes: _Sizes, video_tokens: int, util, total_gib,
            length: int) -> _Budget:
    """The memory budget for a max_model_len of `length` (module docstring: the memory model)."""
    batched = tier.max_num_batched_tokens
    if engine == "vllm" and not tier.enable_chunked_prefill and batched < length:
        batched = length  # without chunked prefill a whole prompt must fit in one step
    weights = sizes.weights["total"]
    if not tier.is_gpu:
        if engine == "vllm":
            if tier.cpu_kv_cache_gib is None:
                raise PlanError("`gpu.env.VLLM_CPU_KVCACHE_SPACE` is unset: vLLM then sizes the KV cache "
                                "itself, from the host's free memory; set it in GiB (conf/gpu/cpu.yaml sets 2)")
            # weights live in host RAM, the KV cache in its own fixed space
            ram = math.inf if tier.ram_gib is None else tier.ram_gib * GIB
            return _Budget(batched, ram, 0.0, tier.cpu_kv_cache_gib * GIB)
        if tier.ram_gib is None:
            return _Budget(batched, math.inf, 0.0, math.inf)
        budget = tier.ram_gib * GIB
        return _Budget(batched, budget, OVERHEAD_GIB * GIB, budget - weights - OVERHEAD_GIB * GIB)
    budget = total_gib * GIB * util
    reserve = OVERHEAD_GIB * GIB
    if engine == "vllm":
        reserve += (0 if tier.enforce_eager else CUDA_GRAPH_GIB * GIB) + activation_bytes(arch, batched, sizes.act)
        reserve += logits_bytes(arch, tier.max_num_seqs)
        if arch.get("vision_hidden_size"):
            reserve += vision_activation_bytes(arch, max(video_tokens, batched), sizes.act)
    return _Budget(batched, budget, reserve, budget - weights - reserve)


def _fit_model_len(tier: Tier, engine: str, arch: dict, sizes: _Sizes, request: Request, util, total_gib,
                   max_len: int, warnings: list[str]) -> tuple[int, _Budget, float]:
    """(max_model_len, budget, bytes per request): max_model_len lowered where one sequence of it would
    not fit vLLM's KV cache (vLLM checks at start-up); on transformers a request also holds its prefill
    activations (no paging)."""
    budget = _budget(tier, engine, arch, sizes, request.encoded_video_tokens, util, total_gib, max_len)
    per_seq = sizes.kv_seq
    if engine == "hf":
        per_seq += activation_bytes(arch, request.need, sizes.act)
        if arch.get("vision_hidden_size"):
            per_seq += vision_activation_bytes(arch, request.encoded_video_tokens, sizes.act)
    needed_len = min(_round_up(request.need, MAX_MODEL_LEN_STEP), max_len)
    if engine == "vllm" and budget.kv < kv_bytes(sizes.kv_tok, max_len) and max_len > needed_len:
        warnings.append(f"lowered max_model_len from {max_len} to {needed_len} so one sequence fits the KV cache "
                        "(vLLM checks this at start-up)")
        max_len = needed_len
        budget = _budget(tier, engine, arch, sizes, request.encoded_video_tokens, util, total_gib, max_len)
    if engine == "vllm" and budget.batched != tier.max_num_batched_tokens:
        warnings.append(f"max_num_batched_tokens raised from {tier.max_num_batched_tokens} to {budget.batched}: "
                        "without chunked prefill vLLM needs it >= max_model_len (or set gpu.enable_chunked_prefill=true)")
    return max_len, budget, per_seq


def _fits(model: dict, tier: Tier, engine: str, arch: dict, family: str, dtype: str, choice, tp: int,
          request: Request, sizes: _Sizes, budget: _Budget, per_seq: float, seqs: int | None, util,
          total_gib) -> tuple[bool, list[str]]:
    """(fits, why not): the request within the model's context, the weights within the budget, at least
    one request within the KV budget."""
    reasons: list[str] = []
    fits = True
    weights, need = sizes.weights["total"], request.need
    if request.context and need > request.context:
        fits = False
        reasons.append(f"a request needs {need} tokens but {model.get('name')} handles {request.context}: use fewer "
                       "frames (video.num_frames) or smaller frames (model.frame_width / model.frame_height)")
    if weights >= budget.total:
        four_bit = weight_bytes(family, arch, dtype, "awq", 4, 128)["total"] / GIB
        smaller = (f"4-bit weights (quant=awq with an AWQ checkpoint, or engine=hf quant=nf4) need ~{four_bit:.1f} GiB; "
                   if choice.method in ("none", "int8") else f"the weights are already {choice.method}: ")
        return False, reasons + [
            f"weights alone need {weights / GIB:.1f} GiB{_per_gpu(tp)} but the budget is {budget.total / GIB:.1f} GiB "
            f"({_budget_words(tier, total_gib, util)}): {smaller}pick a GPU tier with more memory (gpu=...) or a "
            "smaller model"]
    if seqs is not None and seqs < 1 and not tier.is_gpu and engine == "vllm":
        return False, reasons + [
            f"not even one request fits: {need} tokens need {per_seq / 2**20:.1f} MiB of KV cache but "
            f"VLLM_CPU_KVCACHE_SPACE is {tier.cpu_kv_cache_gib:g} GiB: raise gpu.env.VLLM_CPU_KVCACHE_SPACE, "
            "or use fewer or smaller frames (video.num_frames, model.frame_width/height)"]
    if seqs is not None and seqs < 1:
        return False, reasons + [
            f"not even one request fits: {need} tokens need {per_seq / GIB:.2f} GiB of KV cache"
            f"{' and activations' if engine == 'hf' else ''}, but weights ({weights / GIB:.2f} GiB) "
            f"and reserve ({budget.reserve / GIB:.2f} GiB) leave {max(budget.kv, 0) / GIB:.2f} GiB of "
            f"{budget.total / GIB:.1f}: use fewer or smaller frames (video.num_frames, model.frame_width/height), "
            "a lower sampling.max_new_tokens, quantized weights (quant=...), or a higher gpu.gpu_memory_utilization"]
    return fits, reasons


def _fit_words(tier: Tier, engine: str, tp: int, request: Request, sizes: _Sizes, budget: _Budget,
               per_seq: float, seqs: int | None, max_num_seqs: int) -> list[str]:
    """How a plan that fits fits, in one line."""
    weights, need = sizes.weights["total"], request.need
    if seqs is not None and not tier.is_gpu and engine == "vllm":
        return [f"fits: VLLM_CPU_KVCACHE_SPACE={tier.cpu_kv_cache_gib:g} GiB holds {seqs} concurrent requests "
                f"of {need} tokens ({per_seq / 2**20:.1f} MiB each); max_num_seqs {tier.max_num_seqs} -> "
                f"{max_num_seqs}; weights {weights / GIB:.2f} GiB in host RAM"
                f"{' (not checked: set gpu.ram_gib)' if tier.ram_gib is None else ''}"]
    if seqs is not None:
        return [f"fits{_per_gpu(tp)}: {weights / GIB:.2f} GiB weights + {budget.reserve / GIB:.2f} GiB reserve leave "
                f"{budget.kv / GIB:.2f} GiB for KV cache = {seqs} concurrent requests of {need} tokens "
                f"({per_seq / 2**20:.0f} MiB each); "
                + (f"max_num_seqs {tier.max_num_seqs} -> {max_num_seqs}" if engine == "vllm"
                   else f"batches of up to {seqs}")]
    return [f"fits by assumption: host RAM not checked (set gpu.ram_gib); weights "
            f"{weights / GIB:.2f} GiB, {per_seq / 2**20:.1f} MiB per request"]


def _engine_settings(tier: Tier, engine: str, family: str, dtype: str, choice, tp: int, util, cap: bool,
                     seqs: int | None, max_num_seqs: int, batched: int, max_len: int) -> tuple[dict | None, dict | None]:
    """(vLLM's keyword arguments, transformers' settings): the one the plan's engine runs with."""
    if engine == "vllm":
        return {"dtype": dtype, "gpu_memory_utilization": None if util is None else round(util, 4),
                "max_num_seqs": max_num_seqs, "max_num_batched_tokens": batched, "max_model_len": max_len,
                "enable_chunked_prefill": tier.enable_chunked_prefill, "enforce_eager": tier.enforce_eager,
                "quantization": (choice.checkpoint_format or choice.method) if choice.method in PREQUANTIZED else None,
                "kv_cache_dtype": tier.kv_cache_dtype, "tensor_parallel_size": tp, "block_size": tier.block_size}, None
    # rehearsing on a bigger GPU: torch.cuda.set_per_process_memory_fraction(memory_fraction) caps torch
    return None, {"dtype": dtype, "device": tier.device, "max_batch_size": None if seqs is None else max(1, seqs),
                  "memory_fraction": round(util, 4) if tier.is_gpu and cap else None,
                  "quantization_config": _quant_config(choice, dtype, family) if choice.method in BITSANDBYTES else None}


def _cpu_kv_cache_bytes(tier: Tier, budget: _Budget, kv_tok: int, max_len: int, max_num_seqs: int) -> int | None:
    """The bytes of KV cache vLLM on the CPU is given: VLLM_CPU_KVCACHE_SPACE, or less where the job cannot
    fill it (CPU_KV_SPARE); None on a GPU."""
    if tier.is_gpu:
        return None
    return int(min(budget.kv, CPU_KV_SPARE * kv_bytes(kv_tok, max_len, max_num_seqs, block=tier.block_size)))


def _kv_offload(tier: Tier, engine: str, seqs: int | None, kv_per_seq: float, tp: int,
                notes: list[str]) -> float | None:
    """GiB of host memory for vLLM's native KV offloading (vllm/config/cache.py kv_offloading_size), or
    None. The user's gpu.kv_offload_gib where given (0: off); else, on a GPU tier whose KV budget holds
    fewer sequences than the tier's batch, the KV cache of the sequences it is short of: blocks vLLM
    evicts from the GPU (a clip's shared prefix, a preempted request) are kept there and loaded back
    instead of recomputed. Summed over the tensor-parallel ranks, as vLLM counts it."""
    if tier.kv_offload_gib is not None:
        if tier.kv_offload_gib and engine != "vllm":
            notes.append(f"gpu.kv_offload_gib={tier.kv_offload_gib:g} is vLLM's: engine={engine} keeps its KV "
                         "cache where it computes it, so it is not used")
            return None
        return tier.kv_offload_gib or None
    if engine != "vllm" or not tier.is_gpu or seqs is None or seqs >= tier.max_num_seqs:
        return None
    short = (tier.max_num_seqs - seqs) * kv_per_seq * tp
    offload = max(1.0, math.ceil(2 * short / GIB) / 2)  # half-GiB steps, at least 1
    notes.append(f"KV offloading: the GPU holds {seqs} of the tier's {tier.max_num_seqs} sequences; vLLM keeps "
                 f"{offload:g} GiB of evicted KV blocks in host memory (gpu.kv_offload_gib=0 turns it off)")
    return offload


def _per_gpu(tp: int) -> str:
    return f" on each of {tp} GPUs (tensor parallel)" if tp > 1 else ""


def _budget_words(tier: Tier, total_gib, util) -> str:
    if tier.is_gpu:
        return f"{total_gib:g} GiB x gpu_memory_utilization {util:.2f}"
    return f"host RAM, gpu.ram_gib={tier.ram_gib:g}"  # only checked when the cpu tier gives ram_gib
