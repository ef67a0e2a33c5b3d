"""The job's second step: from a validated JobConfig to the plan the engine runs.

`plan_job` probes the machine (its RAM; on a GPU tier the device's memory), asks quant/ for a plan
(tier + model preset + quantization + engine -> dtype, quantization, engine settings, memory) and
refuses, with one line, a plan that cannot run, still before any model loads. Everything the engine
is given comes from the plan (caption/engines/vllm_engine.py reads nothing else).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from caption.output.fingerprint import adapter_identities, job_settings
from caption.prompts import instruction_text
from caption.settings.config import ConfigError, ForeignFootage, JobConfig, load_job_config
from caption.settings.engine_spec import EngineSpec
from caption.settings.generation import sampling_warnings
from caption.settings.settings_ids import SettingsIds
from caption.sweep import in_multirun
from quant.devices import detect_devices, resolve_tier, tier_not_here
from quant.errors import PlanError
from quant.plan import Plan, make_plan
from vidcap_ko.families import get_family
from video_io.decode import DecodeSpec
from video_io.footage_kind import REFERENCES_FILE, videos_of_kind


def total_ram_gib() -> float:
    """This machine's physical memory. The plan checks that the weights fit in it at all; what other
    processes use at the moment is not a property of the machine the job is planned for."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def device_vram_gib() -> float | None:
    """The first GPU's total memory as its driver reports it (nvidia-smi), or None where there is none.
    The tiers declare theirs the same way (conf/gpu/*.yaml `vram_gib`), so a card is compared with its
    own tier like with like: CUDA's own total (torch.cuda.mem_get_info) is smaller, 79.18 GiB on an H100
    80GB against the driver's 79.6, and a job rehearsing h100 on one was refused as too small (issue 36).
    And CUDA does not start in this process (quant/devices.py says why)."""
    devices = detect_devices()
    return devices[0].memory_gib if devices else None


def make_job_plan(job: JobConfig) -> Plan:
    """With plan_only, and in a sweep (one refused job must not end the others), a combination that
    cannot run comes back as a refused plan saying why; otherwise it raises ConfigError."""
    soft = job.options.plan_only or in_multirun()
    gpu, model, quant = dict(job.gpu), job.model.preset, job.quant
    if gpu.get("device") == "cpu" and gpu.get("ram_gib") is None:
        gpu["ram_gib"] = round(total_ram_gib(), 1)  # weights live in host memory: check them
    sampling = job.decode.sampling
    video = {"num_frames": sampling.num_frames if sampling.mode == "uniform" else sampling.max_frames,
             "width": job.decode.width, "height": job.decode.height,
             "max_pixels": job.decode.max_pixels, "size_multiple": job.decode.size_multiple,
             "prune_rate": job.prune_rate}
    if job.requested_engine == "server":
        return make_server_job_plan(job, video, soft)
    device = device_vram_gib() if gpu.get("device") == "cuda" else None
    try:
        plan = make_plan(model, gpu, quant, job.requested_engine, video,
                         max_new_tokens=job.sampling.max_new_tokens, device_vram_gib=device)
    except PlanError as exc:
        if soft:
            return Plan.refused(model, gpu, job.requested_engine, str(exc))
        raise ConfigError(str(exc)) from None
    checkpoint = plan.model_path or ""
    missing = checkpoint.startswith(("/", ".", "~")) and not Path(checkpoint).expanduser().is_dir()
    if missing and not job.options.plan_only:
        raise ConfigError(f"the {plan.quantization.get('method')} checkpoint {checkpoint} does not exist: make it with "
                          "caption-quantize (docs/tiers.md), or set quant.checkpoint")
    return plan


