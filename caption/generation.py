"""Generation settings (the `sampling` config group): read, validate, and say what each engine applies.

One schema for both engines. Where an engine cannot apply a knob the preset sets, the plan carries
a warning naming the knob, the engine and why (`sampling_warnings`), so nothing is dropped silently.

Decoding mode follows from the numbers, as in transformers' `do_sample`: temperature 0 is greedy
(num_beams 1) or beam search (num_beams > 1); temperature > 0 samples.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from omegaconf import DictConfig


class GenerationConfigError(ValueError):
    """A bad `sampling.*` value; caption.config turns it into its ConfigError."""


@dataclass(frozen=True)
class SamplingSettings:
    name: str
    temperature: float  # 0: no sampling (greedy, or beam search with num_beams > 1)
    top_p: float
    top_k: int  # 0: off
    repetition_penalty: float  # 1.0: off
    max_new_tokens: int
    min_new_tokens: int  # end-of-sequence is blocked until this many tokens
    num_beams: int  # 1: no beam search
    length_penalty: float  # beam score = log-prob / length ** length_penalty; beam search only (1.0: off)
    no_repeat_ngram_size: int  # 0: off; n > 0: no n-gram occurs twice in the sequence
    early_stopping: bool  # beam search: stop once num_beams finished candidates exist

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    @property
    def beam_search(self) -> bool:
        return self.num_beams > 1

    @property
    def greedy(self) -> bool:
        return not self.do_sample and not self.beam_search


def load_sampling(cfg: DictConfig) -> SamplingSettings:
    """The `sampling` group as SamplingSettings. Every key is required: the presets in conf/sampling/ are
    the one home of their values (an unknown key, or one a preset leaves out, is an error)."""
    s = cfg.sampling
    known = {f.name for f in fields(SamplingSettings)}
    unknown, missing = sorted(set(s) - known), sorted(k for k in known if s.get(k) is None)
    if unknown:
        raise GenerationConfigError(f"`sampling.{unknown[0]}` is not a sampling setting; known: {', '.join(sorted(known))}")
    if missing:
        raise GenerationConfigError(f"`sampling.{missing[0]}` is missing: the conf/sampling/ preset in use must set it")
    if s.temperature < 0:
        raise GenerationConfigError(f"`sampling.temperature` must be >= 0 (0 = greedy), got {s.temperature}")
    if not 0 < s.top_p <= 1:
        raise GenerationConfigError(f"`sampling.top_p` must be in (0, 1], got {s.top_p}")
    if s.top_k < 0:
        raise GenerationConfigError(f"`sampling.top_k` must be >= 0 (0 = off), got {s.top_k}")
    if s.repetition_penalty <= 0:
        raise GenerationConfigError(f"`sampling.repetition_penalty` must be > 0 (1.0 = off), got {s.repetition_penalty}")
    if s.max_new_tokens is None or s.max_new_tokens <= 0:
        raise GenerationConfigError(f"`sampling.max_new_tokens` must be > 0, got {s.max_new_tokens}")
    if s.min_new_tokens < 0:
        raise GenerationConfigError(f"`sampling.min_new_tokens` must be >= 0, got {s.min_new_tokens}")
    if s.min_new_tokens > s.max_new_tokens:
        raise GenerationConfigError(f"`sampling.min_new_tokens` ({s.min_new_tokens}) exceeds "
                                    f"`sampling.max_new_tokens` ({s.max_new_tokens})")
    num_beams, ngram = int(s.num_beams), int(s.no_repeat_ngram_size)
    if num_beams <= 0:
        raise GenerationConfigError(f"`sampling.num_beams` must be > 0, got {num_beams}")
    if ngram < 0:
        raise GenerationConfigError(f"`sampling.no_repeat_ngram_size` must be >= 0 (0 = off), got {ngram}")
    return SamplingSettings(
        name=str(s.name), temperature=float(s.temperature), top_p=float(s.top_p), top_k=int(s.top_k),
        repetition_penalty=float(s.repetition_penalty), max_new_tokens=int(s.max_new_tokens),
        min_new_tokens=int(s.min_new_tokens), num_beams=num_beams,
        length_penalty=float(s.length_penalty), no_repeat_ngram_size=ngram,
        early_stopping=bool(s.early_stopping))


# Where vLLM 0.32 (site-packages/vllm) decides what it can apply:
_VLLM_SAMPLING = "vllm/sampling_params.py SamplingParams"
_VLLM_BEAMS = "vllm/entrypoints/generate/beam_search/offline.py LLM.beam_search"


def sampling_warnings(s: SamplingSettings, engine: str) -> list[str]:
    """One line per knob `s` sets that `engine` will not apply as the preset means it."""
    warnings = []
    name = f"sampling={s.name}"
    if not s.beam_search and s.length_penalty != 1.0:
        warnings.append(f"{name}: length_penalty={s.length_penalty:g} has no effect without beam search "
                        "(num_beams=1) on either engine")
    if not s.beam_search and s.early_stopping:
        warnings.append(f"{name}: early_stopping has no effect without beam search (num_beams=1)")
    if engine != "vllm":
        return warnings
    if not s.beam_search:
        if s.no_repeat_ngram_size:
            warnings.append(f"{name}: no_repeat_ngram_size={s.no_repeat_ngram_size} is not applied on vLLM: "
                            f"{_VLLM_SAMPLING} has no such field (engine=hf applies it)")
        return warnings
    # beam search on vLLM: LLM.beam_search builds its own per-step SamplingParams from BeamSearchParams
    # (beam_width, max_tokens, temperature, length_penalty) and stops a beam only on the tokenizer's EOS
    ignored = [f"{knob}" for knob, active in (
        ("repetition_penalty=%g" % s.repetition_penalty, s.repetition_penalty != 1.0),
        ("min_new_tokens=%d" % s.min_new_tokens, s.min_new_tokens > 0),
        ("no_repeat_ngram_size=%d" % s.no_repeat_ngram_size, s.no_repeat_ngram_size > 0)) if active]
    if ignored:
        warnings.append(f"{name}: {', '.join(ignored)} not applied to beam search on vLLM: {_VLLM_BEAMS} takes "
                        "only beam_width, max_tokens, temperature and length_penalty (engine=hf applies them)")
    if s.early_stopping:
        warnings.append(f"{name}: early_stopping is not applied on vLLM: {_VLLM_BEAMS} keeps every beam going "
                        f"until max_new_tokens={s.max_new_tokens} steps, finished candidates aside (slower, same "
                        "ranking rule)")
    if s.length_penalty != 1.0:
        warnings.append(f"{name}: length_penalty={s.length_penalty:g} on vLLM divides by the length of prompt + "
                        "caption (vllm/entrypoints/generate/beam_search/utils.py get_beam_search_score), on "
                        "transformers by the caption's length alone: the same value favours long captions less on vLLM")
    return warnings
