"""Every model family the job can be given has each piece it needs, wherever that piece lives today.

A family is registered by its prompt format (caption/prompts.py FAMILIES). README "Adding a model
family" lists the places; this test fails, naming the missing piece, when a registered family lacks one
or when a preset, a checkpoint maker or a formula knows a family the registry does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from caption.config import CONF_DIR
from caption.make_model import FAMILY_NAMES, build_config
from caption.prompts import FAMILIES, build_prompt
from quant import memory, rules

PRESET_FAMILIES = {str(OmegaConf.load(p).get("family")) for p in Path(CONF_DIR, "model").glob("*.yaml")
                   if OmegaConf.load(p).get("family")}


def test_every_family_that_appears_anywhere_is_registered():
    registered = set(FAMILIES)
    assert PRESET_FAMILIES <= registered, "a conf/model preset names an unregistered family"
    assert set(FAMILY_NAMES) == registered, "caption-make-model and caption/prompts.py know different families"
    assert set(memory.QWEN_FAMILIES) <= registered and set(rules.QWEN_VL) <= registered
    assert set(memory.VIDEO_PIXEL_DEFAULTS) <= registered


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_registered_family_has_every_piece(family):
    fmt = FAMILIES[family]
    prompt = build_prompt(family, "caption")
    assert fmt.stop, "stop strings (caption/prompts.py)"
    assert prompt.count("<|video_pad|>") + prompt.count("<video>") == 1, "one video placeholder in the prompt"
    assert family in PRESET_FAMILIES, f"a preset in conf/model/ with family: {family}"
    # a tiny random checkpoint (caption/make_model/<family>.py) and the planner's formulas for it
    config, tokenizer, arch = build_config(family, "tiny")
    assert all(piece in tokenizer.get_vocab() for piece in fmt.stop), "the tokenizer knows the stop strings"
    lm, vision = memory.param_counts(family, arch)  # quant/memory.py: raises for a family it does not know
    assert lm > 0 and vision > 0
    assert memory.vision_tokens(family, arch, 8, 56, 56) > 0
    assert memory.video_text_tokens(family, arch, 8) >= 0
