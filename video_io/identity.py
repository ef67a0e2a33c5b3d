"""Which file a record was made from: its size, modification time and a fingerprint of its bytes.

A clip is named in records by its path inside the captioned folder, and cameras reuse names
(`C0001.MP4`, `GX010001.MP4`): a name alone does not say that a file is the one that was captioned.
Each record therefore carries `source`, this module's identity of the file, and a resumed job, the review
page and the subtitle export compare it with the file found under that name today.

The fingerprint (BLAKE2b, 128 bits) hashes the file's size, its first and last 16 KiB (an MP4's `ftyp`
and `moov` boxes sit at one end or the other: durations, sample tables and the creation time in `mvhd`,
which differ between any two recordings) and 8 pieces of 4 KiB spread between them: 64 KiB read per
file, whatever its size. Comparing is cheaper still: a file whose size and modification time (to the nanosecond) are those
recorded, in the same folder, is the same file without reading it (the rule rsync and make use); only a
file that moved or was touched is read, and it is the same file when its size and fingerprint are.

The identity a record carries is taken by the decoder, where the bytes are read (OpenedFile): when it
opens the file, before decoding, and checked once the frames are out. A clip re-exported while the job
runs (copied and renamed into place: another inode; or rewritten in place: another size or modification
time) between those two moments is never captioned under either file's identity: its record is an error
saying it changed while it was read, and the next run captions the file there then. Taking the identity
later, when the record is written, would name the new file for the old file's frames: decoders read
ahead of the engine, by seconds on a GPU.

An object in a store (video_io/store.py) is identified by what the store says of it: its size, ETag,
last-modified time and, in a versioned bucket, its version id. No byte is read for it: the ETag
changes whenever the object is written. The listing gives each object's identity, so a resume over
thousands of objects compares without a request per object; the decoder asks again (HEAD) when it opens
an object and once it has read it, and nothing else asks (a clip costs two HEADs).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from video_io.store import ObjectInfo, head, is_url, listed, store_reason

Identity = dict[str, Any]  # a record's `source`: input_dir, size, mtime_ns, modified, fingerprint
StrPath = str | os.PathLike[str]

EDGE_BYTES = 16 * 1024  # hashed at each end of the file
PIECES, PIECE_BYTES = 8, 4096  # hashed between the ends, evenly spread


def fingerprint(path: StrPath, size: int | None = None) -> str:
    """The fingerprint of a regular file's bytes (module docstring); OSError if it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never blocks on a FIFO put in its place
    try:
        return _fingerprint_open(fd, os.fstat(fd).st_size if size is None else size)
    finally:
        os.close(fd)


def _fingerprint_open(fd: int, size: int) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(str(size).encode() + b"\x1f")
    if size <= 2 * EDGE_BYTES + PIECES * PIECE_BYTES:
        h.update(os.pread(fd, size, 0))
    else:
        h.update(os.pread(fd, EDGE_BYTES, 0))
        middle = size - 2 * EDGE_BYTES - PIECE_BYTES
        for k in range(PIECES):
            h.update(os.pread(fd, PIECE_BYTES, EDGE_BYTES + middle * k // (PIECES - 1)))
        h.update(os.pread(fd, EDGE_BYTES, size - EDGE_BYTES))
    return h.hexdigest()


def file_identity(path: StrPath, input_dir: StrPath) -> Identity | None:
    """`source` for a record made from `path` (found in `input_dir`): size, modification time and
    fingerprint; None when it is not a regular file that can be read (a FIFO, a dangling link, a file
    gone or unreadable: the decoder says what is wrong with it, in its own error record)."""
    opened = OpenedFile.open(path)
    return None if opened is None else with_folder(opened.identity, input_dir)



def with_folder(identity: Identity, input_dir: StrPath) -> Identity:
    """A decoder's identity of a file (OpenedFile.identity) as a record's `source`: with the folder the
    clip was found in, which only the job knows."""
    return {"input_dir": _folder(os.fspath(input_dir)), **identity}


@dataclass(frozen=True)
class OpenedFile:
    """A file as a decoder opened it: `identity`, what its records carry (size, modification time,
    fingerprint; the folder is added by the job: with_folder), and what tells whether its path still
    leads to those bytes once they are read (`changed`)."""

    identity: Identity
    stat_key: tuple[int, int, int, int]  # device, inode, size, modification time (ns)

    @classmethod
    def open(cls, path: StrPath) -> "OpenedFile | None":
        """The file at `path` now, stat and fingerprint taken through one descriptor (so both describe the
        same file, whatever is renamed onto the path meanwhile); None when it is not a regular file that
        can be read (the decoder says what is wrong with it, in its own error). An object in a store:
        what the store says of it now (OpenedObject)."""
        if is_url(path):
            return OpenedObject.open(str(path))
        try:  # nothing but a regular file is opened (a device under a clip's name is never touched)
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never blocks on a FIFO put in its place
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            digest = _fingerprint_open(fd, st.st_size)
        except OSError:
            return None
        finally:
            os.close(fd)
        identity = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "modified": _utc(st.st_mtime_ns),
                    "fingerprint": digest}
        return cls(identity, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))

    def changed(self, path: StrPath) -> str | None:
        """None while `path` leads to the file opened (same inode, size and modification time: nothing
        renamed onto it, nothing written into it), else what it is now, in words."""
        try:
            st = os.stat(path)
        except OSError as exc:
            return f"it was {describe(self.identity)}; it is now gone ({exc.strerror})"
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == self.stat_key:
            return None
        if (st.st_dev, st.st_ino) != self.stat_key[:2]:
            now = "another file put in its place"
        else:
            now = "the same file, written to"
        return (f"it was {describe(self.identity)}; it is now {now}, "
                f"{describe({'size': st.st_size, 'modified': _utc(st.st_mtime_ns)})}")


