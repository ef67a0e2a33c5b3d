"""A slip is one line and exit status 2, with the closest valid name; a checkpoint that is not what its
preset says is refused before loading; `caption --help` describes every setting and group; the start
lines say what runs, and a folder without videos what it holds; a sweep row that cannot run says why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from caption.settings.schema import documented_keys
from tests.caption.in_process import run_caption
from vidcap_ko.exit_status import EXIT_USAGE

CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")


def _caption(tmp_path, *args):
    return run_caption([*args, f"hydra.run.dir={tmp_path / 'run'}"], env={**os.environ, "HF_HUB_OFFLINE": "1"},
                       cwd=tmp_path)


@pytest.mark.parametrize("slip, said", [
    ("outptu=x.jsonl", "`outptu` is not a setting; did you mean output?"),
    ("+outptu=x.jsonl", "`outptu` is not a setting; did you mean output?"),  # Hydra's own hint leads here
    ("video.num_frame=4", "`video.num_frame` is not a setting; did you mean video.num_frames?"),
    ("model=qwen2_5_vl_7", "`model=qwen2_5_vl_7`: no such model preset; did you mean qwen2_5_vl_7b?"),
    ("sampling=greedyy", "`sampling=greedyy`: no such sampling preset; did you mean greedy?"),
    ("limit=ten", "`limit`: Value 'ten' of type 'str' could not be converted to Integer"),
    ("resume=maybe", "`resume`: Value 'maybe' is not a valid bool"),
    ("tasks=caption", "`tasks` takes a list, e.g. tasks=[caption,keywords]"),
])
def test_a_slip_is_one_line_with_the_closest_name(tmp_path, synth_dir, slip, said):
    done = _caption(tmp_path, f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", slip)
    assert done.returncode == EXIT_USAGE, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"caption: invalid config: {said}" + lines[0].split(said, 1)[1]] and said in lines[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_a_checkpoint_other_than_its_preset_is_refused_before_loading(tmp_path, synth_dir, model_dir):
    other_family = _caption(tmp_path, f"input_dir={synth_dir}", "model=qwen3_vl_8b", f"model.path={model_dir}",
                            "plan_only=true")
    assert other_family.returncode == EXIT_USAGE
    assert ("its config.json builds Qwen2_5_VLForConditionalGeneration, the preset's family qwen3_vl is "
            "Qwen3VLForConditionalGeneration") in other_family.stderr
    other_size = _caption(tmp_path, f"input_dir={synth_dir}", "model=qwen2_5_vl_7b", f"model.path={model_dir}",
                          "plan_only=true")
    assert other_size.returncode == EXIT_USAGE
    assert "num_layers 28 in the preset, text_config.num_hidden_layers 3 in config.json" in other_size.stderr
    assert len(other_size.stderr.strip().splitlines()) == 1


def test_help_describes_every_setting_and_group(tmp_path):
    done = subprocess.run([CAPTION, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    text = done.stdout
    for key, _default, help_text in documented_keys():
        assert f"  {key} = " in text and help_text.split()[0] in text
    for group in ("model", "engine", "gpu", "quant", "lora", "spec", "sampling", "video", "runner"):
        assert f"\n  {group}: " in text and f"    keys ({group}=" in text
    assert "auto (default): The tier this machine is" in text
    assert "video.seek = auto  (auto: from each sampling segment its keyframe" in text


def test_the_start_lines_say_adapter_sampling_and_speculation(job_config, capsys):
    from caption.summary.terminal import print_job_start

    job = job_config(["lora=detailed", "spec=ngram", "sampling=factual"])
    print_job_start(job, 6, 6, 0, [])
    out = capsys.readouterr().out
    assert "decode  sampling factual, adapter detailed, speculative ngram (4 tokens)" in out
    assert "tier    gpu=auto: cpu (no NVIDIA GPU found" in out


def test_a_folder_without_videos_is_said_with_what_it_holds(tmp_path):
    """A wrong input_dir (images, or clips still being copied as .part) is not a silent "0 videos": the start
    lines name what the folder holds and the extensions the job takes; no engine loads for nothing."""
    folder = tmp_path / "footage"
    (folder / "day 1").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg", "day 1/c.mp4.part", ".hidden.mp4"):
        (folder / name).write_bytes(b"x")
    done = _caption(tmp_path, f"input_dir={folder}", f"output={tmp_path / 'o.jsonl'}", "engine=hf", "progress=false")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"note    no video files in {folder} or its subfolders (it holds 2 .jpg file(s), 1 .part file(s)); "
            "the job takes files ending in .3gp, .avi,") in done.stdout
    assert "engine start" not in done.stdout


def test_a_sweep_row_that_cannot_run_says_why():
    from quant.plan import Plan
    from quant.report import sweep_rows

    refused = Plan.refused({"name": "qwen2_5_vl_72b", "family": "qwen2_5_vl"}, {"name": "t4", "dtype": "float16"},
                           "vllm", "147 GB of weights do not fit in 16 GB").to_dict()
    header, [row] = sweep_rows([refused])
    assert row[header.index("fits")] is False
    assert row[header.index("why_not")] == "147 GB of weights do not fit in 16 GB"
