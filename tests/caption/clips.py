"""Folders of synthetic clips that tests caption."""

from __future__ import annotations


def clips_with_references(tmp_path, synth_dir, n: int):
    """tmp_path/clips: the first `n` synthetic clips and their lines of references.jsonl (so jobs also score
    METEOR)."""
    import shutil

    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(n):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    lines = (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:n]
    (folder / "references.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder
