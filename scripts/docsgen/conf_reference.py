"""The configuration reference (docs/snippets/configuration.md): every top-level setting, then every
config group with its schema's keys (type, default, help) and each option's file (what it is,
what it inherits, every key it sets, with its comment).

Sources, read at build time so a new key or a changed default shows up here by itself:
caption/settings/schema.py (JobSchema's settings with their `option(default, help)` texts, GROUP_SCHEMAS),
quant/schema.py (gpu, model, quant), each field's help text, and conf/<group>/*.yaml.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import fields
from pathlib import Path

from omegaconf import MISSING, OmegaConf

from scripts.docsgen.conf_yaml import read_group
from scripts.docsgen.markdown import code, page, table


def said(condition) -> str:
    """A read_when condition in words (caption/settings/unread.py reads them)."""
    from caption.settings.unread import said as in_words

    return in_words(condition)


def schema_rows(schema) -> list[list]:
    """key | type | default | comment, for each field of a group's schema."""
    rows = []
    for f in fields(schema):
        if f.default is MISSING:
            default = "set by every option"
        else:
            value = f.default_factory() if f.default is NO_DEFAULT else f.default
            default = code(value)
        help_text = f.metadata.get("help", "")  # every field has it (tests/test_config_defaults.py)
        read_when = f.metadata.get("read_when")
        if read_when:  # the job refuses it given where it does nothing (caption/settings/unread.py)
            help_text = f"{help_text}{'; ' if help_text else ''}read only when " + " and ".join(
                f"`{key}` {said(condition)}" for key, condition in read_when.items())
        if f.metadata.get("recorded"):  # caption/settings/config.py recorded_settings
            help_text += "; records' `settings` carry it where it is not the default"
        rows.append([f"`{f.name}`", f"`{f.type}`", default, help_text])
    return rows


def top_level_section() -> str:
    from caption.settings.schema import documented_keys

    rows = [[f"`{key}`", code(default) if default != "???" else "required", text]
            for key, default, text in documented_keys()]
    return "\n\n".join(["## Settings outside the groups",
                        "Typed in `caption/settings/schema.py` (`JobSchema`); `key=value` on the command line.",
                        table(["key", "default", "what it does"], rows)])


def option_section(group: str, preset, default_option: str) -> str:
    name = preset.path.stem
    head = f"### `{group}={name}`" + (" (default)" if name == default_option else "")
    lines = [head, ""]
    if preset.description:
        lines += [preset.description, ""]
    if preset.parents:
        lines += ["Starts from " + ", ".join(f"`{group}={p}`" for p in preset.parents) +
                  "; the keys below replace its values.", ""]
    rows = [[f"`{k.key}`", f"`{k.value}`" if k.value else "", k.comment] for k in preset.keys if k.value]
    lines.append(table(["key", "value", "why"], rows) if rows else "Sets no key of its own.")
    return "\n".join(lines)


def group_section(group: str, conf_dir: Path) -> str:
    from caption.settings.help import GROUP_HELP
    from caption.settings.schema import GROUP_SCHEMAS

    defaults = default_options(conf_dir)
    presets = read_group(conf_dir, group)
    options = ", ".join(f"`{p.path.stem}`" + (" (default)" if p.path.stem == defaults.get(group) else "")
                        for p in presets)
    schema = GROUP_SCHEMAS[group]
    parts = [f"## `{group}`: {GROUP_HELP[group]}",
             f"Options (`conf/{group}/`): {options}. Keys (`{schema.__module__}.{schema.__name__}`): a key "
             "marked *set by every option* takes its value from the chosen option's file; the others default "
             f"as shown unless the option sets them. Change one key with `{group}.KEY=VALUE`.",
             table(["key", "type", "default", "what it is"], schema_rows(schema))]
    parts += [option_section(group, p, defaults.get(group)) for p in presets]
    return "\n\n".join(parts)


def default_options(conf_dir: Path) -> dict[str, str]:
    """group -> its default option, from conf/config.yaml's defaults list."""
    config = OmegaConf.to_container(OmegaConf.load(Path(conf_dir) / "config.yaml"), resolve=False)
    found = {}
    for entry in config.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if not key.startswith("override"):
                    found[key] = value
    return found


def configuration_reference(conf_dir: Path) -> str:
    from caption.settings.schema import GROUPS

    return page("caption/settings/schema.py, quant/schema.py and conf/", top_level_section(),
                *[group_section(group, conf_dir) for group in GROUPS])
