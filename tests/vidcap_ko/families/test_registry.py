"""A model family lives in one module of vidcap_ko/families/, complete, and nothing else knows family names.

README "Adding a model family": a new family is one module in vidcap_ko/families/ plus one preset in conf/model/.
These tests fail, naming the piece, when a registered family lacks one, when a preset names a family no
module defines, or when code outside vidcap_ko/families/ decides something by a family's name.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from caption.make_model import FAMILY_NAMES, build_config
from caption.make_model.common import meta_model
from caption.prompts import SYSTEM_PROMPT_KO, build_prompt
from caption.settings.config import CONF_DIR, REPO_ROOT
from quant import memory
from vidcap_ko import families
from vidcap_ko.families import FAMILIES, Family, UnknownFamily, family_of_checkpoint, get_family

PRESETS = {p.stem: OmegaConf.load(p) for p in Path(CONF_DIR, "model").glob("*.yaml")}
PRESET_FAMILIES = {str(p.family) for p in PRESETS.values() if p.get("family")}
PACKAGES_THAT_MUST_NOT_KNOW_FAMILIES = ("caption", "quant", "video_io", "eval")
BENCHMARKS = REPO_ROOT / "caption" / "bench"  # a benchmark names the family of the checkpoint it makes to measure


def test_every_public_module_of_families_is_a_registered_family():
    modules = {m.name for m in pkgutil.iter_modules(families.__path__)
               if not m.ispkg and not m.name.startswith("_") and m.name != "base"}
    assert modules == set(FAMILIES)
    assert all(isinstance(f, Family) for f in FAMILIES.values())
    assert set(FAMILY_NAMES) == set(FAMILIES), "caption-make-model offers the registered families"


def test_every_preset_names_a_registered_family_and_every_family_has_a_preset():
    assert PRESET_FAMILIES <= set(FAMILIES), "a conf/model preset names a family no module in vidcap_ko/families/ defines"
    assert set(FAMILIES) <= PRESET_FAMILIES, "a family without a preset in conf/model/"
    with pytest.raises(UnknownFamily, match="known: llava_next_video, qwen2_5_vl, qwen3_vl"):
        get_family("gpt5_vision")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_registered_family_has_every_piece(name, tmp_path):
    family = get_family(name)
    prompt = build_prompt(name, "caption")
    assert prompt.count(family.video_placeholder) == 1, "one video placeholder in the prompt"
    assert prompt.index(SYSTEM_PROMPT_KO) < prompt.index(family.video_placeholder), "system prompt first"
    assert family.stop, "stop strings"
    # a tiny random checkpoint of the family: its config, tokenizer and modules agree with the family
    config, tokenizer, arch = build_config(name, "tiny")
    assert config.architectures == [family.architecture]
    config.save_pretrained(tmp_path)
    assert family_of_checkpoint(tmp_path) is family, "a checkpoint folder is traced back to its family"
    vocab = tokenizer.get_vocab()
    assert all(s in vocab for s in family.stop) and family.video_placeholder in vocab
    module_names = {n.rsplit(".", 1)[-1] for n, _ in meta_model(config).named_modules()}
    assert set(family.vision_modules) <= module_names, "vision_modules name modules the model has"
    lm, vision = memory.param_counts(name, arch)
    assert lm > 0 and vision > 0
    assert family.video_tokens(arch, 8, 56, 56) > 0 and family.video_text_tokens(arch, 8) >= 0
    assert family.transformers_fix is None or callable(family.transformers_fix)


def _family_name_constants(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in FAMILIES]


def test_no_code_outside_families_decides_by_a_family_name():
    """`if family == "qwen3_vl"` or a list of family names anywhere else means a family is no longer
    one module: such a fact belongs on the Family (vidcap_ko/families/base.py)."""
    found = [hit for package in PACKAGES_THAT_MUST_NOT_KNOW_FAMILIES
             for path in sorted((REPO_ROOT / package).rglob("*.py")) if not path.is_relative_to(BENCHMARKS)
             for hit in _family_name_constants(path)]
    assert not found, "family names outside vidcap_ko/families/:\n" + "\n".join(found)
