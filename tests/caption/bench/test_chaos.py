"""`caption-bench chaos` on 20 damaged clips: the real job (subprocess, embedded model) writes one
record per file, never crashes, never hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from caption.settings.config import REPO_ROOT

pytestmark = pytest.mark.slow


def test_twenty_damaged_clips_end_as_twenty_records(tmp_path):
    run = subprocess.run([sys.executable, "-m", "caption.bench", "chaos", "--n", "20", "--seed", "3",
                          "--out", str(tmp_path), "--time-limit", "600"],
                         capture_output=True, text=True, timeout=900,
                         env=os.environ | {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert "| files | records | crashes | hangs | duplicates | lost |" in run.stdout
    assert result["files"] == 20 and len(result["damage"]) == 20
    assert (result["records"], result["crashes"], result["hangs"], result["duplicates"], result["lost"]) == (20, 0, 0, 0, 0), \
        (tmp_path / "job" / "job.log").read_text(errors="replace")[-3000:]
    assert result["tracebacks_in_records"] == 0 and result["ok"] + result["errors"] == 20
