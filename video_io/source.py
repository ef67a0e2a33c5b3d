"""Open one video file for decoding, refusing what is not a readable regular file, and probe its
header; every refusal says what is wrong in words a person can act on.

The file is opened once and decoders read it through /proc/self/fd/N, so (1) every pass of a
decoder reads the same file even if the path is replaced meanwhile, (2) names that are not valid
UTF-8 (surrogate-escaped str on Linux) never have to be re-encoded by a C library, and (3) a FIFO
or device named .mp4 is refused before any read could block on it.

An object in a store (`s3://...`: video_io/store.py) is opened as an ObjectSource: decoders read it
through a file object that fetches byte ranges as they are read, and the same refusals (empty, text,
a cut-short MP4) are made from its first bytes and box headers.
"""

from __future__ import annotations

import os
import re
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from video_io.store import CountingFile, ObjectInfo, head, is_url, store_reason

# An object whose HEAD the caller has just taken, and which the caller asks the store about again once the
# frames are out (decode_path in video_io/decoder_process.py): the decoder opens it from that answer and
# leaves the check after decoding to the caller, so one clip costs the store two HEADs, not four.
_HEAD_TAKEN: ContextVar[tuple[str, ObjectInfo] | None] = ContextVar("head_taken", default=None)


@contextmanager
def object_checked_by_caller(url: str, info: ObjectInfo) -> Iterator[None]:
    """Within: opening `url` uses `info` (the caller's HEAD) and does not ask the store again after decoding;
    the caller does, and refuses the frames if the object changed (video_io/identity.py OpenedObject)."""
    token = _HEAD_TAKEN.set((url, info))
    try:
        yield
    finally:
        _HEAD_TAKEN.reset(token)

# FFmpeg's own messages for the failures seen on damaged and foreign files, and what to tell a
# person instead. Matched case-insensitively against the library's message.
_REASONS = (
    ("moov atom not found",
     "no MP4 index (moov atom missing): the recording or copy was cut short before the file "
     "was finalised; re-copy or re-export it"),
    ("cannot find video stream", "no video stream"),
    ("invalid data found when processing input",
     "not a video FFmpeg can read (Invalid data found when processing input): the file is "
     "damaged or not a video"),
    ("end of file", "the file ends early (truncated): re-copy it"),
    ("not yet implemented in ffmpeg",
     "damaged or unsupported file: FFmpeg met a header version it does not implement (usually a "
     "damaged header); re-copy or re-export it"),
    ("cannot allocate memory", "damaged file: its index claims more data than memory can hold (a damaged "
                               "sample table); re-copy or re-export it"),
    ("error reading", "not a video FFmpeg can read (decord could not open it): the file is damaged "
                      "or not a video"),
)
# decord prefixes FFmpeg's words with its source position and the failed check
_DECORD_NOISE = re.compile(r"\[[0-9:]+\] \S+\.(cc|h):\d+: |Check failed: .*?\(-?\d+ vs\. -?\d+\) ")


UNKNOWN_CODEC = ("the video track's codec is not recognised: a damaged header or a codec this FFmpeg "
                 "cannot decode")


class DecodeError(Exception):
    """A clip that cannot be decoded; the message says why, for the error record."""


def library_reason(exc: BaseException, library: str) -> str:
    """A reason for a decoder library's exception: a known FFmpeg failure in words, otherwise
    the library's message without decord's source-file prefix."""
    message = re.sub(r"'?/proc/self/fd/\d+'?", "the file", " ".join(str(exc).split()))
    for needle, reason in _REASONS:
        if needle in message.lower():
            return reason
    message = _DECORD_NOISE.sub("", message)
    return f"{library}: {type(exc).__name__}: {message[:300]}"


def _text_reason(head: bytes) -> str | None:
    """'the file is text ...' when its first bytes read as text: a common mistake with a clear fix."""
    if not head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a multi-byte character cut at the end
            return None
        text = head[: exc.start].decode("utf-8")
    if not text or any(not (c.isprintable() or c in "\r\n\t") for c in text):
        return None
    preview = " ".join(text.split())[:40]
    return f"not a video: the file holds text (starts with {preview!r})"


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


