"""The quantization rule at each boundary, and the combinations that must be refused (and how)."""

from __future__ import annotations

import pytest

from quant.errors import PlanError
from quant.presets import load, load_model
from quant.rules import check_combination, choose_quant, plan_dtype, resolve_quant
from quant.tiers import Tier


def tier(name: str, **overrides) -> Tier:
    return Tier.from_config(dict(load("gpu", name), **overrides))


@pytest.mark.parametrize("vram, priority, method", [
    (0, "quality", "nf4"), (16, "quality", "nf4"), (16, "memory", "nf4"),
    (16.5, "quality", "awq"), (24, "quality", "awq"), (16.5, "memory", "nf4"), (24, "memory", "nf4"),
    (24.5, "quality", "int8"), (40, "quality", "int8"), (24.5, "memory", "awq"), (40, "memory", "awq"),
    (40.5, "quality", "none"), (80, "quality", "none"), (40.5, "memory", "awq"), (80, "memory", "awq"),
])
def test_rule_at_each_boundary(vram, priority, method):
    choice = choose_quant(vram, priority)
    assert choice.method == method and choice.priority == priority and choice.auto
    assert choice.double_quant == (method == "nf4")
    assert choice.bits == {"nf4": 4, "awq": 4, "int8": 8, "none": None}[method]


def test_rule_rejects_unknown_priority_naming_the_key():
    with pytest.raises(PlanError, match=r"`quant.priority=speed`.*quality, memory"):
        choose_quant(24, "speed")


def test_auto_on_vllm_swaps_bitsandbytes_for_what_vllm_runs():
    base = load_model("qwen2_5_vl_7b")
    a100 = resolve_quant(dict(load("quant", "auto"), priority="quality"), base, tier("a100"), "vllm")
    assert a100.method == "none" and "rule" in a100.why and "int8" in a100.why and "no bitsandbytes" in a100.why
    l4 = resolve_quant(dict(load("quant", "auto"), priority="memory"), base, tier("l4"), "vllm")
    assert l4.method == "awq"
    # engine=hf runs the rule as written
    assert resolve_quant(load("quant", "auto"), base, tier("a100"), "hf").method == "int8"
    assert resolve_quant(dict(load("quant", "auto"), priority="memory"), base, tier("l4"), "hf").method == "nf4"


def test_auto_keeps_an_awq_release_awq_and_the_cpu_unquantized():
    awq = resolve_quant(load("quant", "auto"), load_model("qwen2_5_vl_7b_awq"), tier("h100"), "vllm")
    assert (awq.method, awq.bits, awq.group_size) == ("awq", 4, 128) and "awq release" in awq.why
    cpu = resolve_quant(load("quant", "auto"), load_model("vidcap_ko_tiny"), tier("cpu"), "vllm")
    assert cpu.method == "none" and cpu.bits is None


def test_explicit_choice_is_kept():
    choice = resolve_quant(load("quant", "nf4"), load_model("qwen2_5_vl_7b"), tier("h100"), "hf")
    assert choice.method == "nf4" and not choice.auto and choice.double_quant


@pytest.mark.parametrize("method", ["nf4", "int8"])
def test_bitsandbytes_on_vllm_is_refused_with_the_way_out(method):
    choice = resolve_quant(load("quant", method), load_model("qwen2_5_vl_7b"), tier("a100"), "vllm")
    with pytest.raises(PlanError, match=r"vLLM 0.32.*`engine=hf`.*`quant=awq` / `quant=gptq`"):
        check_combination(load_model("qwen2_5_vl_7b"), "vllm", choice, tier("a100"))
    assert check_combination(load_model("qwen2_5_vl_7b"), "hf", choice, tier("a100")) == []


def test_awq_without_checkpoint_points_at_the_awq_release():
    base = load_model("qwen2_5_vl_7b")
    choice = resolve_quant(load("quant", "awq"), base, tier("l4"), "vllm")
    with pytest.raises(PlanError, match=r"model=qwen2_5_vl_7b_awq.*quant.checkpoint"):
        check_combination(base, "vllm", choice, tier("l4"))
    with_checkpoint = resolve_quant(dict(load("quant", "awq"), checkpoint="/models/q7b-awq"), base, tier("l4"), "vllm")
    assert check_combination(base, "vllm", with_checkpoint, tier("l4")) == []


def test_an_awq_release_can_only_be_awq():
    awq = load_model("qwen2_5_vl_7b_awq")
    choice = resolve_quant(load("quant", "int8"), awq, tier("a100"), "hf")
    with pytest.raises(PlanError, match=r"awq release.*`quant=awq`.*model=qwen2_5_vl_7b\)"):
        check_combination(awq, "hf", choice, tier("a100"))


def test_awq_on_transformers_says_what_it_needs():
    awq = load_model("qwen2_5_vl_7b_awq")
    warnings = check_combination(awq, "hf", resolve_quant(load("quant", "awq"), awq, tier("l4"), "hf"), tier("l4"))
    assert len(warnings) == 1 and "gptqmodel" in warnings[0]
    dtype, notes = plan_dtype(awq, tier("l4"), resolve_quant(load("quant", "awq"), awq, tier("l4"), "hf"), "hf")
    assert dtype == "float16" and "float16" in notes[0]


