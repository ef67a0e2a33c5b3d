"""How a job ends, as a scheduler and a user see it: exit statuses, refused outputs, interruption
at any moment (SIGINT, SIGTERM, kill -9), fail_fast, a model that does not load, a folder that goes away,
and an engine that breaks mid-run."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from caption.outcome import EngineDied
from tests.caption.in_process import run_caption
from tests.caption.processes import HELD, hold_a_decoder
from tests.caption.warm_process import WARM_ENV, start_warm
from vidcap_ko.exit_status import (
    EXIT_ENGINE_DIED,
    EXIT_FAILED_RECORDS,
    EXIT_INPUT_GONE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
)

pytestmark = pytest.mark.slow
CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")
ENV = WARM_ENV  # one environment, so one warm server per test process (tests/caption/warm_process.py)
MANY = 45  # clips in many_clips


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _start(tmp_path, *overrides, run="run", afresh=False):
    """`caption` in a process of its own: forked from a server that has its imports done
    (tests/caption/warm_process.py), or `afresh` from an interpreter where the test is about its start."""
    args = [*overrides, f"hydra.run.dir={tmp_path / run}"]
    if not afresh:
        return start_warm("caption", args, cwd=tmp_path, env=ENV)
    return subprocess.Popen([CAPTION, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=tmp_path)


def _run(tmp_path, *overrides):
    """A whole job, waited for: in this process (tests/caption/in_process.py); `_start` gives one of its own."""
    done = run_caption([*overrides, f"hydra.run.dir={tmp_path / 'run'}"], env=ENV, cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def many_clips(tmp_path_factory):
    """45 synthetic clips: with 3 tasks (135 records), long enough a run to be stopped in the middle."""
    from video_io.synth.dataset import SynthSpec, generate_dataset

    folder = tmp_path_factory.mktemp("many")
    generate_dataset(folder, n=MANY, seed=21, spec=SynthSpec())
    (folder / "references.jsonl").unlink()  # no scoring: these tests are about records
    return folder


def _wait_for_records(path, n, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"no {n} records in {path} within {timeout}s (exit {proc.poll()})")




def _one_record_per_key(path, expected):
    keys = Counter((r["video"], r["task"], r["adapter"]) for r in _records(path))
    assert len(keys) == expected and max(keys.values()) == 1, keys.most_common(3)


def test_failed_clips_give_a_distinct_exit_status(tmp_path, synth_dir):
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", folder)
    (folder / "broken.mp4").write_bytes(b"not a video at all")
    code, out, err = _run(tmp_path, f"input_dir={folder}", f"output={tmp_path / 'o.jsonl'}", "progress=false")
    assert code == EXIT_FAILED_RECORDS, err[-2000:]
    assert "1 video(s) failed" in out and "broken.mp4" in out and "Traceback" not in err
    assert json.loads((tmp_path / "o.jsonl.summary.json").read_text())["exit_status"] == EXIT_FAILED_RECORDS


def test_a_users_file_as_output_is_refused_in_one_line_and_kept(tmp_path, synth_dir):
    settings = tmp_path / "settings.json"
    settings.write_bytes(b'{"threshold": 0.5}')
    code, out, err = _run(tmp_path, f"input_dir={synth_dir}", f"output={settings}")
    assert code == EXIT_USAGE
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("caption: refused: `output=") and "overwrite=true" in lines[0]
    assert settings.read_bytes() == b'{"threshold": 0.5}' and "summary" not in out


def test_fail_fast_stops_at_the_first_failed_clip(compose_config, tmp_path, synth_dir, vllm_engine):
    from caption.job import run_job

    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "a_broken.mp4").write_bytes(b"\x00" * 64)
    for i in range(4):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    out = tmp_path / "o.jsonl"
    summary = run_job(compose_config([f"input_dir={folder}", f"output={out}", "progress=false", "fail_fast=true",
                                      "video.workers=0", "references=null"]), engine=vllm_engine)
    assert summary["stopped"] == "fail_fast" and summary["exit_status"] == EXIT_FAILED_RECORDS
    assert [r["video"] for r in _records(out)] == ["a_broken.mp4"] and summary["records_left_undone"] == 4
    assert summary["videos_todo"] == 5 and summary["videos_run"] == 1  # the one that got a record


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_the_middle_keeps_every_record_and_a_rerun_finishes(tmp_path, many_clips, signum):
    out = tmp_path / "o.jsonl"
    args = (f"input_dir={many_clips}", f"output={out}", "tasks=[caption,keywords,motion]", "progress=false", HELD)
    proc = _start(tmp_path, *args)
    hold_a_decoder(proc)
    _wait_for_records(out, 1, proc)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]
    assert "stopped early (interrupted)" in stdout and "left undone" in stdout
    written = _records(out)  # every line a whole record
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["records_left_undone"] == 3 * MANY - len(written) > 0
    code, _, err = _run(tmp_path, *args)
    assert code == 0, err[-2000:]
    _one_record_per_key(out, 3 * MANY)


@pytest.mark.parametrize("left", ["nothing", "an empty mountpoint"])
def test_a_folder_that_goes_away_mid_run_stops_the_job_without_error_records(tmp_path, many_clips, left):
    """The folder unmounted or moved while the job runs: every clip after that would fail for it. The job
    stops (exit 7, one line) with no error record for them; once the folder is back it resumes and
    finishes. A decoder held until the folder has gone keeps the job from ending first, however fast the machine."""
    folder, away = tmp_path / "footage", tmp_path / "away"
    shutil.copytree(many_clips, folder)
    out = tmp_path / "o.jsonl"
    args = (f"input_dir={folder}", f"output={out}", "engine=hf", "progress=false", HELD)
    proc = _start(tmp_path, *args)
    held = hold_a_decoder(proc)  # the job cannot end before the folder has gone ...
    folder.rename(away)
    if left == "an empty mountpoint":  # what a network mount that dropped leaves: a folder of another device
        folder.mkdir()
    os.kill(held, signal.SIGCONT)  # ... and its clip comes back, so the results (and refusals) flow again
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_INPUT_GONE and "Traceback" not in stderr, stderr[-3000:]
    what = "it is gone" if left == "nothing" else "another folder stands at its path"
    assert stderr.strip().splitlines()[-1].startswith(f"caption: `input_dir={folder}` went away while the job ran "
                                                      f"({what}")
    written = _records(out) if out.exists() else []
    assert all(r["status"] == "ok" for r in written)
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["stopped"] == "input gone" and summary["records_left_undone"] == MANY - len(written) > 0
    if left == "an empty mountpoint":
        folder.rmdir()
    away.rename(folder)
    code, _, err = _run(tmp_path, *args)
    assert code == 0, err[-2000:]
    _one_record_per_key(out, MANY)


@pytest.fixture(scope="module")
def interpreter_start_s():
    """Seconds this environment's Python takes to reach the first line of a program. Before that, Ctrl-C
    meets Python's own start-up (a sitecustomize on PYTHONPATH may import torch there), not the job."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=ENV, check=True)
    return time.perf_counter() - started


