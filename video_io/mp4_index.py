"""An MP4/MOV track's composition offsets (its `ctts` box: how far each sample's presentation time lies
after its decode time), read from the file's header without demuxing a packet.

FFmpeg's index (PyAV's stream.index_entries) gives each sample's decode timestamp, position and keyframe
flag, but not its presentation timestamp. With B-frames the two orders differ, and with open GOPs (x265's
default: leading pictures decoded after a keyframe but shown before it) a keyframe's presentation time
cannot be told from the decode order alone. This reads it from the sample table (ISO/IEC 14496-12
8.6.1.3), so a decoder reading an object in a store (video_io/store.py) knows every frame's timestamp
having fetched only the header.
"""

from __future__ import annotations

from typing import Callable

Read = Callable[[int, int], bytes]  # (size, offset) -> bytes
CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl"}
MAX_BOX_BYTES = 64 << 20  # a header larger than this is not read for an index (a damaged size, most likely)


def _boxes(read: Read, start: int, end: int):
    """(type, payload start, box end) of each box between start and end."""
    offset = start
    while offset + 8 <= end:
        head = read(16, offset)
        if len(head) < 8:
            return
        size, kind = int.from_bytes(head[:4], "big"), head[4:8]
        header = 8
        if size == 1 and len(head) == 16:
            size, header = int.from_bytes(head[8:16], "big"), 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            return
        yield kind, offset + header, offset + size
        offset += size


def _child(read: Read, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    return next(((s, e) for k, s, e in _boxes(read, start, end) if k == kind), None)


def composition_offsets(read: Read, size: int, track: int) -> list[int] | None:
    """The `track`-th track's offset per sample in decode order (all 0 where it has no ctts box); None where
    the file is not an MP4 whose header can be read so."""
    moov = _child(read, 0, size, b"moov")
    if moov is None or moov[1] - moov[0] > MAX_BOX_BYTES:
        return None
    traks = [(s, e) for k, s, e in _boxes(read, *moov) if k == b"trak"]
    if track >= len(traks):
        return None
    stbl = traks[track]
    for kind in (b"mdia", b"minf", b"stbl"):
        found = _child(read, stbl[0], stbl[1], kind)
        if found is None:
            return None
        stbl = found
    stsz = _child(read, stbl[0], stbl[1], b"stsz")
    if stsz is None:
        return None
    count = int.from_bytes(read(12, stsz[0])[8:12], "big")  # version/flags, sample_size, sample_count
    ctts = _child(read, stbl[0], stbl[1], b"ctts")
    if ctts is None:
        return [0] * count
    data = read(ctts[1] - ctts[0], ctts[0])
    entries = int.from_bytes(data[4:8], "big")
    offsets: list[int] = []
    for i in range(entries):
        at = 8 + 8 * i
        run = int.from_bytes(data[at:at + 4], "big")
        # signed whatever the version, as FFmpeg reads it (libavformat/mov.c mov_read_ctts): encoders write
        # negative offsets into version 0 boxes too
        offsets += [int.from_bytes(data[at + 4:at + 8], "big", signed=True)] * run
    return offsets if len(offsets) == count else None
