"""The job's plan: engine, dtype and quantization resolved from the config before anything loads."""

from __future__ import annotations

import pytest

from caption.planning import load_planned_job
from caption.settings.config import ConfigError


def _job(compose_config, synth_dir, tmp_path, *overrides):
    return load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", *overrides]))


def test_default_plan_is_vllm_float32_on_cpu(compose_config, synth_dir, tmp_path):
    job = _job(compose_config, synth_dir, tmp_path)
    assert job.engine == "vllm" and job.plan.engine == "vllm" and job.plan.dtype == "float32"
    assert job.plan.quantization["method"] == "none" and job.plan.fits
    assert job.plan.vllm["max_model_len"] >= job.plan.tokens_per_request
    # aspect ratio kept within 56x56 = 3136 px: the worst case, 84x28 frames the processor scales to 112x56
    assert job.plan.vision_tokens_per_clip == 32


@pytest.mark.parametrize("quant, engine, checkpoint", [
    ("gptq", "vllm", "vidcap-ko-tiny-gptq"), ("awq", "vllm", "vidcap-ko-tiny-awq"),
    ("nf4", "hf", None), ("int8", "hf", None),
])
def test_quantization_picks_engine_and_weights(compose_config, synth_dir, tmp_path, quant, engine, checkpoint):
    from quant.cpu_kernels import has_w4a16

    if checkpoint and not has_w4a16():  # a CPU without AVX-512: refused before loading, saying what to use
        with pytest.raises(ConfigError, match=r"cpu_gemm_wna16.*_C_AVX2.*use quant=none"):
            _job(compose_config, synth_dir, tmp_path, f"quant={quant}")
        return
    job = _job(compose_config, synth_dir, tmp_path, f"quant={quant}")
    assert job.engine == engine and job.plan.quantization["method"] == quant
    if checkpoint:
        assert job.model.path.endswith(checkpoint) and job.plan.vllm["quantization"] == "compressed-tensors"
        assert job.plan.dtype in ("bfloat16", "float16")  # vLLM runs W4A16 with 16-bit activations
    else:
        assert job.plan.hf["quantization_config"]["load_in_4bit" if quant == "nf4" else "load_in_8bit"]


def test_an_impossible_combination_fails_naming_what_to_change(compose_config, synth_dir, tmp_path):
    with pytest.raises(ConfigError, match="use `engine=hf`"):
        _job(compose_config, synth_dir, tmp_path, "quant=nf4", "engine=vllm")
    with pytest.raises(ConfigError, match="cannot sample"):
        _job(compose_config, synth_dir, tmp_path, "sampling=quality", "sampling.temperature=0.5", "engine=vllm")
    with pytest.raises(ConfigError, match="speculative decoding runs on engine=vllm"):
        _job(compose_config, synth_dir, tmp_path, "spec=ngram", "engine=hf")


def test_beam_search_preset_runs_on_either_engine(compose_config, synth_dir, tmp_path):
    job = _job(compose_config, synth_dir, tmp_path, "sampling=quality")
    assert job.engine == "vllm" and job.sampling.num_beams == 4  # vLLM's LLM.beam_search takes video prompts
    assert _job(compose_config, synth_dir, tmp_path, "sampling=quality", "engine=hf").engine == "hf"


def test_a_plan_that_does_not_fit_is_refused_before_loading(compose_config, synth_dir, tmp_path):
    with pytest.raises(ConfigError, match="does not fit.*VLLM_CPU_KVCACHE_SPACE"):
        _job(compose_config, synth_dir, tmp_path, "gpu.env.VLLM_CPU_KVCACHE_SPACE=0.0001")


def test_plan_only_needs_no_clips(compose_config):
    job = load_planned_job(compose_config(["plan_only=true", "gpu=t4", "model=qwen2_5_vl_7b"]))
    assert job.options.plan_only and job.paths is None
    assert job.engine == "hf"  # vLLM has no Turing vision attention for Qwen VL (vllm issue 29743)
    assert job.plan.dtype == "float16" and job.plan.quantization["method"] == "nf4"