@pytest.mark.parametrize("delay_s", [0.3, 1.5, 4.0])  # imports, composing the config, loading the engine
def test_ctrl_c_during_start_up_exits_130_without_a_traceback(tmp_path, synth_dir, delay_s, interpreter_start_s):
    proc = _start(tmp_path, f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "progress=false",
                  afresh=True)
    time.sleep(interpreter_start_s + delay_s)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]
    assert "caption: interrupted" in stderr or "stopped early (interrupted)" in stdout


# Where a Ctrl-C met omegaconf's clean-up in CI and in a loop of 100 jobs on a loaded machine: in the job's own
# config (`_job`); in Hydra's first composition, which asks only whether this is a sweep and swallows any Exception
# (hydra/_internal/hydra.py `get_mode`), so the job ran on and exited 130 in silence; and in the run's composition
# (hydra/_internal/hydra.py `run`), where omegaconf's error read as an invalid config (2)
SIGNAL_LANDS_IN = {"the job": ("_job", "caption/cli.py"), "hydra's sweep check": ("get_mode", "hydra/_internal/hydra.py"),
                   "hydra's composition": ("run", "hydra/_internal/hydra.py")}


@pytest.mark.parametrize("where", SIGNAL_LANDS_IN)
def test_ctrl_c_inside_omegaconf_is_still_an_interruption(tmp_path, synth_dir, where):
    """A Ctrl-C that lands while omegaconf fills a list, after ListConfig.append put its None placeholder
    and the list read its flags (a CI run under force-avx2 met it while the plan loaded the gpu presets),
    leaves omegaconf's clean-up (flag_override) raising AttributeError on the None in its place; the command
    still ends as interrupted (130, no traceback, saying so), not as a bug (1), an invalid config (2) or a
    silent stop. The signal is made to land there: a trace function raises what the signal handler raises
    (caption/cli.py `_on_signal`) at that line, the first time it runs inside `where`."""
    import inspect

    from omegaconf.basecontainer import BaseContainer

    from caption.outcome import JobInterrupted, interrupts

    setting = BaseContainer._set_item_impl
    lines, first = inspect.getsourcelines(setting)
    flags_read = first + next(i for i, line in enumerate(lines) if "input_is_node = " in line)
    inside, in_file = SIGNAL_LANDS_IN[where]
    landed = []

    def filling_a_list_inside(frame) -> bool:
        append = frame.f_back
        if append.f_code.co_name != "append" or append.f_back.f_code.co_name != "_set_value_impl":
            return False
        while frame is not None:
            if frame.f_code.co_name == inside and frame.f_code.co_filename.endswith(in_file):
                return True
            frame = frame.f_back
        return False

    def signal_lands(frame, event, arg):
        if frame.f_code is not setting.__code__ or landed:
            return None

        def on_line(frame, event, arg):
            if event == "line" and frame.f_lineno == flags_read and filling_a_list_inside(frame):
                landed.append(frame.f_lineno)
                interrupts.received = True
                raise JobInterrupted()
            return on_line
        return on_line

    tracing = sys.gettrace()  # coverage.py's, under `make coverage`: put back after, or it measures no more here
    sys.settrace(signal_lands)
    try:
        done = run_caption([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", "progress=false",
                            f"hydra.run.dir={tmp_path / 'run'}"], env=ENV, cwd=tmp_path)
    finally:
        sys.settrace(tracing)
    assert landed == [flags_read]
    assert done.returncode == EXIT_INTERRUPTED and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "caption: interrupted" in done.stderr and "unexpected error" not in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "o.jsonl").exists()  # (the real handler has said "SIGINT received, stopping")


