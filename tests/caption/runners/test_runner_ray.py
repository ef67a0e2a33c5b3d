"""runner=ray for real: the `caption` command, in a process of its own, runs the embedded model in 2 engine
actors on this machine's 2 CPUs, on a local Ray cluster it starts, or on one started apart as a user starts
one for several machines (`ray start --head`, then `runner.address`: docs/scale-out.md).

Why a process of its own: a Ray cluster started from the test process inherits what earlier tests left in
it (in-process vLLM engines export VLLM_* variables and bind OpenMP threads); under the full suite that
left the engine actors spinning instead of captioning. A user runs `caption runner=ray` from a shell, so
that is what these tests run. Kept few and small (2-10 clips): each job starts two vLLM engines on a 2-core
machine, ~15 CPU-s each, so the greedy-captions job is also the one whose actor is killed.
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
from pathlib import Path

import pytest

from tests.caption.in_process import run_caption

ray = pytest.importorskip("ray")

# two actors, half a CPU each in Ray's books (one core each when bound), decoding tasks half a CPU; one clip
# per batch
RAY = ["runner=ray", "runner.actors=2", "runner.engine_cpus=0.5", "runner.decode_cpus=0.5", "runner.batch_clips=1",
       "progress=false", "references=null"]
RUN_LIMIT_S = 480  # a run that hangs fails the test instead of the suite


@pytest.fixture
def clips(tmp_path, synth_dir):
    def _clips(n):
        folder = tmp_path / f"clips{n}"
        folder.mkdir()
        for i in range(n):  # the six synthetic clips, again under new names past six
            shutil.copy(synth_dir / f"clip_{i % 6:05d}.mp4", folder / f"clip_{i:05d}.mp4")
        return folder
    return _clips


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A running cluster, started as docs/scale-out.md starts one (`ray start --head`, here in the clean
    environment below), that this file's jobs given its address share: each job that starts its own cluster
    pays Ray's daemons and Ray Data's actors again (~10 CPU-s, ~4 s). With Ray's token authentication, as
    `ray start --head` turns it on wherever a token exists (~/.ray/auth_token, which any local cluster Ray
    started leaves): a token of its own here, so that the run does not depend on which test came first.
    Yields (its address, the pid of the process under which its raylet and workers run, the environment a
    driver needs to join it); stopped at the end of the module, its processes with it (its process group:
    `ray stop` would end every cluster on the machine)."""
    import secrets
    import tempfile

    from tests.support.s3_server import free_port

    port, log = free_port(), tmp_path_factory.mktemp("ray-head") / "ray-start.log"
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    # a Ray folder of its own: `ray start` writes its address in <temp dir>/ray_current_cluster, where a bare
    # ray.init() on this machine (another test process's script) would join it; short, for Ray's socket paths
    ray_dir = tempfile.mkdtemp(prefix="rayhead-", dir="/tmp")
    with open(log, "w") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
                                    f"--port={port}", "--include-dashboard=false", "--disable-usage-stats",
                                    f"--temp-dir={ray_dir}"],
                                   stdout=out, stderr=subprocess.STDOUT, env={**_clean_env(), **token},
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "will now block" not in log.read_text(errors="replace"):  # printed once every daemon is up
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", process.pid, token
    finally:
        # the whole group at once: `ray start --block` told alone waits ~30 s on its raylet and Ray Data's
        # detached actors; what has not ended 3 s after SIGTERM is killed
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:  # every process of the group had ended
            pass
        process.wait()
        shutil.rmtree(ray_dir, ignore_errors=True)  # its address file with it: it outlives the cluster


def _clean_env() -> dict:
    """This process's environment without what in-process engines exported (VLLM_*, OpenMP preload)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VLLM_", "RAY_", "PYTEST_")) and k not in ("LD_PRELOAD", "LOCAL_WORLD_SIZE")}
    return {**env, "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def _caption(overrides, tmp_path, output, started=None, env=None):
    """Run `caption` with these overrides; (exit status, summary dict, stderr). `started` gets its pid; `env`:
    variables added to the clean environment."""
    run_dir = tmp_path / f"run-{output.stem}-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-m", "caption", *overrides, f"output={output}",
                             f"hydra.run.dir={run_dir}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**_clean_env(), **(env or {})})
    if started is not None:
        started.append(proc.pid)
    try:
        _, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    summary_path = output.with_name(output.name + ".summary.json")
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    return proc.returncode, summary, stderr


def _records(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _title(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")[0].decode(errors="replace")
    except OSError:  # it ended meanwhile
        return ""


def _actor_pids(cluster_pid):
    """Engine actor processes (Ray titles them ray::MapWorker(MapBatches(_CaptionActor))) under the process
    `cluster_pid`, whose raylet and workers they are: the `head` cluster, which runs one job at a time, or the
    `caption` process that started a Ray instance of its own; another test process's clusters are not under it."""
    parents, actors = {}, []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if b"MapBatches(_CaptionActor)" in fh.read().split(b"\0")[0]:
                    actors.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue

    def under_the_cluster(pid):
        for _ in range(64):
            pid = parents.get(pid, 0)
            if pid == cluster_pid:
                return True
            if pid <= 1:
                return False
        return False

    return [pid for pid in actors if under_the_cluster(pid)]


