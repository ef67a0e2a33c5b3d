"""Hydra multirun support: each job leaves a result.json in its run folder; at the end of a sweep
one table (markdown + CSV, a row per job) of plans and measured figures lands in the sweep folder.

    caption -m gpu=t4,l4,a100,h100 plan_only=true
    caption -m quant=none,awq,gptq,nf4 gpu=cpu input_dir=data/clips output=out.jsonl
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from vidcap_ko.exit_status import EXIT_WRITE_FAILED
from vidcap_ko.writing import WriteFailed, check_writable, writing

log = logging.getLogger(__name__)
RESULT_FILE = "result.json"
MEASURED = ("videos_per_s", "output_tokens_per_s", "captions_ok", "captions_failed", "peak_rss_gib",
            "prefix_cache_hit_rate", "meteor", "wall_s", "exit_status", "stop_reason")


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
    path = folder / RESULT_FILE
    with writing(path, "run folder's result file"):
        folder.mkdir(parents=True, exist_ok=True)
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
        measured.append(measured_figures(summary))
    return plans, measured


def measured_figures(summary: dict) -> dict:
    """A job's row in the sweep table: MEASURED, and every METEOR figure beside the score (each variant's
    score, how many clips it is over, how many were not captioned or failed: caption/summary/scoring.py)."""
    figures = {key: summary.get(key) for key in MEASURED if summary.get(key) is not None}
    figures.update({key: value for key, value in summary.items() if key.startswith("meteor") and key not in figures
                    and isinstance(value, (int, float)) and not isinstance(value, bool)})
    return figures


class RunFolderCheck(Callback):
    """Before Hydra writes its files into the run (or sweep) folder: make it and write a probe, so that
    a read-only, unwritable or full disk ends in one line naming the folder (vidcap_ko/writing.py)."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        self._check(Path(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self._check(Path(str(config.hydra.sweep.dir)))

    @staticmethod
    def _check(folder: Path) -> None:
        try:
            with writing(folder, "run folder", setting="hydra.run.dir"):
                folder.mkdir(parents=True, exist_ok=True)
            check_writable(folder, "run folder")
        except WriteFailed as exc:  # Hydra turns a callback's exception into a warning: exit here
            _exit_write_failed(exc.again(setting="hydra.run.dir"))


def _exit_write_failed(exc: WriteFailed) -> None:
    print(f"caption: {exc}", file=sys.stderr)
    sys.exit(EXIT_WRITE_FAILED)


class SweepSummary(Callback):
    """Writes sweep.md and sweep.csv in the sweep folder when a multirun ends."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from quant.report import write_sweep_table

        sweep_dir = Path(config.hydra.sweep.dir)
        plans, measured = collect(sweep_dir)
        if not plans:
            log.warning("no job wrote %s under %s: no sweep table", RESULT_FILE, sweep_dir)
            return
        try:
            with writing(sweep_dir, "sweep table", setting="hydra.sweep.dir"):
                md, csv_path = write_sweep_table(plans, sweep_dir, measured=measured if any(measured) else None)
        except WriteFailed as exc:
            _exit_write_failed(exc)
        print(f"\nsweep summary ({len(plans)} jobs): {md}\n{md.read_text(encoding='utf-8')}\nCSV: {csv_path}")
