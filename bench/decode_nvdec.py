"""NVDEC against software on the same machine: seconds per clip and frames per second, 360p to 4K, H.264 and HEVC.

    caption-bench decode --backend nvdec      # a machine with an NVIDIA GPU; refused in one line elsewhere

Clips (made once in --out with the footage generator, camera profile, 2-s GOP, 30 fps): 640x360,
1920x1080 and 3840x2160, each in H.264 and HEVC. Per clip:

- seconds per clip of the job's decoding: 8 frames within 448x448 (the 7B presets' budget), seek=auto
  and seek=exact, PyAV in software against NVDEC, one process, decoder reused; the median of --repeat
  calls after a first call, which is reported apart (opening the device);
- frames per second decoding every frame of the file: software with one thread per core of this
  machine, software with --few-cores threads (a small cloud instance), and NVDEC (PyAV with FFmpeg's
  CUDA hwaccel, each picture copied back to host memory as it comes, as the job's path does).

The rows also go to <out>/nvdec_measured.json in the format video_io/nvdec_rule.py reads: the rule that
lets `video.backend=auto` pick NVDEC only where a measurement shows it faster. Filing them there (a
commit) is a decision about the default, made on these numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

SIZES = {"360p": "640x360", "1080p": "1920x1080", "4k": "3840x2160"}
CODECS = ("h264", "hevc")
SECONDS = {"360p": 20, "1080p": 20, "4k": 10}
JOB_BUDGET = 448 * 448  # the 7B presets' frames: within 448x448, a multiple of 28
FRAMES = 8


def clip_args(size: str, codec: str) -> list[str]:
    return ["--size", SIZES[size], "--seconds", str(SECONDS[size]), "--fps", "30", "--codec", codec, "--gop", "60"]


def seconds_per_clip(path: Path, backend: str, seek: str, repeat: int) -> dict:
    """The job's decoding of one clip: the first call and the median of `repeat` after it."""
    from video_io.decode import DecodeSpec, decode_clip
    from video_io.sampling import SamplingSpec

    spec = DecodeSpec(sampling=SamplingSpec(num_frames=FRAMES), max_pixels=JOB_BUDGET, size_multiple=28, seek=seek,
                      backend=backend)
    first = decode_clip(str(path), spec)
    runs = [decode_clip(str(path), spec) for _ in range(repeat)]
    return {"first_s": round(first.decode_seconds, 4),
            "s_per_clip": round(statistics.median(c.decode_seconds for c in runs), 4), "decoder": runs[-1].backend}


def all_frames_fps(path: Path, threads: int | None = None, on_gpu: bool = False) -> float:
    """Frames per second decoding every frame: software with `threads` (FFmpeg's frame and slice threads),
    or NVDEC."""
    import av

    hwaccel = None
    if on_gpu:
        from video_io.nvdec import hwaccel as nvdec_hwaccel

        hwaccel = nvdec_hwaccel()
    with av.open(str(path), hwaccel=hwaccel) as container:
        stream = container.streams.video[0]
        if not on_gpu:
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = threads or 0
        started, frames = time.perf_counter(), 0
        for _ in container.decode(stream):
            frames += 1
        return round(frames / (time.perf_counter() - started), 1)


def measure(path: Path, name: str, repeat: int, few_cores: int) -> dict:
    """One clip: seconds per clip (software and NVDEC, seek auto and exact) and all-frames fps."""
    cores = len(os.sched_getaffinity(0))
    row = {"clip": name, "cores": cores, "few_cores": few_cores}
    for seek in ("auto", "exact"):
        row[f"pyav_{seek}"] = seconds_per_clip(path, "pyav", seek, repeat)
        row[f"nvdec_{seek}"] = seconds_per_clip(path, "nvdec", seek, repeat)
    row["fps_software"] = all_frames_fps(path, threads=cores)
    row["fps_software_few_cores"] = all_frames_fps(path, threads=few_cores)
    row["fps_nvdec"] = all_frames_fps(path, on_gpu=True)
    row["nvdec_faster"] = (row["nvdec_auto"]["s_per_clip"] < row["pyav_auto"]["s_per_clip"]
                           and row["fps_nvdec"] > row["fps_software"])
    print(f"{name:12s} auto {row['pyav_auto']['s_per_clip']:.3f} / {row['nvdec_auto']['s_per_clip']:.3f} s, "
          f"exact {row['pyav_exact']['s_per_clip']:.3f} / {row['nvdec_exact']['s_per_clip']:.3f} s (software / NVDEC); "
          f"all frames {row['fps_software']} fps ({cores} threads), {row['fps_software_few_cores']} fps "
          f"({few_cores}), {row['fps_nvdec']} fps NVDEC", flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    lines = ["| clip | PyAV, seek auto (s) | NVDEC, seek auto (s) | PyAV, exact (s) | NVDEC, exact (s) "
             "| NVDEC first call (s) | all frames, software, all cores | all frames, software, few cores "
             "| all frames, NVDEC | NVDEC faster |", "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r['clip']} | {r['pyav_auto']['s_per_clip']:.3f} | {r['nvdec_auto']['s_per_clip']:.3f} | "
                     f"{r['pyav_exact']['s_per_clip']:.3f} | {r['nvdec_exact']['s_per_clip']:.3f} | "
                     f"{r['nvdec_auto']['first_s']:.3f} | {r['fps_software']:,.0f} fps ({r['cores']} threads) | "
                     f"{r['fps_software_few_cores']:,.0f} fps ({r['few_cores']} threads) | {r['fps_nvdec']:,.0f} fps | "
                     f"{'yes' if r['nvdec_faster'] else 'no'} |")
    return lines


def rule_rows(rows: list[dict], gpu: str) -> dict:
    """The rows as video_io/nvdec_rule.py reads them."""
    return {"measurements": [{"gpu": gpu, "cores": r["cores"], "clip": r["clip"],
                              "codec": r["clip"].split("_")[1], "height": int(SIZES[r["clip"].split("_")[0]].split("x")[1]),
                              "pyav_s_per_clip": r["pyav_auto"]["s_per_clip"],
                              "nvdec_s_per_clip": r["nvdec_auto"]["s_per_clip"],
                              "software_fps": r["fps_software"], "nvdec_fps": r["fps_nvdec"]} for r in rows]}


def run(args, make_clip) -> int:
    """`make_clip(out, name, footage_args)` makes (once) and returns a clip of bench/decode.py's kind."""
    from bench.harness import write_results
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
