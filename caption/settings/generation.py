"""Generation settings (the `sampling` config group): read, validate, and say what each engine applies.

One schema for both engines. Where an engine cannot apply a knob the preset sets, the plan carries
a warning naming the knob, the engine and why (`sampling_warnings`), so nothing is dropped silently.

Decoding mode follows from the numbers, as in transformers' `do_sample`: temperature 0 is greedy
(num_beams 1) or beam search (num_beams > 1); temperature > 0 samples.
"""

from __future__ import annotations

from dataclasses import dataclass

from caption.settings.option import ConfigError, preset_key

SAMPLED = {"sampling.temperature": "> 0"}  # temperature 0: greedy or beam search
BEAMS = {"sampling.num_beams": "> 1"}


@dataclass
class SamplingSchema:
    """The `sampling` group: every preset (conf/sampling/*.yaml) sets each key, and says why."""
    name: str = preset_key("the preset's name, as records name their sampling")
    temperature: float = preset_key("0: no sampling (greedy, or beam search with num_beams > 1); > 0 samples")
    top_p: float = preset_key("sampling: the smallest set of tokens whose probabilities reach this, in (0, 1]",
                              SAMPLED)
    top_k: int = preset_key("sampling: only the k likeliest tokens; 0: off", SAMPLED)
    repetition_penalty: float = preset_key("> 1 makes tokens already in the caption less likely; 1.0: off")
    max_new_tokens: int = preset_key("the longest caption, in tokens (the plan sizes memory for it)")
    min_new_tokens: int = preset_key("end-of-sequence is blocked until the caption has this many tokens")
    num_beams: int = preset_key("1: no beam search; n > 1: beam search over n candidates")
    length_penalty: float = preset_key("beam search: score = log-prob / length ** length_penalty; 1.0: off", BEAMS)
    no_repeat_ngram_size: int = preset_key("n > 0: no n-gram occurs twice in the caption; 0: off")
    early_stopping: bool = preset_key("beam search: stop once num_beams finished candidates exist", BEAMS)

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    @property
    def beam_search(self) -> bool:
        return self.num_beams > 1

    @property
    def greedy(self) -> bool:
        return not self.do_sample and not self.beam_search

    def check(self) -> None:
        """The ranges and the one cross-key rule Hydra's types do not say; ConfigError names the key."""
        _require(self.temperature >= 0, f"`sampling.temperature` must be >= 0 (0 = greedy), got {self.temperature}")
        _require(0 < self.top_p <= 1, f"`sampling.top_p` must be in (0, 1], got {self.top_p}")
        _require(self.top_k >= 0, f"`sampling.top_k` must be >= 0 (0 = off), got {self.top_k}")
        _require(self.repetition_penalty > 0,
                 f"`sampling.repetition_penalty` must be > 0 (1.0 = off), got {self.repetition_penalty}")
        _require(self.max_new_tokens > 0, f"`sampling.max_new_tokens` must be > 0, got {self.max_new_tokens}")
        _require(self.min_new_tokens >= 0, f"`sampling.min_new_tokens` must be >= 0, got {self.min_new_tokens}")
        _require(self.min_new_tokens <= self.max_new_tokens, f"`sampling.min_new_tokens` ({self.min_new_tokens}) "
                 f"exceeds `sampling.max_new_tokens` ({self.max_new_tokens})")
        _require(self.num_beams > 0, f"`sampling.num_beams` must be > 0, got {self.num_beams}")
        _require(self.no_repeat_ngram_size >= 0,
                 f"`sampling.no_repeat_ngram_size` must be >= 0 (0 = off), got {self.no_repeat_ngram_size}")


def _require(holds: bool, message: str) -> None:
    if not holds:
        raise ConfigError(message)


# Where vLLM 0.32 (site-packages/vllm) decides what it can apply:
_VLLM_SAMPLING = "vllm/sampling_params.py SamplingParams"
_VLLM_BEAMS = "vllm/entrypoints/generate/beam_search/offline.py LLM.beam_search"


def sampling_warnings(s: SamplingSchema, engine: str) -> list[str]:
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
