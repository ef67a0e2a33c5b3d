"""One table for a sweep: a row per job with its plan and, when measured, what it achieved.

Meant for a Hydra multirun callback: each job leaves its plan dict (Plan.to_dict()) and its summary
figures; the callback collects them and calls write_sweep_table once.
"""

from __future__ import annotations

import csv
from pathlib import Path

# (column, how to get it from a plan dict)
PLAN_COLUMNS = (
    ("model", lambda p: p.get("model")),
    ("tier", lambda p: p.get("tier")),
    ("engine", lambda p: p.get("engine")),
    ("dtype", lambda p: p.get("dtype")),
    ("quant", lambda p: (p.get("quantization") or {}).get("method")),
    ("bits", lambda p: (p.get("quantization") or {}).get("bits")),
    ("fits", lambda p: p.get("fits")),
    ("why_not", lambda p: None if p.get("fits") else " ".join(p.get("reasons") or []) or "refused"),
    ("tensor_parallel", lambda p: p.get("tensor_parallel_size")),
    ("replicas", lambda p: p.get("replicas")),
    ("max_num_seqs", lambda p: (p.get("vllm") or {}).get("max_num_seqs") or (p.get("hf") or {}).get("max_batch_size")),
    ("max_model_len", lambda p: (p.get("vllm") or {}).get("max_model_len")),
    ("vision_tokens", lambda p: p.get("vision_tokens_per_clip")),
    ("tokens_per_request", lambda p: p.get("tokens_per_request")),
    ("weights_gib", lambda p: (p.get("memory_gib") or {}).get("weights")),
    ("kv_budget_gib", lambda p: (p.get("memory_gib") or {}).get("kv_budget")),
    ("sequences_fit", lambda p: p.get("sequences_fit")),
    ("kv_offload_gib", lambda p: p.get("kv_offload_gib")),
)
# measured figures shown first, in this order, when present; any others follow as they come
MEASURED_FIRST = ("videos_per_s", "output_tokens_per_s", "peak_rss_gib", "peak_vram_gib", "meteor")


def _measured_columns(measured: list[dict]) -> list[str]:
    seen = [key for key in MEASURED_FIRST if any(key in m for m in measured)]
    for m in measured:
        seen += [key for key in m if key not in seen]
    return seen


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def sweep_rows(plans: list[dict], measured: list[dict | None] | None = None) -> tuple[list[str], list[list]]:
    """(header, rows): one row per job; `measured[i]` (or a plan's own "measured" key) adds its figures."""
    measured = list(measured or [None] * len(plans))
    if len(measured) != len(plans):
        raise ValueError(f"{len(plans)} plans but {len(measured)} measured entries: give one per job (None if none)")
    figures = [dict(plan.get("measured") or {}, **(m or {})) for plan, m in zip(plans, measured)]
    extra = _measured_columns(figures)
    header = ["job"] + [name for name, _ in PLAN_COLUMNS] + extra
    rows = []
    for i, (plan, figs) in enumerate(zip(plans, figures)):
        rows.append([plan.get("job", i)] + [get(plan) for _, get in PLAN_COLUMNS] + [figs.get(k) for k in extra])
    return header, rows


def markdown_table(header: list[str], rows: list[list]) -> str:
    def esc(value) -> str:
        return _cell(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_sweep_table(rows: list[dict], out_dir: str | Path, measured: list[dict | None] | None = None,
                      name: str = "sweep") -> tuple[Path, Path]:
    """Write <out_dir>/<name>.md and <name>.csv, one row per job; returns their paths.

    rows: plan dicts (Plan.to_dict()); a row may carry "job" (its id, e.g. Hydra's job number) and
    "measured" (e.g. videos_per_s, output_tokens_per_s, peak_rss_gib, meteor); `measured` gives the same
    per job as a parallel list instead.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    header, table = sweep_rows(rows, measured)
    md_path, csv_path = out / f"{name}.md", out / f"{name}.csv"
    md_path.write_text(markdown_table(header, table), encoding="utf-8")
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows([[_cell(v) for v in row] for row in table])
    return md_path, csv_path