def make_server_job_plan(job: JobConfig, video: dict, soft: bool) -> Plan:
    """engine=server: ask the server what it serves and whether it takes a request shaped as the job's,
    then plan what a server leaves the job to plan (quant/server_plan.py); one line where it cannot."""
    from caption.engines.server_api import ServerError, probe
    from quant.server_plan import make_server_plan

    try:
        served = probe(job.server, job.adapter_names, dict(get_family(job.model.family).processor_kwargs),
                       2 * job.decode.size_multiple)
        return make_server_plan(job.model.preset, video, max_new_tokens=job.sampling.max_new_tokens, served=served)
    except (ServerError, PlanError) as exc:
        if soft:
            return Plan.refused(job.model.preset, {"name": "server"}, "server", str(exc))
        raise ConfigError(str(exc)) from None


def check_weights_reachable(path: str) -> None:
    """A hub id the engines would have to download: present in the local hub cache, or a hub that
    answers within seconds; else one line saying so, before any model loads (instead of a traceback
    from inside the engine's loader)."""
    if Path(path).expanduser().is_dir():
        return
    from huggingface_hub import HfApi, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(path, "config.json"), str):
        return
    fix = (f"download it on a machine with hub access (`huggingface-cli download {path}`) and point "
           f"model.path at the folder, or use the embedded model (model=vidcap_ko_tiny)")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ConfigError(f"`model.path={path}` is a hub id that is not in the local hub cache, and "
                          f"HF_HUB_OFFLINE is set: {fix}")
    try:
        HfApi().model_info(path, timeout=10)
    except Exception as exc:
        raise ConfigError(f"`model.path={path}` is not in the local hub cache and the hub cannot be reached "
                          f"({type(exc).__name__}): {fix}") from None


def plan_job(job: JobConfig) -> JobConfig:
    """The job with its plan, and the model path and dtype the plan chose (a quantized copy, the tier's dtype)."""
    remote = job.requested_engine == "server"  # the model, its weights and its GPU are the server's
    if not job.options.plan_only and not remote:  # a plan needs no weights
        check_weights_reachable(job.model.path)
    gpu, tier_why = (job.gpu, None) if remote else resolve_tier(job.gpu)  # gpu=auto: the tier this machine is
    job = dataclasses.replace(job, gpu=gpu)
    # a CUDA tier without its GPU runs as a plan only (runner=ray: on the cluster's GPUs, not this machine's)
    elsewhere = None if job.options.plan_only or job.runner.name != "local" else tier_not_here(gpu)
    if elsewhere is not None and not in_multirun():
        raise ConfigError(elsewhere)
    plan = make_job_plan(job)
    if elsewhere is not None:  # a sweep's row says why
        plan = Plan.refused(job.model.preset, gpu, job.requested_engine, elsewhere)
    if tier_why is not None:
        plan.notes.insert(0, tier_why)
    if job.speculative is not None and plan.engine != "vllm":
        raise ConfigError(f"`spec={job.speculative['method']}` needs engine=vllm, but the plan runs on {plan.engine} "
                          f"({plan.engine_reason}); set spec=none")
    if job.engine_options.compile_static_cache and plan.engine == "hf":
        check_static_cache(job, plan)
    if not plan.fits and not (job.options.plan_only or in_multirun()):  # a sweep reports it as a row instead
        raise ConfigError(f"the plan does not fit: {' '.join(plan.reasons)}")
    # warnings about the captions themselves go into every record too (JobConfig.caption_warnings)
    sampler = "vllm" if plan.engine == "server" else plan.engine  # a server samples as vLLM does (docs/server.md)
    folder_warnings, footage = foreign_footage(job)
    caption_warnings = [*sampling_warnings(job.sampling, sampler), *folder_warnings]
    plan.warnings.extend(caption_warnings)
    plan.warnings.extend(speculation_warnings(job, plan))
    model = dataclasses.replace(job.model, path=str(plan.model_path or job.model.path), dtype=plan.dtype)
    workers = job.decode_workers
    if workers == "auto":
        workers = auto_decode_workers(str(job.gpu.get("device")), len(os.sched_getaffinity(0)), remote)
    job = auto_decoder(job, plan)
    if job.decode.backend == "nvdec":
        check_nvdec(job)
        plan.warnings.append(f"video.backend=nvdec: each of the {workers} decoder processes holds a CUDA context "
                             "on the GPU beside the engine's share (gpu.gpu_memory_utilization); if clips fail "
                             "for GPU memory, lower video.workers")
    planned = dataclasses.replace(job, plan=plan, model=model, decode_workers=workers,
                                  caption_warnings=tuple(caption_warnings), foreign_footage=footage)
    planned = dataclasses.replace(planned, engine_spec=engine_spec(planned))
    if job.options.plan_only:  # no records to label
        return planned
    settings = {**job_settings(planned), **planned.recorded}  # and each setting declared `recorded` not at its default
    segment_settings = {**settings, "segments": planned.segments.describe()}  # a segment's record: how it was cut too
    identities = adapter_identities(planned)
    ids = SettingsIds(settings, segment_settings, {task: instruction_text(task) for task in planned.options.tasks},
                      {adapter: identities[adapter] for adapter in planned.variants()})
    return dataclasses.replace(planned, settings=settings, segment_settings=segment_settings, settings_ids=ids)