@pytest.mark.slow
def test_ray_runner_writes_the_local_runners_greedy_captions_and_a_killed_actor_costs_no_record(
        clips, long_dir, compose_config, tmp_path, s3):
    """The Ray job reads the clips from object storage (moto's S3 server on loopback: the actors read the
    objects themselves, no disk is shared) and writes the captions the local runner writes from the folder,
    although SIGKILL (what the OOM killer sends) ends an engine actor once the first records are in: Ray
    restarts it and runs its batches again on it, the other actor keeps its engine, and the output holds
    each record once. On the Ray instance the job starts itself (runner.address unset), as a user's job on
    one machine runs. (One job for both: each job starts two engine actors, ~15 CPU-s each.)"""
    import tempfile

    from caption.job import run_job
    from tests.support.s3_server import folder_files, free_port

    # 9 clips and a long one split at its 3 shots (a record per segment): 12 one-clip batches for 2 actors, 24
    # records, so that after the first record each actor still has several batches to run
    folder = clips(9)
    shutil.copy(long_dir / "long_00000.mp4", folder)
    url = f"s3://{s3.bucket(folder_files(folder, prefix='clips/'))}/clips"
    # 64 tokens a request: the batches take seconds together, so the watcher sees them running
    settings = ["tasks=[caption,motion]", "video.segments=auto", "video.segment_over_s=8",
                "sampling.min_new_tokens=64", "sampling.max_new_tokens=64"]
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    # in this process, with an engine of its own: the shared one is loaded for other sampling (and refused)
    run_job(compose_config([f"input_dir={folder}", f"output={local}", "progress=false", "references=null", *settings]))
    killed, job = [], []

    def kill_one_running_a_batch():
        # an actor running a batch: Ray titles an actor's process ray::<class>.<method> while a call runs and
        # ray::<class> between calls (_changeproctitle in ray/_private/worker.py), and Ray Data queues the
        # next batches on it meanwhile (seen here: both actors' titles read .submit for the 2 s the 12 batches
        # took, records arriving all along). An actor killed in a call, with a third of the records to come,
        # takes its batch and the queued ones with it. Not by CPU time over the last half second: an actor that
        # finished its last batch in that half second read busy (0.31 CPU-s under force-avx2) and was killed
        # holding nothing: one pass, nothing tested
        deadline, pids = time.time() + RUN_LIMIT_S, []
        while time.time() < deadline and not killed:
            time.sleep(0.02)
            # the records first (the engines are up): the walk over /proc reads two files of every process
            written = on_ray.read_text(encoding="utf-8").count("\n") if job and on_ray.exists() else 0
            if not 1 <= written <= 16:  # of 24
                continue
            pids = pids if len(pids) == 2 else _actor_pids(job[0])  # the job's Ray instance runs under it
            running = [pid for pid in pids if _title(pid).endswith(".submit")]
            if running:
                os.kill(running[0], signal.SIGKILL)
                killed.append((running[0], written))

    watcher = threading.Thread(target=kill_one_running_a_batch, daemon=True)
    watcher.start()
    # where an earlier `ray start` left its address behind (the file outlives the cluster), the job still starts
    # its own instance: a bare ray.init() joined that address and waited ~13 minutes on it
    ray_tmp = Path(tempfile.mkdtemp(prefix="raytmp-", dir="/tmp"))  # short: Ray's socket paths live under it
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
    try:
        status, summary, err = _caption([f"input_dir={url}", *settings, *RAY], tmp_path, on_ray, started=job,
                                        env={**s3.env(), "RAY_TMPDIR": str(ray_tmp)})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    watcher.join(timeout=5)
    assert status == 0, err[-3000:]
    assert killed, "no actor was killed: the job ended before the watcher saw a batch running"
    assert summary["exit_status"] == 0 and summary["captions_ok"] == 24 and summary["runner"] == "ray"
    assert summary["segments_run"] == 3 and summary["videos_segmented"] == 1 and summary["scan_s_total"] > 0
    # no engine ran in the driver: no stage breakdown rather than one claiming the engine sat idle
    assert summary["stages_s"] is None and summary["engine_idle_fraction"] is None
    assert summary["decode_workers"] is None  # decoding ran in Ray actors, not the local pool
    records = _records(on_ray)
    # every record, once, each the local runner's caption
    assert len({(r["video"], r.get("segment_index"), r["task"]) for r in records}) == len(records) == 24
    assert all(r["status"] == "ok" for r in records)
    local_captions = {(r["video"], r.get("segment_index"), r["task"]): r["caption"] for r in _records(local)}
    assert {(r["video"], r.get("segment_index"), r["task"]): r["caption"] for r in records} == local_captions
    assert all(r["engine"] == "vllm" and r["frames"] == 8 and r["decoder"] for r in records)
    # the driver names each record's object, as the local runner does (a segment's records share their video's)
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    assert all(r["source"]["input_dir"] == url and r["source"]["size"] == sizes[r["video"]] and r["source"]["etag"]
               and r["fetched_bytes"] > 0 for r in records)
    # the killed actor's batches ran again on its successor, Ray's restart of it (nothing lost)
    assert summary["clips_lost"] == 0 and summary["engine_actors_restarted"] == 1, (killed, summary)
    # the actors that sent records: the other one, which kept its engine, the successor, and the killed one if
    # it had finished a batch before its kill (seen both ways); a retry in a new actor pool would add two more
    seen = summary["actors_seen"]
    assert 2 <= len(seen) <= 3 and all(" cores " in actor for actor in seen), (killed, seen)
    assert len(seen) == 3 or not any(f" pid {killed[0][0]} " in actor for actor in seen), (killed, seen)
    # each engine actor ran on one core of its own (its batch thread's affinity); the successor on the cores
    # its killed predecessor left free, so two core sets between them
    cores = [actor.split(" cores ")[1] for actor in seen]
    assert all("," not in c for c in cores) and len(set(cores)) == 2, seen
    # resume: the same command again finds nothing to do and changes nothing. With nothing to do no cluster
    # starts (caption/runners/ray.py starts Ray with the first clip), so it runs in this process
    before = on_ray.read_bytes()
    done = run_caption([f"input_dir={url}", *settings, *RAY, f"output={on_ray}",
                        f"hydra.run.dir={tmp_path / 'run-again'}"], cwd=tmp_path, env={**os.environ, **s3.env()})
    assert done.returncode == 0, done.stderr[-3000:]
    again = json.loads(on_ray.with_name(on_ray.name + ".summary.json").read_text(encoding="utf-8"))
    assert again["videos_skipped_resume"] == 10 and again["videos_run"] == 0 and on_ray.read_bytes() == before
    assert not ray.is_initialized()