# A real SIGINT, sent to the job by itself as hydra's override parser builds its dataclasses: Python runs the
# handler inside dataclasses' Field.__set_name__, and type() puts its RuntimeError ("Error calling __set_name__")
# in place of the handler's exception (met in a loop of 150 jobs signalled during start-up on a loaded machine)
SIGNAL_IN_A_CLASS_BODY = """
import os, signal, sys

def signal_at_set_name(frame, event, arg):
    caller = frame.f_back
    if frame.f_code.co_name == "__set_name__" and caller.f_globals.get("__name__") == "hydra.core.override_parser.types":
        sys.settrace(None)
        os.kill(os.getpid(), signal.SIGINT)

sys.settrace(signal_at_set_name)
from caption.cli import main
sys.argv[0] = "caption"
main()
"""


def test_ctrl_c_while_a_library_defines_its_classes_is_still_an_interruption(tmp_path, synth_dir):
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_A_CLASS_BODY, f"input_dir={synth_dir}",
                           f"output={tmp_path / 'o.jsonl'}", "progress=false", f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert "SIGINT received" in done.stderr, done.stderr[-3000:]  # the signal landed, while hydra imported
    assert done.returncode == EXIT_INTERRUPTED and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "caption: interrupted" in done.stderr and not (tmp_path / "o.jsonl").exists()


