"""Which quantization, and whether model + engine + quantization + tier can work together.

The rule (docs/tiers.md, "Choosing the quantization"): <=16 GiB nf4 with double quant; <=24 GiB AWQ if quality first
else nf4; <=40 GiB int8 if quality first else AWQ; above that 16-bit if quality first else AWQ.

What each engine can run (vLLM 0.32, transformers 5.19, bitsandbytes 0.50.2), and so what is checked:
- vLLM 0.32 has no `bitsandbytes` quantization method at all (vllm/model_executor/layers/quantization/
  __init__.py, QUANTIZATION_METHODS): nf4 and int8 mean engine=hf.
- Neither engine quantizes to AWQ/GPTQ while loading: those need a pre-quantized checkpoint.
- vLLM's AWQ/GPTQ configs take float16/bfloat16 activations only (AutoAWQConfig/AutoGPTQConfig
  .get_supported_act_dtypes), so float32 tiers run them in a 16-bit dtype.
- transformers loads AWQ/GPTQ checkpoints through gptqmodel (+ accelerate; GPTQ also optimum), not in
  this project's dependencies, and runs AWQ in float16 on CUDA.
- vLLM's CPU build runs 4-bit checkpoints only where its kernel library has the W4A16 GEMM, i.e. on CPUs
  with AVX-512 (quant/cpu_kernels.py).
- vLLM has had no vision-attention backend for Turing in Qwen2.5-VL/Qwen3-VL (vllm issue 29743).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from quant.errors import PlanError
from quant.schema import QuantSchema, keys
from quant.tiers import Tier
from vidcap_ko.families import get_family

METHODS = ("none", "awq", "gptq", "nf4", "int8")
PRIORITIES = ("quality", "memory")
ENGINES = ("vllm", "hf")  # "auto" is resolved to one of these by resolve_engine
BITSANDBYTES = ("nf4", "int8")
PREQUANTIZED = ("awq", "gptq")
DEFAULT_BITS = {"awq": 4, "gptq": 4, "nf4": 4, "int8": 8}


@dataclass(frozen=True)
class QuantChoice:
    method: str                       # none | awq | gptq | nf4 | int8
    bits: int | None = None           # None for "none" (the dtype's width)
    group_size: int | None = None
    double_quant: bool = False
    priority: str = "quality"
    checkpoint: str | None = None     # pre-quantized weights to load instead of model.path
    checkpoint_format: str | None = None
    auto: bool = False                # chosen by the rule rather than named by the user
    why: str = ""


# The design's bands, "16 / 24 / 40 GB" of VRAM, read in GiB as the driver reports it: a card sold as
# N GB reports at most N GiB (T4 15.0, L4 22.5, A100-40GB 39.5-40.0, conf/gpu/), so each card lands in
# the band its name says.
BANDS_GIB = (16, 24, 40)


def choose_quant(vram_gib: float, priority: str = "quality") -> QuantChoice:
    """The design rule, from the GPU's memory (GiB, as the driver reports it) and what to favour."""
    if priority not in PRIORITIES:
        raise PlanError(f"`quant.priority={priority}` is not valid; choose one of: {', '.join(PRIORITIES)}")
    if vram_gib < 0:
        raise PlanError(f"`gpu.vram_gib` must be >= 0, got {vram_gib}")
    quality = priority == "quality"
    small, medium, large = BANDS_GIB
    if vram_gib <= small:
        method, band = "nf4", f"<= {small} GiB"
    elif vram_gib <= medium:
        method, band = ("awq" if quality else "nf4"), f"<= {medium} GiB"
    elif vram_gib <= large:
        method, band = ("int8" if quality else "awq"), f"<= {large} GiB"
    else:
        method, band = ("none" if quality else "awq"), f"> {large} GiB"
    return QuantChoice(method=method, bits=DEFAULT_BITS.get(method), group_size=128 if method in PREQUANTIZED else None,
                       double_quant=method == "nf4", priority=priority, auto=True,
                       why=f"rule: {vram_gib:g} GiB is {band}, {priority} first -> {method}")


# Every key of the `quant` group (quant/schema.py): its presets (conf/quant/*.yaml) hold the values.
QUANT_KEYS = keys(QuantSchema)


def quant_settings(quant: dict) -> dict:
    """The `quant` group, checked to hold exactly QUANT_KEYS (PlanError names the key)."""
    unknown, missing = sorted(set(quant) - set(QUANT_KEYS)), [k for k in QUANT_KEYS if quant.get(k) == "???" or k not in quant]
    if unknown:
        raise PlanError(f"`quant.{unknown[0]}` is not a quant setting; known: {', '.join(QUANT_KEYS)}")
    if missing:
        raise PlanError(f"`quant.{missing[0]}` is missing: the conf/quant/ preset in use must set it (null for none)")
    return dict(quant)


