"""When `video.backend=auto` decodes with NVDEC: only where a measurement says it pays.

The measurements (video_io/nvdec_measured.json, rows of `caption-bench decode --backend nvdec`) name
the GPU model and the cores of the machine they came from. auto picks NVDEC on a machine only when a
measurement of its GPU model, made with at least as many cores as it has (software gets no faster
with fewer), shows NVDEC faster than software on every clip measured there: per clip of the job's
decoding and in frames per second. A faster per-clip time alone is not enough: the job runs one
decoder per core, and NVDEC's engines are shared by all of them.

No measurement says so today: on one NVIDIA H200 with 16 cores, NVDEC was slower everywhere
(docs/decoding.md), so auto decodes in software on every machine.
"""

from __future__ import annotations

import json
from pathlib import Path

MEASURED = Path(__file__).resolve().parent / "nvdec_measured.json"


def load_measurements(path: Path = MEASURED) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["measurements"]


def _faster(row: dict) -> bool:
    return row["nvdec_s_per_clip"] < row["pyav_s_per_clip"] and row["nvdec_fps"] > row["software_fps"]


def auto_picks_nvdec(gpus: list[str], cores: int, measurements: list[dict] | None = None) -> tuple[bool, str]:
    """Whether auto decodes with NVDEC on a machine with these GPUs (nvidia-smi's names) and cores, and why."""
    if not gpus:
        return False, "video.backend=auto decodes in software: no NVIDIA GPU here"
    rows = load_measurements() if measurements is None else measurements
    mine = [r for r in rows if r["gpu"] == gpus[0] and r["cores"] >= cores]
    if not mine:
        others = sorted({f"{r['gpu']} ({r['cores']} cores)" for r in rows if not _faster(r)})
        return False, (f"video.backend=auto decodes in software: NVDEC has not been measured on {gpus[0]} with "
                       f"{cores} cores or fewer (caption-bench decode --backend nvdec); it was slower than software "
                       f"on {', '.join(others) or 'every machine measured'}")
    slower = [r["clip"] for r in mine if not _faster(r)]
    if slower:
        return False, (f"video.backend=auto decodes in software: NVDEC measured slower than software on "
                       f"{gpus[0]} ({mine[0]['cores']} cores) for {', '.join(slower)}")
    return True, (f"video.backend=auto decodes with NVDEC: measured faster than software on {gpus[0]} "
                  f"({mine[0]['cores']} cores) for {', '.join(r['clip'] for r in mine)}")
