"""Small JPEG thumbnails of given frames of a clip (for review pages), decoded as decode.py does.

The caller names the frames by index (a caption record's `frame_indices`), so the thumbnails show
exactly what the model was given. decord reads them where it seeks exactly (the codecs in
`video_io.decode.DECORD_EXACT_CODECS`); every other codec, and any file decord refuses, goes to
PyAV, which counts frames the way decode.py's PyAV path does (packets with a timestamp, in
timestamp order), so an index means the same frame whichever decoder picked it.
"""

from __future__ import annotations

import io
import os

import numpy as np

from video_io.decode import DECORD_EXACT_CODECS, DecodeError

BACKENDS = ("auto", "decord", "pyav")


def _probe(path: str) -> tuple[str | None, int, int]:
    """(codec name, width, height) of the first video stream, from the container header."""
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise DecodeError("no video stream")
            ctx = container.streams.video[0].codec_context
            return ctx.name, int(ctx.width or 0), int(ctx.height or 0)
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"not a readable video: {type(exc).__name__}: {str(exc).strip()[:200]}") from None


def thumbnail_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Keep the aspect ratio, longest side `max_side`, both sides even (FFmpeg's scaler wants that)."""
    if width <= 0 or height <= 0:
        return max_side, max_side
    scale = min(1.0, max_side / max(width, height))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def _check_indices(indices: list[int], total: int) -> None:
    bad = [i for i in indices if not 0 <= i < total]
    if bad:
        raise DecodeError(f"frame index {bad[0]} is outside the clip's {total} frames "
                          "(was the file replaced after captioning?)")


def _decord_frames(path: str, indices: list[int], size: tuple[int, int]) -> np.ndarray:
    import decord

    try:
        reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1, width=size[0], height=size[1])
        _check_indices(indices, len(reader))
        return reader.get_batch(list(indices)).asnumpy()
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"decord: {type(exc).__name__}: {str(exc).strip()[:200]}") from None


def _pyav_frames(path: str, indices: list[int], size: tuple[int, int]) -> np.ndarray:
    import av

    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            pts = sorted({p.pts for p in container.demux(stream) if p.pts is not None and p.size})
        _check_indices(indices, len(pts))
        wanted = {pts[i] for i in indices}
        images: dict[int, np.ndarray] = {}
        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for frame in container.decode(stream):
                if frame.pts in wanted and frame.pts not in images:
                    frame = frame.reformat(width=size[0], height=size[1], interpolation="BICUBIC")
                    images[frame.pts] = frame.to_ndarray(format="rgb24")
                    if len(images) == len(wanted):
                        break
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"pyav: {type(exc).__name__}: {str(exc).strip()[:200]}") from None
    if len(images) < len(wanted):
        raise DecodeError(f"pyav: only {len(images)} of {len(wanted)} frames could be decoded "
                          "(file truncated or damaged)")
    return np.stack([images[pts[i]] for i in indices])


def read_frames(path: str, indices: list[int], max_side: int = 128, backend: str = "auto") -> np.ndarray:
    """(len(indices), H, W, 3) uint8 RGB frames, scaled so the longest side is at most `max_side`.

    `backend` is the decoder that chose the indices (a record's `decoder`), or "auto"; decord is
    only used for codecs it seeks exactly in, and PyAV takes over when decord fails."""
    if backend not in BACKENDS:
        raise ValueError(f"thumbnail backend must be one of {BACKENDS}, got {backend!r}")
    if not indices:
        raise DecodeError("no frame indices given")
    if not os.path.isfile(path):
        raise DecodeError(f"not a file: {path}")
    if os.path.getsize(path) == 0:
        raise DecodeError("empty file (0 bytes)")
    codec, width, height = _probe(path)
    size = thumbnail_size(width, height, max_side)
    if backend == "pyav" or codec not in DECORD_EXACT_CODECS:
        return _pyav_frames(path, indices, size)
    try:
        return _decord_frames(path, indices, size)
    except DecodeError as decord_error:
        try:
            return _pyav_frames(path, indices, size)
        except DecodeError as pyav_error:
            raise DecodeError(f"{decord_error}; {pyav_error}") from None


def encode_jpeg(frame: np.ndarray, quality: int = 70) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def jpeg_thumbnails(path: str, indices: list[int], max_side: int = 128, quality: int = 70,
                    backend: str = "auto") -> list[bytes]:
    """One JPEG per index, in the order given; raises DecodeError with a reason a person can act on."""
    return [encode_jpeg(f, quality) for f in read_frames(path, indices, max_side, backend)]
