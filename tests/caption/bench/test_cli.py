"""caption-bench: its help lists every benchmark; the harness runs the real `caption` job and writes
results stamped with the machine; `caption-bench gpu` without a GPU stops at once, in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from caption.bench.cli import BENCHMARKS
from caption.settings.config import REPO_ROOT

ENV = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH")))),
                    "HF_HUB_OFFLINE": "1"}


def test_caption_bench_is_an_installed_command_over_the_bench_package():
    meta = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["caption-bench"] == "caption.bench.cli:main"
    assert "caption*" in meta["tool"]["setuptools"]["packages"]["find"]["include"]  # caption/bench/ is installed
    assert not (REPO_ROOT / "bench").exists(), "benchmarks live in caption/bench/, training and tools in scripts/"


def test_help_lists_every_benchmark_with_its_one_line_description():
    run = subprocess.run([sys.executable, "-m", "caption.bench", "--help"], capture_output=True, text=True, env=ENV, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: caption-bench")
    help_text = " ".join(run.stdout.split())
    for name, module in BENCHMARKS.items():
        first_words = " ".join(module.__doc__.split()[:4])
        assert f" {name} " in help_text and first_words in help_text, name
    for cited in ("engines", "decode", "memory", "runners", "prefix", "spec", "quant", "sampling", "lora", "meteor",
                  "compile", "cpu-runtime", "chaos", "scaleout", "decode-memory", "installers", "gpu"):
        assert cited in BENCHMARKS


def test_the_caption_job_runs_in_the_harness_alone():
    """"Run `caption` in a subprocess and read its summary" is one function (caption.bench.harness.run_caption)."""
    copies = [path.name for path in (REPO_ROOT / "caption" / "bench").glob("*.py")
              if '"-m", "caption"' in path.read_text(encoding="utf-8")]
    assert copies == ["harness.py"]


@pytest.mark.slow
def test_the_harness_runs_the_real_job_and_writes_stamped_results(tmp_path, synth_dir):
    from PIL import Image

    from caption.bench.harness import bars, run_caption, write_results

    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", clips)
    job = run_caption(clips, tmp_path / "job", engine="hf")
    assert job.exit_code == 0 and not job.hung and job.wall_s > 0
    assert job.summary["videos_run"] == 2 and job.summary["engine"] == "hf" and job.peak_rss_gib > 0
    assert [r["status"] for r in job.records()] == ["ok", "ok"]

    lines = ["| engine | videos/s |", "|---|---|", f"| hf | {job.summary['videos_per_s']} |"]
    stamp = write_results(tmp_path / "out", "test", {"summary": job.summary}, lines,
                          bars(["hf"], {"videos/s": [job.summary["videos_per_s"]]}, "videos/s"), "two clips")
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert result["benchmark"] == "test" and result["summary"]["videos_run"] == 2 and result["machine"] == stamp
    assert set(stamp) >= {"cpu_model", "cores", "memory_bandwidth_gbs", "load_average", "git_commit", "date_utc"}
    assert stamp["cpu_model"] and stamp["cores"] >= 1 and stamp["memory_bandwidth_gbs"] > 0
    assert len(stamp["git_commit"]) >= 40 and stamp["date_utc"].endswith("Z")
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| hf |" in markdown and stamp["cpu_model"] in markdown and stamp["git_commit"][:12] in markdown
    with Image.open(tmp_path / "out" / "results.png") as png:
        assert png.format == "PNG" and png.size[0] > 100 and png.size[1] > 100


def test_gpu_without_a_gpu_stops_in_one_line_with_status_2(tmp_path):
    no_gpu = ENV | {"PATH": str(tmp_path)}  # no nvidia-smi on it, whatever this machine has
    run = subprocess.run([sys.executable, "-m", "caption.bench", "gpu", "--out", str(tmp_path / "report")],
                         capture_output=True, text=True, env=no_gpu, timeout=60)
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1
    assert "no NVIDIA GPU" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "report").exists()


def test_decode_on_nvdec_without_a_gpu_stops_in_one_line_with_status_2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "caption.bench", "decode", "--backend", "nvdec", "--out", str(tmp_path / "d")],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1
    assert "could not open a CUDA device" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "d").exists()  # no clip made, nothing measured


def test_gpu_runs_with_what_is_installed_and_says_what_it_skipped(tmp_path):
    """Without vLLM: pruning skipped (vLLM's), the engine rows transformers' only, the jobs on engine=hf; an
    installed package has no tests to run; the report names the driver and the versions."""
    import argparse

    from caption.bench import gpu

    args = argparse.Namespace(skip=["decode"], out=tmp_path, n=8, tier="h100")
    versions = {"gpus": ["NVIDIA H200, 580.159.04, 143771 MiB"], "torch": "2.11.0+cu130", "transformers": "5.17.0",
                "vllm": None, "bitsandbytes": "0.50.2", "av": "18.1.0", "checkout": False}
    skip = gpu.skipped_steps(args, versions)
    assert skip == {"decode": "--skip", "prune": skip["prune"], "nvdec-test": skip["nvdec-test"]}
    assert "vLLM" in skip["prune"] and "checkout" in skip["nvdec-test"]
    assert gpu.skipped_steps(args, versions | {"vllm": "0.32.0", "checkout": True}) == {"decode": "--skip"}
    lines = gpu.report([], tmp_path, versions, skip)
    assert "580.159.04" in lines[0] and "torch 2.11.0+cu130" in lines[0] and "transformers 5.17.0" in lines[0]
    assert "vLLM not installed" in lines[0]
    assert any(line.startswith("skipped prune: needs vLLM") for line in lines)
    feed = {"step": "feed-processor-auto-ahead-auto", "exit_code": 0, "wall_s": 40.2, "videos_per_s": 2.41,
            "engine_idle_fraction": 0.0392, "first_batch_wait_s": {"requests": 0.51, "processor": 0.33},
            "peak_rss_gib": 7.3}
    rows = [line for line in gpu.report([feed, {**feed, "step": "prune-7b", "first_batch_wait_s": None}],
                                        tmp_path, versions, skip) if line.startswith("| ")]
    assert rows[1:] == ["| feed-processor-auto-ahead-auto | 0 | 40.2 | 2.41 | 3.9% | 0.51 + 0.33 | 7.3 |",
                        "| prune-7b | 0 | 40.2 | 2.41 | 3.9% | - | 7.3 |"]


def test_the_gpu_steps_without_vllm_ask_for_transformers(tmp_path, monkeypatch):
    """The commands each step would run, recorded instead of run (the steps themselves need a GPU)."""
    import argparse

    from caption.bench import gpu

    ran = []
    monkeypatch.setattr(gpu, "bench_step", lambda name, arguments, out: ran.append((name, arguments)) or {})
    monkeypatch.setattr(gpu, "job_step", lambda name, clips, out, overrides: ran.append((name, overrides)) or {})
    monkeypatch.setattr(gpu, "engine_clips", lambda n: tmp_path)
    monkeypatch.setattr(gpu, "bench_model", lambda model: ["model=random_qwen2_5_vl_7b"])
    args = argparse.Namespace(skip=[], out=tmp_path, n=8, tier="h100")
    skip = {"prune": "needs vLLM", "nvdec-test": "no checkout"}
    gpu.run_steps(args, "h100", skip, vllm=False)
    steps = dict(ran)
    assert "prune-7b" not in steps and "nvdec-test" not in steps
    assert steps["engines-7b"][-2:] == ["--engines", "hf"]
    assert "quant=nf4" in steps["nf4"] and "engine=hf" in steps["nf4"]
    for name in ("rehearsal-t4", "rehearsal-h100", "job-auto", "job-nvdec"):
        assert steps[name].count("engine=hf") == 1, (name, steps[name])
