"""runner=ray for real: a local Ray cluster on this machine's 2 CPUs, the embedded model, 2 engine actors.

Kept small (3-4 clips): each test starts two vLLM engines in Ray actors on a shared 2-core machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")

# two actors, one core each (runner.engine_cpus=0.5 leaves 1 CPU of 2 for decoding tasks); one clip per batch
RAY = ["runner=ray", "runner.actors=2", "runner.engine_cpus=0.5", "runner.decode_cpus=0.5", "runner.batch_clips=1",
       "progress=false", "references=null"]


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=150 * 2**20, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def clips(tmp_path, synth_dir):
    def _clips(n):
        folder = tmp_path / f"clips{n}"
        folder.mkdir()
        for i in range(n):
            shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
        return folder
    return _clips


def _run(compose_config, overrides, engine=None):
    from caption.job import run_job

    return run_job(compose_config(overrides), engine=engine)


def _records(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


@pytest.mark.slow
def test_ray_runner_writes_the_local_runners_greedy_captions(ray_cluster, clips, compose_config, vllm_engine,
                                                            tmp_path):
    folder = clips(3)
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    _run(compose_config, [f"input_dir={folder}", f"output={local}", "progress=false", "references=null"],
         engine=vllm_engine)
    summary = _run(compose_config, [f"input_dir={folder}", f"output={on_ray}", "tasks=[caption,motion]", *RAY])
    assert summary["exit_status"] == 0 and summary["captions_ok"] == 6 and summary["runner"] == "ray"
    records = _records(on_ray)
    assert len({(r["video"], r["task"]) for r in records}) == len(records) == 6
    local_captions = {r["video"]: r["caption"] for r in _records(local)}
    assert {r["video"]: r["caption"] for r in records if r["task"] == "caption"} == local_captions
    assert all(r["engine"] == "vllm" and r["frames"] == 8 and r["decoder"] for r in records)
    # each engine actor that captioned was bound to one core of its own
    cores = [seen.split(" cores ")[1] for seen in summary["actors_seen"]]
    assert all("," not in c for c in cores) and len(set(cores)) == len(cores)
    # resume: the same command again finds nothing to do and changes nothing
    before = on_ray.read_bytes()
    again = _run(compose_config, [f"input_dir={folder}", f"output={on_ray}", "tasks=[caption,motion]", *RAY])
    assert again["videos_skipped_resume"] == 3 and again["videos_run"] == 0 and on_ray.read_bytes() == before


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _actor_pids():
    """Engine actor processes of this machine (Ray titles them ray::MapWorker(MapBatches(_CaptionActor)))."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if b"MapBatches(_CaptionActor)" in fh.read().split(b"\0")[0]:
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


@pytest.mark.slow
def test_an_engine_actor_killed_mid_run_costs_no_record(ray_cluster, clips, compose_config, tmp_path):
    """SIGKILL (what the OOM killer sends) to an engine actor once the first records are in: Ray restarts
    it, its batch runs again in the next pass, the output is complete and holds each clip once."""
    folder, out = clips(6), tmp_path / "out.jsonl"
    killed = []

    def kill_one_when_records_arrive():
        deadline = time.time() + 300
        while time.time() < deadline and not killed:
            pids = _actor_pids()
            if len(pids) == 2 and out.exists() and out.read_text(encoding="utf-8").count("\n") >= 1:
                busiest = max(pids, key=_cpu_seconds)  # the one generating (the other may still be starting)
                os.kill(busiest, signal.SIGKILL)
                killed.append(busiest)
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_one_when_records_arrive, daemon=True)
    watcher.start()
    # 200 tokens a request keep the engines busy for a while, so the kill lands while batches are queued
    long = ["sampling.min_new_tokens=200", "sampling.max_new_tokens=200"]
    summary = _run(compose_config, [f"input_dir={folder}", f"output={out}", "tasks=[caption,motion]", *long, *RAY])
    watcher.join(timeout=5)
    assert killed, "no actor was killed: the job ended before the watcher saw a record"
    records = _records(out)
    assert sorted((r["video"], r["task"]) for r in records) == [(f"clip_{i:05d}.mp4", task) for i in range(6)
                                                                for task in ("caption", "motion")]  # all, once
    assert all(r["status"] == "ok" for r in records) and summary["exit_status"] == 0
    # the killed actor's batches came back without records and ran again in a second pass
    assert summary["clips_lost"] == 0 and summary["ray_passes"] == 2


def test_engine_actors_claim_distinct_cores_and_a_dead_actors_cores_come_back(tmp_path):
    """_claim_cores in real processes: two claim different cores; when one dies its cores are free again."""
    code = ("import sys, time, types; from caption.runner_ray import _claim_cores;"
            "job = types.SimpleNamespace(gpu={'device': 'cpu', 'env': {'VLLM_CPU_OMP_THREADS_BIND': 'all'}},"
            " runner=types.SimpleNamespace(engine_cpus=1));"
            "cores, lock = _claim_cores(job); print(cores, flush=True); time.sleep(float(sys.argv[1]))")
    # a lock folder of its own (tempfile honours TMPDIR): engine actors of other tests may still hold theirs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)}
    first = subprocess.Popen([sys.executable, "-c", code, "30"], stdout=subprocess.PIPE, text=True, env=env)
    first_cores = first.stdout.readline().strip()
    second = subprocess.run([sys.executable, "-c", code, "0"], capture_output=True, text=True, env=env).stdout.strip()
    first.kill()
    first.wait()
    third = subprocess.run([sys.executable, "-c", code, "0"], capture_output=True, text=True, env=env).stdout.strip()
    if len(os.sched_getaffinity(0)) >= 2:
        assert first_cores != second and "None" not in (first_cores, second)
    assert third == first_cores  # the killed process's lock went with it
