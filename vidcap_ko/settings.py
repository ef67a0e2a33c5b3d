"""The settings machinery every package reads presets and declares keys with: `setting()`, one schema field
(type, default, help, when the job reads it), and the preset loader, one option of a config group
(conf/<group>/<option>.yaml) as a plain dict, outside a job: for the planner, `caption --help`, the scorer's
references fields, the generated docs tables (scripts/docsgen) and tests.

The loader composes with Hydra, as the job does (`+<group>=<option>` with no primary config), so a preset's
`defaults:` list (conf/model/*_awq.yaml extend their bf16 base) means exactly what it means in a job.
Interpolations are left as written (resolve=False): `${vidcap_root:}` in a path needs the job's resolver,
and no reader of a single preset reads paths. Given its group's schema (quant/presets.py gives the
planner's), the preset is merged onto it as in a job, so it has every key (optional ones at their
defaults).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import field
from typing import Any

from vidcap_ko.files import ROOT

CONF_DIR = ROOT / "conf"  # the checkout's, or an installed package's copy


def setting(default: Any, help: str, read_when: dict | None = None, path: bool = False, *,
            recorded: bool = False) -> Any:
    """A schema field: its default (MISSING: every preset of the group sets it), its help text (`caption
    --help`, the configuration reference), `read_when`: the settings under which the job reads it
    ({setting: the values it must have, a tuple, or a comparison such as "> 0"}; caption/settings/unread.py
    refuses such a key given where it would do nothing), `path`: its value is a file or folder, `recorded`:
    it changes what a caption says, so a record's `settings` carry it (as `group.key`) wherever its value is
    not this default (caption/settings/config.py recorded_settings). Lists and dicts take a copy per config.
    caption/settings/option.py and quant/schema.py declare keys with it."""
    metadata = {"help": help, **({"read_when": read_when} if read_when else {}), **({"path": True} if path else {}),
                **({"recorded": True} if recorded else {})}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def options(group: str) -> list[str]:
    """Option names of a config group, e.g. options("gpu") -> ["a100", "auto", "cpu", "h100", "l4", "t4"]."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def default_options() -> dict[str, str]:
    """group -> the option a job takes when none is named (conf/config.yaml's defaults list)."""
    import yaml

    listed = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8"))["defaults"]
    return {group: option for entry in listed if isinstance(entry, dict)
            for group, option in entry.items() if "/" not in group and not group.startswith("override")}


def load_preset(group: str, option: str, schema: type | None = None) -> dict:
    """conf/<group>/<option>.yaml composed (module docstring), merged onto `schema` where one is given."""
    if not (CONF_DIR / group / f"{option}.yaml").exists():
        raise FileNotFoundError(f"no {group} option {option!r} (conf/{group}/{option}.yaml); "
                                f"known: {', '.join(options(group))}")
    return copy.deepcopy(_composed(group, option, schema))


@functools.lru_cache(maxsize=None)
def _composed(group: str, option: str, schema: type | None) -> dict:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    overrides = [f"+{group}={option}"]
    if GlobalHydra.instance().is_initialized():  # inside a job (the planner reads an AWQ preset): its Hydra
        cfg = compose(overrides=overrides)
    else:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(overrides=overrides)
    node = cfg[group] if schema is None else OmegaConf.merge(OmegaConf.structured(schema), cfg[group])
    return OmegaConf.to_container(node, resolve=False)