class OpenedObject(OpenedFile):
    """An object in a store as a decoder opened it: its identity, and whether the store still holds that
    version under its name (same ETag and size) once it is read."""

    @classmethod
    def open(cls, path: StrPath) -> "OpenedObject | None":
        try:
            info = head(str(path))
        except Exception:  # missing, forbidden, unreachable: the decoder says so in its own error
            return None
        return cls(info.identity(), (0, 0, info.size, 0))

    @property
    def info(self) -> ObjectInfo:
        """The store's answer this identity was taken from (what the decoder opens the object by)."""
        i = self.identity
        return ObjectInfo(i["size"], i.get("etag"), i.get("modified"), i.get("version_id"))

    def changed(self, path: StrPath) -> str | None:
        try:
            now = head(str(path)).identity()
        except FileNotFoundError:
            return f"it was {describe(self.identity)}; it is now gone (deleted from the store)"
        except Exception as exc:
            return f"it was {describe(self.identity)}; the store cannot say what it is now ({store_reason(exc)})"
        if _same_object(self.identity, now):
            return None
        return f"it was {describe(self.identity)}; it is now overwritten, {describe(now)}"


def _same_object(recorded: Identity, now: Identity) -> bool:
    """The same version of an object: the same ETag and size (and version id, where both have one)."""
    if (recorded.get("etag"), recorded.get("size")) != (now.get("etag"), now.get("size")):
        return False
    return not (recorded.get("version_id") and now.get("version_id")
                and recorded["version_id"] != now["version_id"])


def _compare_object(recorded: Identity, url: str, input_dir: StrPath) -> str | None:
    try:
        now = {"input_dir": _folder(os.fspath(input_dir)), **listed(url).identity()}
    except FileNotFoundError:
        return f"it was {describe(recorded)}; it is now gone (deleted from the store)"
    except Exception as exc:
        return f"it was {describe(recorded)}; the store cannot say what it is now ({store_reason(exc)})"
    return None if _same_object(recorded, now) else f"it was {describe(recorded)}; it is now {describe(now)}"


def compare(recorded: object, path: StrPath, input_dir: StrPath) -> str | None:
    """None when `path` is the file `recorded` (a record's `source`) describes, else what differs, in
    words for a one-line message. A record without `source` (written before records carried one) and a
    file that was not readable then and is not now (both None) compare equal."""
    if not isinstance(recorded, dict):
        return None
    if is_url(path):
        return _compare_object(recorded, str(path), input_dir)
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"it was {describe(recorded)}; it is now gone ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"it was {describe(recorded)}; it is now not a regular file"
    if st.st_size == recorded.get("size"):
        if st.st_mtime_ns == recorded.get("mtime_ns") and _folder(os.fspath(input_dir)) == recorded.get("input_dir"):
            return None
        try:
            if fingerprint(path, st.st_size) == recorded.get("fingerprint"):
                return None  # moved, copied or touched: the same bytes
        except OSError as exc:
            return f"it was {describe(recorded)}; it cannot be read now ({exc.strerror})"
    now = {"input_dir": _folder(os.fspath(input_dir)), "size": st.st_size, "modified": _utc(st.st_mtime_ns)}
    return f"it was {describe(recorded)}; it is now {describe(now)}"


def describe(identity: Identity) -> str:
    """A file's identity in words: `1,234,567 bytes, modified 2026-11-20 10:00:03 UTC, in /data/day1`."""
    size = identity.get("size")
    size = f"{size:,} bytes" if isinstance(size, int) else "of unknown size"
    folder = f", in {identity['input_dir']}" if "input_dir" in identity else ""
    etag = f", ETag {identity['etag']}" if identity.get("etag") else ""
    return f"{size}{etag}, modified {identity.get('modified', '?')}{folder}"


@functools.lru_cache(maxsize=64)  # one folder for every clip of a job: 30,000 compares, one lookup
def _folder(input_dir: str) -> str:
    if is_url(input_dir):
        return input_dir.rstrip("/")
    return os.path.abspath(os.fspath(Path(input_dir).expanduser()))


def _utc(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mtime_ns / 1e9))
