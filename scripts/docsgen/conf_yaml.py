"""The presets of conf/ as their files say them: each key (nested ones dotted) with the value as written
and the comment beside or above it, and the file's opening comment. PyYAML and OmegaConf drop
comments, and in conf/ the comments are the documentation of the values (why this number), so the
configuration reference reads the lines themselves."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.]*|\"[^\"]+\"):(?P<rest>.*)$")
_LIST_ITEM = re.compile(r"^(?P<indent> *)- (?P<rest>.*)$")


@dataclass
class PresetKey:
    key: str          # dotted, e.g. arch.num_layers, env.VLLM_CPU_KVCACHE_SPACE, adapters.0.name
    value: str        # as written ("" for a mapping that holds keys)
    comment: str = ""


@dataclass
class PresetFile:
    path: Path
    description: str = ""
    parents: list[str] = field(default_factory=list)   # its `defaults:` list, _self_ left out
    keys: list[PresetKey] = field(default_factory=list)


def _split_comment(rest: str) -> tuple[str, str]:
    """`value  # comment` -> (value, comment); a # inside quotes is part of the value."""
    quote = None
    for i, ch in enumerate(rest):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1] in " \t"):
            return rest[:i].strip(), rest[i + 1:].strip()
    return rest.strip(), ""


def read_preset(path: Path) -> PresetFile:
    preset = PresetFile(Path(path))
    stack: list[tuple[int, str]] = []       # (indent, key) of the mappings the current line is inside
    pending: list[str] = []                 # comment lines waiting for the key below them
    last: PresetKey | None = None
    last_indent = -1
    in_defaults = False
    list_index: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if last is None and not stack and indent == 0:
                preset.description = f"{preset.description} {text}".strip()
            elif last is not None and last.comment and indent > last_indent:
                last.comment += " " + text      # a trailing comment that goes on below its key
            else:
                pending.append(text)
            continue
        item = _LIST_ITEM.match(line)
        if item and in_defaults:
            name = item.group("rest").split("#")[0].strip()
            if name != "_self_":
                preset.parents.append(name)
            continue
        if item:  # a list of mappings (lora adapters): number its items
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = ".".join(k for _, k in stack)
            index = list_index[parent] = list_index.get(parent, -1) + 1
            stack.append((indent, str(index)))
            line = " " * (indent + 2) + item.group("rest")
            indent += 2
        match = _KEY.match(line)
        if not match:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = match.group("key").strip('"')
        value, comment = _split_comment(match.group("rest"))
        in_defaults = key == "defaults" and not stack
        if in_defaults:
            continue
        dotted = ".".join([k for _, k in stack] + [key])
        last = PresetKey(dotted, value, " ".join(pending + ([comment] if comment else [])))
        last_indent = indent if comment else -1
        pending = []
        preset.keys.append(last)
        if not value:
            stack.append((indent, key))
    return preset


def read_group(conf_dir: Path, group: str) -> list[PresetFile]:
    return [read_preset(p) for p in sorted((Path(conf_dir) / group).glob("*.yaml"))]
