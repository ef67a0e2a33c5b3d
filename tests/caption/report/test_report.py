"""caption-report: the page a real browser renders from a job's records (thumbnails, captions, METEOR,
filters), placeholders instead of crashes, and a 10,000-clip report that renders one page of rows."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil

import numpy as np
import pytest
from PIL import Image

from caption.report.cli import main as report_main
from caption.report.thumbs import ThumbJob, run_thumbnails
from eval.cli import score_files
from eval.meteor import meteor_score
from tests.caption.browser import dump_dom, screenshot
from tests.caption.misbehaving_thumbnails import hang_or_crash_on_name, note_sigterm_then_answer

HANGUL = re.compile("[가-힣]")
JPEG_URI = "data:image/jpeg;base64,"


def _refs(folder):
    lines = (folder / "references.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["video"]: r for r in map(json.loads, lines)}


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _record(video, caption=None, error=None, task="caption", adapter=None, indices=(2, 6, 10, 14, 18, 22, 26, 30)):
    """A record as caption/job.py writes it (decode errors have no frames)."""
    rec = {"video": video, "task": task, "adapter": adapter, "status": "error" if error else "ok",
           "caption": caption, "error": error, "model": "vidcap-ko-tiny", "engine": "vllm"}
    if not (error or "").startswith("decode:"):
        rec.update(frames=len(indices), frame_indices=list(indices), decoder="decord", output_tokens=12,
                   finish_reason="stop", generate_s=0.2)
    return rec


def _page_data(html_path):
    """The page's JSON, with each clip's placeholder text ("tn", stored once per text) put back in."""
    text = html_path.read_text(encoding="utf-8")
    blob = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S).group(1)
    data = json.loads(blob)
    for clip in data["clips"]:
        if "tn" in clip:
            clip["tn"] = data["placeholders"][clip["tn"]]
    return data


@pytest.fixture
def reviewed(tmp_path, synth_dir):
    """Hand-written records for the six synthetic clips: exact, partial, wrong, failed captions."""
    refs = _refs(synth_dir)
    records = [
        _record("clip_00000.mp4", refs["clip_00000.mp4"]["references"][0]),
        _record("clip_00000.mp4", refs["clip_00000.mp4"]["references_detailed"][0], adapter="detailed"),
        _record("clip_00001.mp4", "바다 위에서 무언가 움직인다."),
        _record("clip_00002.mp4", "산 위에서 새 한 마리가 천천히 왼쪽으로 날아간다."),
        _record("clip_00003.mp4", error="generate: engine stopped"),
        _record("clip_00004.mp4", refs["clip_00004.mp4"]["references"][1]),
        _record("clip_00005.mp4", refs["clip_00005.mp4"]["references"][0]),
        _record("clip_00005.mp4", "구름 한 조각이 천천히 왼쪽으로 움직인다.", task="motion"),
        _record("gone/missing.mp4", error="decode: not a file: gone/missing.mp4"),
    ]
    (tmp_path / "out").mkdir()
    return _write_jsonl(tmp_path / "out" / "captions.jsonl", records)


def _build(records, out, *args):
    assert report_main([str(records), "--out", str(out), *map(str, args)]) == 0
    return out


def test_page_shows_frames_captions_scores_and_filters(reviewed, synth_dir, tmp_path):
    page = _build(reviewed, tmp_path / "report.html", "--input-dir", synth_dir, "--workers", 0)
    html = page.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html and "src=\"" not in html.split("<script")[0]
    assert "default-src 'none'" in html  # the page may not load anything, not even by mistake
    profile = tmp_path / "chromium"

    dom = dump_dom(page, profile)
    clips = {c["video"]: c for c in dom.clips}
    assert list(clips) == ["clip_0000%d.mp4" % i for i in range(6)] + ["gone/missing.mp4"]
    refs = _refs(synth_dir)
    # the frames the model saw, as JPEG data URIs; the right ones (compared with a fresh decode)
    from video_io.thumbnails import read_frames

    for video in ("clip_00002.mp4", "clip_00003.mp4"):
        imgs = clips[video]["imgs"]
        assert len(imgs) == 8 and all(src.startswith(JPEG_URI) for src in imgs)
        shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(imgs[7][len(JPEG_URI):]))).convert("RGB"))
        truth = read_frames(str(synth_dir / video), [30], max_side=shown.shape[1])[0]
        assert np.abs(shown.astype(int) - truth).mean() < 6
    # every caption, per task and adapter, with METEOR from eval/ on the right reference list
    c0 = clips["clip_00000.mp4"]
    assert c0["captions"] == [refs["clip_00000.mp4"]["references"][0], refs["clip_00000.mp4"]["references_detailed"][0]]
    assert c0["meteors"] == ["1.000", "1.000"]
    wrong = "산 위에서 새 한 마리가 천천히 왼쪽으로 날아간다."
    assert clips["clip_00002.mp4"]["captions"] == [wrong] and HANGUL.search(wrong)
    expected = meteor_score([wrong], [refs["clip_00002.mp4"]["references"]])["meteor"]
    assert clips["clip_00002.mp4"]["meteors"] == [f"{expected:.3f}"] and expected < 0.5
    assert clips["clip_00005.mp4"]["meteors"] == ["1.000", ""]  # the motion task has no references
    assert clips["clip_00003.mp4"]["errors"] == ["generate: engine stopped"]
    assert "not decoded by the job: decode: not a file" in clips["gone/missing.mp4"]["placeholder"]
    corpus = score_files(reviewed, synth_dir / "references.jsonl", adapter="none", task="caption")["meteor"]
    assert f"{corpus:.4f}" in dom.ids["totals"]["text"]

    # filters and sorting through the URL hash the page reads
    errors = dump_dom(page, profile, "status=error")
    assert [c["video"] for c in errors.clips] == ["clip_00003.mp4", "gone/missing.mp4"]
    worst_first = [c["video"] for c in dump_dom(page, profile, "sort=score").clips]
    assert worst_first[:2] == ["clip_00002.mp4", "clip_00001.mp4"]
    assert worst_first[-2:] == ["clip_00003.mp4", "gone/missing.mp4"]  # no score: last
    assert [c["video"] for c in dump_dom(page, profile, "sort=score-desc").clips][-3] == "clip_00002.mp4"
    found = dump_dom(page, profile, "q=" + "바다")
    assert [c["video"] for c in found.clips] == ["clip_00001.mp4"]
    paged = dump_dom(page, profile, "size=2&page=2")
    assert [c["video"] for c in paged.clips] == ["clip_00002.mp4", "clip_00003.mp4"]
    assert paged.ids["pageinfo"]["text"] == "page 2 of 4 · 7 of 7 clips"

    # with fewer thumbnails than clips, the failed and the worst-scored clips get them
    few = _page_data(_build(reviewed, tmp_path / "few.html", "--input-dir", synth_dir, "--max-thumbs", 2))
    assert [c["v"] for c in few["clips"] if "t" in c] == ["clip_00002.mp4", "clip_00003.mp4"]

    png = screenshot(page, tmp_path / "report.png", profile)
    pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
    assert pixels.std() > 10, "the screenshot is blank"


def test_input_dir_comes_from_the_job_summary_else_the_records_folder(reviewed, synth_dir, tmp_path):
    for name in ("clip_00000.mp4", "clip_00001.mp4"):
        shutil.copy(synth_dir / name, reviewed.parent)
    summary = reviewed.with_name(reviewed.name + ".summary.json")
    summary.write_text(json.dumps({"input_dir": str(synth_dir), "captions_ok": 7}))
    data = _page_data(_build(reviewed, tmp_path / "a.html", "--workers", 0, "--references", "none"))
    assert data["meta"]["input_dir"] == str(synth_dir) and "summary" in data["meta"]["input_dir_from"]
    assert sum("t" in c for c in data["clips"]) == 6 and not data["corpus"]

    summary.write_text(json.dumps({"captions_ok": 7}))  # a summary from before input_dir was saved
    data = _page_data(_build(reviewed, tmp_path / "b.html", "--workers", 0))
    assert data["meta"]["input_dir_from"] == "the records file's folder"
    by_video = {c["v"]: c for c in data["clips"]}
    assert len(by_video["clip_00001.mp4"]["t"]) == 8
    assert "clip file not found in" in by_video["clip_00002.mp4"]["tn"] and "--input-dir" in by_video["clip_00002.mp4"]["tn"]


def test_undecodable_clips_get_a_placeholder_and_the_reason(tmp_path, synth_dir):
    clips = tmp_path / "clips"
    clips.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", clips / "fine.mp4")
    shutil.copy(synth_dir / "clip_00001.mp4", clips / "replaced.mp4")
    (clips / "cut.mp4").write_bytes((synth_dir / "clip_00002.mp4").read_bytes()[:2500])
    (clips / "hang.mp4").write_bytes((synth_dir / "clip_00003.mp4").read_bytes())
    records = _write_jsonl(tmp_path / "captions.jsonl", [
        _record(name, "맑은 하늘") for name in ("fine.mp4", "cut.mp4", "hang.mp4")
    ] + [_record("replaced.mp4", "맑은 하늘", indices=(10, 200))])
    with open(records, "a", encoding="utf-8") as fh:
        fh.write('{"video": "half-writ')  # a job still writing
    html = _build(records, tmp_path / "r.html", "--input-dir", clips, "--references", "none")
    data = {c["v"]: c for c in _page_data(html)["clips"]}
    assert len(data["fine.mp4"]["t"]) == 8
    assert data["cut.mp4"]["tn"].startswith("no thumbnails: ")
    assert "frame index 200 is outside the clip's 32 frames" in data["replaced.mp4"]["tn"]
    assert any("half-written last record left out" in n for n in _page_data(html)["notes"])

    # a decoder that hangs or dies costs its clip only
    jobs = [ThumbJob(n, str(clips / n), (2, 30), "decord") for n in ("fine.mp4", "hang.mp4", "crash.mp4")]
    shutil.copy(synth_dir / "clip_00004.mp4", clips / "crash.mp4")
    results = {r.video: r for r in run_thumbnails(jobs, workers=2, timeout_s=3, fn=hang_or_crash_on_name)}
    assert len(results["fine.mp4"].jpegs_b64) == 2
    assert "no thumbnails after 3s" in results["hang.mp4"].error
    assert "no thumbnails after 3s" in results["crash.mp4"].error


def test_once_every_clip_is_answered_the_workers_end_without_a_signal(tmp_path, synth_dir):
    """A worker that handles SIGTERM itself (as under coverage.py) ran its handler only if the signal reached
    its main thread: Pool.terminate, which the pool's exit sent, hung a `make coverage` run for ever in
    `test_report_of_a_real_job` (twice: caption/report/thumbs.py). Workers with nothing left to do end
    by themselves, and none is left behind. Whether the old exit signalled a worker was a race (about
    half the pools), so the test starts eight."""
    import multiprocessing as mp

    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(2):
        shutil.copy(synth_dir / f"clip_0000{i}.mp4", clips / f"c{i}.mp4")
    before = {child.pid for child in mp.active_children()}
    jobs = [ThumbJob(f"c{i}.mp4", str(clips / f"c{i}.mp4"), (2, 30), "decord") for i in range(2)]
    for _ in range(8):
        results = list(run_thumbnails(jobs, workers=2, timeout_s=120, fn=note_sigterm_then_answer))
        assert [len(r.jpegs_b64 or []) for r in results] == [2, 2]
    signalled = sorted(p.name for p in (clips / "sigterm").glob("*")) if (clips / "sigterm").exists() else []
    assert signalled == [], f"workers ended by SIGTERM: {signalled}"
    assert {child.pid for child in mp.active_children()} <= before


def test_bad_records_stop_with_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "captions.jsonl"
    bad.write_text('{"video": "a.mp4", "status": "ok", "caption": "x"}\nnot json\n{"video": "b.mp4"}\n')
    assert report_main([str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert f"{bad}:2: malformed JSON" in capsys.readouterr().err
    assert report_main([str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r.html")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_ten_thousand_clips_render_one_page(tmp_path, synth_dir):
    clips = tmp_path / "clips"
    clips.mkdir()
    n, with_files, max_thumbs = 10_000, 30, 20
    for k in range(with_files):
        (clips / f"c{k:05d}.mp4").symlink_to(synth_dir / f"clip_0000{k % 6}.mp4")
    records = _write_jsonl(tmp_path / "captions.jsonl", [
        _record(f"c{k:05d}.mp4", f"{k}번째 장면: 맑은 하늘에서 구름 한 조각이 움직인다.") if k % 97 else
        _record(f"c{k:05d}.mp4", error="generate: out of memory") for k in range(n)])
    page = _build(records, tmp_path / "big.html", "--input-dir", clips, "--max-thumbs", max_thumbs, "--workers", 2)
    data = _page_data(page)
    assert len(data["clips"]) == n
    assert sum("t" in c for c in data["clips"]) == max_thumbs
    assert "--max-thumbs" in data["clips"][max_thumbs]["tn"]
    # ~250 bytes per clip without thumbnails (its Korean caption is ~100), ~16 KB per clip with
    assert page.stat().st_size < 3_000_000

    dom = dump_dom(page, tmp_path / "chromium")
    assert len(dom.clips) == data["page_size"] == 50
    assert sum(len(c["imgs"]) for c in dom.clips) == max_thumbs * 8  # only the page's images exist
    assert dom.ids["pageinfo"]["text"] == f"page 1 of 200 · {n} of {n} clips"
    last = dump_dom(page, tmp_path / "chromium", "status=error&page=3")
    assert len(last.clips) == 4 and all(c["status"] == "error" for c in last.clips)  # 104 errors: 50+50+4
    assert last.clips[-1]["video"] == "c09991.mp4"


@pytest.mark.slow
def test_report_of_a_real_job(compose_config, synth_dir, tmp_path, vllm_engine):
    """The caption job (real decoders, real vLLM) writes records; the page shows all of them."""
    from caption.job import run_job

    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(3):
        shutil.copy(synth_dir / f"clip_0000{i}.mp4", folder)
    (folder / "empty.mp4").write_bytes(b"")
    lines = (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:3]
    (folder / "references.jsonl").write_text("".join(lines), encoding="utf-8")
    out = folder / "captions.jsonl"  # records next to the clips: found without --input-dir
    summary = run_job(compose_config([f"input_dir={folder}", f"output={out}", "progress=false",
                                      "tasks=[caption,motion]"]), engine=vllm_engine)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 8 and summary["captions_failed"] == 2

    page = _build(out, tmp_path / "report.html", "--workers", 2)  # references.jsonl found in the folder
    dom = dump_dom(page, tmp_path / "chromium")
    clips = {c["video"]: c for c in dom.clips}
    assert sorted(clips) == ["clip_00000.mp4", "clip_00001.mp4", "clip_00002.mp4", "empty.mp4"]
    refs = _refs(folder)
    for video in ("clip_00000.mp4", "clip_00001.mp4", "clip_00002.mp4"):
        mine = sorted((r for r in records if r["video"] == video), key=lambda r: r["task"])
        assert clips[video]["captions"] == [r["caption"] for r in mine]  # caption, then motion
        assert all(HANGUL.search(c) for c in clips[video]["captions"])
        assert len(clips[video]["imgs"]) == len(mine[0]["frame_indices"]) == 8
        assert all(src.startswith(JPEG_URI) for src in clips[video]["imgs"])
        segment = meteor_score([mine[0]["caption"]], [refs[video]["references"]])["meteor"]
        assert clips[video]["meteors"] == [f"{segment:.3f}", ""]
    assert "empty file (0 bytes)" in clips["empty.mp4"]["placeholder"]
    assert clips["empty.mp4"]["errors"] == ["decode: empty file (0 bytes)"] * 2
    assert f"{summary['meteor']:.4f}" in dom.ids["totals"]["text"]


def test_a_long_videos_segments_show_their_times_in_tenths_of_a_second(tmp_path, synth_dir):
    """Records keep a segment's bounds to the microsecond (2.941667); the page shows them as it shows its
    other times, in tenths: the entry's title and the timeline's hover texts alike. Each segment keeps its
    own thumbnails."""
    clips = tmp_path / "clips"
    clips.mkdir()
    shutil.copy(synth_dir / "clip_00000.mp4", clips / "reel.mp4")
    coverage = {"duration_s": 9.5, "segments_s": 8.467, "transitions_s": 0.5, "left_out_s": 1.033}
    spans = [(0.0, 2.941667, (2, 6, 10, 14), [{"start_s": 2.942, "end_s": 3.442, "reason": "dissolve"}]),
             (3.441667, 8.966667, (18, 22, 26, 30), [{"start_s": 8.967, "end_s": 9.5, "reason": "tail"}])]
    records = []
    for k, (start, end, indices, left_out) in enumerate(spans):
        record = _record("reel.mp4", "맑은 하늘에 구름이 흐른다.", indices=indices)
        record.update(segment_index=k, segments=2, start_s=start, end_s=end, coverage=coverage, left_out=left_out,
                      shots=[{"index": k, "start_s": start, "end_s": end}])
        records.append(record)
    page = _build(_write_jsonl(tmp_path / "captions.jsonl", records), tmp_path / "r.html", "--input-dir", clips,
                  "--references", "none", "--workers", 0)
    shown = _page_data(page)["clips"]
    assert [c["v"] for c in shown] == ["reel.mp4 [0.0-2.9 s]", "reel.mp4 [3.4-9.0 s]"]
    assert [c["ti"] for c in shown] == [[2, 6, 10, 14], [18, 22, 26, 30]]

    from tests.caption.browser import RenderedPage
    from tests.caption.browser import _run as chromium_run

    dom = chromium_run(page, "", ["--dump-dom"], tmp_path / "chromium")
    hovers = re.findall(r'class="(?:seg|gap|cut)[^"]*" title="([^"]*)"', dom)
    assert hovers == ["segment 0: 0.0-2.9 s", "segment 1: 3.4-9.0 s", "2.9-3.4 s left out: dissolve",
                      "9.0-9.5 s left out: tail", "cut at 3.4 s"], hovers
    assert [c["video"] for c in RenderedPage.parse(dom).clips] == ["reel.mp4 [0.0-2.9 s]", "reel.mp4 [3.4-9.0 s]"]


def test_a_file_holding_two_settings_names_each_and_checks_each_record_against_its_file(tmp_path, synth_dir):
    """Two settings' records of one clip: one made from the file there now, the other from the file it
    replaced (the other settings' job ran before the re-export). The page shows the clip's frames (a
    record of the file there now has them), says which record is another file's, and labels each settings
    by what differs; a clip whose every record is another file's still gets no thumbnails."""
    from video_io.identity import file_identity

    folder = tmp_path / "clips"
    folder.mkdir()
    for i in (0, 1):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    old = {**file_identity(folder / "clip_00000.mp4", folder), "size": 1, "fingerprint": "0" * 32}
    settings = {"a": {"engine": "vllm", "frames": "8 uniform"}, "b": {"engine": "hf", "frames": "4 uniform"}}

    def made(video, sid, source, indices):
        return _record(video, f"{sid}의 캡션", indices=indices) | {"settings_id": sid, "settings": settings[sid],
                                                                 "source": source}

    now = {v: file_identity(folder / v, folder) for v in ("clip_00000.mp4", "clip_00001.mp4")}
    records = [made("clip_00000.mp4", "b", old, (4, 12, 20, 28)), made("clip_00000.mp4", "a", now["clip_00000.mp4"],
                                                                       (2, 6, 10, 14, 18, 22, 26, 30)),
               made("clip_00001.mp4", "a", old, (2, 6)), made("clip_00001.mp4", "b", old, (4, 12))]
    out = _write_jsonl(tmp_path / "two.jsonl", records)
    page = tmp_path / "page.html"
    assert report_main([str(out), "--out", str(page), "--input-dir", str(folder), "--workers", "0",
                        "--references", "none"]) == 0
    data = _page_data(page)
    clips = {c["v"]: c for c in data["clips"]}
    kept = clips["clip_00000.mp4"]
    assert kept["t"] and set(kept["ti"]) <= {2, 6, 10, 14, 18, 22, 26, 30}  # the current record's frames, not b's
    by_settings = {r["settings_id"]: r for r in kept["r"]}
    assert by_settings["b"]["changed"].startswith("made from another file than the one there now: it was 1 bytes")
    assert "changed" not in by_settings["a"]
    assert by_settings["a"]["settings_label"] == "engine=vllm; frames=8 uniform"
    assert by_settings["b"]["settings_label"] == "engine=hf; frames=4 uniform"
    assert "t" not in clips["clip_00001.mp4"] and clips["clip_00001.mp4"]["tn"].startswith("changed since captioning")
    notes = " ".join(data["notes"])
    assert "1 clip(s) changed since captioning" in notes and "1 record(s) of clips shown were made from another" in notes
