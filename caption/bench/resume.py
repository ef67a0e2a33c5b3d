"""A re-run over a large captioned library: time and memory to find that nothing is left to do.

    caption-bench resume                          # 30,000 clips
    caption-bench resume --n 2000 --out runs/resume-2000

Makes a library of N clip files of 50 MiB (one caption-synth clip's bytes, then a hole, then bytes of
its own: sparse files, so every file has an identity of its own and the library takes no disk), captions one of them with the real job (engine=hf) for a
record to copy, and writes the records file the job would have written for all N: that record under each
clip's name, with each clip's own `source` (video_io/identity.py). Then it runs the real `caption` command
over the library into that file, as a user re-running a finished job does, and measures the process's
wall time and peak RSS (its own rusage), twice each:

  unchanged   the library where it was captioned: every clip's size and modification time match its
              record, so no file is read
  moved       the same library under another folder name (a remounted disk): every clip's fingerprint is
              computed again (64 KiB read per clip) before it counts as done

Each run must end with exit status 0 and `0 to caption`. Writes <out>/results.json, results.md, results.png.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from caption.bench.harness import BENCH_DATA, JobRun, bars, clip_set, run_caption, write_results

TEMPLATE_CLIP = "clip_00000.mp4"
LIMIT_S, LIMIT_GIB = 20.0, 1.5  # what issue 31 asks of 30,000 clips on a 2-core machine


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=30000, help="clips in the library (default 30,000)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each case; the table shows the best")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "resume")


CLIP_BYTES = 50 * 2**20  # each clip's size: a short camera clip's; sparse, so the library costs no disk


def make_library(folder: Path, n: int, template: Path) -> None:
    """n clips of CLIP_BYTES in folders of 1,000: `template`'s bytes, a hole, and 16 bytes of its own at the
    end (a fingerprint reads both ends and pieces between: video_io/identity.py)."""
    data = template.read_bytes()
    for i in range(n):
        path = folder / f"day{i // 1000:03d}" / f"C{i:05d}.MP4"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            f.seek(CLIP_BYTES - 16)
            f.write(i.to_bytes(16, "big"))


def write_records(folder: Path, records_path: Path, template: dict) -> int:
    """The records file the job would hold after captioning every clip of `folder`."""
    from video_io.crawl import crawl_videos
    from video_io.identity import file_identity

    count = 0
    with open(records_path, "w", encoding="utf-8") as f:
        for key, path in crawl_videos(folder):
            f.write(json.dumps(template | {"video": key, "source": file_identity(path, folder)},
                               ensure_ascii=False) + "\n")
            count += 1
    return count


def template_record(work: Path, overrides: list[str]) -> dict:
    """A real record: one clip captioned by the real job."""
    run = run_caption(clip_set("resume-template", 1, seed=31), work / "template-run", overrides)
    return run.records()[0]


def rerun(library: Path, records: Path, overrides: list[str], run_dir: Path, n: int) -> JobRun:
    """The real `caption` command resumed over the library: it must find nothing to do."""
    run = run_caption(library, run_dir, overrides, output=records)
    first = next((line for line in run.log.read_text().splitlines() if " videos in " in line), "(no start line)")
    if f"{n} videos" not in first or "(0 to caption," not in first:
        raise SystemExit(f"the re-run found work to do: {first}")
    return run


def run(args) -> int:
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    overrides = ["engine=hf"]  # no engine loads when nothing is left to do; hf makes the template record fastest
    template = template_record(work, overrides)
    library = work / f"library-{args.n}"
    records = work / "records.jsonl"
    shutil.rmtree(library, ignore_errors=True)
    shutil.rmtree(work / "moved", ignore_errors=True)
    started = time.perf_counter()
    make_library(library, args.n, clip_set("resume-template", 1, seed=31) / TEMPLATE_CLIP)
    made_s = time.perf_counter() - started
    written = write_records(library, records, template)
    print(f"library of {args.n} clips made in {made_s:.1f} s; {written} records written")
    results = {}
    for case in ("unchanged", "moved"):
        if case == "moved":
            moved = work / "moved" / library.name
            moved.parent.mkdir(parents=True, exist_ok=True)
            os.rename(library, moved)
            library = moved
        runs = []
        for k in range(args.repeat):
            done = rerun(library, records, overrides, work / f"run-{case}-{k}", args.n)
            runs.append(done)
            print(f"{case} run {k + 1}: {done.wall_s:.2f} s, peak RSS {done.process_peak_rss_gib:.3f} GiB")
        results[case] = {"wall_s": min(r.wall_s for r in runs), "peak_rss_gib": max(r.process_peak_rss_gib for r in runs),
                         "runs_wall_s": [round(r.wall_s, 2) for r in runs]}
    os.rename(library, work / f"library-{args.n}")  # back where the next run makes it anew
    rows = [f"| {case} | {r['wall_s']:.2f} | {r['peak_rss_gib']:.3f} | {'yes' if r['wall_s'] <= LIMIT_S and r['peak_rss_gib'] <= LIMIT_GIB else 'NO'} |"
            for case, r in results.items()]
    markdown = [f"A re-run of the real `caption` command over {args.n:,} captioned clips (nothing to do), best of "
                f"{args.repeat}; the limit is {LIMIT_S:g} s and {LIMIT_GIB:g} GiB.", "",
                "| case | wall (s) | peak RSS (GiB) | within the limit |", "|---|---|---|---|", *rows]
    print("\n".join(markdown))
    write_results(work, "resume", {"n": args.n, "repeat": args.repeat, "cases": results},
                  markdown, bars(list(results), {"wall (s)": [r["wall_s"] for r in results.values()]}, "seconds"),
                  title=f"Finding nothing to do in {args.n:,} captioned clips")
    return 0 if all(r["wall_s"] <= LIMIT_S and r["peak_rss_gib"] <= LIMIT_GIB for r in results.values()) else 1