@dataclass
class Source:
    """An open video file. `uri` is what decoders open (the fd, not the name)."""

    path: str
    fd: int
    size: int
    mtime_ns: int
    inode: tuple[int, int]
    damage: str | None = None  # what is wrong with a file that decoders may still read in part

    @property
    def uri(self) -> Any:
        """What av.open and decord read: a path (the fd's), or for an object a file object at its start."""
        return f"/proc/self/fd/{self.fd}"

    @property
    def fetched(self) -> int | None:
        """Bytes read from an object store for this clip (None: a local file)."""
        return None

    @property
    def pread(self) -> Callable[[int, int], bytes] | None:
        """(size, offset) -> bytes of an object, through its block cache (None: a local file)."""
        return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check_unchanged(self) -> None:
        """Refuse frames decoded from a file that changed under the decoder: rewritten in place
        (size or mtime of the open file differ) or replaced (the path names another file now)."""
        now = os.fstat(self.fd)
        rewritten = (now.st_size, now.st_mtime_ns) != (self.size, self.mtime_ns)
        try:
            current = os.stat(self.path)
            replaced = (current.st_dev, current.st_ino) != self.inode
        except FileNotFoundError:
            replaced = False  # deleted after it was opened: what was decoded is what was there
        if rewritten or replaced:
            raise DecodeError("the file changed while it was being decoded (rewritten or replaced); "
                              "run the job again to caption the new version")


OVERWRITTEN = "the object changed while it was being decoded (overwritten); run the job again to caption the new version"


@dataclass
class ObjectSource(Source):
    """An object in a store, open for reading by range requests (video_io/store.py)."""

    file: CountingFile | None = None
    etag: str | None = None
    caller_checks: bool = False  # the caller asks the store after decoding (object_checked_by_caller)

    @property
    def uri(self) -> Any:
        assert self.file is not None, "read after close"
        return self.file.rewound()

    @property
    def fetched(self) -> int | None:
        return None if self.file is None else self.file.fetched

    @property
    def pread(self) -> Callable[[int, int], bytes] | None:
        return None if self.file is None else self.file.pread

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def check_unchanged(self) -> None:
        """Refuse frames decoded from an object overwritten (another ETag or size) while it was read."""
        if self.file is not None and self.file.overwritten:  # the store refused a range of the version opened
            raise DecodeError(OVERWRITTEN)
        if self.caller_checks:
            return
        try:
            now = head(self.path)
        except FileNotFoundError:
            return  # deleted after it was opened: what was decoded is what was there
        except Exception as exc:
            raise DecodeError(f"the store could not be asked whether the object changed while it was read: "
                              f"{store_reason(exc)}") from None
        if (now.etag, now.size) != (self.etag, self.size):
            raise DecodeError(OVERWRITTEN)


