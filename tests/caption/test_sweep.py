"""Real Hydra multirun sweeps: every job resolves its plan; one table lands in the sweep folder."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from tests.caption.in_process import run_caption

CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")


def _sweep(tmp_path, *overrides, start_up_env=None):
    """The sweep in this process (tests/caption/in_process.py), or in a process of its own where
    `start_up_env` changes what its start-up does (a sitecustomize on PYTHONPATH)."""
    sweep = tmp_path / "sweep"
    command = ["-m", *overrides, f"hydra.sweep.dir={sweep}", "progress=false"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(start_up_env or {})}
    if start_up_env is None:
        proc = run_caption(command, cwd=tmp_path, env=env)
    else:
        proc = subprocess.run([CAPTION, *command], capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return sweep, proc.stdout


def test_gpu_tier_sweep_plans_every_tier(tmp_path):
    sweep, stdout = _sweep(tmp_path, "gpu=t4,l4,a100,h100", "plan_only=true", "model=qwen2_5_vl_7b")
    rows = list(csv.DictReader(open(sweep / "sweep.csv")))
    assert [r["tier"] for r in rows] == ["t4", "l4", "a100", "h100"]
    # the rule wants AWQ on an L4, and the bf16 preset has no AWQ weights: that job is refused, with why
    assert [r["engine"] for r in rows] == ["hf", "auto", "vllm", "vllm"]
    assert [r["fits"] for r in rows] == ["yes", "no", "yes", "yes"]
    assert rows[0]["dtype"] == "float16" and rows[3]["dtype"] == "bfloat16"
    assert (sweep / "sweep.md").read_text().count("\n") == 2 + 4
    for job in range(4):
        plan = json.loads((sweep / str(job) / "result.json").read_text())["plan"]
        assert plan["reasons"] and (plan["quantization"].get("why") or not plan["fits"])
    refused = json.loads((sweep / "1" / "result.json").read_text())["plan"]
    assert "model=qwen2_5_vl_7b_awq" in refused["reasons"][0]
    assert "sweep summary (4 jobs)" in stdout


def test_gpu_count_sweep_plans_tensor_parallel_and_replicas(tmp_path):
    sweep, _ = _sweep(tmp_path, "gpu.count=1,2,4", "plan_only=true", "model=qwen2_5_vl_72b,qwen2_5_vl_72b_awq",
                      "gpu=h100")
    rows = {(r["model"], r["job"]): r for r in csv.DictReader(open(sweep / "sweep.csv"))}
    table = {(model.endswith("awq"), job.split("gpu.count=")[1].split()[0]): (r["fits"], r["tensor_parallel"],
                                                                             r["replicas"])
             for (model, job), r in rows.items()}
    assert table == {(False, "1"): ("no", "1", "1"), (False, "2"): ("no", "1", "2"), (False, "4"): ("yes", "4", "1"),
                     (True, "1"): ("yes", "1", "1"), (True, "2"): ("yes", "2", "1"), (True, "4"): ("yes", "2", "2")}


@pytest.mark.slow
@pytest.mark.w4a16
def test_quantization_sweep_really_runs_and_measures(tmp_path, two_clips_with_references):
    sweep, _ = _sweep(tmp_path, "quant=none,gptq", "gpu=cpu", f"input_dir={two_clips_with_references}")
    rows = list(csv.DictReader(open(sweep / "sweep.csv")))
    assert [r["quant"] for r in rows] == ["none", "gptq"]
    for row in rows:
        assert float(row["videos_per_s"]) > 0 and float(row["peak_rss_gib"]) > 0
        assert 0 <= float(row["meteor"]) <= 1
    for job in range(2):
        assert (sweep / str(job) / "captions.jsonl").read_text().count("\n") == 2


@pytest.mark.slow
def test_quantization_sweep_on_a_cpu_without_avx512_refuses_4bit_and_runs_the_rest(tmp_path,
                                                                                  two_clips_with_references):
    """The same sweep as a CPU without AVX-512 runs it (any machine): the GPTQ job becomes a refused row
    saying why and what to use instead, before loading; the other job runs; the sweep exits 0."""
    from caption.settings.config import REPO_ROOT

    no_avx512 = REPO_ROOT / "tests" / "support" / "no_avx512"  # see its sitecustomize.py
    sweep, _ = _sweep(tmp_path, "quant=none,gptq", "gpu=cpu", f"input_dir={two_clips_with_references}",
                      start_up_env={"PYTHONPATH": os.pathsep.join([str(no_avx512), os.environ.get("PYTHONPATH", "")])})
    rows = list(csv.DictReader(open(sweep / "sweep.csv")))
    assert [(r["quant"], r["fits"]) for r in rows] == [("none", "yes"), ("", "no")]
    assert float(rows[0]["videos_per_s"]) > 0 and 0 <= float(rows[0]["meteor"]) <= 1
    refused = json.loads((sweep / "1" / "result.json").read_text())["plan"]
    assert "cpu_gemm_wna16" in refused["reasons"][0] and "_C_AVX2" in refused["reasons"][0]
    assert "quant=none" in refused["reasons"][0]
    assert not (sweep / "1" / "captions.jsonl").exists()  # refused before anything loaded or wrote
