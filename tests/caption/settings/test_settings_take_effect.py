"""Settings take effect or are refused: a key the chosen presets would not read (the schemas say which:
caption/settings/unread.py), and a CUDA tier on a machine without its GPU, stop the real command and the Python
API before anything loads, in one line with what to add (exit status 2)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from caption import ConfigError
from caption.api import Captioner
from quant import presets
from quant.devices import detect_devices, pick_tier
from tests.caption.in_process import run_caption

CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


@pytest.fixture
def clips(tmp_path, synth_dir):
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", folder)
    return folder


def _caption(tmp_path, *overrides):
    return run_caption([*overrides, "progress=false", f"hydra.run.dir={tmp_path / 'run'}"], env=ENV, cwd=tmp_path)


def _refused(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0].startswith("caption: invalid config: ")
    return lines[0]


@pytest.mark.parametrize("given, fix", [
    (["video.fps=1"], "use `video=fps video.fps=1`"),
    (["video=fps", "video.num_frames=4"], "use `video=uniform video.num_frames=4`"),
    (["runner.actors=2"], "use `runner=ray runner.actors=2`"),
    (["spec.prompt_lookup_max=3"], "use `spec=ngram spec.prompt_lookup_max=3`"),
    (["engine=vllm", "engine.batch_size=4"], "use `engine=hf engine.batch_size=4`"),
    (["sampling.top_p=0.5"], "e.g. `sampling=balanced sampling.top_p=0.5`"),
    (["video.segment_stride_s=5"], "add `video.segments=fixed`"),
])
def test_a_key_the_presets_do_not_read_is_refused_with_the_fix(tmp_path, clips, given, fix):
    out = tmp_path / "out.jsonl"
    line = _refused(_caption(tmp_path, f"input_dir={clips}", f"output={out}", *given))
    assert f"`{given[-1]}` does nothing here" in line and fix in line
    assert not out.exists()
    with pytest.raises(ConfigError, match="does nothing here"):  # the API, in the same words
        Captioner(overrides=given)


def test_the_fix_runs_and_a_sweep_warns_instead(tmp_path, clips):
    assert _caption(tmp_path, f"input_dir={clips}", "video=fps", "video.fps=1", "plan_only=true").returncode == 0
    sweep = tmp_path / "sweep"
    done = run_caption(["-m", "video=uniform,fps", "video.fps=1", "plan_only=true", f"hydra.sweep.dir={sweep}"],
                       env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [json.loads((sweep / job / "result.json").read_text())["plan"]["warnings"] for job in ("0", "1")]
    assert any("`video.fps=1` does nothing here" in w for w in warnings[0])
    assert not any("does nothing" in w for w in warnings[1])


def test_a_call_with_a_key_its_presets_do_not_read_is_refused_before_an_engine_loads(clips):
    with Captioner(engine="hf") as captioner:
        with pytest.raises(ConfigError, match=r"`video.max_frames=4` does nothing here.*video=fps"):
            next(captioner.caption(str(clips), video__max_frames=4))
        assert captioner.engine is None


def _is_a_t4_machine() -> bool:
    devices = detect_devices()
    return bool(devices) and pick_tier(devices, {t: presets.load("gpu", t) for t in presets.tiers()})[0] == "t4"


@pytest.mark.skipif(_is_a_t4_machine(), reason="this machine's GPU is a T4: gpu=t4 runs here")
def test_a_cuda_tier_without_its_gpu_runs_only_as_a_plan(tmp_path, clips):
    out = tmp_path / "out.jsonl"
    line = _refused(_caption(tmp_path, f"input_dir={clips}", f"output={out}", "gpu=t4"))
    assert "`gpu=t4` plans for an NVIDIA T4" in line and "plan_only=true" in line and "gpu=auto" in line
    assert not out.exists()
    plan = _caption(tmp_path, "gpu=t4", "plan_only=true", "model=qwen2_5_vl_7b")
    assert plan.returncode == 0 and "tier                   t4" in plan.stdout
    with pytest.raises(ConfigError, match="`gpu=t4` plans for an NVIDIA T4"):
        Captioner(gpu="t4")
