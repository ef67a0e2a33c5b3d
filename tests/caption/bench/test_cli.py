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
    job = {**feed, "step": "job-4k-nvdec", "summary": {"stages_s": {"engine_step": 25.4}, "decode_s_total": 44.8,
                                                       "videos_run": 32}}
    rows = [line for line in gpu.report([feed, {**feed, "step": "prune-7b", "first_batch_wait_s": None}, job],
                                        tmp_path, versions, skip) if line.startswith("| ")]
    assert rows[1:] == ["| feed-processor-auto-ahead-auto | 0 | 40.2 | 2.41 | 3.9% | 0.51 + 0.33 | - | - | 7.3 |",
                        "| prune-7b | 0 | 40.2 | 2.41 | 3.9% | - | - | - | 7.3 |",
                        "| job-4k-nvdec | 0 | 40.2 | 2.41 | 3.9% | 0.51 + 0.33 | 25.4 | 1.4 | 7.3 |"]


def test_the_gpu_steps_without_vllm_ask_for_transformers(tmp_path, monkeypatch):
    """The commands each step would run, recorded instead of run (the steps themselves need a GPU); the steps
    so far are on disk after each one."""
    import argparse

    from caption.bench import gpu

    ran, written = [], []

    def step(name, *rest):
        saved = tmp_path / "steps.json"
        written.append(json.loads(saved.read_text()) if saved.exists() else [])
        ran.append((name, rest[-1]))
        return {"step": name}

    monkeypatch.setattr(gpu, "bench_step", lambda name, arguments, out: step(name, arguments))
    limits = []
    monkeypatch.setattr(gpu, "job_step", lambda name, clips, out, overrides, limit_s: limits.append(limit_s) or step(
        name, clips, overrides))
    monkeypatch.setattr(gpu, "bench_model", lambda model: ["model=random_qwen2_5_vl_7b"])
    args = argparse.Namespace(skip=[], out=tmp_path, n=8, tier="h100", few_decoders=3, job_limit=123.0)
    skip = {"prune": "needs vLLM", "nvdec-test": "no checkout"}
    inputs = gpu.Inputs(feed=tmp_path / "feed", engine=tmp_path / "engines", footage=tmp_path / "4k")
    rows = gpu.run_steps(args, "h100", skip, False, inputs)
    steps = dict(ran)
    assert "prune-7b" not in steps and "nvdec-test" not in steps
    assert steps["engines-7b"][-2:] == ["--engines", "hf"]
    assert "quant=nf4" in steps["nf4"] and "engine=hf" in steps["nf4"]
    for name in ("rehearsal-t4", "rehearsal-h100", "job-4k-auto", "job-4k-nvdec", "static-cache-job-true"):
        assert steps[name].count("engine=hf") == 1, (name, steps[name])
    assert steps["static-cache-job-false"][-1] == "engine.compile_static_cache=false"
    assert steps["static-cache-job-true"][:-1] == steps["static-cache-job-false"][:-1]
    assert [name for name, _ in ran if name.startswith("job-4k")] == [
        "job-4k-auto", "job-4k-nvdec", "job-4k-auto-3-decoders", "job-4k-nvdec-3-decoders"]
    assert steps["job-4k-nvdec-3-decoders"][-2:] == ["video.backend=nvdec", "video.workers=3"]
    assert len(limits) == 14 and set(limits) == {123.0}  # every job: feed 3, compiled or not 2, nf4, 4 tiers, NVDEC 4
    # the NVDEC job's last row began with every earlier step's rows on disk
    assert written[-1] == [{"step": name} for name, _ in ran[:-4]] and written[0] == []
    assert json.loads((tmp_path / "steps.json").read_text()) == rows == [{"step": name} for name, _ in ran]


def test_the_gpu_checks_make_only_what_their_steps_need(tmp_path, monkeypatch):
    import argparse

    from caption.bench import gpu

    made = []
    monkeypatch.setattr(gpu, "bench_model", lambda model: made.append(model) or [])
    monkeypatch.setattr(gpu, "feed_clips", lambda n: made.append(("feed", n)) or tmp_path / "feed")
    monkeypatch.setattr(gpu, "engine_clips", lambda n: made.append(("engines", n)) or tmp_path / "engines")
    monkeypatch.setattr(gpu, "footage_set", lambda name, n, seed, footage: made.append((name, n, footage)) or tmp_path)
    args = argparse.Namespace(n=8, footage_n=5)
    everything_but = {step: "--skip" for step in gpu.STEPS}
    inputs = gpu.prepare(args, everything_but | {})
    assert (inputs, made) == (gpu.Inputs(None, None, None), [])
    inputs = gpu.prepare(args, {k: v for k, v in everything_but.items() if k != "nvdec-job"})
    assert inputs == gpu.Inputs(None, None, tmp_path) and sorted(map(str, made)) == sorted(map(str, [
        "7b", ("4k-hevc", 5, gpu.FOOTAGE_4K)]))
    assert "3840x2160" in gpu.FOOTAGE_4K and "hevc" in gpu.FOOTAGE_4K
    made.clear()
    inputs = gpu.prepare(args, {k: v for k, v in everything_but.items() if k != "static-cache-job"})
    assert inputs == gpu.Inputs(tmp_path / "feed", None, None) and sorted(map(str, made)) == sorted(
        map(str, ["7b", ("feed", 8)]))