@pytest.mark.parametrize("tier", ["l4", "a100", "h100"])
def test_gpu_tiers_plan_the_real_presets(compose_config, tier):
    job = load_planned_job(compose_config(["plan_only=true", f"gpu={tier}", "model=qwen2_5_vl_7b_awq"]))
    assert job.engine == "vllm" and job.plan.fits and job.plan.quantization["method"] == "awq"
    assert job.plan.vllm["gpu_memory_utilization"] == pytest.approx(0.9)


@pytest.mark.parametrize("quant", ["gptq", "awq"])
def test_without_the_w4a16_kernel_4bit_on_vllm_cpu_is_refused_before_loading(compose_config, synth_dir, tmp_path,
                                                                           monkeypatch, quant):
    """As on a CPU without AVX-512: vLLM would load _C_AVX2, whose library has no cpu_gemm_wna16."""
    import torch.cpu

    from quant import cpu_kernels

    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    cpu_kernels.has_w4a16.cache_clear()
    try:
        assert cpu_kernels.kernel_library().name.startswith("_C_AVX2.")
        assert not cpu_kernels.has_w4a16()  # read from the real library file
        for engine in ("vllm", "auto"):
            with pytest.raises(ConfigError, match=rf"`quant={quant}` on engine=vllm gpu=cpu needs .*cpu_gemm_wna16"):
                _job(compose_config, synth_dir, tmp_path, f"quant={quant}", f"engine={engine}")
        assert _job(compose_config, synth_dir, tmp_path, "quant=auto").plan.quantization["method"] == "none"
    finally:
        cpu_kernels.has_w4a16.cache_clear()


def test_the_kernel_probe_reads_the_library_vllm_loads():
    import torch.cpu

    from quant import cpu_kernels

    library = cpu_kernels.kernel_library()
    expected = "_C_AVX2" if not torch.cpu._is_avx512_supported() else (
        "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512")
    assert library.name.split(".")[0] == expected
    assert cpu_kernels.has_w4a16() == (cpu_kernels.W4A16_OP in library.read_bytes())


def test_nvdec_is_refused_before_loading_where_it_cannot_run(compose_config, synth_dir, tmp_path):
    """video.backend=nvdec needs the local runner and a CUDA device FFmpeg can open: without them the job
    stops at its plan, with one line naming the cause and the setting to use instead."""
    from video_io.nvdec import unavailable_reason

    with pytest.raises(ConfigError, match="Ray's decoding actors hold no GPU: use runner=local, or video.backend=auto"):
        _job(compose_config, synth_dir, tmp_path, "video.backend=nvdec", "runner=ray")
    planned = load_planned_job(compose_config(["plan_only=true", "gpu=h100", "model=qwen2_5_vl_7b",
                                               "video.backend=nvdec", "video.workers=6"]))
    assert any(w.startswith("video.backend=nvdec: each of the 6 decoder processes holds a CUDA context")
               for w in planned.plan.warnings)  # a plan for another machine is made without probing this one
    reason = unavailable_reason()
    if reason is None:  # a GPU machine: the job plans, and its decoders open the device
        assert _job(compose_config, synth_dir, tmp_path, "video.backend=nvdec").decode.backend == "nvdec"
        return
    with pytest.raises(ConfigError) as caught:
        _job(compose_config, synth_dir, tmp_path, "video.backend=nvdec")
    assert str(caught.value) == (f"`video.backend=nvdec` needs an NVIDIA GPU and its driver, and FFmpeg could not "
                                 f"open a CUDA device here ({reason}): use video.backend=auto to decode on the CPU")


def test_the_start_lines_say_the_decoders_run_on_nvdec(compose_config):
    import io

    from caption.summary.terminal import print_job_start

    job = load_planned_job(compose_config(["plan_only=true", "gpu=h100", "model=qwen2_5_vl_7b",
                                           "video.backend=nvdec", "video.workers=6"]))
    out = io.StringIO()
    print_job_start(job, 3, 3, 0, [], out)
    assert ", 6 decoder processes on the GPU's NVDEC\n" in out.getvalue()


