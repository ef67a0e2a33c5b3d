"""Config composition (real Hydra) and validation that fails before anything loads."""

from __future__ import annotations

import os
import re

import pytest

from caption import planning
from caption.planning import load_planned_job, plan_job
from caption.settings.config import ConfigError, load_job_config


def test_defaults_compose_to_the_embedded_model_on_vllm_cpu(compose_config, synth_dir, tmp_path, model_dir):
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'out.jsonl'}"])
    job = load_planned_job(cfg)
    assert job.engine == "vllm" and job.gpu["name"] == "cpu" and job.model.name == "vidcap-ko-tiny"
    assert job.model.path == str(model_dir)
    assert job.decode.width is None and job.decode.max_pixels == 56 * 56 and job.decode.size_multiple == 28
    assert job.decode.seek == "auto" and job.decode.sampling.num_frames == 8
    assert job.gpu["env"]["VLLM_CPU_KVCACHE_SPACE"] and job.gpu["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert job.files().summary_path == tmp_path / "out.jsonl.summary.json"


def test_validating_probes_and_plans_nothing_planning_is_the_next_step(compose_config, synth_dir, tmp_path,
                                                                         monkeypatch):
    probed = []
    monkeypatch.setattr(planning, "total_ram_gib", lambda: probed.append("ram") or 24.0)
    # (bfloat16, not an AWQ copy: on an AVX2-only CPU vLLM has no W4A16 kernel and the plan says so)
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "gpu.dtype=bfloat16"])
    job = load_job_config(cfg)
    assert job.plan is None and job.requested_engine == "auto" and probed == []
    assert job.model.dtype == "float32"  # the preset's, until planned
    with pytest.raises(RuntimeError, match="not planned yet"):
        _ = job.engine
    planned = plan_job(job)
    assert probed == ["ram"] and planned.engine == "vllm" and planned.plan.dtype == "bfloat16"
    assert planned.model.dtype == "bfloat16" and planned.model.path == job.model.path
    assert job.plan is None  # a JobConfig is never changed in place


def test_groups_switch(compose_config, synth_dir, tmp_path):
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "engine=hf",
                          "video=fps", "video.fps=4", "tasks=[caption,keywords]"])
    job = load_planned_job(cfg)
    assert job.engine == "hf" and job.engine_options.batch_size == 16
    assert job.decode.sampling.mode == "fps" and job.decode.sampling.fps == 4.0
    assert job.options.tasks == ["caption", "keywords"]


@pytest.mark.parametrize("overrides, message", [
    ([], "`input_dir` is required"),
    (["output=null"], "`output` is required"),
    (["input_dir=/nonexistent/clips"], "is not a folder"),
    (["tasks=[poem]"], "`tasks=poem` is not valid"),
    (["tasks=[]"], "`tasks` is empty"),
    (["engine.name=tensorrt"], "`engine=tensorrt` is not valid"),
    (["sampling.temperature=-1"], "sampling.temperature"),
    (["sampling.min_new_tokens=100"], "exceeds"),
    (["video.sampling=random"], "video.sampling"),
    (["video.num_frames=0"], "video"),
    (["video.timeout_s=0"], "video.timeout_s"),
    (["video.ablation=shuffle"], "video.ablation"),
    (["video.workers=many"], "`video.workers` must be auto or a whole number"),
    (["video.workers=-1"], "`video.workers` must be auto or a whole number"),
    (["video.prune_rate=1"], r"`video.prune_rate=1` must be in \[0, 1\)"),
    (["video.size_multiple=0"], "`video.size_multiple` must be > 0"),
    (["video.segments=shots"], "`video.segments=shots` is not valid"),
    (["model.path=/nonexistent/model"], "model.path"),
    (["model.family=gpt"], "model.family"),
    (["limit=0"], "limit"),
    (["+engine.batchsize=4"], "`engine.batchsize` is not a setting; did you mean engine.batch_size?"),
    (["+sampling.temprature=0.5"], "`sampling.temprature` is not a setting; did you mean sampling.temperature?"),
    (["+runner.actor=2"], "`runner.actor` is not a setting; did you mean runner.actors?"),
    (["engine.batch_size=null"], "`engine.batch_size` cannot be null"),
    (["engine.max_inflight=0"], "`engine.max_inflight` must be >= 1"),
    (["engine=hf", "engine.processor_device=gpu"], "`engine.processor_device=gpu` is not valid; choose one of: auto, cpu"),
    (["lora.max_rank=null"], "`lora.max_rank` cannot be null"),
    (["runner=ray", "runner.engine_cpus=0"], "`runner.engine_cpus` must be > 0"),
    (["spec=ngram", "spec.prompt_lookup_min=null"], "`spec.prompt_lookup_min` is missing: spec=ngram needs it"),
    (["spec=ngram", "spec.num_speculative_tokens=0"], "`spec.num_speculative_tokens` must be > 0"),
])
def test_invalid_settings_name_the_key(compose_config, synth_dir, tmp_path, overrides, message):
    """Hydra refuses a wrong type or an unknown key while composing (the schemas, caption/settings/schema.py),
    load_job_config a wrong value; either way one line names the key."""
    from hydra.errors import ConfigCompositionException

    from caption.settings.help import explain_composition_error

    args = {"input_dir": f"input_dir={synth_dir}", "output": f"output={tmp_path / 'o.jsonl'}"}
    args.update((o.split("=")[0], o) for o in overrides)  # an override replaces the default of its key
    if not overrides:
        del args["input_dir"]
    with pytest.raises((ConfigError, ConfigCompositionException)) as raised:
        load_planned_job(compose_config(list(args.values())))
    said = (explain_composition_error(raised.value) if isinstance(raised.value, ConfigCompositionException)
            else str(raised.value))
    assert re.search(message, said) and "\n" not in said, said