def resolve_quant(quant: dict, model: dict, tier: Tier, engine: str) -> QuantChoice:
    """The `quant` group dict -> a concrete choice (auto applies the rule, adapted to what can run)."""
    q = quant_settings(quant)
    method, priority = str(q["method"]), str(q["priority"])
    if method != "auto" and method not in METHODS:
        raise PlanError(f"`quant.method={method}` is not valid; choose one of: auto, {', '.join(METHODS)}")
    if priority not in PRIORITIES:
        raise PlanError(f"`quant.priority={priority}` is not valid; choose one of: {', '.join(PRIORITIES)}")
    released = model.get("quantized")
    if method == "auto":
        if released:
            method, why = released, f"the model preset is a {released} release: its weights are already quantized"
        elif not tier.is_gpu:
            method, why = "none", (f"{tier.name} tier: no VRAM to save, weights in {tier.dtype}; "
                                   "for 4-bit on CPU set quant=awq or quant=gptq with a checkpoint")
        else:
            rule = choose_quant(tier.vram_gib, priority)
            method, why = rule.method, rule.why
            if engine == "vllm" and method in BITSANDBYTES:
                # vLLM 0.32 cannot run bitsandbytes: take the nearest method it can run
                method = "awq" if method == "nf4" else "none"
                why += (f"; engine=vllm has no bitsandbytes, so {method} instead "
                        "(engine=hf runs the rule's choice)")
    else:
        why = f"set by quant={method}"
    bits = q["bits"] or DEFAULT_BITS.get(method)
    if released == method and (model.get("arch") or {}).get("quant_bits"):
        bits = model["arch"]["quant_bits"]
    group = q["group_size"] if method in PREQUANTIZED else None
    if method in PREQUANTIZED and released == method:
        group = (model.get("arch") or {}).get("quant_group_size") or group
    checkpoint, checkpoint_format = q["checkpoint"] or None, q["checkpoint_format"] or None
    shipped = (model.get("quantized_checkpoints") or {}).get(method) if method in PREQUANTIZED else None
    if checkpoint is None and shipped:  # the preset names its own quantized copy (the embedded model)
        checkpoint, checkpoint_format = shipped.get("path"), shipped.get("format")
        group = (model.get("arch") or {}).get("quant_group_size") or group
        why += f"; weights from the preset's {method} checkpoint"
    return QuantChoice(method=method, bits=None if method == "none" else int(bits),
                       group_size=int(group) if method in PREQUANTIZED else None,
                       double_quant=bool(q["double_quant"]) if method == "nf4" else False,
                       priority=priority, checkpoint=checkpoint, checkpoint_format=checkpoint_format,
                       auto=q["method"] == "auto", why=why)


def resolve_engine(requested: str, quant: dict, model: dict, tier: Tier) -> tuple[str, str]:
    """(engine, why): `auto` is vLLM unless the combination only runs on transformers."""
    if requested != "auto":
        return requested, f"set by engine={requested}"
    try:
        check_combination(model, "vllm", resolve_quant(quant, model, tier, "vllm"), tier)
        return "vllm", "auto: vLLM runs this combination"
    except PlanError as vllm_error:
        hf_quant = resolve_quant(quant, model, tier, "hf")
        try:
            check_combination(model, "hf", hf_quant, tier)
        except PlanError:
            raise vllm_error from None
        if hf_quant.method in PREQUANTIZED and importlib.util.find_spec("gptqmodel") is None:
            raise vllm_error from None  # transformers could, with a package that is not here
        return "hf", f"auto: transformers, because vLLM cannot: {vllm_error}"


