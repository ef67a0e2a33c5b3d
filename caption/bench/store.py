"""The job from S3-compatible object storage against the job from local disk, and the bytes a clip fetches.

    caption-bench store                        # moto's S3 server on loopback (moto[s3]: the bench extra)
    caption-bench store --n 48 --repeat 3 --out data/bench/store

Two measurements:

  job       the real `caption` command on the same N caption-synth clips, from a folder and from a bucket of
            the loopback store holding the same files (input_dir=s3://..., AWS_ENDPOINT_URL), alternately,
            --repeat times each; the best wall time of each, and the store's over the folder's (the
            target: at most 1.3x). The captions must be the same.
  fetched   decode_clip (the job's decoder) on long clips in the store, 8 frames, each seek mode: the bytes
            its range requests fetched over the object's size (the target: at most 25% for a 4K HEVC 20-s
            clip's 8 frames at the default seek). The clips are caption/bench/decode.py's, made once in --out.
  resume    --resume-n objects (30,000 by default; 0 skips it), each with bytes of its own, and the records
            file the job would hold for all of them (one real record, under each object's key and with its
            identity from the listing); then the real `caption` command resumed over the prefix, which must
            find nothing to do: its wall time (the target: at most 30 s to list and decide).

Where the time goes for a clip from the store: video_io/store.py says what each request is (listing,
HEADs, 1 MiB range reads). Writes <out>/results.json, results.md and results.png.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, clip_set, run_caption, write_results

JOB_TARGET, FETCH_TARGET = 1.3, 0.25
LONG_CLIPS = ("1080p_h264_20s_gop2s", "4k_hevc_20s")  # caption/bench/decode.py CLIPS


RESUME_TARGET_S = 30.0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=48, help="clips in the job (default 48)")
    ap.add_argument("--resume-n", type=int, default=30000, help="objects the resume case lists (0: skip it)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each job; the table shows the best")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "store")


def measure_jobs(s3, clips: Path, bucket: str, work: Path, repeat: int) -> dict:
    env = s3.env()
    walls: dict[str, list[float]] = {"folder": [], "store": []}
    captions: dict[str, dict] = {}
    for k in range(repeat):
        for case, source in (("folder", clips), ("store", f"s3://{bucket}/clips")):
            done = run_caption(source, work / f"job-{case}-{k}", env=env)
            walls[case].append(round(done.wall_s, 2))
            captions[case] = {r["video"]: r["caption"] for r in done.records()}
            print(f"{case} run {k + 1}: {done.wall_s:.2f} s")
    if captions["folder"] != captions["store"]:
        raise SystemExit("the store's captions differ from the folder's: the benchmark compares nothing")
    best = {case: min(values) for case, values in walls.items()}
    return {"n": len(captions["folder"]), "wall_s": best, "runs_wall_s": walls,
            "ratio": round(best["store"] / best["folder"], 3)}


def measure_fetched(s3, bucket: str, work: Path) -> list[dict]:
    from caption.bench.decode import EIGHT_FRAMES, make_clip
    from video_io.decode import DecodeSpec, decode_clip
    from video_io.seek import SEEK_MODES

    rows = []
    saved = dict(os.environ)
    os.environ.update(s3.env())  # this process decodes: its client reads the same variables
    try:
        for name in LONG_CLIPS:
            path = make_clip(work / "clips", name)
            s3.put(bucket, f"long/{name}.mp4", path)
            for seek in SEEK_MODES:
                clip = decode_clip(f"s3://{bucket}/long/{name}.mp4", DecodeSpec(sampling=EIGHT_FRAMES, seek=seek,
                                                                                  max_pixels=3136))
                size = path.stat().st_size
                rows.append({"clip": name, "seek": seek, "seek_used": clip.seek, "bytes": size,
                             "fetched": clip.fetched_bytes, "share": round(clip.fetched_bytes / size, 4),
                             "decode_s": round(clip.decode_seconds, 3)})
                print(f"{name} seek={seek}: {clip.fetched_bytes:,} of {size:,} bytes "
                      f"({clip.fetched_bytes / size:.1%}) in {clip.decode_seconds:.2f} s")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return rows


def measure_resume(s3, clips: Path, work: Path, n: int) -> dict:
    """The real command resumed over n captioned objects: the listing and the decisions, nothing to caption."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from video_io.store import list_objects

    template_run = run_caption(clips, work / "resume-template", ["limit=1"])
    template = template_run.records()[0]
    data = (clips / template["video"]).read_bytes()
    bucket = s3.bucket()
    client = s3.client()

    def put(i: int) -> None:  # bytes of its own: an ETag of its own
        client.put_object(Bucket=bucket, Key=f"lib/day{i // 1000:03d}/C{i:05d}.MP4", Body=data + i.to_bytes(16, "big"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(n)))
    url, records = f"s3://{bucket}/lib", work / "resume-records.jsonl"
    saved = dict(os.environ)
    os.environ.update(s3.env())
    try:
        from video_io.identity import with_folder
        from video_io.store import listed

        with open(records, "w", encoding="utf-8") as out:
            for key, object_url in list_objects(url, (".mp4",)):
                source = with_folder(listed(object_url).identity(), url)
                out.write(json.dumps(template | {"video": key, "source": source}, ensure_ascii=False) + "\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    done = run_caption(url, work / "resume-run", env=s3.env(), output=records)
    first = next((line for line in done.log.read_text().splitlines() if " videos in " in line), "(no start line)")
    if f"{n} videos" not in first or "(0 to caption," not in first:
        raise SystemExit(f"the resume found work to do: {first}")
    print(f"resume over {n:,} objects: {done.wall_s:.2f} s")
    return {"n": n, "wall_s": round(done.wall_s, 2)}


def run(args) -> int:
    from caption.bench.loopback_s3 import folder_files, s3_server

    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    clips = clip_set("store", args.n, seed=45)
    with s3_server(work) as s3:
        bucket = s3.bucket(folder_files(clips, prefix="clips/"))
        jobs = measure_jobs(s3, clips, bucket, work, args.repeat)
        fetched = measure_fetched(s3, bucket, work)
        resume = measure_resume(s3, clips, work, args.resume_n) if args.resume_n else None
    default = next(r for r in fetched if r["clip"] == "4k_hevc_20s" and r["seek"] == "auto")
    ok = jobs["ratio"] <= JOB_TARGET and default["share"] <= FETCH_TARGET and \
        (resume is None or resume["wall_s"] <= RESUME_TARGET_S)
    markdown = [
        f"The real `caption` command on {jobs['n']} caption-synth clips, from a folder and from a bucket of moto's "
        f"S3 server on loopback holding the same files; best of {args.repeat} (the captions are the same).", "",
        "| input | wall (s) | runs (s) |", "|---|---|---|",
        *[f"| {case} | {jobs['wall_s'][case]:.2f} | {', '.join(map(str, jobs['runs_wall_s'][case]))} |"
          for case in ("folder", "store")],
        "", f"The store's wall time over the folder's: **{jobs['ratio']:.2f}x** (target: at most {JOB_TARGET}x).", "",
        "Bytes fetched by range requests to decode 8 frames of a long clip in the store (video_io/store.py):", "",
        "| clip | seek | seek used | object bytes | fetched | share | decode (s) |", "|---|---|---|---|---|---|---|",
        *[f"| {r['clip']} | {r['seek']} | {r['seek_used']} | {r['bytes']:,} | {r['fetched']:,} | {r['share']:.1%} | "
          f"{r['decode_s']} |" for r in fetched],
        "", f"4K HEVC 20 s at the default seek: **{default['share']:.1%}** of the object (target: at most "
            f"{FETCH_TARGET:.0%}).",
    ]
    if resume is not None:
        markdown += ["", f"The real `caption` command resumed over {resume['n']:,} captioned objects (listed, each "
                         f"compared with its record, nothing to caption): **{resume['wall_s']:.1f} s** (target: at most "
                         f"{RESUME_TARGET_S:g} s)."]
    print("\n".join(markdown))
    labels = [f"{r['clip']}\n{r['seek']}" for r in fetched]
    write_results(work, "store", {"job": jobs, "fetched": fetched, "resume": resume, "within_targets": ok}, markdown,
                  bars(labels, {"share of the object fetched (%)": [100 * r["share"] for r in fetched]}, "percent"),
                  title=f"Object storage: the job {jobs['ratio']:.2f}x the folder's wall time; 8 frames of 4K fetch "
                        f"{default['share']:.0%} of the clip")
    return 0 if ok else 1
