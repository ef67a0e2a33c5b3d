"""Prompt builders, one per model family, looked up in one registry.

Every prompt puts what requests share first: the Korean system prompt, then the video, then the
instruction. Requests for the same video with different instructions then share the system
prompt *and* the video tokens as a prefix, which vLLM's prefix cache reuses.

A model family touches more than this file: README "Adding a model family" lists each place, and
tests/test_families.py fails when a registered family lacks one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

SYSTEM_PROMPT_KO = (
    "당신은 한국어 영상 캡션 작성기입니다. 영상에 보이는 장면, 시간대, 날씨, "
    "움직이는 대상과 그 방향과 속도를 정확하게 설명하세요."
)

# Named instructions (tasks). A job runs one or more of them per video.
INSTRUCTIONS_KO: dict[str, str] = {
    "caption": "이 영상을 한 문장으로 설명해 주세요.",
    "keywords": "이 영상의 핵심 키워드를 쉼표로 나열해 주세요.",
    "motion": "움직이는 대상은 어느 방향으로 어떤 속도로 움직이나요?",
}


@dataclass(frozen=True)
class PromptFormat:
    """Everything a model family needs to turn (system, instruction) into a prompt."""

    family: str
    build: Callable[[str, str], str]
    stop: tuple[str, ...] = ()
    # passed to the model's HF processor by both engines (vLLM: mm_processor_kwargs), so both, and the
    # planner's token count (quant/memory.py), see the same frames
    processor_kwargs: dict = field(default_factory=dict)


def _qwen_vl(system: str, instruction: str) -> str:
    # Qwen2.5-VL and Qwen3-VL share the ChatML layout and vision markers.
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>{instruction}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def _llava_next_video(system: str, instruction: str) -> str:
    return f"{system} USER: <video>\n{instruction} ASSISTANT:"


# transformers 5.19's Qwen video processors ask callers to choose `cap_pixels_per_frame`
# (transformers/models/qwen2_vl/video_processing_qwen2_vl.py): True bounds a clip's pixels as Qwen's
# own qwen-vl-utils does and becomes the default in 5.22. Qwen2/2.5-VL take it (quant/memory.py counts
# the same cap; frames as this project samples them are far below it). Qwen3-VL keeps the uncapped
# rule the planner counts (its capped rule is another formula, not modelled here): False, said on purpose.
QWEN2_PROCESSOR = {"cap_pixels_per_frame": True}
QWEN3_PROCESSOR = {"cap_pixels_per_frame": False}

FAMILIES: dict[str, PromptFormat] = {
    "qwen2_5_vl": PromptFormat("qwen2_5_vl", _qwen_vl, stop=("<|im_end|>",), processor_kwargs=QWEN2_PROCESSOR),
    "qwen3_vl": PromptFormat("qwen3_vl", _qwen_vl, stop=("<|im_end|>",), processor_kwargs=QWEN3_PROCESSOR),
    "llava_next_video": PromptFormat("llava_next_video", _llava_next_video, stop=("</s>",)),
}


def prompt_format(family: str) -> PromptFormat:
    try:
        return FAMILIES[family]
    except KeyError:
        raise ValueError(
            f"unknown model family {family!r}; known: {', '.join(sorted(FAMILIES))}. "
            "Add a builder to caption/prompts.py to support a new family."
        ) from None


def instruction_text(task: str) -> str:
    try:
        return INSTRUCTIONS_KO[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(INSTRUCTIONS_KO)}") from None


def build_prompt(family: str, task: str = "caption", system: str = SYSTEM_PROMPT_KO) -> str:
    """The full prompt text, with the family's single video placeholder."""
    return prompt_format(family).build(system, instruction_text(task))
