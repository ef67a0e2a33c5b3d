"""The Python API's records say the settings that ran, as the command's do: one Captioner, a call per
config group that needs another engine, each call's records compared with the `caption` command's for
the same settings, setting by setting and caption by caption."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from caption.settings.config import REPO_ROOT

pytestmark = pytest.mark.slow
BASE = ["engine=hf", "video.workers=0", "references=null"]  # the Captioner's own settings, the command's too


def _variants(model_copy) -> list[tuple[str, list[str]]]:
    """(config group, the overrides of one call) in call order; each needs another engine than the call
    before it, except the second, which repeats the first (the engine is kept)."""
    return [
        ("base", []),
        ("base again", []),
        ("lora", ["lora=detailed"]),
        ("gpu", ["gpu.dtype=bfloat16"]),
        ("quant", ["quant=int8"]),
        ("sampling", ["sampling=creative"]),
        ("video", ["video.num_frames=4"]),
        ("engine options", ["engine.batch_size=2"]),
        ("model", [f"model.path={model_copy}"]),
        ("engine", ["engine=vllm"]),
        ("spec", ["engine=vllm", "spec=ngram"]),
        ("runner", ["runner=ray", "runner.actors=1", "runner.engine_cpus=1", "runner.decode_cpus=0.5"]),
    ]


def _records(path):
    return {(r["video"], r["task"], r["adapter"]): r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


# Both jobs on one local cluster, started here as a notebook starts one (caption/runners/ray.py uses the
# caller's cluster as it is); tests/caption/runners/test_runner_ray.py has the job start its own
RAY_SCRIPT = textwrap.dedent("""
    import json, sys
    import ray
    from caption import Captioner
    from caption.api import compose_config
    from caption.job import run_job

    folder, api_out, command_out, overrides = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    settings = {key.replace(".", "__"): value for key, value in (o.split("=", 1) for o in overrides)}
    # "local": a bare ray.init() joins the address a stopped `ray start` left in /tmp/ray/ray_current_cluster
    # and waits on it for minutes (docs/scale-out.md), so this test hung on any machine holding such a file
    ray.init(address="local", include_dashboard=False)
    with Captioner(engine="hf", video__workers=0, references=None) as captioner:
        records = list(captioner.caption(folder, output=api_out, **settings))
        seen = {"records": len(records), "engine": captioner.engine, "status": captioner.summary["exit_status"]}
    given = [f"input_dir={folder}", f"output={command_out}", "progress=false", *json.loads(sys.argv[5]), *overrides]
    seen["command_status"] = run_job(compose_config(given), given=given)["exit_status"]
    seen["cluster_kept"] = ray.is_initialized()  # the caller's cluster: the jobs leave it running
    ray.shutdown()
    print(json.dumps({**seen, "engine": None if seen["engine"] is None else "loaded here"}))
""")


def _on_ray(folder, api_out, command_out, overrides, tmp_path) -> dict:
    """The runner=ray call and its command's job, in a process of their own, on one cluster it starts: a Ray
    cluster started from this one would inherit what its in-process engines set
    (tests/caption/runners/test_runner_ray.py says how that left the actors spinning), and two clusters never
    share two cores at once."""
    from tests.caption.runners.test_runner_ray import _clean_env

    script = tmp_path / "on_ray.py"
    script.write_text(RAY_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(folder), str(api_out), str(command_out),
                           json.dumps(overrides), json.dumps(BASE)], capture_output=True, text=True,
                          env=_clean_env(), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_calls_records_are_the_commands_for_every_config_group(tmp_path, synth_dir, compose_config):
    """In this process, as lightning-hydra-template's tests call train(cfg): one Captioner making every call,
    then the command's job for each call's settings (caption/cli.py runs run_job on the composed config with
    the overrides given; tests/caption/test_job_outcomes.py runs the console script itself). Each job
    loads the engine its settings need, as the command does. runner=ray runs in a process of its own."""
    from caption.api import Captioner
    from caption.job import run_job

    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(synth_dir / "clip_00001.mp4", folder)
    model_copy = tmp_path / "tiny copy"  # the model group: another checkpoint folder (same weights)
    shutil.copytree(REPO_ROOT / "assets" / "models" / "vidcap-ko-tiny", model_copy)
    variants = _variants(model_copy)
    here = [(i, group, overrides) for i, (group, overrides) in enumerate(variants) if group != "runner"]
    seen = []
    with Captioner(engine="hf", video__workers=0, references=None) as captioner:
        for i, group, overrides in here:
            settings = {key.replace(".", "__"): value for key, value in (o.split("=", 1) for o in overrides)}
            records = list(captioner.caption(folder, output=tmp_path / f"api-{i}.jsonl", **settings))
            engine = captioner.engine
            model = getattr(engine, "model", None)
            seen.append({"group": group, "records": len(records), "engine_id": id(engine) if engine else None,
                         "engine": getattr(engine, "name", None), "dtype": str(getattr(model, "dtype", None)),
                         "status": captioner.summary["exit_status"]})
    commands = {}
    for i, group, overrides in here:
        if group == "base again":  # the same settings as "base": its records are compared with that command's
            continue
        commands[group] = out = tmp_path / f"cmd-{i}.jsonl"
        given = [f"input_dir={folder}", f"output={out}", "progress=false", *BASE, *overrides]
        summary = run_job(compose_config(given), given=given)
        assert summary["exit_status"] == 0, (group, summary.get("stop_reason"))
    i, (group, overrides) = len(variants) - 1, variants[-1]
    assert group == "runner"
    commands[group] = tmp_path / f"cmd-{i}.jsonl"
    ray = _on_ray(folder, tmp_path / f"api-{i}.jsonl", commands[group], overrides, tmp_path)
    assert ray["command_status"] == 0 and ray["cluster_kept"]
    seen.append({"group": group, "records": ray["records"], "engine_id": None, "engine": ray["engine"],
                 "dtype": None, "status": ray["status"]})
    assert all(s["status"] == 0 and s["records"] >= 1 for s in seen), seen

    # the engine is kept while a call needs the same one, and replaced when it needs another
    assert seen[1]["engine_id"] == seen[0]["engine_id"]
    assert [s["engine"] for s in seen] == ["hf"] * 9 + ["vllm"] * 2 + [None]  # runner=ray: in its actors
    assert seen[3]["dtype"] == "torch.bfloat16" and seen[2]["dtype"] == seen[4]["dtype"] == "torch.float32"

    for i, (group, _) in enumerate(variants):
        api, command = _records(tmp_path / f"api-{i}.jsonl"), _records(commands[group.removesuffix(" again")])
        assert api.keys() == command.keys(), group
        for key, made in command.items():
            for setting, value in made["settings"].items():  # setting by setting, for a message that says which
                assert api[key]["settings"].get(setting) == value, (group, setting)
            assert api[key]["settings"] == made["settings"] and api[key]["settings_id"] == made["settings_id"], group
            assert api[key]["caption"] == made["caption"], group  # the engine those settings name made it
    lora = _records(tmp_path / "api-2.jsonl")
    assert all(r["adapter"] == "detailed" and r["caption"].count(".") >= 2 for r in lora.values())  # several sentences
