"""Read conf/<group>/<option>.yaml as plain dicts without Hydra, for the CLI, the README table and tests.

The job itself hands make_plan the groups Hydra composed (`OmegaConf.to_container(cfg.model)` etc.);
this loader mirrors the one Hydra feature the presets use: a `defaults:` list naming other options of
the same group, merged first (`_self_` last), as conf/model/*_awq.yaml extend their bf16 base.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def options(group: str) -> list[str]:
    """Option names of a config group, e.g. options("gpu") -> ["a100", "cpu", "h100", "l4", "t4"]."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def load(group: str, option: str) -> dict:
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no {group} option {option!r} ({path}); known: {', '.join(options(group))}")
    cfg = OmegaConf.load(path)
    merged = OmegaConf.create()
    for entry in list(cfg.pop("defaults", None) or []):
        if entry == "_self_":
            continue
        merged = OmegaConf.merge(merged, OmegaConf.create(load(group, str(entry))))
    merged = OmegaConf.merge(merged, cfg)
    # resolve=False: `${vidcap_root:}` in a path needs the job's resolver and the planner never reads paths
    return OmegaConf.to_container(merged, resolve=False)


def load_model(option: str) -> dict:
    """A model preset (conf/model/<option>.yaml)."""
    return load("model", option)
