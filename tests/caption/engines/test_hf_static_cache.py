"""engine.compile_static_cache (caption/engines/hf_generate.py static_cache): the transformers engine generates
with a static KV cache and its decode step compiled by torch.compile (on this CPU because the setting asks),
with the default cache's captions; the settings it does not go with are refused before a model loads."""

from __future__ import annotations

import pytest

from caption.engines.base import Request
from caption.planning import load_planned_job
from caption.prompts import build_prompt
from caption.settings.config import ConfigError
from caption.settings.unread import check_settings_read


def _job(compose_config, synth_dir, tmp_path, *overrides):
    return load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}",
                                            "engine=hf", "engine.compile_static_cache=true", *overrides]))


@pytest.mark.slow
def test_a_compiled_static_cache_gives_the_default_caches_captions(job_config, synth_dir, hf_engine):
    from caption.engines.hf_engine import HfEngine
    from video_io.decode import decode_clip

    job = job_config(["engine=hf", "engine.compile_static_cache=true"])
    need = job.plan.tokens_per_request
    assert job.engine_spec.hf["max_cache_len"] == need  # the longest request the plan sizes memory for
    clips = [decode_clip(str(synth_dir / f"clip_{i:05d}.mp4"), job.decode) for i in range(4)]
    requests = [Request(key=f"clip{i}", task="caption", adapter=None, prompt=build_prompt(job.model.family),
                        frames=clips[i % 4].frames, video_metadata=clips[i % 4].metadata()) for i in range(7)]
    engine = HfEngine(job.engine_spec)  # its own model: what compiling leaves on it stays with it
    caches, real_generate = [], engine.model.generate

    def watched_generate(**kwargs):
        caches.append((kwargs.get("cache_implementation"), kwargs["input_ids"].shape[0]))
        return real_generate(**kwargs)

    engine.model.generate = watched_generate
    size, hf_engine.batch_size = hf_engine.batch_size, 3
    engine.batch_size = 3
    try:
        compiled = {r.request.key: r.text for r in engine.run(iter(requests))}
        default = {r.request.key: r.text for r in hf_engine.run(iter(requests))}
    finally:
        hf_engine.batch_size = size
    assert caches == [("static", 3), ("static", 3), ("static", 1)]  # the last, smaller batch compiles again
    assert compiled == default and all(compiled.values())  # float32 on a CPU: the same tokens
    assert getattr(engine.model, "_compiled_call", None) is not None  # transformers compiled the decode step
    # every batch's cache had the plan's length: no batch grew it (each growth compiles again)
    assert engine.model._previous_max_cache_length == need
    assert engine.stats()["compiled_static_cache"] and not hf_engine.stats()["compiled_static_cache"]
    engine.close()


def test_what_a_compiled_static_cache_does_not_go_with_is_refused_before_loading(compose_config, synth_dir, tmp_path):
    for method in ("nf4", "int8"):
        with pytest.raises(ConfigError, match=rf"does not go with quant={method}: transformers does not compile bitsandb"):
            _job(compose_config, synth_dir, tmp_path, "gpu=t4", f"quant={method}", "plan_only=true", "model=qwen2_5_vl_3b")
    with pytest.raises(ConfigError, match=r"does not go with LoRA adapters"):
        _job(compose_config, synth_dir, tmp_path, "lora=detailed")
    given = ["engine=vllm", "engine.compile_static_cache=true"]  # vLLM has its own compiled graphs
    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", *given])
    with pytest.raises(ConfigError, match=r"`engine.compile_static_cache=true` does nothing here.*use `engine=hf"):
        check_settings_read(given, cfg, load_planned_job(cfg))
    assert _job(compose_config, synth_dir, tmp_path).engine_options.compile_static_cache is True
