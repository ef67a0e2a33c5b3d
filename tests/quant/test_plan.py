"""make_plan end to end: budgets, concurrency, refusals and rehearsing a small tier on a big GPU."""

from __future__ import annotations

import pytest

from quant.errors import PlanError
from quant.memory import GIB
from quant.plan import make_plan
from quant.presets import load, load_model

CLIP = {"frames": 16, "width": 448, "height": 448}


def gpu(name: str, **overrides) -> dict:
    return dict(load("gpu", name), **overrides)


def test_cpu_vllm_concurrency_by_hand():
    # tiny model, fp32: KV/token = 2 x 3 layers x 1 KV head x 64 x 4 B = 1,536 B; a request = 80 prompt
    # + 16 video + 48 new = 144 tokens, held in 5 blocks of the cpu tier's 32 tokens = 160 x 1,536 B =
    # 245,760 B; VLLM_CPU_KVCACHE_SPACE=2 GiB holds 8,738
    plan = make_plan(load_model("vidcap_ko_tiny"), load("gpu", "cpu"), load("quant", "auto"), "vllm",
                     {"frames": 8, "width": 56, "height": 56}, max_new_tokens=48)
    assert plan.kv_bytes_per_token == 1536 and plan.vision_tokens_per_clip == 16 and plan.tokens_per_request == 144
    assert plan.sequences_fit == 2 * GIB // (160 * 1536) == 8738 and plan.vllm["block_size"] == 32
    assert plan.fits and plan.vllm["max_num_seqs"] == 64 and plan.vllm["max_model_len"] == 512
    assert plan.vllm["quantization"] is None and plan.dtype == "float32" and plan.vllm["gpu_memory_utilization"] is None
    # of the 2 GiB the engine takes twice what 64 requests of 512 tokens can fill (quant/plan.py CPU_KV_SPARE), and
    # the variable, which vLLM would read over it, is not exported
    assert plan.vllm["kv_cache_memory_bytes"] == 2 * 64 * 512 * 1536 and "VLLM_CPU_KVCACHE_SPACE" not in plan.engine_env
    assert "the engine takes 96 MiB of the KV space, 2x what 64 requests of max_model_len 512" in plan.reasons[0]


def test_cpu_vllm_takes_the_whole_kv_space_where_the_space_is_the_limit():
    """A KV space smaller than twice what the batch can fill (a 7B model's on the cpu tier) is taken whole, in
    bytes: a fraction of a GiB too, which vLLM's variable (whole GiB) could not say."""
    small = dict(load("gpu", "cpu"), env=dict(load("gpu", "cpu")["env"], VLLM_CPU_KVCACHE_SPACE="0.05"))
    plan = make_plan(load_model("vidcap_ko_tiny"), small, load("quant", "auto"), "vllm",
                     {"frames": 8, "width": 56, "height": 56}, max_new_tokens=48)
    assert plan.fits and plan.sequences_fit == int(0.05 * GIB) // (160 * 1536) == 218
    assert plan.vllm["kv_cache_memory_bytes"] == int(0.05 * GIB) and "VLLM_CPU_KVCACHE_SPACE" not in plan.engine_env
    assert "the engine takes" not in plan.reasons[0]
    # one request's 0.23 MiB, said in MiB (in GiB it read "0.00 GiB"), against a space too small for it
    tiny = dict(small, env=dict(small["env"], VLLM_CPU_KVCACHE_SPACE="0.0001"))
    refused = make_plan(load_model("vidcap_ko_tiny"), tiny, load("quant", "auto"), "vllm",
                        {"frames": 8, "width": 56, "height": 56}, max_new_tokens=48)
    assert not refused.fits and refused.reasons[0].startswith(
        "not even one request fits: 144 tokens need 0.2 MiB of KV cache but VLLM_CPU_KVCACHE_SPACE is 0.0001 GiB")


