"""Find the video files under a folder, or the video objects under a store URL (video_io/store.py), in a
stable order, keyed by their path relative to it."""

from __future__ import annotations

import os
from pathlib import Path

from video_io import store

VIDEO_EXTENSIONS = frozenset({
    ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".mts", ".m2ts",
    ".wmv", ".flv", ".3gp", ".ogv",
})


def crawl_videos(root: str | Path, extensions: frozenset[str] = VIDEO_EXTENSIONS) -> list[tuple[str, Path]]:
    """(key, path) for every file with a video extension under root, sorted by key. A store URL (s3://...)
    is listed recursively by the same rules: (key, url) pairs (video_io/store.py list_objects).

    The key is the POSIX path relative to root: it names the clip in records and references
    whatever machine or mount the folder is on. Hidden files and folders are skipped. Files
    are selected by extension only; whether they really are videos (or readable, or regular
    files at all) is the decoder's call, so a broken `.mp4` becomes an error record instead of
    silently disappearing.

    Symlinked folders are followed when they lead out of the tree (footage folders are often
    links to mounts), each real folder once. A link to a folder inside the tree is not entered:
    its files are listed under their real path, and a link back up the tree (a loop) cannot
    loop. Names that are not valid UTF-8 come back surrogate-escaped (os.fsdecode), the form
    the decoder opens and the record writer stores.
    """
    if store.is_url(root):
        return store.list_objects(str(root), extensions)  # type: ignore[return-value]
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"input_dir is not a folder: {root}")
    inside = {_inode(folder) for folder, _, _ in os.walk(root, followlinks=False)}
    found, crawled = [], set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        if _inode(folder) in crawled:
            dirs[:] = []
            continue
        crawled.add(_inode(folder))
        keep = []
        for d in sorted(dirs):
            link = os.path.join(folder, d)
            if d.startswith(".") or (os.path.islink(link) and _linked_inode(link) in (inside | crawled)):
                continue
            keep.append(d)
        dirs[:] = keep
        for name in files:
            if name.startswith(".") or Path(name).suffix.lower() not in extensions:
                continue
            path = Path(folder) / name
            found.append((path.relative_to(root).as_posix(), path))
    found.sort(key=lambda item: item[0])
    return found


def other_suffixes(root: str | Path, most: int = 10_000) -> dict[str, int]:
    """Files under root that crawl_videos does not take, counted by extension ("" for none), hidden ones
    left out; the first `most` files only, so a huge tree without videos is not read to its end."""
    if store.is_url(root):
        return store.other_suffixes(str(root), most)
    counts: dict[str, int] = {}
    seen = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            suffix = Path(name).suffix.lower()
            counts[suffix] = counts.get(suffix, 0) + 1
            seen += 1
            if seen >= most:
                return counts
    return counts


def _inode(path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _linked_inode(link: str) -> tuple[int, int] | None:
    try:
        return _inode(link)
    except OSError:
        return None
