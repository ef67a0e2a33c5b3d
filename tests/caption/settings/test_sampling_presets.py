"""Sampling presets: the design's numbers reach each engine, the plan warns for what an engine lacks,
and beam search runs on vLLM as well as on transformers."""

from __future__ import annotations

import io

import pytest

from caption.planning import load_planned_job
from caption.settings.config import ConfigError
from caption.summary.terminal import print_plan
from vidcap_ko.families import get_family

STOP = get_family("qwen2_5_vl").stop

# The design's numbers (the design document 003 (Korean; the team keeps it beside the repository), section 6): 6.1-6.3 guides for
# temperature / top-p / top-k, 6.6 generation_config for the rest; quality and speed are 6.6's
# quality_config and speed_config over generation_config.
BASE = dict(repetition_penalty=1.1, max_new_tokens=256, min_new_tokens=50, no_repeat_ngram_size=3,
            length_penalty=1.0, num_beams=1)
DESIGN = {
    "factual": BASE | dict(temperature=0.3, top_p=0.8, top_k=10),
    "balanced": BASE | dict(temperature=0.7, top_p=0.9, top_k=50),
    "creative": BASE | dict(temperature=1.0, top_p=0.95, top_k=100),
    "speed": BASE | dict(temperature=0.8, top_p=0.95, top_k=50, max_new_tokens=128),
    "quality": BASE | dict(temperature=0.0, num_beams=4, length_penalty=1.2, early_stopping=True),
}
SAMPLED = [p for p, v in DESIGN.items() if v["temperature"] > 0]


def _job(compose_config, synth_dir, tmp_path, *overrides):
    return load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", *overrides]))


@pytest.mark.parametrize("preset", ["greedy", *DESIGN])
def test_each_preset_composes_and_validates(compose_config, synth_dir, tmp_path, preset):
    job = _job(compose_config, synth_dir, tmp_path, f"sampling={preset}")
    s = job.sampling
    assert s.name == preset and 0 <= s.min_new_tokens <= s.max_new_tokens
    assert job.plan.tokens_per_request <= job.model.max_model_len  # prompt + video + max_new_tokens fit
    assert s.greedy == (preset == "greedy") and s.do_sample == (preset in SAMPLED)
    assert s.beam_search == (preset == "quality")


@pytest.mark.parametrize("preset", SAMPLED)
def test_vllm_sampling_params_carry_the_design_values(compose_config, synth_dir, tmp_path, preset):
    from caption.engines.vllm_engine import sampling_params

    want = DESIGN[preset]
    params = sampling_params(_job(compose_config, synth_dir, tmp_path, f"sampling={preset}", "engine=vllm").engine_spec)
    assert (params.temperature, params.top_p, params.top_k) == (want["temperature"], want["top_p"], want["top_k"])
    assert params.repetition_penalty == want["repetition_penalty"]
    assert (params.max_tokens, params.min_tokens) == (want["max_new_tokens"], want["min_new_tokens"])
    assert params.n == 1 and params.stop == list(STOP)


def test_vllm_beam_search_params_carry_the_quality_values(compose_config, synth_dir, tmp_path):
    from caption.engines.vllm_engine import beam_search_params

    job = _job(compose_config, synth_dir, tmp_path, "sampling=quality", "engine=vllm")
    params = beam_search_params(job.engine_spec)
    want = DESIGN["quality"]
    assert params.beam_width == want["num_beams"] and params.max_tokens == want["max_new_tokens"]
    assert params.length_penalty == want["length_penalty"] and params.temperature == 0


