"""Find the video files under a folder, in a stable order, keyed by their path relative to it."""

from __future__ import annotations

import os
from pathlib import Path

VIDEO_EXTENSIONS = frozenset({
    ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".mts", ".m2ts",
    ".wmv", ".flv", ".3gp", ".ogv",
})


def crawl_videos(root: str | Path, extensions: frozenset[str] = VIDEO_EXTENSIONS) -> list[tuple[str, Path]]:
    """(key, path) for every file with a video extension under root, sorted by key.

    The key is the POSIX path relative to root: it names the clip in records and references
    whatever machine or mount the folder is on. Hidden files and folders are skipped. Files
    are selected by extension only; whether they really are videos is the decoder's call, so
    a broken `.mp4` becomes an error record instead of silently disappearing.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"input_dir is not a folder: {root}")
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith(".") or Path(name).suffix.lower() not in extensions:
                continue
            path = Path(folder) / name
            found.append((path.relative_to(root).as_posix(), path))
    found.sort(key=lambda item: item[0])
    return found
