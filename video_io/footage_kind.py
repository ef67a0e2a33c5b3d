"""What a folder of clips says it holds, read from its references.jsonl (what caption-synth writes beside its
clips, and what the job scores captions against) without importing the generator.

A model preset's `trained_on` names the footage its checkpoint knows; the plan warns when the folder is not
of that kind (caption/planning.py). The one kind a folder can show today is caption-synth's: its references
carry the attributes each clip was drawn from (video_io/synth/dataset.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from video_io.store import fetched_copy, is_url

REFERENCES_FILE = "references.jsonl"
SYNTH = "caption-synth"
_SYNTH_ATTRIBUTES = {"scene", "object", "direction"}  # video_io/synth/attributes.py ClipAttributes


def footage_kind(folder: Path) -> str | None:
    """caption-synth when `folder` is caption-synth output, else None (not known)."""
    try:
        with open(Path(folder) / REFERENCES_FILE, encoding="utf-8") as refs:
            first = json.loads(refs.readline())
    except (OSError, ValueError):
        return None
    if isinstance(first, dict) and _SYNTH_ATTRIBUTES <= set(first.get("attributes") or {}):
        return SYNTH
    return None


def videos_of_kind(folder: Path, kind: str) -> frozenset[str]:
    """The clips of `folder` its references.jsonl describes as `kind` footage (each line's `video`; a long
    video's scenes each have a line), so that a folder mixing them with other clips is judged per clip.
    Empty where the file is missing or unreadable, or the kind is not one a folder can show."""
    if kind != SYNTH:
        return frozenset()
    videos = set()
    local = fetched_copy(f"{folder}/{REFERENCES_FILE}") if is_url(folder) else Path(folder) / REFERENCES_FILE
    if local is None:
        return frozenset()
    try:
        with open(local, encoding="utf-8") as refs:
            for line in refs:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("video"), str) \
                        and _SYNTH_ATTRIBUTES <= set(entry.get("attributes") or {}):
                    videos.add(entry["video"])
    except (OSError, UnicodeDecodeError):
        return frozenset()
    return frozenset(videos)
