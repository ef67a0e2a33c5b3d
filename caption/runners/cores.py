"""Cores for engine actors on the cpu tier: each Ray engine actor claims a group of this machine's cores
no other actor of its run holds, and binds itself to them (caption/runners/ray.py says why)."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

CORE_LOCKS = Path(tempfile.gettempdir()) / "vidcap-ko-cores"  # <run>: one lock file per core group
CORE_WAIT_S = 60.0  # how long a restarted engine actor waits for the dead one's cores to come free


def bind_to_cores(cores: list[int]) -> None:
    """This process onto `cores`: every thread it has (a thread it starts later inherits its
    creator's), and torch's OpenMP team to that many threads (torch applies the count to each thread
    lazily, at its first parallel region: aten/src/ATen/ParallelOpenMP.cpp)."""
    import torch

    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:  # the thread ended meanwhile
            pass
    torch.set_num_threads(len(cores))


def claim_cores(job: JobConfig, engines: int = 0, scope: str = "", wait_s: float = CORE_WAIT_S):
    """On the cpu tier with VLLM_CPU_OMP_THREADS_BIND=all: claim a group of this machine's cores
    (runner.engine_cpus of them) no other engine actor of this `scope` (a run) holds, with a lock
    file the OS releases when this process dies, so a restarted actor gets the cores back.
    (cores, lock) or (None, None).

    Each run claims apart: a finished run's actors never get another batch, but Ray reaps them only
    when their handles are dropped (one held its cores over a minute past its pass in a CI run, when a
    retry was a new dataset), and a later run's actor that waited for them would give up and run unbound.
    An idle actor's OpenMP team does not compete for the cores it was bound to.
    Within a run, when the job's `engines` fit the machine's groups, a group still held is waited for
    (up to wait_s): a killed actor's restart may start before the dead process's lock is gone, and an
    actor that gave up at once ran unbound beside the others (two OpenMP teams spinning on the same
    cores)."""
    env = job.plan.engine_env
    if job.gpu["device"] != "cpu" or str(env.get("VLLM_CPU_OMP_THREADS_BIND")) != "all":
        return None, None
    cores = sorted(os.sched_getaffinity(0))
    size = max(1, min(len(cores), int(job.runner.engine_cpus)))
    groups = [cores[start:start + size] for start in range(0, len(cores) - size + 1, size)]
    folder = CORE_LOCKS / scope
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + (wait_s if 0 < engines <= len(groups) else 0)
    while True:
        for group in groups:
            lock = open(folder / f"cores-{group[0]}-{group[-1]}.lock", "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return group, lock
            except BlockingIOError:
                lock.close()
        if time.monotonic() >= deadline:
            return None, None  # more engines than core groups, or held too long: no binding (they share every core)
        time.sleep(0.2)
