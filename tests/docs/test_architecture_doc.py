"""docs/architecture.md lists one clip's path as the pipeline's stages, and that list is the code's:
the table under "The stages of one clip" names, in order, each stage of caption.pipeline.STAGES with
its file, its class, the worker it runs on, what it takes and what it gives; and both runners run that
list, each stage only through it."""

from __future__ import annotations

import ast

from caption.pipeline import STAGES
from caption.pipeline.stage import Stage
from caption.settings.config import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
HEADING = "## The stages of one clip"


def documented_stages() -> list[tuple[str, ...]]:
    """The rows of the stage table: (stage, file, class, worker, takes, gives), backticks dropped."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/architecture.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [tuple(c.strip().replace("`", "") for c in row.strip("|").split("|")) for row in rows]
    assert cells and cells[0] == ("stage", "file", "class", "runs on", "takes", "gives"), cells[:1]
    return [row for row in cells[1:] if not set("".join(row)) <= {"-", ":"}]  # past the header's rule


def test_the_documented_stages_are_the_pipelines_stages_in_order():
    listed = [(s.name, s.__module__.replace(".", "/") + ".py", s.__name__, f"the {s.worker}",
               s.takes, s.gives) for s in STAGES]
    assert documented_stages() == listed


def test_each_stage_is_a_stage_in_a_file_of_its_own():
    assert len({stage.__module__ for stage in STAGES}) == len(STAGES)
    for stage in STAGES:
        assert issubclass(stage, Stage) and stage.process is not Stage.process, stage
        assert (REPO_ROOT / (stage.__module__.replace(".", "/") + ".py")).is_file(), stage.__module__


def test_both_runners_run_the_list_and_no_stage_by_hand():
    """Each runner builds its stages from STAGES (build_stages) and runs them with run_stages; no runner
    names a stage class or calls a stage's process itself."""
    names = {stage.__name__ for stage in STAGES} - {"RecordStage"}  # ray makes a lost clip's records with it
    for runner in ("local", "ray"):
        source = (REPO_ROOT / "caption" / "runners" / f"{runner}.py").read_text(encoding="utf-8")
        tree = ast.parse(source)
        called = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                  for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert {"build_stages", "run_stages"} <= called, runner
        assert "process" not in called, f"caption/runners/{runner}.py calls a stage's process itself"
        assert not names & called, f"caption/runners/{runner}.py builds {names & called} itself"
