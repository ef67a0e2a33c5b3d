"""Fuzz the caption job with damaged copies of good clips and count what went wrong.

    caption-bench chaos --n 500 --seed 1 --out runs/chaos-500

Makes N damaged copies of good clips (bit flips, truncation at random offsets, damaged MP4 box
headers, zeroed ranges), runs the REAL job over them in a subprocess (caption.bench.harness.run_caption: the
embedded model, default engine; its files in <out>/job), then prints a table and writes
<out>/results.json (with results.md and results.png):

  files       damaged files written (all of them have a video extension, so all are crawled)
  records     records in the job's output
  crashes     the job did not finish: exit status other than 0 or 3 (caption/outcome.py), e.g.
              1 (a traceback) or a signal
  hangs       the job ran past --time-limit and was killed
  duplicates  files with more than one record
  lost        files without any record

plus how the records ended (ok, error reasons grouped), decoder timeouts and decoder crashes
inside the job (each costs one clip, not the job). Good clips come from the synthetic data set
(video_io.synth) unless --good-dir names a folder of your own clips.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
from collections import Counter
from pathlib import Path

import numpy as np

from caption.bench.harness import JOB_FINISHED, JobRun, bars, run_caption, write_results
from video_io.crawl import crawl_videos

# a job that ends with a status outside JOB_FINISHED (0 all ok, 3 some records are errors, expected
# here), e.g. 1 (a bug with a traceback), 4 (engine died) or a signal, is a crash
KINDS = ("bitflip", "bitflip_head", "truncate", "box_header", "zero_range")
# ISO-BMFF boxes that hold other boxes (ISO/IEC 14496-12); damage goes into their children too
CONTAINER_BOXES = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta", b"mvex"}


def box_tree(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[tuple[int, int, bytes]]:
    """(offset, size, type) of every box, nested ones included."""
    end = len(data) if end is None else end
    boxes, offset = [], start
    while offset + 8 <= end:
        size = int.from_bytes(data[offset:offset + 4], "big")
        kind = data[offset + 4:offset + 8]
        header = 8
        if size == 1:
            size, header = int.from_bytes(data[offset + 8:offset + 16], "big"), 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            break
        boxes.append((offset, size, kind))
        if kind in CONTAINER_BOXES and depth < 8:
            boxes += box_tree(data, offset + header, offset + size, depth + 1)
        offset += size
    return boxes


def damage(data: bytes, kind: str, rng: np.random.Generator) -> tuple[bytes, str]:
    """A damaged copy of `data` and a short description of what was done."""
    buf = bytearray(data)
    n = len(buf)
    if kind in ("bitflip", "bitflip_head"):
        span = min(n, 4096) if kind == "bitflip_head" else n
        count = int(rng.integers(1, 64))
        for pos in rng.integers(0, span, count):
            buf[pos] ^= 1 << int(rng.integers(0, 8))
        return bytes(buf), f"{count} bits flipped in the first {span} bytes"
    if kind == "truncate":
        cut = int(rng.integers(1, n))
        return bytes(buf[:cut]), f"cut at byte {cut} of {n}"
    if kind == "zero_range":
        start = int(rng.integers(0, n))
        length = int(rng.integers(1, max(2, n // 8)))
        buf[start:start + length] = bytes(len(buf[start:start + length]))
        return bytes(buf), f"{length} bytes zeroed at {start}"
    boxes = box_tree(data)
    if not boxes:
        return damage(data, "bitflip_head", rng)
    offset, size, box = boxes[int(rng.integers(0, len(boxes)))]
    how = int(rng.integers(0, 4))
    if how == 0:
        value = int(rng.choice([0, 1, 7, size - 1, size + 1, size * 2, 0xFFFFFFFF]))
        buf[offset:offset + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
        what = f"size {size} -> {value & 0xFFFFFFFF}"
    elif how == 1:
        buf[offset + 4:offset + 8] = bytes(rng.integers(97, 123, 4).astype(np.uint8))
        what = f"type -> {bytes(buf[offset + 4:offset + 8]).decode()}"
    elif how == 2:
        buf[offset:offset + 8] = bytes(8)
        what = "header zeroed"
    else:
        body = slice(offset + 8, offset + min(size, 64))
        buf[body] = bytes(rng.integers(0, 256, len(buf[body])).astype(np.uint8))
        what = "first body bytes randomised"
    return bytes(buf), f"box {box.decode('latin-1')!r} at {offset}: {what}"


def make_damaged(good: list[Path], out: Path, n: int, seed: int) -> dict[str, str]:
    """Write n damaged files into `out`; returns {file name: what was done}."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    made = {}
    for i in range(n):
        source = good[int(rng.integers(0, len(good)))]
        kind = KINDS[int(rng.integers(0, len(KINDS)))]
        data, what = damage(source.read_bytes(), kind, rng)
        name = f"{i:05d}_{kind}{source.suffix}"
        (out / name).write_bytes(data)
        made[name] = f"{source.name}: {what}"
    return made


