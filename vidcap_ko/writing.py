"""Faults of the machine, not of the job: a file the job writes that cannot be written.

A full disk, a read-only filesystem, a permission the user lacks, an I/O error: each ends the job
with one line that names the file, the cause and what to do, and exit status 5
(vidcap_ko/exit_status.py), never a traceback. Nothing already written is lost: records are appended
whole or cut back to the last whole one (caption/output/checks.py), so once the fault is cleared the
same command resumes where the job stopped.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# errno -> (the cause in words, what to do; {elsewhere} is where the location is set)
_CAUSES = {
    errno.ENOSPC: ("no space left on its disk", "free space there, or {elsewhere}"),
    errno.EDQUOT: ("the disk quota is used up", "free space within your quota, or {elsewhere}"),
    errno.EFBIG: ("the file is larger than its filesystem allows", "{elsewhere}"),
    errno.EROFS: ("its filesystem is read-only", "{elsewhere}, or remount it read-write"),
    errno.EACCES: ("permission denied", "make it writable for this user, or {elsewhere}"),
    errno.EPERM: ("operation not permitted", "make it writable for this user, or {elsewhere}"),
    errno.EIO: ("an I/O error (a failing disk or network filesystem)", "check the disk, or {elsewhere}"),
    # a file where a folder of the path should be (output=results/c.jsonl with a file named results)
    errno.ENOTDIR: ("a part of its path is a file, not a folder", "{elsewhere}"),
    errno.EEXIST: ("a file is where its folder should be", "{elsewhere}"),
    errno.EISDIR: ("it is a folder", "give a file name, or {elsewhere}"),
}


class WriteFailed(Exception):
    """A file of the job could not be written; str() is the one line the user sees.

    `what` names the file for a person ("records file", "run folder"); `setting` is the option that
    moves it elsewhere (output, summary_path, hydra.run.dir); `tail` ends the line (what was kept)."""

    def __init__(self, path: str | os.PathLike[str], cause: OSError, what: str, setting: str | None = None,
                 tail: str | None = None):
        self.path, self.cause, self.what, self.setting, self.tail = Path(path), cause, what, setting, tail
        super().__init__(self.message())

    def again(self, setting: str | None = None, tail: str | None = None) -> "WriteFailed":
        """The same failure, said with the option and the ending the caller knows."""
        return WriteFailed(self.path, self.cause, self.what, setting or self.setting, tail or self.tail)

    @property
    def errno_name(self) -> str:
        return errno.errorcode.get(self.cause.errno or 0, "OSError")

    def message(self) -> str:
        cause, fix = _CAUSES.get(self.cause.errno or 0, (self.cause.strerror or str(self.cause),
                                                   "check the path, or {elsewhere}"))
        if self.what == "records file":
            elsewhere = "move the file to another disk and point output= at it"
        else:
            elsewhere = "choose another location" + (f" ({self.setting}=...)" if self.setting else "")
        fix = fix.format(elsewhere=elsewhere)
        line = (f"cannot write the {self.what} {self.path}: {cause} ({self.errno_name}). "
                f"{fix[0].upper()}{fix[1:]}; then run the same command again")
        return f"{line}: {self.tail}" if self.tail else line


@contextmanager
def writing(path: str | os.PathLike[str], what: str, setting: str | None = None) -> Iterator[None]:
    """Turn an OSError raised while writing `path` into WriteFailed naming it as `what`."""
    try:
        yield
    except OSError as exc:
        raise WriteFailed(exc.filename or path, exc, what, setting) from None


def check_writable(folder: Path, what: str) -> None:
    """Write, sync and remove a small file in `folder`: a read-only, unwritable or already full disk
    fails here, before any model loads, instead of after the first results. Each call's probe has its own
    name (process, thread and a random token): two threads checking one folder at once would otherwise
    meet each other's probe (EEXIST) and report a fault the disk does not have."""
    probe = folder / f".caption-write-check-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    with writing(folder, what):
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                os.write(fd, b"{}\n")
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            os.unlink(probe)


def free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def remove_quietly(path: Path) -> None:
    """Remove a temporary file after a failed write; a fault that forbids that too is already reported."""
    try:
        os.unlink(path)
    except OSError:
        pass


def write_whole(path: Path, data: bytes, temporary_suffix: str = ".partial") -> None:
    """Write `data` as `path` whole or not at all: under a temporary name beside it, synced, then renamed
    (a reader never sees half a file). On OSError the temporary file is removed and `path` is untouched."""
    tmp = Path(path).with_name(Path(path).name + temporary_suffix)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        remove_quietly(tmp)
        raise


def check_can_write(path: str | os.PathLike[str], what: str, setting: str | None = None, into: bool = False) -> None:
    """Before the expensive part of a command: `path` can be written (`into`: files can be written into the
    folder `path`). Its folder, or the nearest of its parents that exists (the writer makes the missing
    ones), is a folder that takes a file; else WriteFailed in one line naming `path` as `what` and the
    option (`setting`) that moves it."""
    folder = Path(path).expanduser().absolute()
    folder = folder if into else folder.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
        check_writable(folder, what)
    except (WriteFailed, OSError) as exc:
        cause = exc.cause if isinstance(exc, WriteFailed) else exc
        raise WriteFailed(path, cause, what, setting) from None