# A real SIGINT, sent to the job by itself inside the callback the import system runs as a module's lock goes
# (`cb` in importlib._bootstrap `_get_module_lock`): Python cannot raise from a weakref callback, so it printed
# "Exception ignored in ... cb" and a traceback and went on (a CI run met it with Ctrl-C 0.3 s into start-up).
# argv[1]: the function that must be on the stack when it lands
SIGNAL_IN_A_WEAKREF_CALLBACK = """
import os, signal, sys

def inside(frame, function):
    while frame is not None and frame.f_code.co_name != function:
        frame = frame.f_back
    return frame is not None

def signal_in_the_lock_callback(frame, event, arg):
    if (frame.f_code.co_name == "cb" and frame.f_code.co_filename == "<frozen importlib._bootstrap>"
            and signal.getsignal(signal.SIGINT) is not signal.default_int_handler and inside(frame, INSIDE)):
        sys.settrace(None)
        os.kill(os.getpid(), signal.SIGINT)

INSIDE = sys.argv.pop(1)
sys.settrace(signal_in_the_lock_callback)
from caption.cli import main
sys.argv[0] = "caption"
main()
"""


@pytest.mark.parametrize("inside", ["main", "load_engine"])  # anywhere in start-up; while the model loads
def test_ctrl_c_inside_the_import_systems_callback_is_a_clean_interruption(tmp_path, synth_dir, inside):
    """The job notes the signal (its handler ran), and stops at its next check: before its config when
    the signal came in start-up, before any clip is captioned when it came while the model loaded."""
    out = tmp_path / "o.jsonl"
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_A_WEAKREF_CALLBACK, inside, f"input_dir={synth_dir}",
                           f"output={out}", "progress=false", f"hydra.run.dir={tmp_path / 'run'}", "engine=hf"],
                          capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert "SIGINT received" in done.stderr, done.stderr[-3000:]  # the signal landed, in an import
    assert done.returncode == EXIT_INTERRUPTED and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr, done.stderr[-3000:]
    assert not out.exists() or _records(out) == []
    if inside == "load_engine":
        summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
        assert summary["stopped"] == "interrupted" and summary["records_left_undone"] == summary["videos_todo"] > 0


