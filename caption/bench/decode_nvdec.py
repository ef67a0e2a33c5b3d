"""NVDEC against software on the same machine: seconds per clip and frames per second, 360p to 4K, H.264 and HEVC.

    caption-bench decode --backend nvdec      # a machine with an NVIDIA GPU; refused in one line elsewhere

Clips (made once in --out with the footage generator, camera profile, 2-s GOP, 30 fps): 640x360,
1920x1080 and 3840x2160, each in H.264 and HEVC. Per clip:

- seconds per clip of the job's decoding: 8 frames within 448x448 (the 7B presets' budget), seek=auto
  and seek=exact, PyAV in software against NVDEC, one process, decoder reused; the median of --repeat
  calls after a first call, which is reported apart (opening the device). NVDEC twice: as the job
  decodes (the pictures stay on the GPU, the kept ones are copied back; video_io/nvdec.py), and with
  every decoded picture copied back as it comes (the first NVDEC path, `KEEP_PICTURES_ON_GPU = False`);
- frames per second decoding every frame of the file: software with one thread per core of this
  machine, software with --few-cores threads (a small cloud instance), NVDEC with every picture copied
  back to host memory, and NVDEC with the pictures left on the GPU (the decoder alone): the gap
  between the last two is what the copies cost;
- one kept picture (the clip's first), made the job's size and RGB: swscale on a picture already in
  host memory (software), the copy back plus swscale (NVDEC, as the job does), and the alternative of
  scaling on the GPU (torch, from the picture's DLPack planes; bicubic, antialiased) with only the
  small RGB frame copied back, with its mean absolute difference from swscale's pixels.

The rows also go to <out>/nvdec_measured.json in the format video_io/nvdec_rule.py reads: the rule that
lets `video.backend=auto` pick NVDEC only where a measurement shows it faster. Filing them there (a
commit) is a decision about the default, made on these numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

SIZES = {"360p": "640x360", "1080p": "1920x1080", "4k": "3840x2160"}
CODECS = ("h264", "hevc")
SECONDS = {"360p": 20, "1080p": 20, "4k": 10}
JOB_BUDGET = 448 * 448  # the 7B presets' frames: within 448x448, a multiple of 28
FRAMES = 8


def clip_args(size: str, codec: str) -> list[str]:
    return ["--size", SIZES[size], "--seconds", str(SECONDS[size]), "--fps", "30", "--codec", codec, "--gop", "60"]


@contextmanager
def _nvdec_copying(copy_every_picture: bool):
    """NVDEC as the job decodes (pictures left on the GPU), or copying every picture back as it comes
    (video_io/nvdec.py KEEP_PICTURES_ON_GPU), for the length of the block."""
    from video_io import nvdec

    nvdec.KEEP_PICTURES_ON_GPU = not copy_every_picture
    try:
        yield
    finally:
        nvdec.KEEP_PICTURES_ON_GPU = True


def seconds_per_clip(path: Path, backend: str, seek: str, repeat: int, copy_every_picture: bool = False) -> dict:
    """The job's decoding of one clip: the first call and the median of `repeat` after it.
    `copy_every_picture`: NVDEC copying each decoded picture back as it comes (video_io/nvdec.py)."""
    from video_io.decode import DecodeSpec, decode_clip
    from video_io.sampling import SamplingSpec

    spec = DecodeSpec(sampling=SamplingSpec(num_frames=FRAMES), max_pixels=JOB_BUDGET, size_multiple=28, seek=seek,
                      backend=backend)
    with _nvdec_copying(copy_every_picture):
        first = decode_clip(str(path), spec)
        runs = [decode_clip(str(path), spec) for _ in range(repeat)]
    return {"first_s": round(first.decode_seconds, 4),
            "s_per_clip": round(statistics.median(c.decode_seconds for c in runs), 4), "decoder": runs[-1].backend}


def all_frames_fps(path: Path, threads: int | None = None, on_gpu: bool = False,
                   copy_every_picture: bool = True) -> float:
    """Frames per second decoding every frame: software with `threads` (FFmpeg's frame and slice threads),
    or NVDEC, each picture copied back to host memory or left on the GPU."""
    import av

    hwaccel = None
    if on_gpu:
        from video_io import nvdec

        with _nvdec_copying(copy_every_picture):
            hwaccel = nvdec.hwaccel()
    with av.open(str(path), hwaccel=hwaccel) as container:
        stream = container.streams.video[0]
        if not on_gpu:
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = threads or 0
        started, frames = time.perf_counter(), 0
        for _ in container.decode(stream):
            frames += 1
        return round(frames / (time.perf_counter() - started), 1)


def job_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) the job scales a frame of this size to (the 7B presets' budget)."""
    from video_io.sizing import fit_size

    h, w = fit_size(height, width, 28, JOB_BUDGET)
    return w, h


def _yuv_to_rgb_matrix(frame):
    """Limited-range Y'CbCr -> RGB coefficients (R from Cr; G from Cb, Cr; B from Cb): BT.709 where the
    stream says so, else BT.601, which is what swscale takes for an unspecified colorspace
    (libswscale's SWS_CS_DEFAULT)."""
    name = str(getattr(frame, "colorspace", "")).upper()
    if "709" in name or getattr(frame, "colorspace", None) == 1:
        return 1.5748, 0.187324, 0.468124, 1.8556
    return 1.402, 0.344136, 0.714136, 1.772


def torch_small_rgb(frame, size: tuple[int, int], torch):
    """One NV12 picture (in GPU memory or host memory) scaled and made RGB by torch where it lies, the
    small frame then copied to host memory: the planes come through DLPack (PyAV 18), Y and the
    interleaved chroma are each scaled to `size` (bicubic, antialiased), then converted."""
    import torch.nn.functional as F

    if frame.format.name == "cuda":  # PyAV exports a device picture only unsynchronised (stream=None): the
        torch.cuda.synchronize()  # decoder's work must be done before torch reads it
    # the capsule itself: given the plane, torch would ask for a stream, which PyAV refuses
    luma = torch.from_dlpack(frame.planes[0].__dlpack__()).float()[None, None]  # (1, 1, H, W)
    chroma = torch.from_dlpack(frame.planes[1].__dlpack__()).float()  # (H/2, W/2, 2): Cb, Cr interleaved
    chroma = chroma.permute(2, 0, 1)[None]
    w, h = size
    y = F.interpolate(luma, size=(h, w), mode="bicubic", antialias=True, align_corners=False)[0, 0]
    cb, cr = (F.interpolate(chroma, size=(h, w), mode="bicubic", antialias=True, align_corners=False)[0] - 128.0) \
        * (255.0 / 224.0)
    y = (y - 16.0) * (255.0 / 219.0)
    rv, gu, gv, bu = _yuv_to_rgb_matrix(frame)
    rgb = torch.stack([y + rv * cr, y - gu * cb - gv * cr, y + bu * cb], dim=-1)
    return rgb.round_().clamp_(0, 255).to(torch.uint8).cpu().numpy()


def kept_picture_ms(path: Path, repeat: int) -> dict:
    """One kept picture (the clip's first) made the job's size and RGB, three ways: milliseconds each
    (median of `repeat` after one), and how far torch's pixels are from swscale's."""
    import av
    import numpy as np
    import torch

    from video_io import nvdec
    from video_io.pyav_frames import small_rgb

    def timed(make):
        make()
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            out = make()
            times.append(time.perf_counter() - started)
        return out, round(1000 * statistics.median(times), 2)

    with av.open(str(path)) as container:
        soft = next(container.decode(video=0))
        size = job_size(soft.width, soft.height)
        swscaled, host_ms = timed(lambda: small_rgb(soft, size, 0))
        nv12 = soft.reformat(format="nv12")
        on_cpu, torch_cpu_ms = timed(lambda: torch_small_rgb(nv12, size, torch))
    row = {"size": f"{size[0]}x{size[1]}", "swscale_host_ms": host_ms, "torch_cpu_ms": torch_cpu_ms,
           "torch_cpu_vs_swscale": round(float(np.abs(on_cpu.astype(int) - swscaled.astype(int)).mean()), 3)}
    with av.open(str(path), hwaccel=nvdec.hwaccel()) as container:  # the job's: pictures stay on the GPU
        picture = next(container.decode(video=0))
        if picture.format.name != "cuda":
            return {**row, "gpu": f"NVDEC gave a {picture.format.name} picture (software fallback)"}
        _, copy_ms = timed(lambda: small_rgb(picture, size, 0))
        on_gpu, gpu_ms = timed(lambda: torch_small_rgb(picture, size, torch))
    return {**row, "copy_and_swscale_ms": copy_ms, "torch_on_gpu_ms": gpu_ms,
            "torch_gpu_vs_swscale": round(float(np.abs(on_gpu.astype(int) - swscaled.astype(int)).mean()), 3)}


def measure(path: Path, name: str, repeat: int, few_cores: int) -> dict:
    """One clip: seconds per clip (software and NVDEC, seek auto and exact), all-frames fps, one kept picture."""
    cores = len(os.sched_getaffinity(0))
    row = {"clip": name, "cores": cores, "few_cores": few_cores}
    for seek in ("auto", "exact"):
        row[f"pyav_{seek}"] = seconds_per_clip(path, "pyav", seek, repeat)
        row[f"nvdec_{seek}"] = seconds_per_clip(path, "nvdec", seek, repeat)
        row[f"nvdec_copy_all_{seek}"] = seconds_per_clip(path, "nvdec", seek, repeat, copy_every_picture=True)
    row["fps_software"] = all_frames_fps(path, threads=cores)
    row["fps_software_few_cores"] = all_frames_fps(path, threads=few_cores)
    row["fps_nvdec"] = all_frames_fps(path, on_gpu=True)
    row["fps_nvdec_on_gpu"] = all_frames_fps(path, on_gpu=True, copy_every_picture=False)
    try:
        row["kept_picture"] = kept_picture_ms(path, repeat)
    except Exception as exc:  # the comparison is extra: a failure is reported, the table still comes
        row["kept_picture"] = {"error": f"{type(exc).__name__}: {exc}"}
    row["nvdec_faster"] = (row["nvdec_auto"]["s_per_clip"] < row["pyav_auto"]["s_per_clip"]
                           and row["fps_nvdec_on_gpu"] > row["fps_software"])
    print(f"{name:12s} auto {row['pyav_auto']['s_per_clip']:.3f} / {row['nvdec_auto']['s_per_clip']:.3f} s, "
          f"exact {row['pyav_exact']['s_per_clip']:.3f} / {row['nvdec_exact']['s_per_clip']:.3f} s (software / NVDEC); "
          f"all frames {row['fps_software']} fps ({cores} threads), {row['fps_software_few_cores']} fps "
          f"({few_cores}), {row['fps_nvdec']} fps NVDEC ({row['fps_nvdec_on_gpu']} left on the GPU); "
          f"every picture copied: auto {row['nvdec_copy_all_auto']['s_per_clip']:.3f}, exact "
          f"{row['nvdec_copy_all_exact']['s_per_clip']:.3f} s; kept picture {row['kept_picture']}", flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    lines = ["| clip | PyAV, seek auto (s) | NVDEC, seek auto (s) | NVDEC, every picture copied, auto (s) "
             "| PyAV, exact (s) | NVDEC, exact (s) | NVDEC, every picture copied, exact (s) "
             "| NVDEC first call (s) | all frames, software, all cores | all frames, software, few cores "
             "| all frames, NVDEC, copied | all frames, NVDEC, left on the GPU | NVDEC faster |", "|" + "---|" * 13]
    for r in rows:
        lines.append(f"| {r['clip']} | {r['pyav_auto']['s_per_clip']:.3f} | {r['nvdec_auto']['s_per_clip']:.3f} | "
                     f"{r['nvdec_copy_all_auto']['s_per_clip']:.3f} | "
                     f"{r['pyav_exact']['s_per_clip']:.3f} | {r['nvdec_exact']['s_per_clip']:.3f} | "
                     f"{r['nvdec_copy_all_exact']['s_per_clip']:.3f} | "
                     f"{r['nvdec_auto']['first_s']:.3f} | {r['fps_software']:,.0f} fps ({r['cores']} threads) | "
                     f"{r['fps_software_few_cores']:,.0f} fps ({r['few_cores']} threads) | {r['fps_nvdec']:,.0f} fps | "
                     f"{r['fps_nvdec_on_gpu']:,.0f} fps | {'yes' if r['nvdec_faster'] else 'no'} |")
    lines += ["", "One kept picture (the clip's first) made the job's size and RGB, median ms:", "",
              "| clip | size | swscale, picture in host memory | NVDEC: copy back + swscale "
              "| NVDEC: torch on the GPU, small frame copied | torch vs swscale (mean abs, 0-255) |", "|---|---|---|---|---|---|"]
    for r in rows:
        k = r["kept_picture"]
        if "error" in k or "gpu" in k:
            lines.append(f"| {r['clip']} | {k.get('size', '-')} | {k.get('swscale_host_ms', '-')} | "
                         f"{k.get('error') or k.get('gpu')} | - | - |")
            continue
        lines.append(f"| {r['clip']} | {k['size']} | {k['swscale_host_ms']} | {k['copy_and_swscale_ms']} | "
                     f"{k['torch_on_gpu_ms']} | {k['torch_gpu_vs_swscale']} |")
    return lines


def rule_rows(rows: list[dict], gpu: str) -> dict:
    """The rows as video_io/nvdec_rule.py reads them."""
    return {"measurements": [{"gpu": gpu, "cores": r["cores"], "clip": r["clip"],
                              "codec": r["clip"].split("_")[1], "height": int(SIZES[r["clip"].split("_")[0]].split("x")[1]),
                              "pyav_s_per_clip": r["pyav_auto"]["s_per_clip"],
                              "nvdec_s_per_clip": r["nvdec_auto"]["s_per_clip"],
                              # the decoder's own rate, as the job now uses it: pictures left on the GPU
                              "software_fps": r["fps_software"], "nvdec_fps": r["fps_nvdec_on_gpu"]} for r in rows]}


def run(args, make_clip) -> int:
    """`make_clip(out, name, footage_args)` makes (once) and returns a clip of caption/bench/decode.py's kind."""
    from caption.bench.harness import write_results
    from quant.devices import detect_devices

    names = [f"{size}_{codec}" for size in SIZES for codec in CODECS]
    rows = [measure(make_clip(args.out, name, clip_args(*name.split("_"))), name, args.repeat, args.few_cores)
            for name in names]
    gpu = ", ".join(d.name for d in detect_devices()) or "unknown GPU"
    lines = table(rows)
    print("\n" + "\n".join(lines))
    (args.out / "nvdec_measured.json").write_text(json.dumps(rule_rows(rows, gpu), indent=2) + "\n")
    write_results(args.out, "decode-nvdec", {"backend": "nvdec", "repeat": args.repeat, "gpu": gpu, "rows": rows}, lines,
                  None, f"NVDEC against software on {gpu}, {rows[0]['cores']} cores")
    print(json.dumps({"gpu": gpu, "nvdec_faster": {r["clip"]: r["nvdec_faster"] for r in rows}}))
    return 0
