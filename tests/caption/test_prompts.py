"""Prompt layout: Korean system prompt, then the video, then the instruction."""

from __future__ import annotations

import pytest

from caption.prompts import INSTRUCTIONS_KO, SYSTEM_PROMPT_KO, build_prompt
from vidcap_ko.families import FAMILIES
from vidcap_ko.record import TASKS


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_shared_parts_come_first(family):
    prompts = [build_prompt(family, task) for task in INSTRUCTIONS_KO]
    system_at = prompts[0].index(SYSTEM_PROMPT_KO)
    for task, prompt in zip(INSTRUCTIONS_KO, prompts):
        video_at = prompt.index(FAMILIES[family].video_placeholder)
        assert system_at < video_at < prompt.index(INSTRUCTIONS_KO[task])
    # the prompts of different tasks differ only after the video placeholder
    shared = min(len(p) for p in prompts)
    common = next(i for i in range(shared) if len({p[i] for p in prompts}) > 1)
    assert common > prompts[0].index(FAMILIES[family].video_placeholder)


def test_qwen_prompt_equals_the_models_chat_template(model_dir):
    from transformers import AutoProcessor  # here: at module level every test worker paid its import to collect

    processor = AutoProcessor.from_pretrained(model_dir)
    for task, instruction in INSTRUCTIONS_KO.items():
        messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": instruction}]}]
        rendered = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert rendered == build_prompt("qwen2_5_vl", task)


def test_unknown_family_and_task_name_the_choices():
    with pytest.raises(ValueError, match="known: .*qwen2_5_vl"):
        build_prompt("gpt5_vision")
    with pytest.raises(ValueError, match="known: caption"):
        build_prompt("qwen2_5_vl", "poem")


def test_every_task_of_the_record_format_has_an_instruction():
    # a record's `task` (vidcap_ko/record.py TASKS, what eval/ and the tools read) is a named instruction
    assert tuple(INSTRUCTIONS_KO) == TASKS
