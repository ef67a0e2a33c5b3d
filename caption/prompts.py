"""What the job asks: the Korean system prompt and the named instructions (tasks).

Every prompt puts what requests share first: the Korean system prompt, then the video, then the
instruction. Requests for the same video with different instructions then share the system
prompt *and* the video tokens as a prefix, which vLLM's prefix cache reuses. How a family lays
them out is the family's `prompt` (vidcap_ko/families/<family>.py).
"""

from __future__ import annotations

from vidcap_ko.families import get_family

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


def instruction_text(task: str) -> str:
    try:
        return INSTRUCTIONS_KO[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(INSTRUCTIONS_KO)}") from None


def build_prompt(family: str, task: str = "caption", system: str = SYSTEM_PROMPT_KO) -> str:
    """The full prompt text, with the family's single video placeholder."""
    return get_family(family).prompt(system, instruction_text(task))