def test_ctrl_c_after_the_last_record_leaves_a_summary_that_says_so(tmp_path, synth_dir):
    """Signalled while it closes the engine and decoders (every record written): the job still writes its
    summary, which says it was interrupted, and exits 130."""
    out = tmp_path / "o.jsonl"
    proc = _start(tmp_path, f"input_dir={synth_dir}", f"output={out}", "progress=false")
    _wait_for_records(out, 6, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["exit_status"] == EXIT_INTERRUPTED
    assert summary["captions_ok"] == 6 and summary["records_left_undone"] == 0
    assert summary["meteor"] is not None and summary["meteor_n"] == 6  # scored, though stopped
    assert "stopped early (interrupted)" in stdout and len(_records(out)) == 6


def test_a_second_ctrl_c_exits_at_once(tmp_path, many_clips):
    out = tmp_path / "o.jsonl"
    proc = _start(tmp_path, f"input_dir={many_clips}", f"output={out}", "tasks=[caption,keywords,motion]", HELD)
    held = hold_a_decoder(proc)
    _wait_for_records(out, 1, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)  # two signals at once reach Python's handler as one; a clean stop takes longer than this
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    os.kill(held, signal.SIGKILL)  # the job exited at once, without stopping its decoders: this one, stopped by
    # the test, would outlive it (a running decoder ends when its pipe closes)
    assert proc.returncode == EXIT_INTERRUPTED and "interrupted again, exiting now" in stderr
    _records(out)  # what was written is whole lines


def test_kill_9_at_random_moments_then_a_rerun_equals_an_uninterrupted_run(tmp_path, many_clips, compose_config,
                                                                          vllm_engine):
    from caption.job import run_job

    tasks = "tasks=[caption,keywords,motion]"
    reference = tmp_path / "reference.jsonl"
    run_job(compose_config([f"input_dir={many_clips}", f"output={reference}", tasks, "progress=false"]),
            engine=vllm_engine)
    out = tmp_path / "o.jsonl"
    args = (f"input_dir={many_clips}", f"output={out}", tasks, "progress=false")
    rng = random.Random(5)
    for trial in range(3):
        proc = _start(tmp_path, *args, run=f"run{trial}", afresh=not trial)
        _wait_for_records(out, 1, proc) if trial else None  # the first kill lands during start-up (its imports)
        time.sleep(rng.uniform(0.0, 1.0) if trial else rng.uniform(1.0, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    code, _, err = _run(tmp_path, *args)
    assert code == 0, err[-2000:]
    _one_record_per_key(out, 3 * MANY)
    captions = {(r["video"], r["task"]): r["caption"] for r in _records(out)}
    assert captions == {(r["video"], r["task"]): r["caption"] for r in _records(reference)}


def _requests(job, clip, fps_values):
    from caption.engines.base import Request
    from caption.prompts import build_prompt

    requests = []
    for i, fps in enumerate(fps_values):
        metadata = clip.metadata() | {"fps": fps}
        requests.append(Request(key=f"clip{i}", task="caption", adapter=None, frames=clip.frames,
                                prompt=build_prompt(job.model.family), video_metadata=metadata))
    return requests


def test_an_engine_that_breaks_is_restarted_and_the_job_goes_on(job_config, synth_dir):
    """A request the engine cannot take (fps 0.001 puts M-RoPE positions past vLLM's table: IndexError in an
    engine step) is sent straight to the real engine, bypassing the job's admission check: the requests in
    flight get error records, a new engine takes the ones not yet started, and later requests succeed."""
    from caption.pipeline.supervisor import EngineSupervisor
    from caption.summary.tally import JobTally
    from video_io.decode import decode_clip

    job = job_config(["engine=vllm", "engine.max_restarts=1", "engine.max_inflight=2"])
    clip = decode_clip(str(synth_dir / "clip_00000.mp4"), job.decode)
    requests = _requests(job, clip, [8.0, 8.0, 0.001, 8.0, 8.0, 8.0, 8.0])
    supervisor, tally = EngineSupervisor(job), JobTally()
    supervisor.start()
    try:
        results = {r.request.key: r for r in supervisor.run(requests, tally)}
    finally:
        supervisor.close()
    assert sorted(results) == [f"clip{i}" for i in range(7)]  # every request answered, none twice
    failed = sorted(k for k, r in results.items() if r.error)
    assert "clip2" in failed and all("engine failed" in results[k].error for k in failed)
    assert set(failed) <= {"clip2", "clip3"}  # in flight with it (max_inflight=2); clip0/1 were done by then
    assert all(results[k].error is None and results[k].text for k in ("clip0", "clip1", "clip4", "clip5", "clip6"))
    assert supervisor.restarts == 1 and tally.engine_restarts == 1 and "IndexError" in tally.engine_failures[0]


def test_an_engine_that_keeps_breaking_stops_the_job_with_the_plan_and_a_hint(job_config, synth_dir):
    from caption.pipeline.supervisor import EngineSupervisor
    from caption.summary.tally import JobTally
    from video_io.decode import decode_clip

    job = job_config(["engine=vllm", "engine.max_restarts=0"])
    clip = decode_clip(str(synth_dir / "clip_00000.mp4"), job.decode)
    supervisor = EngineSupervisor(job)
    supervisor.start()
    try:
        with pytest.raises(EngineDied, match=r"IndexError.*Plan: model vidcap-ko-tiny.*lower gpu.max_num_seqs"):
            list(supervisor.run(_requests(job, clip, [0.001]), JobTally()))
    finally:
        supervisor.close()


def test_a_model_that_does_not_load_ends_the_job_in_one_line_and_a_rerun_captions_every_clip(tmp_path, synth_dir,
                                                                                             model_dir):
    """A weights file cut short (a copy that stopped halfway): exit status 4 with one line naming the folder
    and the library's reason, the traceback in caption.log, a summary saying so, no record written; once the
    file is whole again the same command captions every clip."""
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    weights = (model_dir / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(3):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    out = tmp_path / "o.jsonl"
    command = (f"input_dir={folder}", f"output={out}", f"model.path={model}", "engine=hf", "progress=false")
    code, stdout, err = _run(tmp_path, *command)
    assert code == EXIT_ENGINE_DIED, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"caption: the hf engine could not load the model {model}: SafetensorError: "), last
    log = tmp_path / "run" / "caption.log"
    assert f"(the traceback is in {log})" in last and "Traceback" not in err and "Traceback" in log.read_text()
    assert "stopped early (engine did not load): 3 record(s) left undone" in stdout
    summary = json.loads((tmp_path / "o.jsonl.summary.json").read_text())
    assert summary["stopped"] == "engine did not load" and summary["exit_status"] == EXIT_ENGINE_DIED
    assert not out.exists() or _records(out) == []
    (model / "model.safetensors").write_bytes(weights)
    code, stdout, err = _run(tmp_path, *command)
    assert code == 0, err[-3000:]
    assert sorted(r["video"] for r in _records(out)) == [f"clip_{i:05d}.mp4" for i in range(3)]


def test_admission_refuses_what_would_break_the_engine():
    from caption.pipeline.admission import PositionLimits, refusal

    limits = PositionLimits(max_positions=1024, temporal_patch_size=2, tokens_per_second=2, fps_scaled=True)
    good = {"fps": 30.0, "duration": 10.0, "total_num_frames": 300, "frames_indices": list(range(0, 300, 38))}
    assert refusal(8, good, limits, prompt_budget=100) is None
    for change, expected in [({"fps": 0.001}, "beyond the model's 1024 positions"), ({"fps": -0.654}, "fps"),
                             ({"fps": float("nan")}, "fps"), ({"duration": 0.0}, "duration"),
                             ({"frames_indices": [0, 400, 1, 2, 3, 4, 5, 6]}, "outside the clip"),
                             ({"frames_indices": [0, 1]}, "2 frame indices for 8 frames")]:
        assert expected in refusal(8, good | change, limits, prompt_budget=100)
    slow = PositionLimits(max_positions=1024, fps_scaled=False)  # families whose positions ignore fps
    assert refusal(8, good | {"fps": 0.001}, slow, prompt_budget=100) is None


@pytest.mark.parametrize("raised, hint", [
    (MemoryError(), "the host's memory did not hold it: close what else uses it"),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to "
                  "allocate 2147483648 bytes. Error code 12 (Cannot allocate memory)\nout of memory"),
     "the host's memory did not hold it"),
    (OSError("Unable to load weights from checkpoint file"), "check that folder (config.json, and every weights"),
    (ModuleNotFoundError("No module named 'flash_attn'", name="flash_attn"),
     "the package flash_attn is not installed here: pip install flash_attn"),
])
def test_why_a_model_did_not_load_comes_with_what_to_do(job_config, monkeypatch, raised, hint):
    """The library's reason in one line (a multi-line message folded), then what to do about that kind of failure."""
    from caption.outcome import EngineDidNotLoad
    from caption.pipeline import supervisor

    def fails(spec):
        raise raised

    monkeypatch.setattr(supervisor, "build_engine", fails)  # a load that fails as these do, without the memory
    job = job_config(["engine=hf"])
    with pytest.raises(EngineDidNotLoad) as caught:
        supervisor.load_engine_or_say_why(job)
    said = str(caught.value)
    assert said.startswith(f"the hf engine could not load the model {job.engine_spec.model_path}: "
                           f"{type(raised).__name__}") and "\n" not in said
    assert hint in said.split(" (the traceback is above): ")[1]


def test_a_signal_while_the_model_loads_is_an_interruption_not_a_model_that_cannot_load(job_config, monkeypatch):
    """A library whose clean-up fails while the signal's JobInterrupted unwinds (caption/outcome.py
    interruption_behind) raises its own error in the interrupt's place: the job stops as interrupted (exit 130,
    resumable), not as a model that does not load (exit 4, "check that folder")."""
    from caption.outcome import JobInterrupted
    from caption.pipeline import supervisor

    def interrupted_while_loading(spec):
        try:
            raise JobInterrupted()  # what the signal handler raises (caption/cli.py)
        finally:
            raise RuntimeError("a library's clean-up, failing in the interrupt's place")

    monkeypatch.setattr(supervisor, "build_engine", interrupted_while_loading)
    with pytest.raises(JobInterrupted):
        supervisor.load_engine_or_say_why(job_config(["engine=hf"]))


# A Python in which torchvision was never installed (`pip install .` into an image without it): no finder
# finds it, so transformers' own check (importlib.util.find_spec) reports it missing and raises its error
HIDE_TORCHVISION_AND_LOAD = """
import sys


class NoTorchvision:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        return None if name.partition(".")[0] == "torchvision" else self.finder.find_spec(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)


sys.meta_path[:] = [NoTorchvision(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]

from hydra import compose, initialize_config_dir

from caption.settings.config import CONF_DIR
from caption.outcome import EngineDidNotLoad
from caption.pipeline.supervisor import load_engine_or_say_why
from caption.planning import load_planned_job

with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
    job = load_planned_job(compose(config_name="config", overrides=sys.argv[1:]))
try:
    load_engine_or_say_why(job)
except EngineDidNotLoad as said:
    print(said)
"""


def test_a_model_that_does_not_load_for_a_missing_torchvision_says_which_build_to_install(tmp_path, synth_dir):
    """transformers' video processor needs torchvision, which the base install leaves to the image: without
    it the load fails in transformers (its own ImportError), and the line names the package and the pip
    command for the build that fits the torch there, not the damaged-checkpoint advice."""
    from importlib.metadata import version

    from caption.settings.config import REPO_ROOT
    from vidcap_ko.torchvision_shim import install_line

    done = subprocess.run([sys.executable, "-c", HIDE_TORCHVISION_AND_LOAD, f"input_dir={synth_dir}",
                           f"output={tmp_path / 'o.jsonl'}", "engine=hf"], capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.strip().splitlines()[-1]
    assert "ImportError: Qwen2VLVideoProcessor requires the Torchvision library but it was not found" in said, said
    torch = version("torch")
    assert f"the package torchvision is not installed here (transformers' video processors need it): install the " \
           f"build for this torch {torch}, leaving torch as it is: {install_line(torch)}" in said
    assert "checkpoint" not in said and "\n" not in said


def test_the_torchvision_to_install_is_the_one_built_for_the_torch_there():
    from vidcap_ko.torchvision_shim import install_line

    assert install_line("2.13.0+cpu") == ("pip install --no-deps 'torchvision==0.28.*' && "
                                          "python -m vidcap_ko.torchvision_shim install")
    assert install_line("2.11.0+cu130") == ("pip install --no-deps 'torchvision==0.26.*' "
                                            "--index-url https://download.pytorch.org/whl/cu130")
    assert install_line("2.12.1") == "pip install --no-deps 'torchvision==0.27.*'"
    assert install_line("3.0.0") == "pip install --no-deps torchvision, the release built for this torch"


def _two_clips_and(tmp_path, synth_dir, *extra: tuple[str, bytes]):
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    for name, data in extra:
        (folder / name).write_bytes(data)
    return folder


def test_the_speed_is_over_the_clips_captioned_not_those_that_only_failed(compose_config, tmp_path, synth_dir,
                                                                           hf_engine, capsys):
    """A trial that took only a broken file generated nothing: no speed (it said hundreds of videos/s, the
    broken clip's error record over the moment it took). With clips captioned, the speed counts them alone."""
    from caption.job import run_job

    folder = _two_clips_and(tmp_path, synth_dir, ("a_broken.mp4", b"not a video at all"))
    out = tmp_path / "o.jsonl"
    base = [f"input_dir={folder}", f"output={out}", "engine=hf", "progress=false", "references=null",
            "video.workers=0"]
    trial = run_job(compose_config([*base, "limit=1"]), engine=hf_engine)
    assert trial["videos_run"] == 1 and trial["captions_failed"] == 1 and trial["videos_captioned"] == 0
    assert trial["videos_per_s"] is None and trial["output_tokens_per_s"] is None
    printed = capsys.readouterr().out.split("== caption job summary ==")[1]
    assert "1 run, 1 failed" in printed and "videos/s" not in printed and "\n  speed " not in printed, printed

    rest = run_job(compose_config([*base, "retry_errors=true"]), engine=hf_engine)  # the broken one again, and two
    assert rest["videos_run"] == 3 and rest["videos_failed"] == 1 and rest["videos_captioned"] == 2
    assert rest["videos_per_s"] == pytest.approx(2 / rest["generation_wall_s"], rel=0.1)
    assert f"speed        {rest['videos_per_s']} videos/s" in capsys.readouterr().out


def _summary_copies(out) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.parent.glob(f"{out.name}.summary.*.json"))]


