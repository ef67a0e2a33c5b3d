"""Read one option of a config group (conf/<group>/<option>.yaml) as a plain dict, outside a job: for
the quant CLI, the generated docs tables (scripts/docsgen) and tests.

Hydra composes it, as it does for the job (`+<group>=<option>` with no primary config), so a preset's
`defaults:` list (conf/model/*_awq.yaml extend their bf16 base) means exactly what it means in a job.
Interpolations are left as written (resolve=False): `${vidcap_root:}` in a path needs the job's
resolver, and the planner never reads paths. The preset is merged onto its group's schema, as in a
job, so a gpu, model or quant preset has every key (the optional ones at their schema defaults).
"""

from __future__ import annotations

import copy
import functools

from vidcap_ko.files import ROOT

CONF_DIR = ROOT / "conf"  # the checkout's, or an installed package's copy


def options(group: str) -> list[str]:
    """Option names of a config group, e.g. options("gpu") -> ["a100", "cpu", "h100", "l4", "t4"]."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


AUTO_TIER = "auto"  # conf/gpu/auto.yaml: not a tier, the machine's (quant/devices.py resolve_tier)


def tiers() -> list[str]:
    """The GPU tiers (conf/gpu/ without auto)."""
    return [name for name in options("gpu") if name != AUTO_TIER]


def default_options() -> dict[str, str]:
    """group -> the option a job takes when none is named (conf/config.yaml's defaults list)."""
    import yaml

    listed = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8"))["defaults"]
    return {group: option for entry in listed if isinstance(entry, dict)
            for group, option in entry.items() if "/" not in group and not group.startswith("override")}


def load(group: str, option: str) -> dict:
    if not (CONF_DIR / group / f"{option}.yaml").exists():
        raise FileNotFoundError(f"no {group} option {option!r} (conf/{group}/{option}.yaml); "
                                f"known: {', '.join(options(group))}")
    return copy.deepcopy(_composed(group, option))


@functools.lru_cache(maxsize=None)
def _composed(group: str, option: str) -> dict:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    overrides = [f"+{group}={option}"]
    if GlobalHydra.instance().is_initialized():  # inside a job (the planner reads an AWQ preset): its Hydra
        cfg = compose(overrides=overrides)
    else:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(overrides=overrides)
    schema = _schema(group)
    node = cfg[group] if schema is None else OmegaConf.merge(OmegaConf.structured(schema), cfg[group])
    return OmegaConf.to_container(node, resolve=False)


def _schema(group: str):
    """The typed schema of a group the planner reads (quant/schema.py); the job's other groups are
    typed in caption/settings/schema.py, which quant/ does not read."""
    from quant.schema import SCHEMAS

    return SCHEMAS.get(group)


def load_model(option: str) -> dict:
    """A model preset (conf/model/<option>.yaml)."""
    return load("model", option)
