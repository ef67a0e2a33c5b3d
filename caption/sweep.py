"""Hydra multirun support: each job leaves a result.json in its run folder; at the end of a sweep
one table (markdown + CSV, a row per job) of plans and measured figures lands in the sweep folder.

    caption -m gpu=t4,l4,a100,h100 plan_only=true
    caption -m quant=none,awq,gptq,nf4 gpu=cpu input_dir=data/clips output=out.jsonl
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)
RESULT_FILE = "result.json"
MEASURED = ("videos_per_s", "output_tokens_per_s", "captions_ok", "captions_failed", "peak_rss_gib",
            "prefix_cache_hit_rate", "meteor", "wall_s")


def run_dir() -> Path | None:
    """This job's Hydra output folder (None outside a Hydra app, e.g. under hydra.compose)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:
        return None


def in_multirun() -> bool:
    """Whether this job is one of a Hydra multirun (`caption -m ...`)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:
        return False


def write_result(result: dict) -> Path | None:
    folder = run_dir()
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RESULT_FILE
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return path


def _overrides(job_dir: Path) -> str:
    overrides = job_dir / ".hydra" / "overrides.yaml"
    if not overrides.exists():
        return ""
    lines = [line[2:].strip() for line in overrides.read_text().splitlines() if line.startswith("- ")]
    noise = ("input_dir=", "output=", "progress=", "hydra.")
    return " ".join(line for line in lines if not line.startswith(noise))


def collect(sweep_dir: Path) -> tuple[list[dict], list[dict]]:
    """(plans, measured) of every job under a sweep folder, in job order."""
    plans, measured = [], []
    jobs = sorted((p for p in sweep_dir.glob(f"*/{RESULT_FILE}")), key=lambda p: int(p.parent.name)
                  if p.parent.name.isdigit() else p.parent.name)
    for path in jobs:
        result = json.loads(path.read_text(encoding="utf-8"))
        plan = dict(result["plan"])
        plan["job"] = _overrides(path.parent) or path.parent.name
        plans.append(plan)
        summary = result.get("summary") or {}
        measured.append({key: summary.get(key) for key in MEASURED if summary.get(key) is not None})
    return plans, measured


class SweepSummary(Callback):
    """Writes sweep.md and sweep.csv in the sweep folder when a multirun ends."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from quant.report import write_sweep_table

        sweep_dir = Path(config.hydra.sweep.dir)
        plans, measured = collect(sweep_dir)
        if not plans:
            log.warning("no job wrote %s under %s: no sweep table", RESULT_FILE, sweep_dir)
            return
        md, csv_path = write_sweep_table(plans, sweep_dir, measured=measured if any(measured) else None)
        print(f"\nsweep summary ({len(plans)} jobs): {md}\n{md.read_text(encoding='utf-8')}\nCSV: {csv_path}")