def test_running_a_job_again_and_again_keeps_only_the_summaries_that_would_be_lost(compose_config, tmp_path,
                                                                                  synth_dir, hf_engine):
    """Each run replaces the summary beside the output; the one before is kept (dated) only where nothing else
    says what it said. Without a run folder (the job in process, the Python API): the runs that captioned
    something are kept, those that found nothing to do are not. Seven runs: two copies, not six."""
    from caption.job import run_job

    folder = _two_clips_and(tmp_path, synth_dir)
    out = tmp_path / "o.jsonl"
    base = [f"input_dir={folder}", f"output={out}", "engine=hf", "progress=false", "references=null",
            "video.workers=0"]
    runs = [run_job(compose_config([*base, "limit=1"]), engine=hf_engine),  # a trial: one clip
            run_job(compose_config(base), engine=hf_engine)]  # the other one
    runs += [run_job(compose_config(base), engine=hf_engine) for _ in range(5)]  # nothing left to do
    assert [r["videos_run"] for r in runs] == [1, 1, 0, 0, 0, 0, 0] and all(r["run_result"] is None for r in runs)
    copies = _summary_copies(out)
    assert [(c["videos_run"], c["captions_ok"]) for c in copies] == [(1, 1), (1, 1)]  # the runs that captioned
    assert [len(r["previous_files_kept_as"] or []) for r in runs] == [0, 1, 1, 0, 0, 0, 0]
    assert json.loads((tmp_path / "o.jsonl.summary.json").read_text())["videos_skipped_resume"] == 2