def test_engine_actors_claim_distinct_cores_and_a_dead_actors_cores_come_back(tmp_path):
    """claim_cores in real processes: two claim different cores; when one dies its cores are free again;
    a new run claims apart from the last."""
    code = ("import sys, time, types; from caption.runners.cores import claim_cores;"
            "job = types.SimpleNamespace(gpu={'device': 'cpu'},"
            " plan=types.SimpleNamespace(engine_env={'VLLM_CPU_OMP_THREADS_BIND': 'all'}),"
            " runner=types.SimpleNamespace(engine_cpus=1));"
            "cores, lock = claim_cores(job, int(sys.argv[2]), sys.argv[3]); print(cores, flush=True);"
            "time.sleep(float(sys.argv[1]))")
    # a lock folder of its own (tempfile honours TMPDIR): engine actors of other tests may still hold theirs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)}
    def claim(hold_s, engines=0, scope="run1"):
        return subprocess.Popen([sys.executable, "-c", code, str(hold_s), str(engines), scope],
                                stdout=subprocess.PIPE, text=True, env=env)

    first = claim(30)
    first_cores = first.stdout.readline().strip()
    second = claim(0).communicate()[0].strip()
    first.kill()
    first.wait()
    third = claim(0).communicate()[0].strip()
    if len(os.sched_getaffinity(0)) >= 2:
        assert first_cores != second and "None" not in (first_cores, second)
    assert third == first_cores  # the killed process's lock went with it

    # every group held: an actor of a job whose engines fit the groups waits for one to come free (a
    # killed actor's restart) instead of running unbound
    groups = len(os.sched_getaffinity(0))
    holders = [claim(30) for _ in range(groups)]
    held = [h.stdout.readline().strip() for h in holders]
    # a later run's actors do not wait for an earlier run's, idle ones Ray has not reaped yet
    first_group = str(sorted(os.sched_getaffinity(0))[:1])
    assert claim(0, engines=groups, scope="run2").communicate(timeout=20)[0].strip() == first_group
    waiting = claim(30, engines=groups)
    time.sleep(1)
    holders[0].kill()
    holders[0].wait()
    assert waiting.stdout.readline().strip() == held[0]
    assert claim(0, engines=groups + 1).communicate()[0].strip() == "None"  # more engines than groups: no wait
    for h in holders + [waiting]:
        h.kill()
        h.wait()