def open_source(path: str) -> Source:
    """Open `path` for reading or raise DecodeError saying why it cannot be decoded."""
    if is_url(path):
        return _open_object(path)
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        if os.path.islink(path):
            raise DecodeError(f"broken symlink: it points to {os.readlink(path)!r}, which does not "
                              f"exist") from None
        raise DecodeError("file not found: deleted or moved after the folder was listed") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise DecodeError("symlink loop: the link points (through other links) back to itself") from None
        raise DecodeError(f"cannot read the file: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DecodeError(f"not a regular file: it is {_kind(st.st_mode)}; only video files are decoded")
    if st.st_size == 0:
        raise DecodeError("empty file (0 bytes)")
    try:
        # O_NONBLOCK: if the path became a FIFO since the stat, open returns instead of waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError:
        raise DecodeError("permission denied: the job's user cannot read this file") from None
    except OSError as exc:
        raise DecodeError(f"cannot open the file: {exc.strerror}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise DecodeError(f"not a regular file: it is {_kind(opened.st_mode)}")
        os.set_blocking(fd, True)
        try:
            head = os.pread(fd, 512, 0)
        except OSError as exc:
            raise DecodeError(f"cannot read the file: {exc.strerror}") from None
        reason = _text_reason(head)
        if reason:
            raise DecodeError(reason)
        reason, fatal = _mp4_reason(lambda n, offset: os.pread(fd, n, offset), opened.st_size, head)
        if fatal:
            raise DecodeError(reason)
    except BaseException:
        os.close(fd)
        raise
    return Source(path, fd, opened.st_size, opened.st_mtime_ns, (opened.st_dev, opened.st_ino), reason)


def _open_object(url: str) -> ObjectSource:
    """An object opened for reading, refused as a file would be (missing, empty, text, cut short), with
    the store's reason where the store refuses it."""
    taken = _HEAD_TAKEN.get()
    caller_checks = taken is not None and taken[0] == url
    try:
        info = taken[1] if taken is not None and caller_checks else head(url)
        if info.size == 0:
            raise DecodeError("empty object (0 bytes)")
        file = CountingFile(url, info)
    except DecodeError:
        raise
    except FileNotFoundError:
        raise DecodeError("object not found: deleted or moved after the listing") from None
    except Exception as exc:  # forbidden, unreachable: the store's own words
        raise DecodeError(f"the store refused the object: {store_reason(exc)}") from None
    source = ObjectSource(url, -1, info.size, 0, (0, 0), None, file, info.etag, caller_checks)
    try:
        first = file.pread(512, 0)
        reason = _text_reason(first)
        if reason:
            raise DecodeError(reason)
        reason, fatal = _mp4_reason(file.pread, info.size, first)
        if fatal:
            raise DecodeError(reason)
        source.damage = reason
    except DecodeError:
        source.close()
        raise
    except Exception as exc:
        source.close()
        if file.overwritten:
            raise DecodeError(OVERWRITTEN) from None
        raise DecodeError(f"the store failed while the object was read: {store_reason(exc)}") from None
    return source


def _mp4_reason(pread: Callable[[int, int], bytes], size: int, first: bytes) -> tuple[str | None, bool]:
    """(reason, fatal) for an ISO-BMFF file (MP4/MOV/3GP: first box 'ftyp'), from its top-level
    box headers: a box running past the end means the file was cut short, no 'moov' box means
    it was never finalised (FFmpeg says only 'Invalid data found when processing input' for
    both). Fatal unless the index ('moov') came before the cut, so the frames before it may
    still decode."""
    if first[4:8] != b"ftyp":
        return None, False
    offset, kinds = 0, set()
    while offset + 8 <= size:
        header = pread(16, offset)
        box_size, kind = int.from_bytes(header[:4], "big"), header[4:8]
        if box_size == 1 and len(header) == 16:
            box_size = int.from_bytes(header[8:16], "big")
        elif box_size == 0:
            box_size = size - offset  # runs to the end of the file
        if box_size < 8:
            return (f"damaged MP4: the box at byte {offset} has an impossible size ({box_size})",
                    b"moov" not in kinds)
        if offset + box_size > size:
            name = kind.decode("latin-1")
            return (f"the file is truncated: it ends inside its '{name}' box ({size - offset} of "
                    f"{box_size} bytes present); the copy or recording was cut short, re-copy it",
                    b"moov" not in kinds)
        kinds.add(kind)
        offset += box_size
    if b"moov" not in kinds:
        return ("no MP4 index (moov atom missing): the recording or copy was cut short before the "
                "file was finalised; re-copy or re-export it", True)
    return None, False


@dataclass(frozen=True)
class Probe:
    """What the container header says about the first video stream (no frame decoded unless
    `rotation` was asked for)."""

    codec: str
    width: int
    height: int
    rotation: int  # counter-clockwise degrees a player turns the frames by: 0, 90, 180, 270


def no_video_reason(container) -> str:
    """Why a file has nothing to decode, naming what it holds instead (an audio-only .mp4: a voice memo)."""
    others = [f"{s.type} ({s.codec_context.name})" if s.codec_context else s.type
              for s in container.streams if s.type != "video"]
    return "no video stream" + (f" (the file holds only: {', '.join(others)})" if others else "")


@contextmanager
def first_video_stream(uri: str):
    """(container, stream): the file's first video stream, with PyAV, for the `with` block. A file with no
    video, an unknown codec or anything FFmpeg raises, there or inside the block, is a DecodeError
    saying why; properties must be read inside the block (PyAV gives garbage once it closes)."""
    import av

    try:
        with av.open(uri, metadata_errors="replace") as container:
            if not container.streams.video:
                raise DecodeError(no_video_reason(container))
            stream = container.streams.video[0]
            if stream.codec_context is None:
                raise DecodeError(UNKNOWN_CODEC)
            yield container, stream
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(library_reason(exc, "pyav")) from None


def display_rotation(frame) -> int:
    """Counter-clockwise quarter turns, in degrees, the frame's display matrix asks for."""
    try:
        degrees = frame.rotation
    except Exception:  # no display matrix
        return 0
    return int(round(degrees / 90.0)) % 4 * 90 if degrees else 0


def probe(source: Source, rotation: bool) -> Probe:
    """Codec and size of the first video stream; with `rotation`, decode its first frame to read
    the display matrix (PyAV exposes it on frames only). Raises DecodeError."""
    import av

    try:
        with av.open(source.uri, metadata_errors="replace") as container:
            if not container.streams.video:
                raise DecodeError(no_video_reason(container))
            stream = container.streams.video[0]
            ctx = stream.codec_context
            if ctx is None:
                raise DecodeError(UNKNOWN_CODEC)
            codec, width, height = ctx.name, ctx.width, ctx.height
            turn = 0
            if rotation:
                for frame in container.decode(stream):
                    turn = display_rotation(frame)
                    break
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(library_reason(exc, "pyav")) from None
    if width <= 0 or height <= 0:
        raise DecodeError(f"the video stream has no picture size ({width}x{height}): damaged header")
    return Probe(codec, width, height, turn)
