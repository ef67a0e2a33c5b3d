"""Seconds per clip of decoding 8 frames, per seek mode, on real-size footage, one core.

    taskset -c 1 caption-bench decode --out data/bench_decode [--repeat 3]

Makes (once, kept in --out) the clips issue 12 names with the footage generator
(video_io/synth/footage.py): 1080p H.264 20 s with a 2-s GOP and with a 250-frame GOP, 1080x1920
portrait H.264, 4K HEVC 10 s and 20 s (at the camera-like ~37 Mbit/s; the same pictures also at
19 and 10 Mbit/s, as web and stock downloads come). Decodes each with backend=auto (--backend nvdec: on the GPU) and
video.seek=auto|keyframe|exact at the embedded model's budget (3136 px, multiple 28), min of --repeat
runs; with one core (taskset) seconds per clip are core-seconds per clip. With ffmpeg on the PATH, also ffmpeg's full decode and
keyframe-only decode (-skip_frame nokey), one thread, for reference.

--backend nvdec measures NVDEC against software on the same machine instead, at 360p, 1080p and 4K,
H.264 and HEVC (caption/bench/decode_nvdec.py); where FFmpeg cannot open a CUDA device it stops in one line,
with exit status 2.

Review-page thumbnails (caption-report) of the frames the default mode sampled, at caption-report's
default size: PyAV from the keyframe before each frame (video_io/pyav_frames.py frames_at, the
default), against the two routes the report took before it: decord (H.264) and PyAV decoding the
clip from its start (other codecs).
Writes <out>/results.json, results.md and results.png; the last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from caption.bench.harness import best_of, write_results
from caption.report.thumbs import DEFAULT_SIZE as THUMB_SIDE  # caption-report's --thumb-size
from caption.settings.config import REPO_ROOT
from video_io.decode import DecodeSpec, decode_clip
from video_io.pyav_frames import decode_wanted, packet_index
from video_io.sampling import SamplingSpec
from video_io.seek import SEEK_MODES
from video_io.thumbnails import read_frames, thumbnail_size

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)

CLIPS = {  # name: footage generator arguments
    "1080p_h264_20s_gop2s": ["--size", "1920x1080", "--seconds", "20", "--fps", "30", "--codec", "h264",
                             "--gop", "60"],
    "1080p_h264_20s_gop250": ["--size", "1920x1080", "--seconds", "20", "--fps", "30", "--codec", "h264",
                              "--gop", "250"],
    "1080x1920_portrait_h264": ["--size", "1080x1920", "--seconds", "20", "--fps", "30", "--codec", "h264",
                                "--gop", "60"],
    "4k_hevc_10s": ["--size", "3840x2160", "--seconds", "10", "--fps", "30", "--codec", "hevc", "--gop", "60"],
    # 8 segments of 2.5 s each hold a keyframe of a 2-s GOP: the default takes 8 keyframes
    "4k_hevc_20s": ["--size", "3840x2160", "--seconds", "20", "--fps", "30", "--codec", "hevc", "--gop", "60"],
    # the same pictures at lower bitrates (web and stock downloads): what a frame costs is mostly its bits
    "4k_hevc_20s_10mbps": ["--size", "3840x2160", "--seconds", "20", "--fps", "30", "--codec", "hevc", "--gop", "60",
                           "--mbps", "10"],
    "4k_hevc_10s_19mbps": ["--size", "3840x2160", "--seconds", "10", "--fps", "30", "--codec", "hevc", "--gop", "60",
                           "--mbps", "19"],
    "4k_hevc_10s_10mbps": ["--size", "3840x2160", "--seconds", "10", "--fps", "30", "--codec", "hevc", "--gop", "60",
                           "--mbps", "10"],
}


def make_clip(out: Path, name: str, footage_args: list[str] | None = None) -> Path:
    """The clip `name` (CLIPS, or made with `footage_args`), made once in <out>/<name>."""
    folder = out / name
    found = sorted(folder.glob("*.mp4")) if folder.is_dir() else []
    if not found:
        subprocess.run([sys.executable, "-m", "video_io.synth.footage", "--out", str(folder), "--n", "1",
                        "--seed", "1", "--profile", "camera", *(footage_args or CLIPS[name])], check=True,
                       cwd=REPO_ROOT)
        found = sorted(folder.glob("*.mp4"))
    return found[0]


def ffmpeg_seconds(path: Path, keyframes_only: bool, repeat: int) -> float | None:
    if not shutil.which("ffmpeg"):
        return None
    cmd = ["ffmpeg", "-v", "error", "-threads", "1"] + (["-skip_frame", "nokey"] if keyframes_only else [])
    cmd += ["-i", str(path), "-f", "null", "-"]
    return round(best_of(repeat, lambda: subprocess.run(cmd, check=True)), 3)


def thumbnail_seconds(path: Path, indices: list[int], repeat: int) -> dict:
    """Seconds to read the thumbnails of `indices`: the report's route now, and its two former routes."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        size = thumbnail_size(stream.codec_context.width, stream.codec_context.height, THUMB_SIDE)
        pts, _ = packet_index(container, stream)
    wanted = sorted({pts[i] for i in indices})
    return {
        "pyav_seek": round(best_of(repeat, lambda: read_frames(str(path), indices, THUMB_SIDE)), 4),
        "decord": round(best_of(repeat, lambda: read_frames(str(path), indices, THUMB_SIDE, "decord")), 4),
        "pyav_from_start": round(best_of(repeat, lambda: decode_wanted(str(path), lambda r, w, h: size, wanted, [],
                                                                       seek=False)), 4),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "bench_decode")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clips", default=",".join(CLIPS), help="comma-separated subset of " + ", ".join(CLIPS))
    parser.add_argument("--backend", choices=["auto", "nvdec"], default="auto",
                        help="nvdec: NVDEC against software on this machine, 360p to 4K, H.264 and HEVC "
                             "(caption/bench/decode_nvdec.py; --clips is not used)")
    parser.add_argument("--few-cores", type=int, default=2,
                        help="--backend nvdec: the software decoder's threads for the few-cores column")