def test_engines_are_fed_by_the_plans_specification_and_its_frames_size_the_processor_cache(job_config):
    from caption.engines.vllm_engine import engine_args, processor_cache_gib

    one = job_config([]).engine_spec
    assert one.requests_per_clip == 1 and processor_cache_gib(one) == 0.0  # nothing can hit: off
    three = job_config(["tasks=[caption,keywords,motion]"]).engine_spec
    # the embedded model's frames: 8 of 3136 pixels, float32 (12 bytes a pixel), for the 86 clips that
    # engine.max_inflight=256 requests of 3 span, with a quarter spare: 0.03 GiB (448x448 frames: 1.9 GiB)
    assert (three.frames_per_clip, three.frame_pixels, three.requests_per_clip) == (8, 3136, 3)
    assert processor_cache_gib(three) == round(1.25 * 86 * 8 * 3136 * 12 / 2**30, 3) == 0.03
    big = job_config(["tasks=[caption,keywords,motion]", "video.width=448", "video.height=448"]).engine_spec
    assert processor_cache_gib(big) == round(1.25 * 86 * 8 * 448 * 448 * 12 / 2**30, 3)
    args = engine_args(three)
    assert args["model"] == three.model_path and args["mm_processor_cache_gb"] == 0.03
    assert {k: args[k] for k in ("max_num_seqs", "max_model_len", "block_size")} == \
        {k: three.vllm[k] for k in ("max_num_seqs", "max_model_len", "block_size")}


@pytest.mark.parametrize("overrides, offload, pruning", [
    (["gpu=t4", "gpu.vllm_vision_ok=true", "model=qwen2_5_vl_7b_awq", "video.num_frames=128",
      "video.max_pixels=200704", "sampling=balanced"], True, None),
    (["gpu=t4", "gpu.vllm_vision_ok=true", "model=qwen2_5_vl_7b_awq", "video.num_frames=128",
      "video.max_pixels=200704", "sampling=balanced", "gpu.kv_offload_gib=0"], False, None),
    (["gpu=h100", "model=qwen2_5_vl_7b", "video.prune_rate=0.5"], False, 0.5),
    ([], False, None),
])
def test_engine_arguments_carry_kv_offload_and_pruning_only_where_planned(compose_config, overrides, offload, pruning):
    """What vllm.LLM is given: kv_offloading_size where the GPU's KV budget is short of the tier's batch
    (and gpu.kv_offload_gib did not turn it off), video_pruning_rate where video.prune_rate is set."""
    from caption.engines.vllm_engine import engine_args

    job = load_planned_job(compose_config(["plan_only=true", "engine=vllm", *overrides]))
    args = engine_args(job.engine_spec)
    assert ("kv_offloading_size" in args) == offload == (job.plan.kv_offload_gib is not None)
    if offload:
        assert args["kv_offloading_size"] == job.plan.kv_offload_gib >= 1
    assert args.get("video_pruning_rate") == pruning


def test_the_start_lines_name_a_log_only_while_the_terminal_is_quiet(compose_config, tmp_path):
    """A job run in a process whose earlier job was quiet (the Python API, then run_job) names no log: the
    earlier job's file gets none of its lines."""
    import io

    from caption.summary.console import console
    from caption.summary.terminal import print_job_start

    job = load_planned_job(compose_config(["plan_only=true"]))
    log = tmp_path / "caption.log"
    lines = {}
    for when in ("quiet", "after"):
        if when == "quiet":
            console.quiet(log)
        out = io.StringIO()
        try:
            print_job_start(job, 1, 1, 0, [], out)
        finally:
            console.restore()
        lines[when] = out.getvalue()
    assert f"  log     {log}\n" in lines["quiet"]
    assert "log " not in lines["after"], lines["after"]
