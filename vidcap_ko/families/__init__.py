"""Model families, one module each, looked up by name.

A family module (qwen2_5_vl.py, qwen3_vl.py, llava_next_video.py) defines FAMILY, a vidcap_ko.families.base.Family:
its prompt, stop strings, processor arguments, the planner's parameter and video-token formulas, the
modules quantization leaves alone, what the engines must know (position limits, GPU support, a
transformers fix) and how caption-make-model writes a random-weight checkpoint of it. Every module
here is a family (base.py aside); helpers shared by some families live in vidcap_ko/families/common/. Adding a family is one module
here plus one preset in conf/model/ (docs/model-families.md "Adding a model family");
tests/vidcap_ko/families/test_registry.py checks both.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

from vidcap_ko.families.base import Checkpoint, Family, UnknownFamily

__all__ = ["Checkpoint", "FAMILIES", "Family", "UnknownFamily", "family_of_checkpoint", "get_family"]


def _discover() -> dict[str, Family]:
    found = {}
    for module in pkgutil.iter_modules(__path__):
        if module.ispkg or module.name.startswith("_") or module.name == "base":  # common/: shared helpers
            continue
        family = importlib.import_module(f"{__name__}.{module.name}").FAMILY
        if family.name != module.name:
            raise ImportError(f"vidcap_ko/families/{module.name}.py defines a family named {family.name!r}; name them alike")
        found[family.name] = family
    return found


FAMILIES: dict[str, Family] = _discover()


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnknownFamily(f"unknown model family {name!r}; known: {', '.join(sorted(FAMILIES))} "
                            "(a family is a module in vidcap_ko/families/)") from None


def family_of_checkpoint(model_dir: str | Path) -> Family:
    """The family of a checkpoint folder, by its config.json `architectures`."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    names = config.get("architectures") or []
    for family in FAMILIES.values():
        if family.architecture in names:
            return family
    raise UnknownFamily(f"{model_dir}: no family in vidcap_ko/families/ builds {', '.join(names) or 'its architecture'}; "
                        f"known: {', '.join(f.architecture for f in FAMILIES.values())}")
