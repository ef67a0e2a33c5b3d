"""What a folder of clips says it holds, read from its references.jsonl (what caption-synth writes beside its
clips, and what the job scores captions against) without importing the generator.

A model preset's `trained_on` names the footage its checkpoint knows; the plan warns when the folder is not
of that kind (caption/planning.py). The one kind a folder can show today is caption-synth's: its references
carry the attributes each clip was drawn from (video_io/synth/dataset.py).
"""

from __future__ import annotations

import json
from pathlib import Path

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
