"""One option of a config group as a plain dict, as the planner, the quant CLI and tests read it: the
shared loader's (vidcap_ko/settings.py), merged onto the planner's schema of its group (quant/schema.py:
gpu, model, quant); the job's other groups are typed in caption/settings/schema.py, which quant/ does not
read."""

from __future__ import annotations

from vidcap_ko.settings import CONF_DIR, default_options, load_preset, options

__all__ = ["AUTO_TIER", "CONF_DIR", "default_options", "load", "load_model", "options", "tiers"]

AUTO_TIER = "auto"  # conf/gpu/auto.yaml: not a tier, the machine's (quant/devices.py resolve_tier)


def tiers() -> list[str]:
    """The GPU tiers (conf/gpu/ without auto)."""
    return [name for name in options("gpu") if name != AUTO_TIER]


def load(group: str, option: str) -> dict:
    from quant.schema import SCHEMAS

    return load_preset(group, option, SCHEMAS.get(group))


def load_model(option: str) -> dict:
    """A model preset (conf/model/<option>.yaml)."""
    return load("model", option)
