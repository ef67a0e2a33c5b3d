"""What a model family is: every fact the planner, the engines and the checkpoint maker need about one
architecture, as one object. Each public module of this package defines one, named FAMILY.

Nothing here imports torch, transformers or vLLM at module level: the planner (quant/) reads a
family's formulas in milliseconds on any machine; the checkpoint and engine pieces import what they
need when called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Checkpoint:
    """How `caption-make-model` writes a random-weight checkpoint of the family (caption.make_model)."""

    builtin: dict[str, dict]  # shape (tiny, cpu) -> arch numbers, in the vocabulary of conf/model/*.yaml `arch:`
    job: dict[str, dict]  # shape (tiny, cpu) -> what the job feeds it: frames, frame_side, max_model_len
    special_tokens: tuple[str, ...]  # added to the tokenizer where missing
    eos_tokens: tuple[str, ...]  # generation stops on these (the first is the tokenizer's eos)
    config: Callable[[dict, dict], Any]  # (arch, token ids by text) -> transformers config
    processor: Callable[[Any, dict, str], Any]  # (tokenizer, arch, chat template) -> transformers processor
    # (default system prompt) -> chat template; None keeps the source tokenizer's ChatML template
    chat_template: Callable[[str], str] | None = None
    bos_token: str | None = None
    rename_key: Callable[[str], str] = field(default=lambda key: key)  # saved key -> released key


@dataclass(frozen=True)
class Family:
    name: str  # what conf/model presets write as `family:`
    architecture: str  # config.json `architectures[0]` of the family's releases

    # prompt: (system, instruction) -> the whole prompt, system first, with exactly one video placeholder
    prompt: Callable[[str, str], str]
    video_placeholder: str  # the token the prompt marks the video with (the processor expands it)
    stop: tuple[str, ...]  # generation stops at these strings
    # passed to the family's HF processor by both engines (vLLM: mm_processor_kwargs), so both engines
    # and the planner's token count see the same frames
    processor_kwargs: dict

    # the planner's formulas (quant/memory.py calls them), over a preset's `arch:` block
    vision_params: Callable[[dict], int]  # vision tower + projector parameters
    video_tokens: Callable[[dict, int, int, int], int]  # (arch, frames, width, height) -> placeholder tokens
    video_text_tokens: Callable[[dict, int], int]  # (arch, frames) -> text the processor adds around a video
    size_multiple: Callable[[dict], int]  # frame sides the decoder gives are multiples of this (video_io/sizing.py)
    vision_modules: tuple[str, ...]  # module names kept unquantized (bitsandbytes skip list, AWQ/GPTQ ignore)

    # vLLM's video-token pruning (EVS, vllm/multimodal/video_prune/evs.py): a clip's video tokens come in
    # this many temporal groups of equal size, and the first group is always kept. None: vLLM cannot
    # prune this family's video tokens (video.prune_rate is refused)
    temporal_groups: Callable[[dict, int], int] | None

    # what the engines must know
    fps_scaled_positions: bool  # temporal positions scale with 1/fps (caption/pipeline/admission.py bounds them)
    vllm_vision_on_turing: bool  # vLLM has a vision-attention backend for this family on sm75 (T4)
    transformers_fix: Callable[[], bool] | None  # patches the installed transformers where it is wrong

    checkpoint: Checkpoint
    # preset `arch:` key -> where a checkpoint's config.json holds the same number ("text_config.X" is also
    # looked for at the top level, where older releases keep the language model's numbers)
    config_keys: dict[str, str] = field(default_factory=dict)

    def config_mismatches(self, arch: dict, config: dict) -> list[str]:
        """What a checkpoint's config.json says against a preset's `arch:` block, in words; [] when they agree."""
        found = config.get("architectures") or []
        if self.architecture not in found:
            return [f"its config.json builds {', '.join(found) or 'an unnamed architecture'}, the preset's family "
                    f"{self.name} is {self.architecture}"]
        wrong = []
        for key, where in self.config_keys.items():
            section, _, name = where.rpartition(".")
            held = (config.get(section) or {}).get(name) if section else None
            if held is None and section == "text_config":
                held = config.get(name)
            if key in arch and held is not None and held != arch[key]:
                wrong.append(f"{key} {arch[key]} in the preset, {where} {held} in config.json")
        return wrong


class UnknownFamily(ValueError):
    """A family name no module in vidcap_ko/families/ defines."""


def no_video_text(arch: dict, frames: int) -> int:
    """Families whose processor adds no text around the video's placeholder tokens."""
    return 0
