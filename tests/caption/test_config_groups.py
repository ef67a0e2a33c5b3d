"""Settings have one home: each config group's presets set exactly the keys its typed reader takes.

A reader never supplies a default of its own (it requires every key), so the value in conf/<group>/ is
the one a job runs with. This test composes every preset with the real Hydra and compares its keys with
the reader's: a preset that leaves a key out, or carries one nothing reads, fails here by name.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from caption.config import LORA_KEYS, SPEC_KEYS, VIDEO_KEYS, RunnerSettings
from caption.engines.options import EngineOptions
from caption.generation import SamplingSettings
from quant.plan import MODEL_KEYS, OPTIONAL_MODEL_KEYS
from quant.presets import options
from quant.rules import QUANT_KEYS
from quant.tiers import OPTIONAL_TIER_KEYS, TIER_KEYS, Tier


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


# group -> (keys every preset sets, keys a preset may add), from the group's composed value
SCHEMAS = {
    "engine": lambda g: (_names(EngineOptions), set()),
    "sampling": lambda g: (_names(SamplingSettings), set()),
    "gpu": lambda g: (set(TIER_KEYS), set(OPTIONAL_TIER_KEYS)),
    "quant": lambda g: (set(QUANT_KEYS), set()),
    "model": lambda g: (set(MODEL_KEYS), set(OPTIONAL_MODEL_KEYS)),
    "video": lambda g: (set(VIDEO_KEYS), set()),
    "lora": lambda g: (set(LORA_KEYS), set()),
    "spec": lambda g: (set(SPEC_KEYS[g["method"]]), set()),
    "runner": lambda g: ({"name"} if g["name"] == "local" else _names(RunnerSettings), set()),
}


@pytest.mark.parametrize("group,option", [(group, option) for group in SCHEMAS for option in options(group)])
def test_every_preset_sets_exactly_the_keys_its_reader_takes(compose_config, group, option):
    composed = compose_config([f"{group}={option}"])[group]  # Hydra applies the preset's own defaults list
    required, optional = SCHEMAS[group](composed)
    keys = set(composed) - {"defaults"}
    assert not required - keys, f"conf/{group}/{option}.yaml leaves out {sorted(required - keys)}"
    assert not keys - required - optional, f"conf/{group}/{option}.yaml sets {sorted(keys - required - optional)}, " \
                                           "which no reader takes"


def test_readers_keep_no_defaults_of_their_own():
    """A dataclass default would be a second home for a value the presets already set."""
    from dataclasses import MISSING

    for cls in (EngineOptions, SamplingSettings, Tier):
        assert all(f.default is MISSING and f.default_factory is MISSING for f in fields(cls)), cls.__name__
