"""The documentation cannot drift from the code: every generated table is regenerated and compared with
the file on disk, a change to conf/ or a new results file changes the page it belongs to, and the site
builds with `mkdocs build --strict` (broken links, anchors and missing pages fail)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from caption.settings.config import CONF_DIR, REPO_ROOT
from scripts.docsgen import build
from scripts.docsgen.record import record


def test_generated_docs_are_current():
    stale = build.stale()
    assert not stale, f"stale generated docs: {', '.join(stale)}; run `{build.REGENERATE}` and commit the result"


def test_a_changed_conf_default_changes_the_generated_pages(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    engine = conf / "engine" / "auto.yaml"
    engine.write_text(engine.read_text().replace("max_restarts: 2 ", "max_restarts: 7 "))
    balanced = conf / "sampling" / "balanced.yaml"
    balanced.write_text(balanced.read_text().replace("temperature: 0.7", "temperature: 0.55"))
    before, after = build.outputs(), build.outputs(conf_dir=conf)
    reference = after["docs/snippets/configuration.md"]
    assert reference != before["docs/snippets/configuration.md"]
    assert "| `max_restarts` | `7` | an engine that breaks mid-run" in reference
    assert "| `balanced` | `0.55` |" in after["docs/snippets/sampling-presets.md"]


def _copy_docs_tree(tmp_path):
    """A repository root holding what the generator reads: README.md, docs/ pages and docs/results/."""
    shutil.copy(REPO_ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_a_new_results_file_is_shown_first_and_makes_the_page_stale(tmp_path):
    root = _copy_docs_tree(tmp_path)
    newest = sorted((root / "docs/results/prune").glob("*.json"))[-1]
    result = json.loads(newest.read_text())
    result["machine"]["date_utc"] = "2099-01-01T00:00:00Z"
    result["tables"][0]["rows"][0][2] = "9.999"
    (root / "docs/results/prune/2099-01-01-abcdef0.json").write_text(json.dumps(result))
    snippet = build.outputs(root)["docs/snippets/bench/prune.md"]
    shown, older = snippet.split("Older results of this command:")
    assert "9.999" in shown and "2099-01-01T00:00:00Z" in shown      # the newest run is the table shown
    assert f"(results/prune/{newest.name})" in older                  # the one it replaces is listed
    assert set(build.stale(root)) == {"docs/snippets/bench/prune.md", "docs/snippets/benchmark-index.md"}


def test_a_headline_the_results_no_longer_hold_fails_by_name(tmp_path):
    root = _copy_docs_tree(tmp_path)
    for path in (root / "docs/results/chaos").glob("*.json"):
        data = json.loads(path.read_text())
        data["tables"][0]["columns"][2] = "crashed"
        path.write_text(json.dumps(data))
    try:
        build.outputs(root)
    except ValueError as exc:
        assert "crashes of the job over 500 damaged files" in str(exc)
    else:
        raise AssertionError("a headline whose column is gone was rendered anyway")


def test_record_files_a_benchmark_run_with_its_tables(tmp_path):
    from caption.bench.harness import write_results

    lines = ["Speed of something\n", "| setting | videos/s |", "|---|---|", "| a | 1.50 |", "| b \\| c | 2.25 |"]
    stamp = write_results(tmp_path / "run", "prune", {"speed": [1.5, 2.25]}, lines, title="a test run")
    filed = record(tmp_path / "run", "caption-bench prune --n 2", tmp_path / "results")
    data = json.loads(filed.read_text())
    assert filed.parent.name == "prune" and filed.name.startswith(stamp["date_utc"][:10])
    assert data["machine"] == stamp and data["speed"] == [1.5, 2.25]
    assert data["tables"] == [{"title": "Speed of something", "columns": ["setting", "videos/s"],
                               "rows": [["a", "1.50"], ["b | c", "2.25"]]}]


def test_the_site_builds_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "site" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "max_restarts" in page and "--8&lt;--" not in page  # the generated reference was included
