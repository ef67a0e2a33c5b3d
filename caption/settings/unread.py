"""Settings given that the job would not read: refused, with what to add instead.

`video.fps=1` without `video=fps` used to run 8 uniform frames and say nothing. The schemas say which keys
are read only where other settings hold (caption/settings/schema.py `preset_key` and `option(..., read_when)`,
quant/schema.py for the gpu and quant groups): `video.fps` when `video.sampling` is fps, `engine.batch_size`
on engine hf, `runner.actors` with runner=ray... A key given on the command line (or to the Python API)
whose condition does not hold in the planned job is refused in one line that says which preset reads it
(`video=fps video.fps=1`). What decides is the plan: the engine engine=auto chose, the tier gpu=auto
resolved to, the method quant=auto picked. In a sweep (`caption -m`), where one job of several may not
read a key the others do, it is a plan warning instead.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Iterable

from omegaconf import DictConfig, OmegaConf

from caption.settings.config import ConfigError, JobConfig

# settings the plan resolves: a condition on them is checked against what the plan chose
RESOLVED = {
    "engine.name": lambda job: job.plan.engine,
    "gpu.device": lambda job: job.gpu.get("device"),
    "quant.method": lambda job: (job.plan.quantization or {}).get("method") or "none",
}


def read_conditions() -> dict[str, dict]:
    """`group.key` -> {setting: condition} for every key a schema marks as read only sometimes."""
    from caption.settings.schema import GROUP_SCHEMAS

    found = {}
    for group, schema in GROUP_SCHEMAS.items():
        for f in fields(schema):
            if "read_when" in f.metadata:
                found[f"{group}.{f.name}"] = f.metadata["read_when"]
    return found


def given_keys(overrides) -> list[tuple[str, str]]:
    """(dotted key, the override as given) for each `key=value` override that sets a key (not a group's
    preset, not Hydra's own settings)."""
    from caption.settings.schema import GROUPS

    given = []
    for override in overrides:
        key, sep, _ = str(override).partition("=")
        key = key.lstrip("+~")
        if sep and "." in key and not key.startswith("hydra.") and key.split(".")[0] in GROUPS:
            given.append((key, str(override).lstrip("+")))
    return given


def holds(condition, value) -> bool | None:
    """Whether `value` meets a condition (a tuple of values, or "> n"); None where the value is not known."""
    if value is None:
        return None
    if isinstance(condition, str) and condition.startswith(">"):
        return float(value) > float(condition[1:])
    return value in tuple(condition)


def said(condition) -> str:
    return f"is above {condition[1:].strip()}" if isinstance(condition, str) else "is " + " or ".join(map(str, condition))


def presets_where(setting: str, condition) -> list[str]:
    """The presets of the setting's group in which the condition holds (conf/<group>/)."""
    from quant import presets

    group, _, key = setting.partition(".")
    found = []
    for option in presets.options(group):
        try:
            value = presets.load(group, option).get(key)
        except Exception:  # a preset that does not compose alone is not offered
            continue
        if option != presets.AUTO_TIER and holds(condition, value):
            found.append(option)
    return found


def fix(setting: str, condition, override: str) -> str:
    """What to add so that `override` is read: the preset that makes the setting hold, with it."""
    group = setting.partition(".")[0]
    options = presets_where(setting, condition)
    if len(options) == 1:
        return f"use `{group}={options[0]} {override}`"
    if options:
        return (f"use it with a {group} preset where it is read ({group}={'|'.join(options)}), e.g. "
                f"`{group}={options[0]} {override}`")
    shown = condition if isinstance(condition, str) else f"={condition[0]}"
    return f"add `{setting}{shown}`"


def setting_value(setting: str, cfg: DictConfig, job: JobConfig | None = None) -> tuple[object, str]:
    """The setting's value in this job (the plan's, where the plan resolves it) and, where an `auto`
    chose it, words saying so."""
    given = OmegaConf.select(cfg, setting, default=None)
    resolved = RESOLVED.get(setting)
    if resolved is None or job is None or job.plan is None:
        return given, ""
    chosen = f" (chosen by {setting.split('.')[0]}=auto)" if given in (None, "auto") else ""
    return resolved(job), chosen


def unread_settings(overrides: Iterable[str], cfg: DictConfig, job: JobConfig | None = None) -> list[str]:
    """One line per key given in `overrides` that the job `cfg` describes (planned: `job`) would not read."""
    conditions = read_conditions()
    lines = []
    for key, override in given_keys(overrides):
        for setting, condition in conditions.get(key, {}).items():
            value, chosen = setting_value(setting, cfg, job)
            if holds(condition, value) is False:
                lines.append(f"`{override}` does nothing here: {key} is read only when {setting} {said(condition)}, "
                             f"and this job's {setting} is {value}{chosen}; {fix(setting, condition, override)}")
    return lines


def check_settings_read(overrides: Iterable[str], cfg: DictConfig, job: JobConfig | None = None) -> None:
    """Refuse (ConfigError, one line) a given key the job would not read; in a sweep, warn in the plan."""
    from caption.sweep import in_multirun

    lines = unread_settings(overrides, cfg, job)
    if not lines:
        return
    if in_multirun() and job is not None and job.plan is not None:
        job.plan.warnings.extend(lines)
        return
    raise ConfigError(lines[0])


def task_overrides() -> list[str]:
    """The overrides this Hydra job was given (a sweep's job: its own values)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return list(HydraConfig.get().overrides.task)
    except ValueError:  # not inside a Hydra app
        return []

