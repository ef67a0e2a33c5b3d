"""File a benchmark run into docs/results: `python -m scripts.docsgen record data/bench/prune
--command "caption-bench prune"` copies <dir>/results.json (what caption-bench wrote, machine stamp
included) to docs/results/<benchmark>/<date>-<commit>.json and adds the tables of <dir>/results.md,
which the same write_results call wrote from the same figures (caption/bench/harness.py), each under the line
that introduces it. Then `python -m scripts.docsgen` renders it; the newest result of a command is the
one a page shows."""

from __future__ import annotations

import json
import re
from pathlib import Path


def markdown_tables(text: str) -> list[dict]:
    """Each pipe table of a results.md: {title: the paragraph above it, columns, rows}."""
    tables, paragraph, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+$", lines[i + 1].strip()):
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            tables.append({"title": paragraph, "columns": _cells(lines[i]), "rows": rows})
            paragraph, i = "", j
            continue
        if line and not line.startswith("#") and not line.startswith("Machine:"):
            paragraph = line
        i += 1
    return tables


def _cells(line: str) -> list[str]:
    parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [p.strip().replace("\\|", "|") for p in parts]


def record(run_dir: Path, command: str, results_dir: Path) -> Path:
    run_dir = Path(run_dir)
    data = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    md = run_dir / "results.md"
    if "machine" not in data:
        raise SystemExit(f"{run_dir}/results.json has no machine stamp: rerun the benchmark (caption/bench/harness.py "
                         "write_results stamps every result)")
    data["command"] = command
    data["tables"] = markdown_tables(md.read_text(encoding="utf-8")) if md.exists() else []
    data["provenance"] = f"filed by `python -m scripts.docsgen record` from {run_dir.name}/results.json and results.md"
    stamp = data["machine"]
    commit = (stamp.get("git_commit") or "unknown")[:12] + ("-dirty" if str(stamp.get("git_commit")).endswith("-dirty") else "")
    out = Path(results_dir) / data["benchmark"] / f"{stamp['date_utc'][:10]}-{commit}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