@pytest.mark.slow  # its engine actors start vLLM (the weights then fail to load): 42 s of `make test-fast`'s 2:56
def test_a_model_that_does_not_load_in_the_actors_stops_the_job_in_one_line(clips, tmp_path, model_dir, head):
    """A weights file cut short: the first actor whose engine does not load stops the job with its reason,
    as the local runner does; no clip gets an error record (a rerun with the model mended captions them all).
    On a running cluster, which the failed job leaves running, without its actors."""
    address, cluster_pid, token = head
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a copy that stopped halfway
    out = tmp_path / "o.jsonl"
    code, summary, err = _caption([f"input_dir={clips(3)}", f"model.path={model}", *RAY, f"runner.address={address}"],
                                  tmp_path, out, env=token)
    assert code == 4, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"caption: the vllm engine could not load the model {model}: SafetensorError: "), last
    assert "(the traceback is in the job's log, from the engine actor " in last and "Traceback" not in err
    assert summary["stopped"] == "engine did not load" and summary["records_left_undone"] == 3
    assert not out.exists() or out.read_text() == ""
    # the cluster is the user's: it goes on, and Ray ends the job's engine actors with the job
    deadline = time.monotonic() + 60
    while _actor_pids(cluster_pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _actor_pids(cluster_pid), "the failed job's engine actors outlived it"
    assert os.path.exists(f"/proc/{cluster_pid}"), "the failed job took the cluster down"


@pytest.mark.slow  # no engine, but the running cluster the engine tests above share: test-fast would start it for this alone
def test_a_cluster_that_asks_for_a_token_refuses_the_job_in_one_line_before_anything_runs(clips, tmp_path, head):
    """A driver without the cluster's token (Ray never turns token authentication on for a given address):
    exit status 2 and one line that says what to set, instead of a traceback asking for a bug report. (Ray
    tries ~20 times a second apart before it gives up: ray/_private/node.py `_init_gcs_client`.)"""
    address, _, _ = head
    out = tmp_path / "o.jsonl"
    code, summary, err = _caption([f"input_dir={clips(2)}", *RAY, f"runner.address={address}"], tmp_path, out)
    assert code == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == (f"caption: invalid config: runner.address={address}: the Ray cluster there asks for a token "
                    "(Ray's token authentication): run the job with RAY_AUTH_MODE=token and the cluster's token in "
                    "RAY_AUTH_TOKEN or ~/.ray/auth_token (`ray get-auth-token` on its head prints it)"), last
    assert "Traceback" not in err and not (out.exists() and out.read_text())


def test_an_address_where_no_cluster_answers_is_refused_at_once(clips, tmp_path):
    """runner.address naming a port where nothing listens: one line and exit status 2 in seconds (Ray itself
    retried it for ~13 minutes), before any Ray process starts. In this process: Ray is never started."""
    from tests.support.s3_server import free_port

    address, out = f"127.0.0.1:{free_port()}", tmp_path / "o.jsonl"
    started = time.monotonic()
    done = run_caption([f"input_dir={clips(2)}", *RAY, f"runner.address={address}", f"output={out}",
                        f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"caption: invalid config: runner.address={address}: no Ray cluster answers there ("), last
    assert last.endswith("start one with `ray start --head` (docs/scale-out.md), or leave runner.address unset to "
                         "start one on this machine for the job")
    assert time.monotonic() - started < 60 and not ray.is_initialized()