def good_clips(folder: Path | None, work: Path) -> list[Path]:
    if folder is not None:
        clips = [path for _, path in crawl_videos(folder)]
        if not clips:
            raise SystemExit(f"--good-dir {folder} holds no video files")
        return clips
    from video_io.synth.dataset import SynthSpec, generate_dataset

    synth = work / "good"
    if not (synth / "references.jsonl").exists():
        generate_dataset(synth, n=8, seed=0, spec=SynthSpec())
    return sorted(synth.glob("*.mp4"))


def job_outcome(job: JobRun) -> dict:
    text = job.log.read_text(errors="replace") if job.log.exists() else ""
    code = job.exit_code
    return {"command": " ".join(job.command), "exit_code": code, "hung": job.hung, "seconds": round(job.wall_s, 1),
            "traceback": "Traceback (most recent call last)" in text and code != 0,
            "signal": signal.Signals(-code).name if code is not None and code < 0 and not job.hung else None}


def tally(files: list[str], records: list[dict], job: dict) -> dict:
    """What the job made of the damaged files (`records`: its whole lines; a line a crash cut is lost)."""
    per_file = Counter(r.get("video") for r in records)
    reasons = Counter()
    for r in records:
        if r.get("status") == "ok":
            reasons["ok (captioned)"] += 1
        else:
            text = (r.get("error") or "?").removeprefix("decode: ").removeprefix("generate: ")
            reasons[text.split(":")[0][:70]] += 1
    errors = [r.get("error") or "" for r in records]
    return {
        "files": len(files), "records": len(records),
        "crashes": int(not job["hung"] and job["exit_code"] not in JOB_FINISHED), "hangs": int(job["hung"]),
        "duplicates": sum(1 for f in files if per_file[f] > 1),
        "lost": sum(1 for f in files if per_file[f] == 0),
        "ok": sum(r.get("status") == "ok" for r in records),
        "errors": sum(r.get("status") != "ok" for r in records),
        "decoder_timeouts": sum("timed out" in e for e in errors),
        "decoder_crashes": sum("decoder process died" in e for e in errors),
        "tracebacks_in_records": sum("Traceback" in json.dumps(r) for r in records),
        "reasons": dict(reasons.most_common()),
        "job": job,
    }


def table(result: dict) -> list[str]:
    keys = ("files", "records", "crashes", "hangs", "duplicates", "lost", "ok", "errors",
            "decoder_timeouts", "decoder_crashes", "tracebacks_in_records")
    lines = ["| " + " | ".join(keys) + " |", "|" + "|".join("---:" for _ in keys) + "|",
             "| " + " | ".join(str(result[k]) for k in keys) + " |",
             f"\njob: exit code {result['job']['exit_code']}, {result['job']['seconds']} s"
             f"{', killed after the time limit' if result['job']['hung'] else ''}", "\nhow the records ended:"]
    lines += [f"  {count:5d}  {reason}" for reason, count in result["reasons"].items()]
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=20, help="damaged files to make")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="work folder (damaged clips, the job's files, results)")
    parser.add_argument("--good-dir", type=Path, default=None, help="good clips to damage (default: synthetic)")
    parser.add_argument("--time-limit", type=float, default=1800, help="seconds before the job counts as hung")


def run(args) -> int:
    if args.n < 1:
        raise SystemExit("caption-bench chaos: --n must be >= 1")
    clips = args.out / "damaged"
    if clips.exists():
        shutil.rmtree(clips)
    made = make_damaged(good_clips(args.good_dir, args.out), clips, args.n, args.seed)
    job = run_caption(clips, args.out / "job", time_limit_s=args.time_limit, check=False)
    result = tally(sorted(made), job.records(), job_outcome(job))
    result["damage"] = made
    lines = table(result)
    print("\n".join(lines))
    print(f"(job log: {job.log})")
    write_results(args.out, "chaos", result, ["```", *lines, "```"],
                  bars(list(result["reasons"]), {"records": list(result["reasons"].values())}, "records"),
                  f"{args.n} damaged clips (seed {args.seed})")
    return 0
