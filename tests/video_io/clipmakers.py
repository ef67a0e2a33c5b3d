"""Write test clips with PyAV: frames that spell their own index, any codec, rotation, VFR timing,
audio-only files, and MP4s with their index box removed. Frames are made one at a time, so
large sizes never need a full stack in memory."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from video_io.synth.mux import encode_all

CODE_BITS = 12  # a 4x3 grid of black/white blocks: indices up to 4095


def coded_frame(i: int, width: int = 64, height: int = 64, top: tuple | None = None) -> np.ndarray:
    """A frame whose grid of black/white blocks spells `i` in binary. With `top`, the top half
    is that colour instead (for rotation checks) and the code sits in the bottom half."""
    image = np.full((height, width, 3), 128, np.uint8)
    y0 = 0
    if top is not None:
        image[: height // 2] = top
        y0 = height // 2
    bh, bw = (height - y0) // 3, width // 4
    for bit in range(CODE_BITS):
        r, c = divmod(bit, 4)
        image[y0 + r * bh: y0 + (r + 1) * bh, c * bw:(c + 1) * bw] = 255 if i >> bit & 1 else 0
    return image


def read_code(image: np.ndarray, top: bool = False) -> int:
    """The index a coded_frame spells (read at the block centres: survives scaling and coding)."""
    height, width = image.shape[:2]
    y0 = height // 2 if top else 0
    bh, bw = (height - y0) / 3, width / 4
    value = 0
    for bit in range(CODE_BITS):
        r, c = divmod(bit, 4)
        if image[int(y0 + (r + 0.5) * bh), int((c + 0.5) * bw)].mean() > 128:
            value |= 1 << bit
    return value


ENCODER_OPTIONS = {
    "libx264": {"preset": "ultrafast", "g": "25", "bf": "2"},
    "libx265": {"preset": "ultrafast", "x265-params": "keyint=25:bframes=2:log-level=none"},
    "libvpx-vp9": {"deadline": "realtime", "cpu-used": "8", "g": "25"},
    "libsvtav1": {"preset": "12", "g": "25", "svtav1-params": "lp=1"},
    "mpeg4": {"g": "25", "bf": "2"},
}


def write_clip(path: Path, n: int, width: int = 64, height: int = 64, codec: str = "libx264",
               fps: int = 25, times: list[float] | None = None, rotation: int = 0,
               pix_fmt: str = "yuv420p", frame_fn=None, options: dict | None = None,
               keyframes: set[int] | None = None) -> Path:
    """Encode n frames (frame_fn(i) -> HxWx3 uint8, default coded_frame) to `path`.

    `times`: each frame's start in seconds (variable frame rate), written with a 1 ms time base.
    `rotation`: counter-clockwise degrees in the display matrix, as phones write it.
    `options`: encoder options over ENCODER_OPTIONS (e.g. a longer GOP). `keyframes`: frames the encoder
    must make keyframes (as a scene cut would; give a GOP longer than the clip to have only these)."""
    frame_fn = frame_fn or (lambda i: coded_frame(i, width, height))
    policy = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.codec_context.options = dict(ENCODER_OPTIONS.get(codec, {})) | (options or {})
        if times is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
        if rotation:
            stream.set_display_rotation(rotation)

        def frames():
            for i in range(n):
                frame = av.VideoFrame.from_ndarray(frame_fn(i), format="rgb24")
                if keyframes is not None and i in keyframes:
                    frame.pict_type = av.video.frame.PictureType.I
                if times is None:
                    frame.pts, frame.time_base = i, Fraction(1, fps)
                else:
                    frame.pts, frame.time_base = round(times[i] * 1000), Fraction(1, 1000)
                yield frame

        encode_all(container, stream, frames())
    finally:
        container.close()
        _restore_scheduling(policy)
    return path


def _restore_scheduling(policy: tuple[int, int]) -> None:
    """SVT-AV1 (libsvtav1, bundled with PyAV), run as root, switches the thread that opens the encoder
    to SCHED_FIFO priority 99 (it tries to raise its own threads and logs "Failed to set thread
    priority"). Left so, the test process and every process it starts outrank everything else on the
    machine, and OpenMP teams that mix it with ordinary threads crawl (the whole suite took 1,401 s
    instead of 470 s). Put the policy back."""
    if (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) != policy:
        os.sched_setscheduler(0, policy[0], os.sched_param(policy[1]))


def write_audio_only(path: Path, seconds: float = 1.0) -> Path:
    """An .mp4 with one AAC audio stream and no video, as a voice recorder writes."""
    rate = 16000
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        tone = np.sin(np.arange(int(rate * seconds)) * 2 * np.pi * 440 / rate).astype(np.float32)

        def frames():
            for start in range(0, len(tone), 1024):
                frame = av.AudioFrame.from_ndarray(tone[None, start:start + 1024], format="fltp", layout="mono")
                frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
                yield frame

        encode_all(container, stream, frames())
    finally:
        container.close()
    return path


def mp4_boxes(data: bytes) -> list[tuple[bytes, int, int]]:
    """Top-level MP4 boxes as (type, offset, size)."""
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        kind = data[offset + 4:offset + 8]
        if size == 1:
            size = int.from_bytes(data[offset + 8:offset + 16], "big")
        elif size == 0:
            size = len(data) - offset
        if size < 8:
            break
        boxes.append((kind, offset, size))
        offset += size
    return boxes


CONTAINER_BOXES = {b"moov", b"trak", b"mdia", b"minf", b"stbl"}


def find_box(data: bytes, path: list[bytes], start: int = 0, end: int | None = None) -> tuple[int, int]:
    """(offset, size) of the box at `path` (e.g. [b"moov", b"trak", b"mdia", b"minf"])."""
    end = len(data) if end is None else end
    offset = start
    while offset + 8 <= end:
        size, kind = int.from_bytes(data[offset:offset + 4], "big"), data[offset + 4:offset + 8]
        if kind == path[0]:
            return (offset, size) if len(path) == 1 else find_box(data, path[1:], offset + 8, offset + size)
        offset += size
    raise ValueError(f"no box {path[0]!r}")


def without_moov(data: bytes) -> bytes:
    """The MP4 with its index box (moov) cut out, as a recording stopped before finalising."""
    for kind, offset, size in mp4_boxes(data):
        if kind == b"moov":
            return data[:offset] + data[offset + size:]
    raise ValueError("no moov box")