def test_turing_qwen_vl_on_vllm_is_refused_but_llava_is_not():
    awq = load_model("qwen2_5_vl_7b_awq")
    choice = resolve_quant(load("quant", "auto"), awq, tier("t4"), "vllm")
    with pytest.raises(PlanError, match=r"29743.*`engine=hf`.*gpu.vllm_vision_ok=true"):
        check_combination(awq, "vllm", choice, tier("t4"))
    assert check_combination(awq, "vllm", choice, tier("t4", vllm_vision_ok=True)) == []
    llava = load_model("llava_next_video_7b")
    none = resolve_quant(load("quant", "none"), llava, tier("t4"), "vllm")
    assert check_combination(llava, "vllm", none, tier("t4")) == []


def test_dtype_follows_the_tier_and_the_kernels():
    base, awq = load_model("qwen2_5_vl_7b"), load_model("qwen2_5_vl_7b_awq")
    none = resolve_quant(load("quant", "none"), base, tier("t4"), "hf")
    dtype, notes = plan_dtype(base, tier("t4"), none, "hf")
    assert dtype == "float16" and "bfloat16" in notes[0]                   # T4 has no bf16
    assert plan_dtype(base, tier("h100"), none, "vllm") == ("bfloat16", [])
    avx512_bf16 = tier("cpu", supports_bf16=True)
    cpu_awq = resolve_quant(load("quant", "auto"), awq, avx512_bf16, "vllm")
    dtype, notes = plan_dtype(awq, avx512_bf16, cpu_awq, "vllm")
    assert dtype == "bfloat16" and "16-bit activations" in notes[0]        # vLLM AWQ: no float32


def test_cpu_dtype_auto_runs_a_bf16_checkpoint_in_bf16_only_where_the_cpu_has_bf16():
    real, embedded = load_model("qwen2_5_vl_7b"), load_model("vidcap_ko_tiny")  # stored bf16 / float32
    with_bf16, without = tier("cpu", supports_bf16=True), tier("cpu", supports_bf16=False)
    assert with_bf16.dtype == "auto"  # the tier's default
    none = resolve_quant(load("quant", "none"), real, with_bf16, "vllm")
    assert plan_dtype(real, with_bf16, none, "vllm") == ("bfloat16", [])
    dtype, notes = plan_dtype(real, without, none, "hf")
    assert dtype == "float32" and "no AVX512-BF16" in notes[0] and "twice" in notes[0]
    for cpu in (with_bf16, without):  # a float32 checkpoint stays float32, silently
        assert plan_dtype(embedded, cpu, none, "vllm") == ("float32", [])
    # asked for explicitly, bf16 runs either way; without the instructions the plan says it is emulated
    assert plan_dtype(embedded, tier("cpu", supports_bf16=True, dtype="bfloat16"), none, "vllm") == ("bfloat16", [])
    dtype, notes = plan_dtype(embedded, tier("cpu", supports_bf16=False, dtype="bfloat16"), none, "vllm")
    assert dtype == "bfloat16" and "emulated" in notes[0]
    assert plan_dtype(real, tier("cpu", dtype="float32"), none, "vllm") == ("float32", [])


def test_the_cpu_tier_reads_bf16_from_this_cpu_and_auto_is_for_cpus_only():
    import torch

    assert tier("cpu").supports_bf16 == torch.cpu._is_avx512_bf16_supported()  # False under force-avx2
    with pytest.raises(PlanError, match="`gpu.dtype=auto` is not valid on tier h100"):
        tier("h100", dtype="auto")


def test_bad_settings_name_their_keys():
    base = load_model("qwen2_5_vl_7b")
    with pytest.raises(PlanError, match="`quant.method=fp4`"):
        resolve_quant(dict(load("quant", "auto"), method="fp4"), base, tier("l4"), "vllm")
    with pytest.raises(PlanError, match="`quant.group_size` is missing"):
        resolve_quant({k: v for k, v in load("quant", "awq").items() if k != "group_size"}, base, tier("l4"), "vllm")
    with pytest.raises(PlanError, match="`quant.bit` is not a quant setting"):
        resolve_quant(dict(load("quant", "awq"), bit=4), base, tier("l4"), "vllm")
    with pytest.raises(PlanError, match="`engine=trt`"):
        check_combination(base, "trt", resolve_quant(load("quant", "none"), base, tier("l4"), "hf"), tier("l4"))
    with pytest.raises(PlanError, match="`quant.bits=8` with quant=awq"):
        check_combination(base, "vllm", resolve_quant(dict(load("quant", "awq"), bits=8, checkpoint="x"), base,
                                                      tier("l4"), "vllm"), tier("l4"))
    with pytest.raises(PlanError, match="`gpu.dtype=float16`"):
        tier("t4", dtype="bfloat16")
    with pytest.raises(PlanError, match="`gpu.gpu_memory_utilization`"):
        tier("l4", gpu_memory_utilization=1.5)