def measure_clip(name: str, args, cores: int) -> dict:
    """One clip: every seek mode (best of --repeat), the review page's thumbnails, ffmpeg for reference."""
    path = make_clip(args.out, name)
    row = {"clip": name, "file": path.name, "cores": cores}
    for seek in SEEK_MODES:
        spec = DecodeSpec(EIGHT_FRAMES, max_pixels=3136, size_multiple=28, seek=seek, backend=args.backend)
        best, cpu, clip = float("inf"), float("inf"), None
        for _ in range(args.repeat):
            started = time.process_time()  # this process's CPU time, every thread (FFmpeg's, the driver's)
            clip = decode_clip(str(path), spec)
            cpu = min(cpu, time.process_time() - started)
            best = min(best, clip.decode_seconds)
        row[seek] = {"s_per_clip": round(best, 4), "core_s_per_clip": round(best * cores, 4),
                     "cpu_s_per_clip": round(cpu, 4), "used": clip.seek, "backend": clip.backend,
                     "indices": clip.indices, "times": clip.times}
    row["thumbnails_s"] = thumbnail_seconds(path, row["auto"]["indices"], args.repeat)
    row["ffmpeg_full_s"] = ffmpeg_seconds(path, False, args.repeat)
    row["ffmpeg_keyframes_s"] = ffmpeg_seconds(path, True, args.repeat)
    print(f"{name:26s} " + "  ".join(f"{m}={row[m]['s_per_clip']:.3f}s cpu {row[m]['cpu_s_per_clip']:.3f}s"
                                      f"({row[m]['used']},{row[m]['backend']})"
                                      for m in SEEK_MODES)
          + f"  ffmpeg full={row['ffmpeg_full_s']} keyframes={row['ffmpeg_keyframes_s']}"
          + f"  thumbnails {row['thumbnails_s']}", flush=True)
    return row


def tables(rows: list[dict], backend: str) -> list[str]:
    lines = [f"| clip ({backend}) | cores | auto s/clip (CPU s) | keyframe s/clip (CPU s) | exact s/clip (CPU s) "
             f"| ffmpeg full | ffmpeg keyframes |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ff = [f"{r[k]:.3f}" if r[k] is not None else "-" for k in ("ffmpeg_full_s", "ffmpeg_keyframes_s")]
        cells = [f"{r[m]['s_per_clip']:.3f} ({r[m]['cpu_s_per_clip']:.3f})" for m in ("auto", "keyframe", "exact")]
        lines.append(f"| {r['clip']} | {r['cores']} | {cells[0]} {r['auto']['used']} | {cells[1]} | {cells[2]} | "
                     f"{ff[0]} | {ff[1]} |")
    lines += ["", "| clip | thumbnails, PyAV from keyframes (now) | decord | PyAV from the start | decord / now "
              "| from start / now |", "|---|---|---|---|---|---|"]
    for r in rows:
        t = r["thumbnails_s"]
        lines.append(f"| {r['clip']} | {t['pyav_seek']:.3f} | {t['decord']:.3f} | {t['pyav_from_start']:.3f} | "
                     f"{t['decord'] / t['pyav_seek']:.2f}x | {t['pyav_from_start'] / t['pyav_seek']:.2f}x |")
    return lines


def plot(rows: list[dict], cores: int):
    def draw(fig) -> None:
        ax = fig.add_subplot()
        for k, seek in enumerate(SEEK_MODES):
            ax.bar([i + 0.27 * k for i in range(len(rows))], [r[seek]["s_per_clip"] for r in rows], 0.27, label=seek)
        ax.set_xticks([i + 0.27 for i in range(len(rows))], [r["clip"] for r in rows], fontsize=7)
        ax.set_ylabel(f"seconds per clip ({cores} core)")
        ax.legend()
    return draw


def run(args) -> int:
    if args.backend == "nvdec":
        from video_io.nvdec import unavailable_reason

        if (reason := unavailable_reason()) is not None:
            print(f"caption-bench decode: --backend nvdec: FFmpeg could not open a CUDA device here ({reason})",
                  file=sys.stderr)
            return 2
        from caption.bench import decode_nvdec

        return decode_nvdec.run(args, make_clip)
    cores = len(os.sched_getaffinity(0))
    rows = [measure_clip(name, args, cores) for name in args.clips.split(",")]
    lines = tables(rows, args.backend)
    print("\n" + "\n".join(lines))
    write_results(args.out, "decode", {"backend": args.backend, "repeat": args.repeat, "rows": rows}, lines,
                  plot(rows, cores), f"decoding 8 frames per clip, backend={args.backend}, {cores} core(s)",
                  figsize=(8, 4))
    print(json.dumps({"clips": {r["clip"]: {**{m: r[m]["s_per_clip"] for m in SEEK_MODES},
                                            "thumbnails": r["thumbnails_s"]} for r in rows},
                      "cores": cores}))
    return 0
