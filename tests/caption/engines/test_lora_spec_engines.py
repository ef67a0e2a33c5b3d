"""LoRA served by both engines, and speculative decoding that leaves greedy output unchanged."""

from __future__ import annotations

import pytest

from tests.caption.engines.test_engines import clip_requests, texts_by_key

pytestmark = pytest.mark.slow


def _vllm(job):
    from caption.engines.vllm_engine import VllmEngine

    return VllmEngine(job.engine_spec)


# n-gram speculation proposes the tokens that followed the last generated ones earlier in the context: an
# example caption in the prompt gives it something to look up (without one the embedded model's short
# captions repeat nothing, and n-gram proposes nothing at all)
EXAMPLE = "예: 열기구 하나가 빠르게 아래로 움직인다. 구름 한 조각이 천천히 오른쪽으로 움직인다. "


def test_speculative_decoding_keeps_greedy_output(synth_dir, job_config, vllm_engine):
    requests = clip_requests(synth_dir, tasks=("caption", "motion"))
    for request in requests:
        request.prompt = request.prompt.replace("<|vision_end|>", "<|vision_end|>" + EXAMPLE, 1)
    plain = texts_by_key(vllm_engine.run(requests))
    for spec in ("ngram", "draft"):
        engine = _vllm(job_config([f"spec={spec}"]))
        try:
            engine.reset_stats()
            speculative = texts_by_key(engine.run(requests))
            stats = engine.stats()
        finally:
            engine.close()
        assert {k: r.text for k, r in speculative.items()} == {k: r.text for k, r in plain.items()}, spec
        # proposals were made and some accepted, yet the greedy text above is unchanged
        assert stats["spec_draft_tokens"] > 0 and stats["spec_accepted_tokens"] > 0, (spec, stats)
        assert 0 < stats["spec_acceptance_rate"] <= 1, (spec, stats)
    # vLLM keeps one engine's counters per process: the engine built before these reports none, not theirs
    assert not vllm_engine.holds_counters and vllm_engine.stats()["prefix_cache_queries"] is None


def test_lora_adapter_is_served_by_both_engines_and_they_agree(synth_dir, job_config):
    from caption.engines.hf_engine import HfEngine
    from video_io.synth.captions_ko import parse_attributes

    requests = clip_requests(synth_dir)
    for request in requests:
        request.adapter = "detailed"
    base_requests = clip_requests(synth_dir)
    job = job_config(["lora=detailed", "lora.include_base=true"])
    engine = _vllm(job)
    try:
        results = list(engine.run(requests + base_requests))  # adapter and base model in the same batches
    finally:
        engine.close()
    detailed = texts_by_key(r for r in results if r.request.adapter)
    base = texts_by_key(r for r in results if r.request.adapter is None)
    hf = HfEngine(job_config(["lora=detailed", "engine=hf"]).engine_spec)
    try:
        detailed_hf = texts_by_key(hf.run(requests))
        base_hf = texts_by_key(hf.run(base_requests))
    finally:
        hf.close()
    for key, result in detailed_hf.items():
        assert detailed[key].text == result.text, key
    for key, result in base_hf.items():  # the base model's requests get no adapter
        assert base[key].text == result.text, key
    sentences = [r.text.count(".") for r in detailed_hf.values()]
    assert min(sentences) >= 2, "the adapter writes several sentences"
    for request in requests:
        text = detailed_hf[(request.key, "caption")].text
        assert "에서" in text and parse_attributes(text)["direction"] is not None