REAL_CHECKPOINT = "For real footage pass a real checkpoint, e.g. model=qwen2_5_vl_7b model.path=/models/Qwen2.5-VL-7B-Instruct"


def foreign_footage(job: JobConfig) -> tuple[list[str], ForeignFootage | None]:
    """A checkpoint that knows only one kind of footage (the embedded model: caption-synth's clips) pointed at
    other clips: a warning for every record where the folder shows none of its kind; where it shows some
    (its references describe them), a warning for the records of each other clip (ForeignFootage)."""
    trained_on = job.model.trained_on
    if trained_on is None or job.paths is None:
        return [], None
    known = videos_of_kind(job.paths.input_dir, trained_on)
    if not known:
        return [f"{job.model.name} knows only {trained_on} clips: on this folder its captions will be nonsense. "
                f"{REAL_CHECKPOINT}"], None
    return [], ForeignFootage(trained_on, known, f"{job.model.name} knows only {trained_on} clips, and this clip is "
                                                  f"not one ({REFERENCES_FILE} does not describe it as such): its "
                                                  f"caption will be nonsense. {REAL_CHECKPOINT}")


def speculation_warnings(job: JobConfig, plan: Plan) -> list[str]:
    """Speculative decoding where it is not expected to pay (docs/serving.md "Speculative decoding", caption-bench spec)."""
    if job.speculative is None:
        return []
    method = job.speculative["method"]
    warnings = []
    if plan.tier == "cpu":
        warnings.append(f"spec={method} on the cpu tier: measured 0.45-0.97x of the speed without it on the "
                        "embedded model (docs/serving.md, 'Speculative decoding'): it pays where a large target is "
                        "memory-bound on a GPU; the summary's spec_acceptance_rate says what it did")
    if method == "ngram":
        warnings.append("spec=ngram proposes only tokens that repeat the prompt's text, which video captions "
                        "rarely do (bench_spec: no proposals at all): each step pays for the lookup")
    return warnings


def check_static_cache(job: JobConfig, plan: Plan) -> None:
    """`engine.compile_static_cache` where transformers compiles the decode step: not with bitsandbytes weights
    (their quantizer says it is not compileable: transformers/quantizers/base.py `is_compileable`, and a static
    cache uncompiled is slower), not with LoRA adapters (each switch between batches would compile again)."""
    if (plan.hf or {}).get("quantization_config"):
        raise ConfigError(f"`engine.compile_static_cache=true` does not go with quant={plan.quantization['method']}: "
                          "transformers does not compile bitsandbytes weights, and a static KV cache alone is slower "
                          "(0.84x per token on one H100); drop one of them")
    if job.adapters:
        raise ConfigError("`engine.compile_static_cache=true` does not go with LoRA adapters: each switch between "
                          "adapters would compile the model again; drop the adapters or the setting")


