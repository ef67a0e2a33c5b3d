"""Every config key has one default, in one place.

Each config group has a typed schema (caption/schema.py GROUP_SCHEMAS; gpu, model and quant from
quant/schema.py) that Hydra validates while composing. A key without a schema default is set by every
preset of the group (conf/<group>/*.yaml, the one home of those values); a key with a schema default is
optional, and a preset may set it only to say something else. These tests compose every preset with the
real Hydra and read every preset file, so a preset that leaves a key out, repeats a default, or a
reader that takes other keys than its schema, fails here by name.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import fields

import pytest
from omegaconf import MISSING, OmegaConf

from caption.config import CONF_DIR, RunnerSettings
from caption.engines.options import EngineOptions, ServerOptions
from caption.generation import SamplingSettings
from caption.schema import GROUP_SCHEMAS, EngineSchema, RunnerSchema, SamplingSchema
from quant.presets import options
from quant.tiers import Tier

PRESETS = [(group, option) for group in GROUP_SCHEMAS for option in options(group)]


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def _schema_defaults(group: str) -> dict:
    out = {}
    for f in fields(GROUP_SCHEMAS[group]):
        if f.default is not MISSING:
            out[f.name] = f.default_factory() if f.default is NO_DEFAULT else f.default
    return out


@pytest.mark.parametrize("group,option", PRESETS)
def test_every_preset_sets_each_key_its_schema_leaves_to_the_presets(compose_config, group, option):
    composed = compose_config([f"{group}={option}"])[group]
    unset = [f.name for f in fields(GROUP_SCHEMAS[group]) if OmegaConf.is_missing(composed, f.name)]
    assert not unset, f"conf/{group}/{option}.yaml leaves {unset} unset (the schema has no default for them)"


@pytest.mark.parametrize("group,option", PRESETS)
def test_no_preset_repeats_a_default_written_elsewhere(compose_config, group, option):
    """A value a preset sets must differ from what it would get anyway: its parent preset's (a
    `defaults:` list) or, with no parent, the schema's default."""
    own = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{option}.yaml"), resolve=False)
    parents = [p for p in own.pop("defaults", []) if p != "_self_"]
    inherited = (OmegaConf.to_container(compose_config([f"{group}={parents[-1]}"])[group], resolve=False)
                 if parents else _schema_defaults(group))
    repeated = sorted(k for k, v in own.items() if k in inherited and inherited[k] == v)
    assert not repeated, f"conf/{group}/{option}.yaml repeats {repeated}: the value is already " \
                         f"{'conf/' + group + '/' + parents[-1] + '.yaml' if parents else 'the schema'}'s"


def test_the_readers_take_exactly_their_schemas_keys():
    assert _names(EngineOptions) | _names(ServerOptions) == _names(EngineSchema)
    assert _names(SamplingSettings) == _names(SamplingSchema)
    assert _names(RunnerSettings) == _names(RunnerSchema)


def test_readers_keep_no_defaults_of_their_own():
    """A dataclass default would be a second home for a value the presets or the schema already hold."""
    for cls in (EngineOptions, ServerOptions, SamplingSettings, Tier):
        assert all(f.default is NO_DEFAULT and f.default_factory is NO_DEFAULT for f in fields(cls)), cls.__name__


def test_unknown_keys_and_wrong_types_fail_while_composing(compose_config):
    from hydra.errors import ConfigCompositionException

    for override in ("gpu.vram_gb=16", "runner.actorz=2", "video.fps=fast", "sampling.top_k=1.5", "quant.bitz=4"):
        with pytest.raises(ConfigCompositionException):
            compose_config([override])
