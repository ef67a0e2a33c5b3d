"""The decode pool: results keyed by path, hung or crashing decoders cost one clip, not the job."""

from __future__ import annotations

import json
import os
import shutil
import time

from tests.video_io.hanging_decoders import crash_on_name, hang_on_name, report_surroundings, slow_on_name
from video_io.decode import DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.workers import DecodePool

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


def _folder(tmp_path, synth_dir, names):
    for i, name in enumerate(names):
        shutil.copy(synth_dir / f"clip_0000{i % 6}.mp4", tmp_path / name)
    return [str(tmp_path / n) for n in names]


def test_every_path_gets_exactly_one_result(tmp_path, synth_dir):
    paths = _folder(tmp_path, synth_dir, [f"v{i}.mp4" for i in range(7)]) + [str(tmp_path / "missing.mp4")]
    with DecodePool(DecodeSpec(EIGHT_FRAMES, width=56, height=56), workers=2, timeout_s=30) as pool:
        results = list(pool.imap(paths))
    assert sorted(r.path for r in results) == sorted(paths)
    by_path = {r.path: r for r in results}
    assert not by_path[str(tmp_path / "missing.mp4")].ok
    assert all(by_path[p].ok and by_path[p].clip.frames.shape == (8, 56, 56, 3) for p in paths[:-1])


def test_a_hung_decoder_is_killed_and_the_stream_goes_on(tmp_path, synth_dir):
    paths = _folder(tmp_path, synth_dir, ["a.mp4", "hang.mp4", "b.mp4", "c.mp4"])
    started = time.perf_counter()
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=2, timeout_s=2, decode_fn=hang_on_name) as pool:
        results = {r.path: r for r in pool.imap(paths)}
        assert pool.restarts == 1
    assert time.perf_counter() - started < 30
    assert "timed out after 2s" in results[str(tmp_path / "hang.mp4")].error
    assert all(results[str(tmp_path / n)].ok for n in ("a.mp4", "b.mp4", "c.mp4"))


def test_a_crashing_decoder_is_replaced(tmp_path, synth_dir):
    paths = _folder(tmp_path, synth_dir, ["crash.mp4", "a.mp4", "b.mp4"])
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=1, timeout_s=30, decode_fn=crash_on_name) as pool:
        results = {r.path: r for r in pool.imap(paths)}
    assert "decoder process died (exit code 11): the decoder crashed" in results[str(tmp_path / "crash.mp4")].error
    assert results[str(tmp_path / "a.mp4")].ok and results[str(tmp_path / "b.mp4")].ok


def test_in_process_mode(tmp_path, synth_dir):
    paths = _folder(tmp_path, synth_dir, ["a.mp4"])
    results = list(DecodePool(DecodeSpec(EIGHT_FRAMES), workers=0).imap(paths))
    assert len(results) == 1 and results[0].ok


def test_ready_says_without_waiting_whether_a_result_is_in(tmp_path, synth_dir):
    """A consumer with other work (an engine with requests in flight) asks ready() and takes only
    what is decoded: ready() is False while the decoder works, True once its clip is in and at the
    end, and a decoder that overruns its deadline is still caught by it."""
    paths = _folder(tmp_path, synth_dir, ["slow.mp4", "hang.mp4"])
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=1, timeout_s=4, decode_fn=slow_on_name) as pool:
        stream = pool.imap(paths[:1])
        assert stream.ready() is False  # the decoder has the clip, for 1.5 s
        deadline = time.perf_counter() + 30
        while not stream.ready():
            assert time.perf_counter() < deadline
            time.sleep(0.05)
        assert next(stream).ok
        assert stream.ready() is True  # ended: next() does not wait
        assert next(stream, None) is None
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=1, timeout_s=2, decode_fn=hang_on_name) as pool:
        stream = pool.imap(paths[1:])
        deadline = time.perf_counter() + 30
        while not stream.ready():
            assert time.perf_counter() < deadline
            time.sleep(0.05)
        assert "timed out after 2s" in next(stream).error and pool.restarts == 1


