"""Paths as users type them: a path-valued setting passed as one shell word reaches the job as typed.

Hydra's override grammar takes only some characters unquoted: `caption "input_dir=/data/내 영상"` (Korean
letters), `input_dir=~/clips`, a path with `=`, a quote or brackets in it end in a lexer error, and a
path with a comma becomes a sweep. Before Hydra reads the command line (caption/cli.py), every override
of a path-valued key (the schemas mark them: caption/settings/schema.py `path_keys`, plus Hydra's own run
folders) that Hydra would reject or read as something else is quoted the way its grammar reads quoted
strings back unchanged (`hydra_quote`). An override Hydra reads as typed is left alone, so quoting it
yourself (`"input_dir='/data/내 영상'"`), `references=null` and a sweep over paths (`caption -m
output=a.jsonl,b.jsonl`) keep their meaning.
"""

from __future__ import annotations

import os
import re

HYDRA_PATH_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir")  # Hydra's own folders
QUOTES = ("'", '"')


def hydra_quote(text: str) -> str:
    """`text` as a single-quoted value of Hydra's override grammar that it reads back as `text`: a quote
    is escaped, and so are the backslashes before a quote or at the end (elsewhere Hydra keeps a
    backslash as it is); `${` is escaped too, so a path is never taken for an interpolation."""
    quoted = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    quoted = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, quoted)
    return "'" + quoted.replace("${", "\\${") + "'"


def path_keys() -> set[str]:
    """Every path-valued setting: the schemas' (caption/settings/schema.py) and Hydra's run folders."""
    from caption.settings.schema import path_keys as schema_paths

    return {*schema_paths(), *HYDRA_PATH_KEYS}


def _parsed(override: str):
    """Hydra's reading of one override, or None where its grammar rejects it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_override(override)
    except HydraException:
        return None


def as_typed(override: str, multirun: bool = False) -> str:
    """One override, its value quoted where it is a path Hydra would not read as typed."""
    prefix = re.match(r"^(\+{0,2})", override).group(1)
    key, sep, value = override[len(prefix):].partition("=")
    if not sep or key not in path_keys() or not value:
        return override
    if len(value) > 1 and value[0] in QUOTES and value[-1] == value[0]:
        return override  # quoted by the user: Hydra reads it
    if key in HYDRA_PATH_KEYS and value.startswith("~"):
        value = os.path.expanduser(value)  # Hydra makes its folders as named: a folder called "~"
    parsed = _parsed(override)
    if parsed is not None:
        if parsed.is_sweep_override():
            if multirun:
                return override  # several paths, one job each
        else:
            read = parsed.value()
            if not isinstance(read, str) or read == value:
                return override  # as typed, or meant as Hydra reads it (null, a list)
    return f"{prefix}{key}={hydra_quote(value)}"


def paths_as_typed(args: list[str]) -> list[str]:
    """The command line with every path-valued override Hydra would misread quoted (module docstring)."""
    multirun = any(a in ("-m", "--multirun") for a in args)
    return [a if a.startswith("-") else as_typed(a, multirun) for a in args]
