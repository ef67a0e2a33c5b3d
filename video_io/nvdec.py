"""NVDEC, the GPU's video decoder, through FFmpeg's CUDA hwaccel in PyAV (`video.backend=nvdec`).

Decoding on the GPU takes the per-frame work off the CPU: a 4K HEVC I-frame costs ~0.15 s of one
core in software here (docs/decoding.md "Cost"). The frames, seeks and records stay those of the PyAV
path (video_io/pyav_frames.py): FFmpeg still demuxes and parses on the CPU, NVDEC reconstructs the
pictures, and they stay in GPU memory (PyAV's `is_hw_owned`): a seek decodes from the keyframe before
each frame kept, so most decoded pictures are only references for the next, and are never copied.
Only the frames kept come back to host memory (NV12, or P010 for 10-bit), copied by the same swscale
call that scales and converts them, as in software (av/video/reformatter.py copies a hardware frame
to host memory before scaling it). `KEEP_PICTURES_ON_GPU = False` copies every picture as it comes
instead, as this path did first: `caption-bench decode --backend nvdec` measures both.

PyAV's wheels (av 18.1 here: `av.codec.hwaccel.hwdevices_available()` lists "cuda", and
`av.codecs_available` the *_cuvid decoders) carry FFmpeg's NVDEC support and load the driver's
libcuda and libnvcuvid only when a device is opened, so this needs no package beyond PyAV and no
CUDA toolkit: an NVIDIA GPU and its driver. Where there is none, opening the device fails, and
`unavailable_reason` says so in FFmpeg's words.

A codec or profile NVDEC cannot decode (FFmpeg's libdav1d AV1 decoder has no hwaccel; older GPUs
lack HEVC 4:2:2) is decoded on the CPU instead (allow_software_fallback), and the clip's record
says which decoder was used (Clip.backend "nvdec" or "pyav").
"""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from video_io.source import DecodeError

DEVICE_TYPE = "cuda"
# FFmpeg's CUDA device option (libavutil/hwcontext_cuda.c): use the device's primary context, the
# one the CUDA runtime shares within a process, instead of creating a context per opened clip.
# `_keep_primary_context` holds one reference for the life of the decoder process, so opening a
# clip retains a live context instead of building and tearing one down every time.
_DEVICE_OPTIONS = {"primary_ctx": "1"}
# A probe must not initialise CUDA in the job's own process: the engine may fork its workers after
# the plan, and CUDA does not survive a fork. It runs in a child process of its own instead.
PROBE_TIMEOUT_S = 60.0
# Decoded pictures stay on the device until a kept one is converted (module docstring); False: every
# picture is copied back as it comes (the first NVDEC path; the bench's "every picture copied" column).
KEEP_PICTURES_ON_GPU = True


def hwaccel():
    """The `hwaccel=` argument for av.open: decode on the default CUDA device (the first one
    CUDA_VISIBLE_DEVICES shows), falling back to software for streams NVDEC cannot take.
    DecodeError where no device opens."""
    from av.codec.hwaccel import HWAccel

    try:
        _keep_primary_context()
    except Exception as exc:
        raise DecodeError(f"video.backend=nvdec: no CUDA device to decode on ({unavailable_reason() or exc}); "
                          f"use video.backend=auto to decode on the CPU") from None
    return HWAccel(DEVICE_TYPE, allow_software_fallback=True, options=dict(_DEVICE_OPTIONS),
                   is_hw_owned=KEEP_PICTURES_ON_GPU)


@lru_cache(maxsize=1)
def _keep_primary_context():
    """One device reference held by this process (see _DEVICE_OPTIONS); raises where there is no device."""
    return _open_device()


def _open_device():
    import av
    from av.codec.hwaccel import HWAccel

    # HEVC: the codec NVDEC is here for; its decoder offers a CUDA hwaccel config
    return HWAccel(DEVICE_TYPE, options=dict(_DEVICE_OPTIONS)).create(av.Codec("hevc", "r"))


def unavailable_reason() -> str | None:
    """None when FFmpeg can open a CUDA device for NVDEC in this process, else why not (FFmpeg's
    own log lines, e.g. "Cannot load libcuda.so.1; Could not dynamically load CUDA")."""
    import av
    import av.logging
    from av.codec.hwaccel import hwdevices_available

    if DEVICE_TYPE not in hwdevices_available():
        return f"this PyAV's FFmpeg ({av.__version__}) was built without CUDA hardware decoding"
    level = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)  # PyAV passes FFmpeg's log lines on only with a level set
    try:
        with av.logging.Capture() as said:
            _open_device()
    except Exception as exc:
        lines = [" ".join(message.split()) for _, _, message in said if message.strip()]
        return "; ".join(dict.fromkeys(lines)) or f"{type(exc).__name__}: {exc}"
    finally:
        av.logging.set_level(level)
    return None


def probe_in_child(timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """unavailable_reason, asked of a fresh Python process (this one stays without CUDA)."""
    code = "from video_io.nvdec import unavailable_reason as r; print(r() or '', end='')"
    try:
        # run from the folder holding video_io/, so the child imports this same code, installed or not
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                              cwd=Path(__file__).resolve().parent.parent)
    except subprocess.TimeoutExpired:
        return f"opening the CUDA device took over {timeout_s:.0f} s"
    if done.returncode != 0:
        tail = " ".join((done.stderr or "").split()[-30:])
        return f"the NVDEC probe process failed (exit {done.returncode}): {tail}"
    return done.stdout.strip() or None

