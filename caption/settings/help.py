"""`caption --help`: every setting with its default and what it does, every config group with its
options and keys. Read from the schema (caption/settings/schema.py) and the presets' own comments
(conf/<group>/<option>.yaml), so the help cannot say something the config does not."""

from __future__ import annotations

import re
import textwrap
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import fields
from pathlib import Path

from omegaconf import MISSING

from caption.settings.config import CONF_DIR
from caption.settings.option import closest
from caption.settings.schema import GROUP_SCHEMAS, GROUPS, documented_keys, known_keys
from vidcap_ko.settings import default_options

GROUP_HELP = {
    "model": "the checkpoint and its family: prompt, frames, architecture numbers for the planner",
    "engine": "vLLM or transformers (auto: vLLM unless the plan needs transformers), or a server (OpenAI API)",
    "gpu": "the machine's tier: dtype, batch limits, memory (auto: detected from the machine)",
    "quant": "weight quantization: auto (the rule), none, awq, gptq, nf4, int8",
    "lora": "LoRA adapters served beside the base model",
    "spec": "speculative decoding (vLLM)",
    "sampling": "temperature, top-p/k, penalties, token limits, beams",
    "video": "frame sampling, frame size, decoder, decoder processes, per-clip timeout",
    "runner": "where decoding and generation run: this machine, or a Ray cluster",
}
_KEY_LINE = re.compile(r"^([A-Za-z_]\w*):\s*(.*?)\s*(?:#\s*(.*))?$")


def _preset_lines(path: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """A preset's first comment line, and (key, value, comment) of its top-level keys, comments that
    continue on the next lines joined."""
    title, keys = "", []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not title and line.startswith("#"):
            title = line.lstrip("# ").strip()
        match = _KEY_LINE.match(line)
        if match and match.group(1) != "defaults":
            keys.append([match.group(1), match.group(2), match.group(3) or ""])
        elif keys and line.startswith(" ") and line.strip().startswith("#"):
            keys[-1][2] += " " + line.strip().lstrip("#").strip()
    return title, [tuple(k) for k in keys]


def _yaml(value) -> str:
    """A default as a user writes it on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def _wrap(text: str, indent: int, width: int = 100) -> str:
    return textwrap.fill(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * indent)


def help_text(conf: Path) -> str:
    out = ["caption: caption a folder of videos with a vision-language model, write one JSONL record per",
           "(video, task, adapter), and score the captions with METEOR (vidcap-ko)", "",
           "usage: caption input_dir=FOLDER|s3://BUCKET/PREFIX [output=FILE.jsonl] [group=option ...] [key=value ...]",
           "       caption input_list=LIST.jsonl|.csv|.parquet [output=FILE.jsonl] ...  (the videos a table names)",
           "       caption -m gpu=t4,l4,a100,h100 plan_only=true     (a sweep: one job per combination)",
           "       caption --hydra-help                              (Hydra's own options)", "",
           "settings (caption/settings/schema.py; key=value):"]
    for key, default, text in documented_keys():
        out.append(f"  {key} = {_yaml(default)}")
        out.append(_wrap(text, 6))
    defaults = default_options()
    out += ["", "config groups (conf/<group>/<option>.yaml; group=option picks one, group.key=value changes a key):"]
    for group in GROUPS:
        out.append("")
        out.append(f"  {group}: {GROUP_HELP[group]}")
        for preset in sorted((conf / group).glob("*.yaml")):
            title, _ = _preset_lines(preset)
            mark = " (default)" if preset.stem == defaults.get(group) else ""
            out.append(_wrap(f"{preset.stem}{mark}: {title}", 4))
        default = conf / group / f"{defaults.get(group, '')}.yaml"
        if default.is_file():
            out.append(f"    keys ({group}={default.stem}):")
            listed = _preset_lines(default)[1]
            for key, value, comment in listed:
                out.append(_wrap(f"{group}.{key} = {value}" + (f"  ({comment})" if comment else ""), 6))
            out += _schema_lines(group, {key for key, _, _ in listed})
    out += ["", "exit status: 0 all ok, 1 a bug, 2 a bad config or refused output, 3 some records are errors,",
            "4 the engine did not load or died, 5 a file could not be written (disk full, read-only),",
            "6 another job writes the output, 7 the input folder went away mid-run, 130 interrupted"]
    return "\n".join(out) + "\n"


def _schema_lines(group: str, listed: set[str]) -> list[str]:
    """The group's optional keys the default preset leaves at their schema defaults."""
    lines = []
    for f in fields(GROUP_SCHEMAS[group]):
        if f.name in listed or f.default is MISSING:
            continue
        default = f.default_factory() if f.default is NO_DEFAULT else f.default
        help = f.metadata.get("help", "")
        lines.append(_wrap(f"{group}.{f.name} = {_yaml(default)}" + (f"  ({help})" if help else ""), 6))
    return lines


def group_keys(group: str) -> set[str]:
    """The keys of a config group (its schema, caption/settings/schema.py), for "did you mean"."""
    return {f.name for f in fields(GROUP_SCHEMAS[group])}


def explain_composition_error(exc: BaseException) -> str:
    """One line for a config Hydra could not compose: what is wrong, and the closest valid name."""
    import re

    from omegaconf.errors import OmegaConfBaseException

    text = str(exc)
    found = re.search(r"Could not find '([\w-]+)/([^']+)'", text)
    if found:  # a preset name: model=nope
        group, name = found.groups()
        options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        return (f"`{group}={name}`: no such {group} preset{closest(name, options)} "
                f"(conf/{group}/ has: {', '.join(options)})")
    found = re.search(r"Could not override '([^']+)'", text)
    if found:  # a key that is not there: outptu=x, video.num_frame=3
        key = found.group(1)
        group, _, leaf = key.rpartition(".")
        candidates = group_keys(group) if group in GROUPS else known_keys() if not group else []
        prefix = f"{group}." if group else ""
        return f"`{key}` is not a setting{closest(leaf, candidates, prefix)} (caption --help lists them)"
    cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else exc
    full_key = getattr(cause, "full_key", None)
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    if full_key:
        if "ListConfig" in first:
            return f"`{full_key}` takes a list, e.g. {full_key}=[caption,keywords]"
        if "is not Optional" in first:
            return f"`{full_key}` cannot be null: give it a value (caption --help shows each key's)"
        return f"`{full_key}`: {first}"
    return " ".join(text.split())
