"""Long videos captioned per segment: METEOR per scene, the cost of finding shots, memory at 2,000 segments.

    caption-bench segments                        # 8 videos of 6 scenes, held-out seed; 200 vs 2,000 segments
    caption-bench segments --n 4 --scene-seconds 4 5 --large 400 --skip-memory

Quality: caption-synth-long videos (seed 303, held out from training) of 5-6-s scenes drawn as
caption-synth draws its clips (what the embedded model knows), joined by hard cuts, dissolves and
fades, each scene with its references (references.jsonl, one line per scene). Each is captioned three
ways by the real `caption` job: one caption per video (video.segments=none), a caption per shot
(scenes), and a caption every 5 s (fixed). METEOR is per scene (n = the scenes): a segment's caption
against the scene it overlaps most (eval/inputs.py match, as the job scores them); the one caption of
a whole video against every scene's references. `recovered` counts the scenes whose segment lies
inside them (more than 90% of the segment in the scene).

Memory: one 200-s video split every second (segments=fixed, 1 s), then the same video under ten names
(2,000 segments): peak RSS of the job process (the decoders' memory is apart and flat by construction,
video_io/workers.py); output lengths forced short. Writes <out>/results.json, results.md, results.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from caption.bench.harness import BENCH_DATA, HELD_OUT_SEED, bars, bench_model, run_caption, write_results

MODES = {"none": ["video.segments=none"], "scenes": ["video.segments=scenes"],
         "fixed 5 s": ["video.segments=fixed", "video.segment_stride_s=5"]}
MEMORY_VIDEO_S = 200


def long_set(n: int, seed: int, **spec) -> Path:
    """<data/bench>/segments-...: n caption-synth-long videos, made once."""
    from video_io.synth.long import LongSpec, generate_long

    options = {"n_scenes": 6, "scene_s": (4.0, 5.0), "transition_s": (0.5, 1.0), "style": "clip", **spec}
    def named(value) -> str:
        return "-".join(f"{x:g}" for x in value) if isinstance(value, tuple) else f"{value:g}"

    folder = BENCH_DATA / "_".join([f"segments-seed{seed}-n{n}", *(f"{k}{named(v)}" for k, v in sorted(spec.items()))])
    if not (folder / "scenes.jsonl").exists():
        generate_long(folder, n, seed, LongSpec(**options))
    return folder


def per_scene_meteor(folder: Path, records: list[dict]) -> dict:
    """METEOR over every scene of every video, and how many scenes a segment alone recovered."""
    from eval.meteor import meteor_score

    truth = [json.loads(line) for line in open(folder / "scenes.jsonl", encoding="utf-8")]
    hyps, refs, recovered = [], [], 0
    for video in truth:
        mine = [r for r in records if r["video"] == video["video"]]
        for scene in video["scenes"]:
            inside = [r for r in mine if r.get("start_s") is not None and _share(r, scene) > 0.9]
            if mine and mine[0].get("segment_index") is None:  # one caption for the whole video
                caption = mine[0].get("caption") or ""
            else:
                best = max(mine, key=lambda r: _overlap(r, scene), default=None)
                caption = (best.get("caption") or "") if best is not None and _overlap(best, scene) > 0 else ""
            recovered += bool(inside)
            hyps.append(caption)
            refs.append(scene["references"])
    score = meteor_score(hyps, refs)
    return {"meteor": round(score["meteor"], 4), "scenes": len(hyps), "recovered": recovered}


def _overlap(record: dict, scene: dict) -> float:
    if record.get("start_s") is None:
        return 0.0
    return min(record["end_s"], scene["end_s"]) - max(record["start_s"], scene["start_s"])


def _share(record: dict, scene: dict) -> float:
    return _overlap(record, scene) / max(1e-9, record["end_s"] - record["start_s"])


def quality(args, out: Path) -> list[dict]:
    folder = long_set(args.n, args.seed, scene_s=tuple(args.scene_seconds))
    rows = []
    for mode, overrides in MODES.items():
        print(f"captioning {args.n} videos, segments {mode} ...", file=sys.stderr, flush=True)
        run = run_caption(folder, out / mode.replace(" ", "-"), [*bench_model("embedded"), *overrides])
        records, s = run.records(), run.summary
        minutes = sum(json.loads(line)["duration_s"] for line in open(folder / "scenes.jsonl")) / 60
        rows.append({"mode": mode, "records": len(records), **per_scene_meteor(folder, records),
                     "scan_s_per_video_min": round(s["scan_s_total"] / minutes, 3),
                     "generation_wall_s": s["generation_wall_s"], "wall_s": round(run.wall_s, 1),
                     "with_times": sum(r.get("start_s") is not None and r.get("end_s") is not None for r in records)})
    return rows


def memory(args, out: Path) -> list[dict]:
    video = long_set(1, args.seed + 1, seconds=float(MEMORY_VIDEO_S), n_scenes=1)
    names = BENCH_DATA / f"segments-memory-{args.large // MEMORY_VIDEO_S}-names"
    names.mkdir(parents=True, exist_ok=True)
    for i in range(args.large // MEMORY_VIDEO_S):
        link = names / f"long_{i:05d}.mp4"
        if not link.is_symlink():
            link.symlink_to((video / "long_00000.mp4").resolve())
    forced = [*bench_model("embedded"), "video.segments=fixed", "video.segment_stride_s=1", "video.segment_min_s=0.5",
              f"sampling.max_new_tokens={4 * args.tokens}",
              f"benchmark.output_tokens={{median:{args.tokens},sigma:0.5,min:1,max:{4 * args.tokens}}}"]
    rows = []
    for n, folder in ((MEMORY_VIDEO_S, video), (args.large // MEMORY_VIDEO_S * MEMORY_VIDEO_S, names)):
        print(f"captioning {n} segments ...", file=sys.stderr, flush=True)
        s = run_caption(folder, out / f"memory-{n}", forced).summary
        rows.append({"segments": s["segments_run"], "peak_rss_gib": s["peak_rss_gib"],
                     "generation_wall_s": s["generation_wall_s"], "captions_ok": s["captions_ok"]})
    return rows


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=8, help="long videos for the quality runs (6 scenes each)")
    ap.add_argument("--scene-seconds", type=float, nargs=2, default=(5.0, 6.0), metavar=("MIN", "MAX"),
                    help="scene lengths: with the default trim (0.5 s) and transitions of up to 1 s, a 5-s scene "
                         "leaves a segment of about 3.5 s, near the 4-s clips the embedded model knows")
    ap.add_argument("--seed", type=int, default=HELD_OUT_SEED)
    ap.add_argument("--large", type=int, default=2000, help="segments of the large memory run (200 per video)")
    ap.add_argument("--tokens", type=int, default=8, help="memory runs: forced output tokens per request (median)")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "segments")


def run(args) -> int:
    out = args.out
    rows = quality(args, out)
    low, high = args.scene_seconds
    lines = [f"{args.n} caption-synth-long videos (seed {args.seed}, 6 scenes of {low:g}-{high:g} s, --style clip), "
             "embedded model, vLLM; METEOR per scene\n",
             "| video.segments | records | METEOR per scene | scenes recovered | records with times | "
             "shot scan (s per video-minute) | generation wall (s) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['records']} | {r['meteor']:.4f} | {r['recovered']}/{r['scenes']} | "
              f"{r['with_times']}/{r['records']} | {r['scan_s_per_video_min']} | {r['generation_wall_s']} |" for r in rows]
    mem = [] if args.skip_memory else memory(args, out)
    if mem:
        lines += ["", f"One {MEMORY_VIDEO_S}-s video cut every second, then under {args.large // MEMORY_VIDEO_S} names; "
                  f"forced output lengths (median {args.tokens})\n",
                  "| segments | peak RSS (GiB) | generation wall (s) | records ok |", "|---|---|---|---|"]
        lines += [f"| {m['segments']} | {m['peak_rss_gib']:.3f} | {m['generation_wall_s']} | {m['captions_ok']} |"
                  for m in mem]
    print("\n" + "\n".join(lines))
    headline = {"scene_s": [low, high], **{"meteor_" + r["mode"].replace(" ", "_"): r["meteor"] for r in rows}}
    if mem:
        headline["peak_rss_ratio"] = round(mem[-1]["peak_rss_gib"] / mem[0]["peak_rss_gib"], 4)
    write_results(out, "segments", {**headline, "quality": rows, "memory": mem}, lines,
                  bars([r["mode"] for r in rows], {"METEOR per scene": [r["meteor"] for r in rows]},
                       "METEOR per scene (embedded model)"),
                  "Long videos: a caption per segment")
    print(json.dumps(headline))
    return 0
