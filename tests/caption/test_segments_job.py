"""video.segments through the whole job: one record per segment with its times, resumed, retried and
counted as videos are; short clips keep the records they always had."""

from __future__ import annotations

import json
import shutil

import pytest

from caption.job import run_job
from caption.output.checks import OutputRefused
from tests.caption.in_process import run_caption, run_command
from video_io.identity import file_identity

SEGMENT_FIELDS = ("segment_index", "segments", "start_s", "end_s")


def _records(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


@pytest.fixture
def mixed_folder(tmp_path, long_dir, synth_dir):
    """The two long videos and two short clips, with the references of each (per scene, per clip)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in ("long_00000.mp4", "long_00001.mp4"):
        shutil.copy(long_dir / name, folder)
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    refs = open(long_dir / "references.jsonl", encoding="utf-8").readlines()
    refs += open(synth_dir / "references.jsonl", encoding="utf-8").readlines()[:2]
    (folder / "references.jsonl").write_text("".join(refs), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_long_videos_get_a_record_per_segment_and_resume_by_segment(mixed_folder, long_dir, compose_config,
                                                                  vllm_engine, tmp_path):
    out = tmp_path / "c.jsonl"
    base = [f"input_dir={mixed_folder}", f"output={out}", "progress=false", "video.workers=1",
            "video.segments=auto", "video.segment_over_s=8"]
    summary = run_job(compose_config(base), engine=vllm_engine)
    records = _records(out)
    truth = {json.loads(line)["video"]: json.loads(line) for line in open(long_dir / "scenes.jsonl")}
    short = [r for r in records if r["video"].startswith("clip_")]
    long = sorted((r for r in records if r["video"].startswith("long_")), key=lambda r: (r["video"], r["segment_index"]))
    # short clips (4 s, under segment_over_s): the records they always had, no segment fields
    assert len(short) == 2 and not any(k in r for r in short for k in SEGMENT_FIELDS)
    # each long video: one record per scene, in order, with its times, its frames inside them
    for video, scenes in ((v, t["scenes"]) for v, t in truth.items()):
        mine = [r for r in long if r["video"] == video]
        assert [r["segment_index"] for r in mine] == list(range(len(scenes)))
        assert {r["segments"] for r in mine} == {len(scenes)}
        for r, scene in zip(mine, scenes):
            assert scene["start_s"] - 0.5 <= r["start_s"] < r["end_s"] <= scene["end_s"] + 0.5
            assert all(r["start_s"] <= t < r["end_s"] for t in r["frame_times"]) and r["status"] == "ok"
            assert r["scan_s"] > 0 and r["settings"]["segments"].startswith("clips over 8 s")
    assert summary["segments_run"] == len(long) == 6 and summary["videos_segmented"] == 2
    assert summary["videos_run"] == 4 and summary["captions_ok"] == 8 and summary["exit_status"] == 0
    # METEOR: each segment against the scene it overlaps most, the clips against theirs
    assert summary["meteor_n"] == 8 and summary["meteor"] >= 0.8  # caption-bench segments measures it on more

    # a job stopped after part of a video: the rest of its segments, and nothing else, is done again
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not (json.loads(line)["video"] == "long_00001.mp4"
                                           and json.loads(line)["segment_index"] > 0)]
    out.write_text("".join(kept), encoding="utf-8")
    again = run_job(compose_config(base), engine=vllm_engine)
    assert again["videos_skipped_resume"] == 3 and again["segments_run"] == 2 and again["captions_ok"] == 2
    assert again["records_left_undone"] == 0
    after = _records(out)
    assert sorted((r["video"], r.get("segment_index")) for r in after) == \
        sorted((r["video"], r.get("segment_index")) for r in records)  # none lost, none twice
    # retry_errors: a segment's error record is replaced by a new attempt
    failed = [dict(r, status="error", caption=None, error="decode: test") if r.get("segment_index") == 1
              and r["video"] == "long_00000.mp4" else r for r in after]
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in failed), encoding="utf-8")
    retried = run_job(compose_config([*base, "retry_errors=true"]), engine=vllm_engine)
    assert retried["captions_ok"] == 1 and retried["segments_run"] == 1
    final = _records(out)
    assert len(final) == 8 and all(r["status"] == "ok" for r in final)
    # other segment settings: refused before anything runs, naming what differs
    with pytest.raises(OutputRefused, match="segments clips over 8 s.* -> clips over 8 s.*threshold 6"):
        run_job(compose_config([*base, "video.scene_threshold=6"]), engine=vllm_engine)


@pytest.mark.slow
def test_segments_none_and_auto_give_short_clips_the_same_records(two_clips_with_references, compose_config,
                                                                  vllm_engine, tmp_path):
    made = {}
    for mode in ("none", "auto"):
        out = tmp_path / f"{mode}.jsonl"
        run_job(compose_config([f"input_dir={two_clips_with_references}", f"output={out}", "progress=false",
                                "video.workers=0", f"video.segments={mode}"]), engine=vllm_engine)
        made[mode] = [{k: v for k, v in r.items() if not k.endswith("_s")} for r in _records(out)]
    key = lambda r: r["video"]  # noqa: E731
    assert sorted(made["none"], key=key) == sorted(made["auto"], key=key)  # settings_id included


@pytest.mark.slow
def test_the_transformers_engine_captions_segments_too(long_dir, compose_config, hf_engine, tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(long_dir / "long_00000.mp4", folder)
    out = tmp_path / "hf.jsonl"
    summary = run_job(compose_config([f"input_dir={folder}", f"output={out}", "progress=false", "engine=hf",
                                      "video.workers=0", "video.segments=scenes"]), engine=hf_engine)
    records = _records(out)
    assert summary["exit_status"] == 0 and summary["segments_run"] == len(records) == 3
    assert [r["segment_index"] for r in sorted(records, key=lambda r: r["start_s"])] == [0, 1, 2]
    assert all(r["engine"] == "hf" and r["caption"] and r["end_s"] > r["start_s"] for r in records)
    read = file_identity(folder / "long_00000.mp4", folder)  # each segment names the file its decoder read
    assert all(r["source"] == read for r in records)


@pytest.mark.slow
def test_real_footage_is_covered_and_every_gap_is_named_in_records_summary_page_and_subtitles(tmp_path,
                                                                                             tmp_path_factory):
    """The `caption` command on real footage with real editing (tests/video_io/real_footage.py), as a user
    runs it: every second is in a segment or named as left out, and each place results live says so."""
    import os

    import srt

    from tests.caption.browser import _run as chromium_run
    from tests.video_io.real_footage import reel_made_once

    folder = tmp_path / "reels"
    folder.mkdir()
    shutil.copy(reel_made_once(tmp_path_factory)[0], folder / "reel.mp4")  # the scene tests' reel
    out, env = tmp_path / "c.jsonl", {**os.environ, "HF_HUB_OFFLINE": "1"}
    job = run_caption([f"input_dir={folder}", f"output={out}", "video.segments=scenes", "progress=false",
                       "video.workers=1", f"hydra.run.dir={tmp_path / 'run'}"], env=env)
    assert job.returncode == 0, job.stderr[-2000:]
    records = sorted(_records(out), key=lambda r: r["segment_index"])
    # the records: segments and left-out spans tile the reel; every shot is in a segment
    spans = sorted([(r["start_s"], r["end_s"]) for r in records] +
                   [(g["start_s"], g["end_s"]) for r in records for g in r["left_out"]])
    assert spans[0][0] == 0 and all(abs(a[1] - b[0]) < 2e-3 for a, b in zip(spans, spans[1:]))
    coverage = records[0]["coverage"]
    assert abs(spans[-1][1] - coverage["duration_s"]) < 2e-3 and all(r["coverage"] == coverage for r in records)
    assert sorted(s["index"] for r in records for s in r["shots"]) == list(range(10))
    assert {g["reason"] for r in records for g in r["left_out"]} <= {"trim", "dissolve", "fade"}
    # the summary and the terminal: seconds captioned, >= 90% outside transitions, left out by reason
    summary = json.loads(out.with_name(out.name + ".summary.json").read_text(encoding="utf-8"))["coverage"]
    video = summary["per_video"]["reel.mp4"]
    assert video["fraction_outside_transitions"] >= 0.9 and video["segments"] == len(records)
    assert sum(summary["left_out_s"].values()) == pytest.approx(coverage["left_out_s"], abs=0.01)
    line = next(x for x in job.stdout.splitlines() if x.strip().startswith("coverage"))
    assert f"{summary['captioned_s']:.1f} of {summary['duration_s']:.1f} s captioned" in line and "trim" in line
    # subtitles: a cue per segment at its times; every gap between cues is a span the records leave out
    export = run_command("caption-export", [out, "--format", "srt"], env=env)
    assert export.returncode == 0 and "the records name every gap" in export.stderr
    cues = list(srt.parse((tmp_path / "c-srt" / "reel.srt").read_text(encoding="utf-8")))
    assert [(round(c.start.total_seconds(), 2), round(c.end.total_seconds(), 2)) for c in cues] == \
        [(round(r["start_s"], 2), round(r["end_s"], 2)) for r in records]
    gaps = [(round(a.end.total_seconds(), 2), round(b.start.total_seconds(), 2)) for a, b in zip(cues, cues[1:])]
    named = {}
    for r in records:
        for g in r["left_out"]:
            named.setdefault(round(g["start_s"], 2), round(g["end_s"], 2))
    for start, end in gaps:  # a chain of named spans from one cue's end to the next cue's start
        at = start
        while at < end:
            assert at in named, f"the gap {start}-{end} s between cues is not named in the records"
            at = named[at]
    # the review page draws the reel's timeline above its first segment
    report = tmp_path / "report.html"
    made = run_command("caption-report", [out, "--out", report], env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    dom = chromium_run(report, "", ["--dump-dom"], tmp_path / "profile")
    timeline = dom.index('class="timeline"')
    assert timeline < dom.index('class="clip ok"') and "reel.mp4: " in dom[timeline:timeline + 400]
    assert dom.count('class="seg ok"') == len(records) and dom.count('class="cut"') == 9
