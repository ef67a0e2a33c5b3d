"""How one setting is declared: its type, default, help and when it is read, in one line of a schema
dataclass (caption/settings/schema.py and the group schemas it lists), and the error a group's check() raises.

A group's dataclass is also the typed object the job reads (caption/settings/config.py turns the composed group
into it with OmegaConf.to_object): there is no second copy of a key to keep in step.
"""

from __future__ import annotations

from typing import Any

from omegaconf import MISSING

from vidcap_ko.settings import setting


class ConfigError(ValueError):
    """An invalid setting; the message names the key and what to change it to."""


def option(default: Any, help: str, read_when: dict | None = None, path: bool = False, *,
           recorded: bool = False) -> Any:
    """A schema field with a default of its own, its help text (`caption --help`), `read_when`: the
    settings under which the job reads it, `path`: its value is a file or folder, taken as typed on the
    command line (caption/settings/overrides.py), `recorded`: it changes captions, so records' settings carry
    it where it is not this default. The metadata's shape is vidcap_ko/settings.py setting()'s."""
    return setting(default, help, read_when, path, recorded=recorded)


def preset_key(help: str, read_when: dict | None = None, path: bool = False, *, recorded: bool = False) -> Any:
    """A key every preset of its group sets (MISSING: conf/<group>/*.yaml hold its values and say why),
    with its help text. `read_when`: {setting: the values it must have (a tuple), or a comparison
    ("> 0")}; a key given on the command line whose setting is otherwise would do nothing, and
    caption/settings/unread.py refuses it, saying what to add. `recorded`: records' settings carry its value
    (it changes captions)."""
    return setting(MISSING, help, read_when, path, recorded=recorded)


def at_least(value: Any, key: str, low: float = 0, inclusive: bool = False) -> Any:
    """`value`, or ConfigError where it is not above `low` (with `inclusive`: not below it)."""
    if value is None or (value < low if inclusive else value <= low):
        raise ConfigError(f"`{key}` must be {'>=' if inclusive else '>'} {low:g}, got {value}")
    return value


def one_of(value: Any, allowed: tuple[Any, ...], key: str) -> Any:
    """`value`, or ConfigError listing what `key` may be."""
    if value not in allowed:
        raise ConfigError(f"`{key}={value}` is not valid; choose one of: {', '.join(map(str, allowed))}")
    return value


def closest(word: str, candidates, prefix: str = "") -> str:
    """ "; did you mean X?" for the nearest candidate, or "" when none is near."""
    import difflib

    found = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{found[0]}?" if found else ""