def test_a_commands_earlier_summary_stays_in_its_run_folder_and_is_kept_beside_the_output_once_that_is_reused(
        tmp_path, synth_dir):
    """The command writes each run's summary into its run folder too (result.json, named in `run_result`):
    there it is not lost when the next run replaces the one beside the output, so no copy is made. A run
    folder given again (hydra.run.dir) holds the later run's instead: then the earlier one is kept."""
    folder = _two_clips_and(tmp_path, synth_dir)
    out = tmp_path / "o.jsonl"
    command = [f"input_dir={folder}", f"output={out}", "engine=hf", "progress=false", "references=null"]

    def caption(run, *extra):  # the command's main() in this process (tests/caption/in_process.py)
        done = run_caption([*command, *extra, f"hydra.run.dir={tmp_path / run}"], env=ENV, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((tmp_path / "o.jsonl.summary.json").read_text())

    first = caption("run1", "limit=1")
    assert first["run_result"] == str(tmp_path / "run1" / "result.json")
    second = caption("run2")
    assert second["videos_run"] == 1 and not second["previous_files_kept_as"] and _summary_copies(out) == []
    held = json.loads((tmp_path / "run1" / "result.json").read_text())["summary"]
    assert held == first  # the first run's summary, whole, where its run_result says
    third = caption("run2")  # the same run folder: the second run's result.json is the third's now
    assert third["videos_run"] == 0 and len(third["previous_files_kept_as"]) == 1
    assert _summary_copies(out) == [second]


def test_a_failed_segment_is_named_in_tenths_of_a_second_as_the_page_names_it():
    from caption.summary.tally import JobTally

    tally = JobTally()
    tally.count({"video": "reel.mp4", "task": "caption", "adapter": None, "status": "error", "error": "decode: x",
                 "segment_index": 1, "segments": 3, "start_s": 2.941667, "end_s": 5.3})
    assert tally.failures == {"reel.mp4": "segment 1 (2.9-5.3 s): decode: x"}