def engine_spec(job: JobConfig) -> EngineSpec:
    """What the engine is given (caption/settings/engine_spec.py): the plan's settings and the job's, nothing else."""
    family, d = get_family(job.model.family), job.decode
    return EngineSpec(
        engine=job.plan.engine, model_path=job.model.path, family=job.model.family, stop=family.stop,
        processor_kwargs=dict(family.processor_kwargs), vllm=job.plan.vllm, hf=job.plan.hf,
        env=dict(job.plan.engine_env), options=job.engine_options, sampling=job.sampling, adapters=job.adapters,
        lora_max_rank=job.lora_max_rank, speculative=job.speculative,
        requests_per_clip=len(job.options.tasks) * len(job.variants()),
        frames_per_clip=d.sampling.num_frames if d.sampling.mode == "uniform" else d.sampling.max_frames,
        frame_pixels=_frame_pixels(d),
        server=job.server, served_model=(job.plan.server or {}).get("served_model"))


def _frame_pixels(d: DecodeSpec) -> int:
    """The most pixels a decoded frame has: an exact size, else the pixel budget, which caption/settings/config.py
    _decode gives every job that sets no exact size (video.max_pixels, or the model preset's frame size)."""
    if d.width and d.height:
        return d.width * d.height
    if d.max_pixels is None:
        raise ConfigError("the job's frames have neither an exact size nor a pixel budget: set video.max_pixels")
    return d.max_pixels


def check_nvdec(job: JobConfig) -> None:
    """`video.backend=nvdec` where it can run: the local runner (Ray's decoding actors are given no GPU)
    on a machine where FFmpeg opens a CUDA device (asked of a child process: video_io/nvdec.py)."""
    if job.runner.name != "local":
        raise ConfigError("`video.backend=nvdec` decodes in the local runner's processes and Ray's decoding "
                          "actors hold no GPU: use runner=local, or video.backend=auto")
    if job.options.plan_only:  # a plan may be made for another machine
        return
    from video_io.nvdec import probe_in_child

    reason = probe_in_child()
    if reason:
        raise ConfigError(f"`video.backend=nvdec` needs an NVIDIA GPU and its driver, and FFmpeg could not open "
                          f"a CUDA device here ({reason}): use video.backend=auto to decode on the CPU")


def auto_decoder(job: JobConfig, plan: Plan) -> JobConfig:
    """`video.backend=auto` on a GPU tier: NVDEC only where a filed measurement says it pays on this
    machine's GPU and cores (video_io/nvdec_rule.py: nowhere yet); the plan's notes say which and why."""
    if job.decode.backend != "auto" or job.gpu.get("device") != "cuda" or job.runner.name != "local" \
            or job.options.plan_only:
        return job
    from quant.devices import detect_devices
    from video_io.nvdec_rule import auto_picks_nvdec

    pays, why = auto_picks_nvdec([d.name for d in detect_devices()], len(os.sched_getaffinity(0)))
    plan.notes.append(why)
    return dataclasses.replace(job, decode=dataclasses.replace(job.decode, backend="nvdec")) if pays else job


def auto_decode_workers(device: str, cpus: int, remote_engine: bool = False) -> int:
    """`video.workers=auto`: decoder processes for the local runner on a machine with `cpus` CPUs.

    On a GPU the engine computes elsewhere, and decoding bounds the job unless it has the cores: a
    1080p clip costs ~0.27 core-seconds in the default seek mode (docs/decoding.md "Cost"), so the design's
    50 clips/s on an H100 needs ~14 cores decoding. Every CPU but two, then: one for this process
    (prompts, vLLM's multimodal processor, records) and one for the engine's own process. On the cpu
    tier the engine computes with one thread per core; 2 decoders kept it busy (engine idle ~5%,
    docs/benchmarks.md "Engines") and more would take cores from it. (runner=ray sizes its decoding
    actors from the cluster instead: runner.decode_cpus.) With engine=server the model computes on another
    machine: every CPU but one (for this process: encoding frames, the requests, records)."""
    if remote_engine:
        return max(1, cpus - 1)
    if device == "cuda":
        return max(1, cpus - 2)
    return min(2, cpus)


def load_planned_job(cfg) -> JobConfig:
    """Validate a composed config, then plan it: what the job does before anything loads."""
    return plan_job(load_job_config(cfg))