@pytest.mark.slow
@pytest.mark.parametrize("preset", list(DESIGN))
def test_transformers_generate_kwargs_carry_the_design_values(compose_config, synth_dir, tmp_path, hf_engine, preset):
    from transformers import GenerationConfig

    from caption.engines.hf_engine import HfEngine

    want = DESIGN[preset]
    job = _job(compose_config, synth_dir, tmp_path, f"sampling={preset}", "engine=hf")
    engine = HfEngine(job.engine_spec, model=hf_engine.model, processor=hf_engine.processor)  # the real constructor
    kwargs = engine._generate_kwargs()
    for key in ("repetition_penalty", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size", "num_beams"):
        assert kwargs[key] == want[key], key
    assert kwargs["do_sample"] == (want["temperature"] > 0)
    if kwargs["do_sample"]:
        assert (kwargs["temperature"], kwargs["top_p"], kwargs["top_k"]) == (want["temperature"], want["top_p"],
                                                                              want["top_k"])
    else:
        assert "temperature" not in kwargs  # greedy/beam: transformers would warn about unused sampling knobs
    if want["num_beams"] > 1:
        assert kwargs["length_penalty"] == want["length_penalty"] and kwargs["early_stopping"] is True
    config = GenerationConfig(**{k: v for k, v in kwargs.items() if k != "eos_token_id"})
    config.validate(strict=True)  # transformers itself accepts the combination


def _warnings(compose_config, synth_dir, tmp_path, *overrides) -> list[str]:
    return _job(compose_config, synth_dir, tmp_path, *overrides).plan.warnings


def test_the_plan_warns_for_each_knob_an_engine_lacks(compose_config, synth_dir, tmp_path):
    [ngram] = _warnings(compose_config, synth_dir, tmp_path, "sampling=balanced", "engine=vllm")
    assert "no_repeat_ngram_size=3" in ngram and "vllm/sampling_params.py" in ngram
    assert _warnings(compose_config, synth_dir, tmp_path, "sampling=balanced", "engine=hf") == []
    beams = " ".join(_warnings(compose_config, synth_dir, tmp_path, "sampling=quality", "engine=vllm"))
    for knob in ("repetition_penalty=1.1", "min_new_tokens=50", "no_repeat_ngram_size=3", "early_stopping",
                 "length_penalty=1.2", "beam_search/offline.py"):
        assert knob in beams, knob
    assert _warnings(compose_config, synth_dir, tmp_path, "sampling=quality", "engine=hf") == []
    assert _warnings(compose_config, synth_dir, tmp_path, "sampling=greedy", "engine=vllm") == []
    lonely = _warnings(compose_config, synth_dir, tmp_path, "sampling=greedy", "sampling.length_penalty=1.2")
    assert any("length_penalty=1.2 has no effect without beam search" in w for w in lonely)


def test_plan_only_prints_the_sampling_warnings(compose_config, synth_dir, tmp_path):
    job = _job(compose_config, synth_dir, tmp_path, "sampling=quality", "plan_only=true")
    out = io.StringIO()
    print_plan(job.plan.to_dict(), None, out)
    printed = [line for line in out.getvalue().splitlines() if line.strip().startswith("warning")]
    assert any("min_new_tokens=50" in line and "not applied to beam search on vLLM" in line for line in printed)


def test_beam_search_runs_on_vllm_and_auto_keeps_vllm(compose_config, synth_dir, tmp_path):
    for engine in ("auto", "vllm"):
        job = _job(compose_config, synth_dir, tmp_path, "sampling=quality", f"engine={engine}")
        assert job.engine == "vllm" and job.sampling.num_beams == 4
    assert _job(compose_config, synth_dir, tmp_path, "sampling=quality", "engine=hf").engine == "hf"


def test_what_beam_search_cannot_combine_with_is_refused_or_rerouted(compose_config, synth_dir, tmp_path):
    sampled_beams = ("sampling=quality", "sampling.temperature=0.7")
    with pytest.raises(ConfigError, match="beam_search/offline.py.*cannot sample"):
        _job(compose_config, synth_dir, tmp_path, *sampled_beams, "engine=vllm")
    assert _job(compose_config, synth_dir, tmp_path, *sampled_beams).engine == "hf"  # auto: beam sampling on hf
    with pytest.raises(ConfigError, match="speculative decoding do not go together"):
        _job(compose_config, synth_dir, tmp_path, "sampling=quality", "spec=ngram")


@pytest.mark.parametrize("override, key", [
    ("sampling.no_repeat_ngram_size=-1", "no_repeat_ngram_size"), ("sampling.num_beams=0", "num_beams"),
    ("sampling.top_k=-5", "top_k"), ("sampling.min_new_tokens=300", "min_new_tokens"),
    ("sampling.repetition_penalty=0", "repetition_penalty"),
])
def test_bad_sampling_values_name_the_key(compose_config, synth_dir, tmp_path, override, key):
    with pytest.raises(ConfigError, match=f"sampling.{key}"):
        _job(compose_config, synth_dir, tmp_path, "sampling=balanced", override)


# Beam search on real engines. Short limits keep it quick: the embedded model's captions are ~13
# tokens, and the knobs only transformers applies are off, so both engines search the same way.
SHORT_BEAMS = ["sampling=quality", "sampling.max_new_tokens=24", "sampling.min_new_tokens=0",
               "sampling.repetition_penalty=1.0", "sampling.no_repeat_ngram_size=0"]


@pytest.fixture(scope="module")
def vllm_beam_engine(job_config):
    from caption.engines.vllm_engine import VllmEngine

    engine = VllmEngine(job_config([*SHORT_BEAMS, "engine=vllm"]).engine_spec)
    yield engine
    engine.close()


def _assert_captions(results, synth_dir, n):
    import json

    from video_io.synth.captions_ko import parse_attributes

    references = {json.loads(line)["video"]: json.loads(line)["attributes"]
                  for line in open(synth_dir / "references.jsonl", encoding="utf-8")}
    assert len(results) == n
    named = 0
    for r in results:
        assert r.error is None and r.finish_reason == "stop", r
        assert sum("가" <= ch <= "힣" for ch in r.text) >= 10 and r.text.endswith("."), r.text
        assert "<|" not in r.text and "영상" not in r.text, r.text  # no prompt text in the caption
        assert 0 < r.output_tokens <= 24 and r.prompt_tokens > 16
        truth = references[r.request.key]
        named += sum(parse_attributes(r.text)[k] == truth[k] for k in truth)
    assert named >= 0.8 * n * 6, "captions should name most of the clip's attributes"


@pytest.mark.slow
def test_vllm_beam_search_keeps_four_beams_and_returns_the_best(synth_dir, vllm_beam_engine):
    from tests.caption.engines.test_engines import clip_requests

    requests = clip_requests(synth_dir)
    results = {r.request.key: r for r in vllm_beam_engine.run(requests)}
    _assert_captions(list(results.values()), synth_dir, len(requests))
    engine, first = vllm_beam_engine, requests[0]
    [output] = engine.llm.beam_search([engine.prompt_for(first)], engine.beam_params)
    beams = output.sequences
    assert len(beams) == 4 and len({tuple(b.tokens) for b in beams}) == 4  # four distinct hypotheses
    best_tokens = beams[0].tokens[len(beams[0].orig_prompt["prompt_token_ids"]):]
    assert engine.tokenizer.decode(best_tokens, skip_special_tokens=True).strip() == results[first.key].text


@pytest.mark.slow
def test_greedy_and_beam_captions_on_both_engines(synth_dir, job_config, vllm_engine, hf_engine, vllm_beam_engine):
    from caption.engines.hf_engine import HfEngine
    from tests.caption.engines.test_engines import clip_requests, texts_by_key

    requests = clip_requests(synth_dir)
    hf_beams = HfEngine(job_config([*SHORT_BEAMS, "sampling.length_penalty=0", "engine=hf"]).engine_spec,
                        model=hf_engine.model, processor=hf_engine.processor)
    runs = {"vllm greedy": vllm_engine, "hf greedy": hf_engine, "vllm beam": vllm_beam_engine}
    texts = {name: texts_by_key(engine.run(requests)) for name, engine in runs.items()}
    for results in texts.values():
        _assert_captions(list(results.values()), synth_dir, len(requests))
    # with length_penalty 0 both engines rank beams by log-probability alone (their length terms
    # differ: vLLM counts the prompt too), so they must find the same best caption
    vllm_lp0 = _vllm_with_length_penalty(vllm_beam_engine, 0.0)
    for request, result in zip(requests, hf_beams.run(requests)):
        [output] = vllm_beam_engine.llm.beam_search([vllm_beam_engine.prompt_for(request)], vllm_lp0)
        best = output.sequences[0]
        text = vllm_beam_engine.tokenizer.decode(best.tokens[len(best.orig_prompt["prompt_token_ids"]):],
                                                 skip_special_tokens=True).strip()
        assert result.text == text, request.key


def _vllm_with_length_penalty(engine, value):
    from vllm.sampling_params import BeamSearchParams

    p = engine.beam_params
    return BeamSearchParams(beam_width=p.beam_width, max_tokens=p.max_tokens, temperature=p.temperature,
                            length_penalty=value)
