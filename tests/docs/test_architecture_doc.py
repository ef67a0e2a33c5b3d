"""docs/architecture.md lists one clip's path as the pipeline's stages, and that list is the code's:
the table under "The stages of one clip" names, in order, each stage of caption.pipeline.STAGES with
its file, its entry (a class or function that file defines), what it takes and what it gives."""

from __future__ import annotations

import ast
import importlib
import re

from caption.pipeline import STAGES
from caption.settings.config import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
HEADING = "## The stages of one clip"


def documented_stages() -> list[tuple[str, ...]]:
    """The rows of the stage table: (stage, file, entry, takes, gives), backticks dropped."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/architecture.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [tuple(c.strip().replace("`", "") for c in row.strip("|").split("|")) for row in rows]
    assert cells and cells[0] == ("stage", "file", "entry", "takes", "gives"), cells[:1]
    return [row for row in cells[1:] if not set("".join(row)) <= {"-", ":"}]  # past the header's rule


def test_the_documented_stages_are_the_pipelines_stages_in_order():
    listed = [(s.name, s.module.replace(".", "/") + ".py", s.entry, s.takes, s.gives) for s in STAGES]
    assert documented_stages() == listed


def test_each_stage_names_a_file_that_defines_its_entry():
    for stage in STAGES:
        assert (REPO_ROOT / (stage.module.replace(".", "/") + ".py")).is_file(), stage.module
        assert callable(getattr(importlib.import_module(stage.module), stage.entry)), stage


def test_both_runners_compose_the_same_stages():
    """Each runner hands its decoded clips to caption_clips, which composes the stages after decoding;
    no runner calls a later stage itself."""
    later = {stage.entry for stage in STAGES[1:]}
    for runner in ("local", "ray"):
        tree = ast.parse((REPO_ROOT / "caption" / "runners" / f"{runner}.py").read_text(encoding="utf-8"))
        called = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                  for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert "caption_clips" in called, runner
        assert not later & called, f"caption/runners/{runner}.py calls {later & called} itself"
    source = (REPO_ROOT / "caption" / "pipeline" / "__init__.py").read_text(encoding="utf-8")
    body = source.split("def caption_clips", 1)[1]
    assert all(re.search(rf"\b{entry}\(", body) for entry in later)
