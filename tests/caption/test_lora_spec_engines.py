"""LoRA served by both engines, and speculative decoding that leaves greedy output unchanged."""

from __future__ import annotations

import pytest

from caption.prompts import prompt_format

from tests.caption.test_engines import _requests, _texts

pytestmark = pytest.mark.slow


def _vllm(job):
    from caption.engines.vllm_engine import VllmEngine

    return VllmEngine(job, prompt_format(job.model.family).stop)


def test_speculative_decoding_keeps_greedy_output(synth_dir, job_config, vllm_engine):
    requests = _requests(synth_dir, tasks=("caption", "motion"))
    plain = _texts(vllm_engine.run(requests))
    for spec in ("ngram", "draft"):
        engine = _vllm(job_config([f"spec={spec}"]))
        try:
            engine.reset_stats()
            speculative = _texts(engine.run(requests))
            stats = engine.stats()
        finally:
            engine.close()
        assert {k: r.text for k, r in speculative.items()} == {k: r.text for k, r in plain.items()}, spec
        assert stats["spec_draft_tokens"] >= 0, spec
        if spec == "draft":  # a draft model proposes every step; n-gram only where text repeats
            assert stats["spec_draft_tokens"] > 0 and 0 < stats["spec_acceptance_rate"] <= 1


def test_lora_adapter_is_served_by_both_engines_and_they_agree(synth_dir, job_config):
    from caption.engines.hf_engine import HfEngine
    from video_io.synth.captions_ko import parse_attributes

    requests = _requests(synth_dir)
    for request in requests:
        request.adapter = "detailed"
    base_requests = _requests(synth_dir)
    job = job_config(["lora=detailed", "lora.include_base=true"])
    engine = _vllm(job)
    try:
        detailed = _texts(engine.run(requests + base_requests))
    finally:
        engine.close()
    hf = HfEngine(job_config(["lora=detailed", "engine=hf"]), ("<|im_end|>",))
    try:
        detailed_hf = _texts(hf.run(requests))
    finally:
        hf.close()
    for key, result in detailed_hf.items():
        assert detailed[key].text == result.text, key
    sentences = [r.text.count(".") for r in detailed_hf.values()]
    assert min(sentences) >= 2, "the adapter writes several sentences"
    for request in requests:
        text = detailed_hf[(request.key, "caption")].text
        assert "에서" in text and parse_attributes(text)["direction"] is not None