def test_taking_the_first_clips_stops_at_their_number_when_decoders_finish_together(tmp_path, synth_dir):
    """While the engine loads, the stream takes the clips it starts with (`meanwhile(ahead=...)`) and no
    more: two decoders that finish in the same instant (a thread that waited, on a busy machine) leave the
    second clip in its decoder's pipe, where each decoder holds one anyway. Made certain here by waiting
    until both answers are in before collecting; nothing is lost after."""
    paths = _folder(tmp_path, synth_dir, [f"v{i}.mp4" for i in range(4)])
    with DecodePool(DecodeSpec(EIGHT_FRAMES, width=56, height=56), workers=2, timeout_s=30) as pool:
        stream = pool.imap(paths)
        deadline = time.perf_counter() + 60
        while not all(w.path is not None and w.conn.poll() for w in pool._workers):  # both answered
            assert time.perf_counter() < deadline
            stream._hand_out()
            time.sleep(0.05)
        stream._collect(stream._busy(), 1.0, room=1)
        assert len(stream.results) == 1
        assert sum(w.path is not None for w in pool._workers) == 1  # the other clip waits in its pipe
        assert sorted(r.path for r in stream) == sorted(paths)  # and comes out with the rest


def _surroundings(result) -> dict:
    return json.loads(result.error[result.error.index("{"):])


def test_decoders_are_forked_from_one_server_and_see_the_jobs_environment_and_cores_of_now(tmp_path, synth_dir,
                                                                                         monkeypatch):
    """The fork server starts with the first decoder of this process; a decoder started later, after the job
    changed its environment and its cores, sees them as a spawned one would."""
    paths = _folder(tmp_path, synth_dir, ["a.mp4", "b.mp4"])
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=1, decode_fn=report_surroundings) as pool:
        before = [_surroundings(r) for r in pool.imap(paths[:1])]
    monkeypatch.setenv("VIDCAP_TEST_MARK", "set after the server started")
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(cores)})
    try:
        with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=2, decode_fn=report_surroundings) as pool:
            after = [_surroundings(r) for r in pool.imap(paths)]
    finally:
        os.sched_setaffinity(0, cores)
    assert before[0]["mark"] is None and before[0]["cores"] == sorted(cores)
    assert [(s["mark"], s["cores"]) for s in after] == [("set after the server started", [max(cores)])] * 2
    seen = before + after
    # one parent, not this process: the fork server, which had PyAV imported before any decoder started
    assert len({s["parent"] for s in seen}) == 1 and seen[0]["parent"] != os.getpid()
    assert all(s["av_preloaded"] for s in seen)


DEEP_TEMPORARY_FOLDER_SCRIPT = """
import json, os, sys, tempfile
from tests.video_io.hanging_decoders import report_surroundings
from video_io.decode import DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.workers import DecodePool

with DecodePool(DecodeSpec(SamplingSpec(num_frames=8)), workers=1, timeout_s=60, decode_fn=report_surroundings) as pool:
    (fake,) = list(pool.imap([sys.argv[1]]))
with DecodePool(DecodeSpec(SamplingSpec(num_frames=8), width=56, height=56), workers=1, timeout_s=60) as pool:
    (real,) = list(pool.imap([sys.argv[1]]))
print(json.dumps({"seen": fake.error, "ok": real.ok, "error": real.error, "pid": os.getpid(),
                  "tempdir": tempfile.gettempdir()}))
"""


def test_decoders_start_under_a_temporary_folder_too_deep_for_the_fork_servers_socket(tmp_path, synth_dir):
    """TMPDIR 100 characters deep (a cluster job's scratch folder): the fork server's socket,
    <TMPDIR>/pymp-XXXXXXXX/listener-XXXXXXXX, would pass the 107 bytes a Unix socket's path may have, and the
    job ended with "OSError: AF_UNIX path too long". Its folder is made in /tmp instead; the decoders are still
    forked from the server, and the process's own temporary files still go to TMPDIR, left empty at exit."""
    import subprocess
    import sys

    from caption.settings.config import REPO_ROOT

    deep = tmp_path / ("scratch-" + "d" * (100 - len(str(tmp_path)) - 9))
    deep.mkdir()
    assert len(str(deep)) == 100
    clip = _folder(tmp_path, synth_dir, ["a.mp4"])[0]
    env = {**os.environ, "TMPDIR": str(deep), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", DEEP_TEMPORARY_FOLDER_SCRIPT, clip], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"], result["error"]
    seen = json.loads(result["seen"][result["seen"].index("{"):])
    assert seen["av_preloaded"] and seen["parent"] != result["pid"]  # forked from the server, not spawned
    assert result["tempdir"] == str(deep) and list(deep.iterdir()) == []
