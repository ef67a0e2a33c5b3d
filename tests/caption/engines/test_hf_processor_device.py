"""engine.processor_device (caption/engines/hf_engine.py `_inputs`): auto runs the processor's pixel work
where the engine runs. On a GPU the frames go there as uint8, and the pixel values must be the CPU's, bit
for bit (on one H100 they were, and a batch of 4 took 0.027 s instead of 0.138 s: docs/benchmarks.md).
These machines have no GPU: CI checks where auto puts the work and that the CPU path keeps it on the CPU;
on a GPU machine the comparison runs."""

from __future__ import annotations

import pytest

from caption.engines.base import Request
from caption.prompts import build_prompt

pytestmark = pytest.mark.slow


def _requests(job, clips, n):
    from video_io.decode import decode_clip

    decoded = [decode_clip(str(clips / f"clip_{i:05d}.mp4"), job.decode) for i in range(n)]
    return [Request(key=f"clip{i}", task="caption", adapter=None, prompt=build_prompt(job.model.family),
                    frames=clip.frames, video_metadata=clip.metadata()) for i, clip in enumerate(decoded)]


def test_auto_processes_where_the_engine_runs(job_config, synth_dir, hf_engine):
    assert hf_engine.device == "cpu" and hf_engine.processor_device == "cpu"  # auto, on this CPU
    inputs = hf_engine._inputs(_requests(job_config(["engine=hf"]), synth_dir, 2))
    assert inputs["pixel_values_videos"].device.type == "cpu" and inputs["input_ids"].shape[0] == 2


def test_processor_device_cpu_keeps_the_pixel_work_on_the_cpu(job_config):
    spec = job_config(["engine=hf", "engine.processor_device=cpu"]).engine_spec
    assert spec.options.processor_device == "cpu"


def test_the_processor_on_the_gpu_gives_the_cpus_pixel_values(job_config, synth_dir, hf_engine):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the processor on the GPU is compared with the CPU's on a GPU machine")
    batch = _requests(job_config(["engine=hf"]), synth_dir, 4)
    on_cpu = hf_engine._inputs(batch)
    hf_engine.device = hf_engine.processor_device = "cuda"
    on_gpu = hf_engine._inputs(batch)
    assert on_gpu["pixel_values_videos"].device.type == "cuda"
    for key, value in on_cpu.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, on_gpu[key].cpu()), key