def check_combination(model: dict, engine: str, quant: QuantChoice, tier: Tier) -> list[str]:
    """Raise PlanError for what cannot work; return warnings for what works with a caveat."""
    name, family = model.get("name", "?"), model.get("family", "?")
    released = model.get("quantized")
    warnings: list[str] = []
    if engine not in ENGINES:
        raise PlanError(f"`engine={engine}` is not valid; choose one of: {', '.join(ENGINES)}")
    m = quant.method
    if released and m != released:
        base = f"the bf16 base preset (model={model.get('base_preset')})" if model.get("base_preset") else "its bf16 base preset"
        raise PlanError(f"`model={name}` is a {released} release (weights already quantized), so only "
                        f"`quant={released}` (or quant=auto) applies; for quant={m} use {base}")
    # the engine cannot run the model on this GPU at all: say so before anything about quantization
    if engine == "vllm" and not tier.vllm_vision_ok and not get_family(family).vllm_vision_on_turing:
        raise PlanError(f"tier {tier.name} (sm{(tier.compute_capability or '?').replace('.', '')}): vLLM has had no "
                        f"vision-attention backend for Turing in {family} (vllm issue 29743): use `engine=hf`, or set "
                        "`gpu.vllm_vision_ok=true` once your vLLM build is checked to run it on this GPU")
    if m in BITSANDBYTES and engine == "vllm":
        raise PlanError(f"`quant={m}` uses bitsandbytes, which vLLM 0.32 does not have: use `engine=hf` "
                        "(transformers + bitsandbytes) or `quant=awq` / `quant=gptq` with a pre-quantized checkpoint")
    if m == "awq" and quant.bits != 4:
        raise PlanError(f"`quant.bits={quant.bits}` with quant=awq: AWQ checkpoints here are 4-bit; set `quant.bits=4`")
    if m == "gptq" and quant.bits not in (2, 3, 4, 8):
        raise PlanError(f"`quant.bits={quant.bits}` with quant=gptq: choose 2, 3, 4 or 8")
    if m in PREQUANTIZED and released != m and not quant.checkpoint:
        hint = (f"`model={model['awq_preset']}` (the official AWQ release)"
                if m == "awq" and model.get("awq_preset") else "a model preset that is such a release")
        how = " (auto chose it)" if quant.auto else ""
        raise PlanError(f"`quant={m}`{how} needs pre-quantized {m.upper()} weights; vLLM and transformers do not "
                        f"quantize to {m.upper()} while loading: use {hint}, set `quant.checkpoint=<dir or hub id>` "
                        f"(llm-compressor makes one), or `engine=hf quant=nf4` to quantize at load")
    if m in PREQUANTIZED and engine == "vllm" and not tier.is_gpu:
        from quant import cpu_kernels

        if not cpu_kernels.has_w4a16():
            library = cpu_kernels.kernel_library()
            raise PlanError(f"`quant={m}` on engine=vllm gpu={tier.name} needs vLLM's 4-bit CPU kernel "
                            f"(cpu_gemm_wna16), which this CPU's vLLM build lacks (it loads "
                            f"{library.name if library else 'no kernel library'}: the CPU has no AVX-512): "
                            f"use quant=none here, or run the {m.upper()} checkpoint on a CPU with AVX-512 or a GPU")
    if m in PREQUANTIZED and engine == "hf":
        extra = " + optimum" if m == "gptq" else ""
        warnings.append(f"transformers loads {m.upper()} checkpoints through gptqmodel (+ accelerate{extra}), which "
                        "this project does not install: add them to the environment, or use engine=vllm")
    return warnings


def plan_dtype(model: dict, tier: Tier, quant: QuantChoice, engine: str) -> tuple[str, list[str]]:
    """The dtype the engine should load and compute in, with warnings when it differs from the tier's."""
    dtype, warnings = tier.dtype, []
    if dtype == "auto":  # the cpu tier: a bf16 checkpoint in bf16 where the CPU has bf16 arithmetic
        # (caption-bench engines --dtype: vLLM 1.7x, transformers 1.4x faster than float32 on the bench model)
        native = model.get("dtype") == "bfloat16" and tier.supports_bf16
        dtype = "bfloat16" if native else "float32"
        if model.get("dtype") == "bfloat16" and not native and quant.method == "none":
            warnings.append(f"{model.get('name')} is stored in bfloat16 but this CPU has no AVX512-BF16: it runs "
                            "in float32, twice the weights' memory")
    elif dtype == "bfloat16" and tier.device == "cpu" and not tier.supports_bf16:
        warnings.append("this CPU has no AVX512-BF16: bfloat16 is emulated, slower than float32 "
                        "(`gpu.dtype=auto` runs float32 here)")
    if model.get("dtype") == "bfloat16" and dtype == "float16" and quant.method == "none":
        warnings.append(f"{model.get('name')} is stored in bfloat16 and runs in float16 on {tier.name}; "
                        "values beyond float16's range would overflow")
    if quant.method in PREQUANTIZED:
        if engine == "vllm" and dtype == "float32":
            dtype = "bfloat16" if tier.supports_bf16 else "float16"
            warnings.append(f"vLLM runs {quant.method.upper()} with 16-bit activations only: dtype {dtype} "
                            f"instead of the tier's float32")
        elif engine == "hf" and tier.is_gpu and dtype != "float16":
            dtype = "float16"
            warnings.append(f"transformers runs {quant.method.upper()} in float16 on CUDA (it casts bfloat16)")
    return dtype, warnings