def test_decode_workers_auto_leaves_the_engine_its_cores(compose_config, synth_dir, tmp_path):
    """video.workers=auto: on a GPU tier decoding gets every CPU but this process's and the engine's; on
    the cpu tier 2 decoders, since the engine computes on every core."""
    assert [planning.auto_decode_workers("cuda", n) for n in (16, 4, 2, 1)] == [14, 2, 1, 1]
    assert [planning.auto_decode_workers("cpu", n) for n in (16, 2, 1)] == [2, 2, 1]
    cpus = len(os.sched_getaffinity(0))
    base = [f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}"]
    job = load_job_config(compose_config(base))
    assert job.decode_workers == "auto"  # resolved by planning, which knows the device
    assert plan_job(job).decode_workers == planning.auto_decode_workers("cpu", cpus)
    on_gpu = load_planned_job(compose_config([*base, "gpu=h100", "plan_only=true"]))
    assert on_gpu.decode_workers == planning.auto_decode_workers("cuda", cpus)
    assert load_planned_job(compose_config([*base, "video.workers=5"])).decode_workers == 5


def test_hub_ids_are_accepted_without_touching_the_hub(compose_config, synth_dir, tmp_path):
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}",
                          "model.path=Qwen/Qwen2.5-VL-7B-Instruct"])
    assert load_job_config(cfg).model.path == "Qwen/Qwen2.5-VL-7B-Instruct"  # planning checks it can be had


@pytest.mark.parametrize("preset,multiple", [("vidcap_ko_tiny", 28), ("qwen3_vl_8b", 32), ("llava_next_video_7b", 14)])
def test_frame_sides_are_multiples_of_what_the_family_patches(compose_config, preset, multiple):
    """Patch x merge for Qwen (14 x 2, 16 x 2), the CLIP patch for LLaVA-NeXT-Video: from the family
    (vidcap_ko/families/<family>.py size_multiple), unless video.size_multiple names one."""
    job = load_job_config(compose_config(["plan_only=true", f"model={preset}"]))
    assert job.decode.size_multiple == multiple
    forced = load_job_config(compose_config(["plan_only=true", f"model={preset}", "video.size_multiple=56"]))
    assert forced.decode.size_multiple == 56


def test_a_preset_whose_weights_cannot_be_had_says_so_before_loading(compose_config, synth_dir, tmp_path):
    """conf/model/qwen2_5_vl_3b.yaml names a hub id; the tests run with HF_HUB_OFFLINE=1 and no cache."""
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "model=qwen2_5_vl_3b"])
    job = load_job_config(cfg)  # valid as a config
    with pytest.raises(ConfigError, match=r"`model.path=Qwen/Qwen2.5-VL-3B-Instruct` is a hub id that is not in "
                                          r"the local hub cache.*huggingface-cli download"):
        plan_job(job)
    assert load_planned_job(compose_config(["plan_only=true", "model=qwen2_5_vl_3b"])).plan is not None