def test_a_pixel_budget_is_planned_at_its_worst_frame_size():
    # no exact size: each clip keeps its aspect ratio within 3136 px, so the plan takes the worst case,
    # 84x28 frames, which the processor (min 3136 px) scales up to 112x56: 4 x 2 tokens per 2 frames
    plan = make_plan(load_model("vidcap_ko_tiny"), load("gpu", "cpu"), load("quant", "auto"), "vllm", max_new_tokens=48)
    assert plan.vision_tokens_per_clip == 4 * 8 and plan.tokens_per_request == 80 + 32 + 48
    assert any("worst case" in n for n in plan.notes) and not any("worst case" in w for w in plan.warnings)


def test_gpu_budget_adds_up_and_caps_max_num_seqs():
    plan = make_plan(load_model("qwen2_5_vl_7b_awq"), gpu("l4"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    mem = plan.memory_gib
    assert mem["budget"] == pytest.approx(22.5 * 0.9, abs=1e-3)
    assert mem["kv_budget"] == pytest.approx(mem["budget"] - mem["weights"] - mem["reserve"], abs=2e-3)
    assert plan.sequences_fit == int(mem["kv_budget"] * GIB // (plan.kv_bytes_per_token * 2176))
    assert plan.vllm["max_num_seqs"] == 16 and plan.vllm["quantization"] == "awq" and plan.fits
    # less memory, fewer sequences: the tier's 16 is no longer reachable
    tight = make_plan(load_model("qwen2_5_vl_7b_awq"), gpu("l4", gpu_memory_utilization=0.45),
                      load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    assert 1 <= tight.sequences_fit < 16 and tight.vllm["max_num_seqs"] == tight.sequences_fit
    assert "max_num_seqs 16 -> " in tight.reasons[0]


def test_refuses_when_weights_alone_exceed_the_gpu():
    plan = make_plan(load_model("qwen2_5_vl_72b"), gpu("h100"), load("quant", "none"), "vllm", CLIP, max_new_tokens=48)
    assert not plan.fits and plan.memory_gib["weights"] > 130
    assert "weights alone" in plan.reasons[0] and "quant=awq" in plan.reasons[0]
    with pytest.raises(PlanError, match="does not fit: weights alone"):
        plan.raise_if_unfit()
    already = make_plan(load_model("qwen2_5_vl_72b_awq"), gpu("l4"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    assert not already.fits and "already awq" in already.reasons[0] and "gpu=" in already.reasons[0]
    # its AWQ release fits the same GPU
    assert make_plan(load_model("qwen2_5_vl_72b_awq"), gpu("h100"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48).raise_if_unfit().fits


def test_cpu_tier_checks_weights_against_host_ram_when_given():
    clip = {"frames": 16, "width": 448, "height": 448}
    no_bf16 = dict(load("gpu", "cpu"), ram_gib=16, supports_bf16=False)
    plan = make_plan(load_model("qwen2_5_vl_7b"), no_bf16, load("quant", "auto"), "vllm", clip, max_new_tokens=48)
    assert not plan.fits and "gpu.ram_gib=16" in plan.reasons[0]      # 30.9 GiB of fp32 weights
    # a CPU with bf16 arithmetic keeps the checkpoint's bf16 (gpu.dtype=auto): half the weights, it fits
    plan = make_plan(load_model("qwen2_5_vl_7b"), dict(no_bf16, supports_bf16=True), load("quant", "auto"), "vllm", clip, max_new_tokens=48)
    assert plan.fits and plan.dtype == "bfloat16"
    from quant.cpu_kernels import has_w4a16

    if has_w4a16():  # 4-bit weights fit in 16 GiB of RAM
        assert make_plan(load_model("qwen2_5_vl_7b_awq"), dict(load("gpu", "cpu"), ram_gib=16), load("quant", "auto"), "vllm", max_new_tokens=48).fits
    else:  # a CPU without AVX-512: vLLM's build has no 4-bit kernel, refused before anything else
        with pytest.raises(PlanError, match="cpu_gemm_wna16"):
            make_plan(load_model("qwen2_5_vl_7b_awq"), dict(load("gpu", "cpu"), ram_gib=16), load("quant", "auto"), "vllm", max_new_tokens=48)


def test_refuses_when_not_one_request_fits():
    long_clip = {"frames": 256, "width": 448, "height": 448}          # 32,768 video tokens
    plan = make_plan(load_model("qwen2_5_vl_7b_awq"), gpu("t4"), load("quant", "auto"), "hf", long_clip, max_new_tokens=48)
    assert not plan.fits and plan.sequences_fit == 0
    assert "not even one request fits" in plan.reasons[0] and "video.num_frames" in plan.reasons[0]


def test_request_longer_than_the_model_context_is_refused():
    plan = make_plan(load_model("vidcap_ko_tiny"), load("gpu", "cpu"), load("quant", "auto"), "vllm",
                     {"frames": 512, "width": 56, "height": 56}, max_new_tokens=48)                # 1,024 video tokens
    assert not plan.fits and "handles 1024" in plan.reasons[0]


def test_max_model_len_follows_the_request():
    # 256 frames of 56x56 = 512 video tokens: 640 > the preset's 512, so the plan picks 768 and says so
    plan = make_plan(load_model("vidcap_ko_tiny"), load("gpu", "cpu"), load("quant", "auto"), "vllm",
                     {"frames": 256, "width": 56, "height": 56}, max_new_tokens=48)
    assert plan.vllm["max_model_len"] == 768 and any("model.max_model_len=768" in w for w in plan.warnings)
    # a preset asking for more context than the KV cache holds is lowered so vLLM can start
    model = dict(load_model("qwen2_5_vl_7b_awq"), max_model_len=128000)
    plan = make_plan(model, gpu("l4"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    assert plan.vllm["max_model_len"] == 2304 and any("lowered max_model_len" in w for w in plan.warnings)


def test_batched_tokens_cover_a_whole_prompt_without_chunked_prefill():
    plan = make_plan(load_model("qwen2_5_vl_3b_awq"), gpu("t4", vllm_vision_ok=True), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    assert plan.vllm["max_model_len"] == 4096 and plan.vllm["max_num_batched_tokens"] == 4096
    assert any("max_num_batched_tokens raised from 2048" in w for w in plan.warnings)
    chunked = make_plan(load_model("qwen2_5_vl_3b_awq"), gpu("h100"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48)
    assert chunked.vllm["max_num_batched_tokens"] == 16384 and chunked.vllm["enable_chunked_prefill"]


def test_hf_plan_carries_bitsandbytes_settings():
    plan = make_plan(load_model("qwen2_5_vl_7b"), gpu("t4"), load("quant", "auto"), "hf", CLIP, max_new_tokens=48)
    assert plan.vllm is None and plan.quantization["method"] == "nf4" and plan.fits
    cfg = plan.hf["quantization_config"]
    assert cfg["load_in_4bit"] and cfg["bnb_4bit_use_double_quant"] and cfg["bnb_4bit_compute_dtype"] == "float16"
    assert cfg["llm_int8_skip_modules"] == ["visual", "lm_head"] and plan.hf["max_batch_size"] == plan.sequences_fit


def test_rehearse_a_small_tier_on_a_big_gpu():
    model, tier = load_model("qwen2_5_vl_3b"), gpu("t4", vllm_vision_ok=True)
    plan = make_plan(model, tier, load("quant", "none"), "vllm", CLIP, device_vram_gib=79.6, cap_to_tier=True, max_new_tokens=48)
    assert plan.vllm["gpu_memory_utilization"] == round(15.0 * 0.85 / 79.6, 4)
    assert plan.memory_gib["budget"] == pytest.approx(15.0 * 0.85, abs=1e-3)
    assert any("rehearsing t4" in w for w in plan.warnings)
    # the tier's own flag does the same
    flagged = make_plan(model, dict(tier, cap_to_tier=True), load("quant", "none"), "vllm", CLIP, device_vram_gib=79.6, max_new_tokens=48)
    assert flagged.vllm["gpu_memory_utilization"] == plan.vllm["gpu_memory_utilization"]
    on_hf = make_plan(model, tier, load("quant", "none"), "hf", CLIP, device_vram_gib=79.6, cap_to_tier=True, max_new_tokens=48)
    assert on_hf.hf["memory_fraction"] == plan.vllm["gpu_memory_utilization"]
    with pytest.raises(PlanError, match="less than the tier"):
        make_plan(model, gpu("a100"), load("quant", "none"), "vllm", CLIP, device_vram_gib=22.5, cap_to_tier=True, max_new_tokens=48)
    with pytest.raises(PlanError, match="needs that GPU's memory: none was found"):
        make_plan(model, tier, load("quant", "none"), "vllm", CLIP, cap_to_tier=True, max_new_tokens=48)


def test_a_preset_without_arch_is_refused_by_name():
    with pytest.raises(PlanError, match=r"has no `arch:` block"):
        preset = {k: v for k, v in load("model", "vidcap_ko_tiny").items() if k != "arch"}
        make_plan(preset, load("gpu", "cpu"), load("quant", "auto"), "vllm", max_new_tokens=48)


def test_plan_is_plain_data():
    plan = make_plan(load_model("qwen2_5_vl_7b_awq"), gpu("h100"), load("quant", "auto"), "vllm", CLIP, max_new_tokens=48).to_dict()
    assert plan["tier"] == "h100" and "speculative" not in plan  # the job's spec group decides, not the tier
    assert set(plan["memory_gib"]) >= {"weights", "kv_per_sequence", "kv_budget", "reserve", "budget"}
    assert plan["quantization"]["why"] and plan["model_path"] == "Qwen/Qwen2.5-VL-7B-Instruct-AWQ"


def test_kv_offload_where_the_gpu_holds_less_than_a_full_batch():
    """T4 with the 7B AWQ and 128 frames of 448x448: 2 of the tier's 8 sequences fit the GPU's KV
    budget; vLLM keeps 6 sequences' worth of evicted blocks in host memory (kv_offloading_size)."""
    model, tier = load_model("qwen2_5_vl_7b_awq"), gpu("t4", vllm_vision_ok=True)
    long_clip = {"num_frames": 128, "max_pixels": 448 * 448}
    plan = make_plan(model, tier, load("quant", "auto"), "vllm", long_clip, max_new_tokens=256)
    assert plan.fits and plan.sequences_fit == 2 < tier["max_num_seqs"]
    short_gib = (tier["max_num_seqs"] - 2) * plan.memory_gib["kv_per_sequence"]
    assert plan.kv_offload_gib == plan.vllm["kv_offloading_size"] >= short_gib
    assert any("KV offloading" in note for note in plan.notes)
    off = make_plan(model, dict(tier, kv_offload_gib=0), load("quant", "auto"), "vllm", long_clip, max_new_tokens=256)
    assert off.kv_offload_gib is None and "kv_offloading_size" not in off.vllm
    given = make_plan(load_model("qwen2_5_vl_7b_awq"), gpu("h100", kv_offload_gib=8), load("quant", "auto"), "vllm",
                      CLIP, max_new_tokens=48)
    assert given.vllm["kv_offloading_size"] == 8


@pytest.mark.parametrize("tier, engine", [("h100", "vllm"), ("l4", "vllm"), ("t4", "hf"), ("cpu", "vllm")])
def test_no_kv_offload_where_a_full_batch_fits_or_on_no_gpu(tier, engine):
    model = load_model("qwen2_5_vl_7b_awq" if tier != "cpu" else "vidcap_ko_tiny")
    plan = make_plan(model, load("gpu", tier), load("quant", "auto"), engine, max_new_tokens=48)
    assert plan.kv_offload_gib is None and "kv_offloading_size" not in (plan.vllm or {})


def test_kv_offload_on_the_cpu_tier_is_refused():
    with pytest.raises(PlanError, match="no GPU memory to offload from"):
        make_plan(load_model("vidcap_ko_tiny"), dict(load("gpu", "cpu"), kv_offload_gib=2), load("quant", "auto"),
                  "vllm", max_new_tokens=48)
