"""Small JPEG thumbnails of given frames of a clip (for review pages), decoded as decode.py does.

The caller names the frames by index (a caption record's `frame_indices`), so the thumbnails show
exactly what the model was given. PyAV reads them as the job's default decoder does
(video_io/pyav_frames.py `frames_at`: from the keyframe before each frame, only the wanted frames
scaled and converted); a record made with `video.backend=decord` is read back by decord where it
seeks exactly (the codecs in `video_io.decode.DECORD_EXACT_CODECS`). Both count frames alike (packets
with a timestamp, in timestamp order), so an index means the same frame whichever decoder picked it.
"""

from __future__ import annotations

import io

import numpy as np

from video_io.decode import DECORD_EXACT_CODECS, DecodeError
from video_io.pyav_frames import check_indices, frames_at
from video_io.source import Source, library_reason, open_source, probe

BACKENDS = ("auto", "decord", "pyav")


def thumbnail_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Keep the aspect ratio, longest side `max_side`, both sides even (FFmpeg's scaler wants that)."""
    if width <= 0 or height <= 0:
        return max_side, max_side
    scale = min(1.0, max_side / max(width, height))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def _decord_frames(source: Source, indices: list[int], size: tuple[int, int]) -> np.ndarray:
    import decord

    try:
        reader = decord.VideoReader(source.uri, ctx=decord.cpu(0), num_threads=1, width=size[0], height=size[1])
        check_indices(indices, len(reader))
        return reader.get_batch(list(indices)).asnumpy()
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(library_reason(exc, "decord")) from None


def read_frames(path: str, indices: list[int], max_side: int = 128, backend: str = "auto") -> np.ndarray:
    """(len(indices), H, W, 3) uint8 RGB frames, scaled so the longest side is at most `max_side`.

    `backend` is the decoder that chose the indices (a record's `decoder`), or "auto" (PyAV, as the
    job's); decord is only used when named, for codecs it seeks exactly in, and PyAV takes over when
    decord fails."""
    if backend not in BACKENDS:
        raise ValueError(f"thumbnail backend must be one of {BACKENDS}, got {backend!r}")
    if not indices:
        raise DecodeError("no frame indices given")
    with open_source(path) as source:  # refuses FIFOs, text, truncated MP4s... in plain words
        info = probe(source, rotation=True)
        turned = info.rotation in (90, 270)
        size = thumbnail_size(*((info.height, info.width) if turned else (info.width, info.height)), max_side)
        # rotated clips: PyAV turns them upright (decord2 turns some wrongly: see decode.py)
        if backend != "decord" or info.codec not in DECORD_EXACT_CODECS or info.rotation:
            return frames_at(source, indices, size)
        try:
            return _decord_frames(source, indices, size)
        except DecodeError as decord_error:
            try:
                return frames_at(source, indices, size)
            except DecodeError as pyav_error:
                raise DecodeError(f"{pyav_error} (decord: {decord_error})") from None


def encode_jpeg(frame: np.ndarray, quality: int = 70) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def jpeg_thumbnails(path: str, indices: list[int], max_side: int = 128, quality: int = 70,
                    backend: str = "auto") -> list[bytes]:
    """One JPEG per index, in the order given; raises DecodeError with a reason a person can act on."""
    return [encode_jpeg(f, quality) for f in read_frames(path, indices, max_side, backend)]
