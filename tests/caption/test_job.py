"""The caption job end to end (real Hydra, decord, vLLM/transformers): records, errors, resume."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from caption.job import run_job
from caption.settings.config import REPO_ROOT
from tests.caption.browser import dump_dom
from tests.caption.in_process import run_caption

pytestmark = pytest.mark.slow


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def clips_with_bad_files(tmp_path, synth_dir):
    folder = tmp_path / "clips"
    (folder / "sub").mkdir(parents=True)
    for i in range(4):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder / ("sub" if i % 2 else ".") / f"clip_{i:05d}.mp4")
    (folder / "empty.mp4").write_bytes(b"")
    (folder / "notes.mp4").write_text("this is a text file with a video name")
    data = (synth_dir / "clip_00004.mp4").read_bytes()
    (folder / "truncated.mp4").write_bytes(data[:200])
    return folder


def test_job_writes_one_record_per_video_and_survives_bad_files(compose_config, clips_with_bad_files,
                                                                tmp_path, vllm_engine_with_counters):
    out = tmp_path / "captions.jsonl"
    cfg = compose_config([f"input_dir={clips_with_bad_files}", f"output={out}", "progress=false"])
    summary = run_job(cfg, engine=vllm_engine_with_counters)
    records = {r["video"]: r for r in _records(out)}
    assert sorted(records) == ["clip_00000.mp4", "clip_00002.mp4", "empty.mp4", "notes.mp4",
                               "sub/clip_00001.mp4", "sub/clip_00003.mp4", "truncated.mp4"]
    for key in ("clip_00000.mp4", "sub/clip_00001.mp4"):
        r = records[key]
        assert r["status"] == "ok" and r["error"] is None and r["caption"]
        assert r["frames"] == 8 and r["prompt_tokens"] > 16 and r["output_tokens"] > 3
        assert r["model"] == "vidcap-ko-tiny" and r["engine"] == "vllm" and r["adapter"] is None
        assert r["decode_s"] >= 0 and r["generate_s"] > 0
    assert "empty file" in records["empty.mp4"]["error"]
    for key in ("notes.mp4", "truncated.mp4", "empty.mp4"):
        assert records[key]["status"] == "error" and records[key]["error"].startswith("decode: ")
    assert summary["videos_found"] == 7 and summary["captions_ok"] == 4 and summary["videos_failed"] == 3
    assert summary["decode_workers"] == min(2, len(os.sched_getaffinity(0)))  # video.workers=auto on the cpu tier
    assert {f["video"] for f in summary["failures"]} == {"empty.mp4", "notes.mp4", "truncated.mp4"}
    saved = json.loads((tmp_path / "captions.jsonl.summary.json").read_text())
    assert saved["captions_ok"] == 4 and saved["prefix_cache_queries"] > 0


def test_resume_after_a_crash_neither_loses_nor_repeats(compose_config, clips_with_bad_files, tmp_path,
                                                        hf_engine):
    out = tmp_path / "captions.jsonl"
    overrides = [f"input_dir={clips_with_bad_files}", f"output={out}", "engine=hf", "progress=false"]
    run_job(compose_config(overrides), engine=hf_engine)
    first = _records(out)
    # simulate kill -9: the last two records lost, the one before cut mid-line
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2], encoding="utf-8")
    summary = run_job(compose_config(overrides), engine=hf_engine)
    assert summary["videos_skipped_resume"] == len(first) - 3 and summary["videos_run"] == 3
    again = _records(out)
    assert sorted(r["video"] for r in again) == sorted(r["video"] for r in first)
    assert {r["video"]: r["caption"] for r in again} == {r["video"]: r["caption"] for r in first}
    # nothing left to do: the engine is not even needed
    summary = run_job(compose_config(overrides), engine=None)
    assert summary["videos_run"] == 0 and len(_records(out)) == len(first)


def test_several_tasks_per_video_and_retrying_errors(compose_config, clips_with_bad_files, tmp_path,
                                                     hf_engine):
    out = tmp_path / "captions.jsonl"
    overrides = [f"input_dir={clips_with_bad_files}", f"output={out}", "engine=hf", "progress=false",
                 "tasks=[caption,keywords]"]
    run_job(compose_config(overrides), engine=hf_engine)
    records = _records(out)
    assert len(records) == 2 * 7
    keywords = [r for r in records if r["task"] == "keywords" and r["status"] == "ok"]
    assert len(keywords) == 4 and all(r["caption"].count(",") == 5 for r in keywords)
    (clips_with_bad_files / "notes.mp4").unlink()
    shutil.copy(clips_with_bad_files / "clip_00000.mp4", clips_with_bad_files / "notes.mp4")
    run_job(compose_config(overrides + ["retry_errors=true"]), engine=hf_engine)
    records = _records(out)
    keys = [(r["video"], r["task"]) for r in records]
    assert len(keys) == len(set(keys)) == 2 * 6 + 2  # still one record per key
    assert {r["status"] for r in records if r["video"] == "notes.mp4"} == {"ok"}
    # the broken file's error records were of another file (the text one): kept apart, saying so
    superseded = _records(tmp_path / "captions.superseded.jsonl")
    assert {(r["video"], r["status"]) for r in superseded} == {("notes.mp4", "error")}
    assert all("it was" in r["superseded_because"] for r in superseded)


def test_the_console_script_runs_the_default_job(tmp_path, synth_dir):
    """`caption input_dir=... output=...` exactly as a user types it (vLLM on CPU, defaults)."""
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    out = tmp_path / "out.jsonl"
    # a temporary folder of its own, to see what the job leaves there; torch's compiled kernels where they are
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(temporary), "TORCHINDUCTOR_CACHE_DIR": inductor}
    caption = os.path.join(os.path.dirname(sys.executable), "caption")
    proc = subprocess.run([caption, f"input_dir={folder}", f"output={out}", "progress=false",
                           f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "caption job summary" in proc.stdout
    assert [r["status"] for r in _records(out)] == ["ok", "ok"]
    # a quiet terminal: the plan, the summary and where the log went; vLLM's and the libraries' lines are
    # in the log (and the clips are not caption-synth's: no references.jsonl, so the plan warns)
    terminal = proc.stdout + proc.stderr
    for noise in ("WARNING", "Warning", "Triton", "LD_PRELOAD", "NUMA", "Loading safetensors"):
        assert noise not in terminal, noise
    assert len(proc.stdout.splitlines()) <= 20
    assert not list(temporary.iterdir())  # vLLM's rendezvous file (vllm_dist_*) was left there by every job
    log = tmp_path / "run" / "caption.log"
    assert f"log     {log}" in proc.stdout and f"full log: {log}" in proc.stdout
    assert "WARNING" in log.read_text() and "Loading safetensors" in log.read_text()
    # the plan's warning lives where the results live: terminal (start and summary), log, summary, records, page
    said = "vidcap-ko-tiny knows only caption-synth clips"
    assert said in proc.stderr and f"warning: {said}" in proc.stdout and "model=qwen2_5_vl_7b model.path=" in proc.stdout
    assert said in log.read_text()
    assert all(any(said in w for w in r["warnings"]) for r in _records(out))
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert any(said in w for w in summary["plan_warnings"])
    page = tmp_path / "page.html"
    from caption.report.cli import main as report_main

    assert report_main([str(out), "--out", str(page), "--workers", "0"]) == 0
    dom = dump_dom(page, tmp_path / "chromium")
    assert said in dom.ids["warnings"]["text"] and "hidden" not in dom.ids["warnings"]["attrs"]


def test_verbose_brings_every_line_back_to_the_terminal(tmp_path, synth_dir):
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", folder)
    proc = run_caption([f"input_dir={folder}", f"output={tmp_path / 'o.jsonl'}", "verbose=true",
                        f"hydra.run.dir={tmp_path / 'run'}"], env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Loading safetensors" in proc.stdout + proc.stderr and "prefix_cache_hit_rate" in proc.stdout
    assert not (tmp_path / "run" / "caption.log").exists()


def test_the_plan_warns_only_when_the_embedded_model_meets_footage_it_does_not_know(compose_config, synth_dir,
                                                                                     tmp_path):
    from caption.planning import load_planned_job

    synthetic = load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'a.jsonl'}"]))
    assert synthetic.caption_warnings == () and synthetic.plan.warnings == []
    real = tmp_path / "footage"
    real.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", real / "street.mp4")
    job = load_planned_job(compose_config([f"input_dir={real}", f"output={tmp_path / 'b.jsonl'}"]))
    assert len(job.caption_warnings) == 1 and "vidcap-ko-tiny knows only caption-synth clips" in job.caption_warnings[0]
    assert job.plan.warnings == list(job.caption_warnings)  # the summary's plan_warnings carry it too


def test_a_bad_config_fails_before_any_model_loads(tmp_path, synth_dir):
    proc = run_caption([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "tasks=[poem]",
                        f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO_ROOT)
    assert proc.returncode == 2
    assert "invalid config: `tasks=poem` is not valid; choose one of: caption, keywords, motion" in proc.stderr
    assert "vllm" not in proc.stderr.lower() and "Loading" not in proc.stdout


def test_adapter_records_name_their_adapter_and_are_scored(compose_config, tmp_path, two_clips_with_references):
    folder = two_clips_with_references
    out = tmp_path / "out.jsonl"
    summary = run_job(compose_config([f"input_dir={folder}", f"output={out}", "progress=false", "engine=hf",
                                      "lora=detailed", "lora.include_base=true"]))
    records = _records(out)
    assert sorted((r["video"], r["adapter"] or "") for r in records) == [
        ("clip_00000.mp4", ""), ("clip_00000.mp4", "detailed"),
        ("clip_00001.mp4", ""), ("clip_00001.mp4", "detailed")]
    assert summary["meteor[detailed]"] > 0.3 and summary["meteor"] > 0.5
