"""One writer per output: a job holds an exclusive lock on `<output>.lock` for its whole life.

Two jobs appending to one records file would each caption every clip and write every record twice (a
command started in two terminals, a scheduler's retry while the first attempt still runs). The lock is an
OS file lock (flock), held through an open file descriptor: it dies with the process, so a job killed with
`kill -9` leaves no lock behind, only at most a lock file that the next job takes over. The file holds who
holds the lock (pid, host, start time, command), which is what a refused job names.

The lock is taken before the job reads its output (to resume it) and released after the last record and
the summary are written. A job that ends removes the lock file while still holding the lock; a job that
opened the file just before it was removed notices (the path no longer leads to the file it locked) and
opens it again, so two jobs can never both believe they hold it.

Network filesystems: Linux implements flock on NFS with the server's byte-range locks, so on NFSv4 (and
NFSv3 with lockd) jobs on different machines exclude each other; on a mount without locking (`nolock`) or
a filesystem that refuses locks, the lock holds only among jobs on one machine. Where the filesystem
refuses locks altogether the job says so in a warning and goes on (docs/robustness.md).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from caption.output.checks import OutputRefused

LOCK_SUFFIX = ".lock"


class OutputBusy(OutputRefused):
    """Another job holds the output's lock; the message names it (exit status 6: caption/outcome.py)."""


def lock_path(output: Path) -> Path:
    return Path(output).with_name(Path(output).name + LOCK_SUFFIX)


class OutputLock:
    """An exclusive lock on one output, held from `acquire` until `release` (or the process's end)."""

    def __init__(self, output: Path):
        self.output, self.path = Path(output), lock_path(output)
        self._fd: int | None = None
        self.unsupported: str | None = None  # why the filesystem gave no lock (the job goes on, warned)

    @classmethod
    def acquire(cls, output: Path) -> "OutputLock":
        """Take the lock or raise OutputBusy naming the job that holds it; changes nothing else."""
        lock = cls(output)
        lock._take()
        return lock

    def _take(self) -> None:
        for _ in range(100):  # another job removing the file between our open and our lock: open again
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _read_holder(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise OutputBusy(_busy_message(self.output, holder)) from None
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    self.unsupported = f"{os.strerror(exc.errno)} ({errno.errorcode.get(exc.errno, exc.errno)})"
                    return  # no lock to hold: the job goes on and warns (job.py)
                raise
            if _same_file(fd, self.path):
                if os.fstat(fd).st_size and not _read_holder(fd):  # a file of the user's under that name
                    os.close(fd)
                    raise OutputRefused(f"`output={self.output}`: the job keeps its lock in {self.path}, which "
                                        "holds something else; move that file away or choose another output=")
                self._fd = fd
                _write_holder(fd)
                return
            os.close(fd)  # the file we locked was removed by the job that just ended: take the new one
        raise OutputBusy(f"`output={self.output}`: its lock file {self.path} keeps being replaced; "
                         "is another job starting and stopping on it?")

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except IsADirectoryError:
            raise OutputRefused(f"`output={self.output}`: {self.path} is a folder, and the job keeps its lock "
                                "there: move it away or choose another output=") from None

    def release(self) -> None:
        """Remove the lock file, then let the lock go (safe to call twice)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if _same_file(fd, self.path):
                os.unlink(self.path)
        except OSError:
            pass  # a read-only folder by now, say: the lock itself still goes with the descriptor
        finally:
            os.close(fd)

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _write_holder(fd: int) -> None:
    holder = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "command": " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])[:500]}
    data = (json.dumps(holder, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # a full disk: the lock holds all the same, only the name of its holder is missing


def _read_holder(fd: int) -> dict[str, Any] | None:
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return holder if isinstance(holder, dict) and "pid" in holder else None


def _busy_message(output: Path, holder: dict[str, Any] | None) -> str:
    if holder:
        who = (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, started {holder.get('started', '?')}: "
               f"`{holder.get('command', '?')}`")
    else:
        who = "a job that is just starting"
    return (f"`output={output}` is being written by another job ({who}); two jobs on one output would write "
            "every record twice: wait for it to finish (then run this command again to resume), stop it, or "
            "choose another output=")
