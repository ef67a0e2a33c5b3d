"""Holding a running `caption` job open from a test, so that what the test does to it (a signal, a second
job on its output) lands while it runs, however fast the machine: no test races the job."""

from __future__ import annotations

import os
import signal
import time

HELD = "video.timeout_s=600"  # the job's override: a held decoder's clip is not given up before the test acts


def children_of(pid: int) -> list[int]:
    """The processes `pid` started, from each of its threads' `children` list (proc(5)): a few small reads,
    where a walk over all of /proc reads two files of every process on the machine (4 ms with 69 of them;
    the suite runs ~300), and the tests below poll every 5 ms while a job starts."""
    found = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended
        return []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(child) for child in f.read().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def decoders_of(pid: int) -> list[int]:
    """The decoder processes (video_io/decoder_process.py names them) the job `pid` started: children of the
    fork server it started (video_io/decoder_process.py decoder_context), or its own where they are spawned."""
    from video_io.decoder_process import DECODER_PROCESS_NAME

    found = []
    for process in [p for child in children_of(pid) for p in (child, *children_of(child))]:
        try:
            with open(f"/proc/{process}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name == DECODER_PROCESS_NAME:
            found.append(process)
    return found


def hold_a_decoder(proc, timeout=120) -> int:
    """Stop (SIGSTOP) one of the job's decoder processes as soon as it has started (it takes its name once
    it has told the job so: video_io/decoder_process.py), which is before it can have sent a clip back:
    the clip it holds or is given next never comes back (the job runs with video.timeout_s=600), so the
    job cannot finish before the test's signal lands, however fast it is, as long as it has more clips
    than decoders (a stopped decoder that had sent its one clip back is given the next)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        decoders = decoders_of(proc.pid)
        if decoders:
            os.kill(decoders[0], signal.SIGSTOP)
            return decoders[0]
        time.sleep(0.005)
    raise AssertionError(f"no decoder process of pid {proc.pid} within {timeout}s (exit {proc.poll()})")
