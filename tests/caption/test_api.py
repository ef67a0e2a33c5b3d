"""The Python API: the command's job from a script (no `__main__` guard needed) and from `python -c`;
its records are the command's. The scripts run as processes of their own, forked with their imports done
(tests/caption/warm_process.py)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest

from caption import ConfigError
from caption.api import Captioner, overrides_of
from caption.settings.config import REPO_ROOT
from tests.caption.warm_process import WARM_ENV, run_warm_python

pytestmark = pytest.mark.slow
ENV = WARM_ENV  # one environment, so one warm server per test process (tests/caption/warm_process.py)


def _captions(path):
    return {r["video"]: r["caption"] for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="module")
def clips(tmp_path_factory, synth_dir):
    folder = tmp_path_factory.mktemp("api-clips")
    for i in range(3):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    return folder


@pytest.fixture
def cli_captions(tmp_path, clips, compose_config, vllm_engine):
    """The command's captions of the clips: its job (caption/cli.py runs run_job on the composed config) on
    the session's engine; tests/caption/test_job_outcomes.py checks that the command itself gives these."""
    from caption.job import run_job

    out = tmp_path / "cli.jsonl"
    run_job(compose_config([f"input_dir={clips}", f"output={out}", "progress=false", "references=null"]),
            engine=vllm_engine)
    return _captions(out)


def test_a_script_without_a_main_guard_runs_once_and_gets_the_commands_records(tmp_path, clips, cli_captions):
    script = tmp_path / "notebook_like.py"
    script.write_text(textwrap.dedent(f"""
        import json
        from caption import Captioner

        print("script body ran")
        with Captioner(model="vidcap_ko_tiny", video__num_frames=8, references=None) as captioner:
            streamed = {{r["video"]: r["caption"] for r in captioner.caption({str(clips)!r})}}
            two = [r["video"] for r in captioner.caption([{str(clips / 'clip_00002.mp4')!r},
                                                          {str(clips / 'clip_00000.mp4')!r}])]
            summary = captioner.summary
        print(json.dumps({{"streamed": streamed, "two": sorted(two), "status": summary["exit_status"],
                          "output": summary["output"]}}))
    """))
    done = run_warm_python([str(script)], env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("script body ran") == 1  # decoder and engine processes did not run it again
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["streamed"] == cli_captions and result["status"] == 0
    assert result["two"] == ["clip_00000.mp4", "clip_00002.mp4"]
    assert result["output"] is None  # the records were the call's only: no file is named that the close removes
    assert "Traceback" not in done.stderr and "Loading safetensors" not in done.stdout + done.stderr  # in the log


def test_python_c_captions_a_folder(tmp_path, clips, cli_captions):
    code = (f"from caption import caption_folder; s = caption_folder({str(clips)!r}, {str(tmp_path / 'c.jsonl')!r}, "
            "engine='vllm', references=None); print(s['captions_ok'])")
    done = run_warm_python(["-c", code], env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "3"
    assert _captions(tmp_path / "c.jsonl") == cli_captions


def test_a_slip_fails_when_the_captioner_is_made(tmp_path):
    with pytest.raises(ConfigError, match="`sampling=greedyy`: no such sampling preset; did you mean greedy"):
        Captioner(sampling="greedyy")
    assert overrides_of({"video__num_frames": 16, "output": "/a b/c.jsonl", "tasks": ["caption", "motion"],
                         "limit": None, "resume": False}) == \
        ["video.num_frames=16", "output='/a b/c.jsonl'", "tasks=[caption,motion]", "limit=null", "resume=false"]


def test_what_a_call_names_is_refused_as_a_setting(tmp_path, clips):
    """A call's videos and output are its arguments: given as settings they were overridden by the call's own
    (records went to a temporary file, not `output=`), or overrode them. Refused, saying where they go."""
    with pytest.raises(ConfigError, match=r"`output` is not a setting here: .*captioner.caption\(videos, output="):
        Captioner(output=str(tmp_path / "mine.jsonl"))
    with pytest.raises(ConfigError, match="`input_dir` is not a setting here: the videos are a call's first"):
        Captioner(overrides=[f"input_dir={clips}"])
    captioner = Captioner(engine="hf")
    try:
        with pytest.raises(ConfigError, match="`input_dir` is not a setting here"):
            next(captioner.caption(clips, input_dir=str(tmp_path)))
    finally:
        captioner.close()
    assert not (tmp_path / "mine.jsonl").exists()


def test_a_model_that_does_not_load_raises_in_one_line_at_the_first_call(tmp_path, clips, model_dir):
    from caption import EngineDidNotLoad

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:4096])  # a copy that stopped early
    with Captioner(engine="hf", model__path=str(model), references=None) as captioner:
        with pytest.raises(EngineDidNotLoad, match=f"the hf engine could not load the model {re.escape(str(model))}: "):
            list(captioner.caption(clips, output=tmp_path / "o.jsonl"))


def _python_examples() -> list[tuple[str, str]]:
    """(page, code) of every Python example that makes a Captioner, in the README and the docs' API page."""
    found = []
    for page in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "captioning.md"):
        found += [(page.name, code) for code in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
                  if "Captioner(" in code]
    return found


@pytest.mark.parametrize("page, code", _python_examples(), ids=lambda v: v if v.endswith(".md") else "")
def test_the_python_example_prints_each_record_as_it_comes(tmp_path, clips, synth_dir, page, code):
    """The example run as written, as a script, from a folder holding `clips/`: what it prints reaches its
    stdout (the library's own output goes to the log, only while the library runs)."""
    shutil.copytree(clips, tmp_path / "clips")
    lines = (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:3]
    (tmp_path / "clips" / "references.jsonl").write_text("".join(lines), encoding="utf-8")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = run_warm_python([str(script)], env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith("clip_")]
    assert sorted(video for video, _ in printed) == ["clip_00000.mp4", "clip_00001.mp4", "clip_00002.mp4"]
    assert all(re.search("[\uac00-\ud7a3]", caption) for _, caption in printed)  # each with its Korean caption
    assert "Loading" not in done.stdout and "INFO" not in done.stdout  # the library's lines went to the log
