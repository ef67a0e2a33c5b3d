"""A result you can trust: every record says how it was made, resuming never mixes records made another
way under one label, warnings live where the results live, and undecodable captions are not clean."""

from __future__ import annotations

import json
import shutil

import pytest

from caption.job import run_job
from caption.output.checks import OutputRefused, check_settings
from caption.output.fingerprint import differences, folder_identity
from caption.pipeline.record import clean_caption
from caption.settings.settings_ids import SettingsIds, settings_id
from eval.cli import main as meteor_main


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_checkpoints_identity_follows_its_content_not_its_name(tmp_path, model_dir):
    copy = shutil.copytree(model_dir, tmp_path / "copy")
    assert folder_identity(str(copy)) == folder_identity(str(model_dir))
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01  # a retrained checkpoint: same tensors, other values
    weights.write_bytes(bytes(data))
    retrained = folder_identity(str(copy))
    assert retrained != folder_identity(str(model_dir))
    config = json.loads((copy / "config.json").read_text())
    config["text_config"]["rms_norm_eps"] = 1e-5
    (copy / "config.json").write_text(json.dumps(config))
    assert folder_identity(str(copy)) not in (retrained, folder_identity(str(model_dir)))


def test_records_without_settings_are_not_taken_for_this_jobs(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"video": "a.mp4", "task": "caption", "adapter": None, "status": "ok",
                               "caption": "x", "error": None}) + "\n")
    ids = SettingsIds({"engine": "vllm"}, {}, {"caption": "describe"}, {None: None})
    with pytest.raises(OutputRefused, match="carry no settings .* add_beside=true"):
        check_settings(out, ids, ({"engine": "vllm"}, {}), add_beside=False)
    # asked for: no refusal
    check_settings(out, ids, ({"engine": "vllm"}, {}), add_beside=True)
    # not this job's task
    keywords = SettingsIds({"engine": "vllm"}, {}, {"keywords": "list"}, {None: None})
    check_settings(out, keywords, ({"engine": "vllm"}, {}), add_beside=False)
    assert differences({"engine": "vllm", "sampling": "greedy"}, {"engine": "hf", "sampling": "greedy"}) == \
        ["engine vllm -> hf"]


@pytest.mark.slow
def test_changed_settings_are_refused_and_added_beside_on_request(compose_config, two_clips_with_references,
                                                                   tmp_path, vllm_engine, hf_engine):
    out = tmp_path / "o.jsonl"
    base = [f"input_dir={two_clips_with_references}", f"output={out}", "progress=false", "video.workers=0"]
    first = run_job(compose_config(base), engine=vllm_engine)
    made = _records(out)
    assert first["exit_status"] == 0 and len(made) == 2
    assert {r["settings"]["engine"] for r in made} == {"vllm"} and len({r["settings_id"] for r in made}) == 1
    settings = made[0]["settings"]
    assert settings["model"] == "vidcap-ko-tiny" and settings["sampling"] == "greedy" and settings["model_id"]
    assert settings["frames"].startswith("8 uniform") and settings["quant"] == "none"

    again = run_job(compose_config(base), engine=vllm_engine)  # same settings: resumes, nothing to do
    assert again["videos_skipped_resume"] == 2 and again["videos_run"] == 0
    assert again["previous_files_kept_as"]  # the first run's summary is kept, not overwritten

    for change, said in (("engine=hf", "engine vllm -> hf"), ("sampling=balanced", "sampling greedy -> balanced"),
                         ("video.num_frames=4", "frames 8 uniform"), ("gpu.dtype=bfloat16", "dtype float32 -> bfloat16")):
        with pytest.raises(OutputRefused, match=f"2 record\\(s\\) made with other settings .*{said}"):
            run_job(compose_config([*base, change]))  # no engine given: refused before one could load
    assert _records(out) == made

    beside = run_job(compose_config([*base, "engine=hf", "add_beside=true"]), engine=hf_engine)
    both = _records(out)
    assert beside["videos_run"] == 2 and beside["engine"] == "hf" and beside["meteor_n"] == 2
    assert both[:2] == made and {r["settings"]["engine"] for r in both[2:]} == {"hf"}
    assert len({r["settings_id"] for r in both}) == 2
    # caption-meteor asks which settings to score, and scores each alone
    refs = two_clips_with_references / "references.jsonl"
    assert meteor_main([str(out), str(refs)]) == 2
    assert meteor_main([str(out), str(refs), "--settings", both[2]["settings_id"]]) == 0


@pytest.mark.slow
def test_the_same_model_at_another_path_resumes_and_other_weights_there_are_refused(
        compose_config, two_clips_with_references, tmp_path, model_dir, vllm_engine):
    """A model moved, or copied to a node's own disk: its records are this job's (their model_id is its
    content), resumed and scored; other weights at that path are refused, naming the model_id."""
    out = tmp_path / "o.jsonl"
    base = [f"input_dir={two_clips_with_references}", f"output={out}", "progress=false", "video.workers=0",
            "limit=1"]
    first = run_job(compose_config(base), engine=vllm_engine)
    assert first["videos_run"] == 1
    moved = shutil.copytree(model_dir, tmp_path / "local disk" / "model")
    again = run_job(compose_config([*base, f"model.path={moved}", "limit=null"]), engine=vllm_engine)
    assert again["videos_skipped_resume"] == 1 and again["videos_run"] == 1 and again["meteor_n"] == 2
    made = _records(out)
    assert [r["settings"]["model_path"] for r in made] == [str(model_dir), str(moved)]
    assert made[0]["settings_id"] == made[1]["settings_id"]  # one job: caption-meteor and the page see one group
    weights = moved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01  # a retrained checkpoint put in its place
    weights.write_bytes(bytes(data))
    with pytest.raises(OutputRefused, match="2 record\\(s\\) made with other settings .*model_id"):
        run_job(compose_config([*base, f"model.path={moved}"]))
    assert _records(out) == made


@pytest.mark.slow
def test_an_engine_loaded_for_other_settings_is_refused_before_anything_is_written(
        compose_config, two_clips_with_references, tmp_path, model_dir, vllm_engine):
    """run_job's `engine` (one loaded once, kept across jobs): an engine loaded for another sampling or other
    weights would make captions that the records, which name the job's settings, misdescribe. Refused in one
    line naming what differs, before the output is touched. What the engine is only sized for (the requests
    and frames of a clip) may differ; the same model at another path is shown to pass above."""
    from caption.settings.option import ConfigError

    out = tmp_path / "o.jsonl"
    base = [f"input_dir={two_clips_with_references}", f"output={out}", "progress=false", "video.workers=0",
            "references=null"]
    with pytest.raises(ConfigError, match="^the engine passed to the job was loaded for another sampling than "
                                          "the job's: pass none and the job loads its own"):
        run_job(compose_config([*base, "sampling.min_new_tokens=16"]), engine=vllm_engine)
    retrained = shutil.copytree(model_dir, tmp_path / "retrained")
    data = bytearray((retrained / "model.safetensors").read_bytes())
    data[-100] ^= 0x01
    (retrained / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="loaded for another model than the job's"):
        run_job(compose_config([*base, f"model.path={retrained}"]), engine=vllm_engine)
    assert not out.exists()
    summary = run_job(compose_config([*base, "tasks=[caption,motion]", "video.num_frames=4"]), engine=vllm_engine)
    assert summary["exit_status"] == 0 and summary["captions_ok"] == 4


@pytest.mark.slow
def test_records_whose_id_hashed_the_model_path_still_resume(compose_config, two_clips_with_references, tmp_path,
                                                             vllm_engine):
    """An output written by vidcap-ko up to 2026-11-26, whose ids hashed model_path too: its records are
    still this job's (resumed, scored), and a record whose id matches neither rule is not."""
    from caption.prompts import instruction_text

    out = tmp_path / "o.jsonl"
    base = [f"input_dir={two_clips_with_references}", f"output={out}", "progress=false", "video.workers=0"]
    run_job(compose_config([*base, "limit=1"]), engine=vllm_engine)
    record = _records(out)[0]
    record["settings_id"] = settings_id(record["settings"], instruction_text("caption"), None, None)  # the old rule
    out.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    again = run_job(compose_config(base), engine=vllm_engine)
    assert again["videos_skipped_resume"] == 1 and again["videos_run"] == 1 and again["meteor_n"] == 2
    record["settings_id"] = "0123456789ab"
    out.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(OutputRefused, match="1 record\\(s\\) made with other settings"):
        run_job(compose_config(base))


@pytest.mark.slow
def test_undecodable_captions_are_cleaned_flagged_and_counted(compose_config, tmp_path, synth_dir, capsys):
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(4):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    out = tmp_path / "o.jsonl"
    # the detailed adapter sampled at temperature 0.7 writes byte tokens out of order (U+FFFD) here
    summary = run_job(compose_config([f"input_dir={folder}", f"output={out}", "lora=detailed", "sampling=balanced",
                                      "progress=false", "video.workers=0"]))
    records = _records(out)
    flagged = [r for r in records if r.get("flags")]
    assert summary["exit_status"] == 0 and flagged and all("\ufffd" not in r["caption"] for r in records)
    assert all(r["status"] == "ok" and r["flags"][0].startswith("undecodable text:") for r in flagged)
    assert summary["captions_flagged"] == len(flagged)
    assert any("undecodable text" in w for w in summary["run_warnings"])
    assert f"({len(flagged)} flagged)" in capsys.readouterr().out


def test_clean_caption_removes_what_cannot_be_text():
    assert clean_caption("맑은 하늘") == ("맑은 하늘", [])
    text, flags = clean_caption("맑은\ufffd 하늘\x07 이다\ufffd")
    assert text == "맑은 하늘 이다" and flags == ["undecodable text: 2 U+FFFD, 1 control character(s) removed"]


def test_the_review_page_shows_flagged_captions_and_the_jobs_warnings(tmp_path):
    from caption.report.cli import main as report_main
    from tests.caption.browser import dump_dom

    warning = "vidcap-ko-tiny knows only caption-synth clips: on this folder its captions will be nonsense."
    records = [{"video": "a.mp4", "task": "caption", "adapter": None, "status": "ok", "caption": "맑은 하늘 이다",
                "error": None, "model": "vidcap-ko-tiny", "engine": "vllm", "settings_id": "s1", "warnings": [warning],
                "flags": ["undecodable text: 2 U+FFFD character(s) removed"]},
               {"video": "b.mp4", "task": "caption", "adapter": None, "status": "ok", "caption": "흐린 바다",
                "error": None, "model": "vidcap-ko-tiny", "engine": "vllm", "settings_id": "s1", "warnings": [warning]}]
    out = tmp_path / "o.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    page = tmp_path / "page.html"
    assert report_main([str(out), "--out", str(page), "--workers", "0", "--references", "none"]) == 0
    dom = dump_dom(page, tmp_path / "chromium")
    assert dom.ids["warnings"]["text"] == warning and "hidden" not in dom.ids["warnings"]["attrs"]
    flagged, clean = dom.clips
    assert "flagged" in flagged["text"] and "undecodable text: 2 U+FFFD" in flagged["text"]
    assert "flagged" not in clean["text"] and "1 captions flagged" in dom.ids["totals"]["text"]


@pytest.mark.slow
def test_an_output_holding_two_settings_reads_true(compose_config, two_clips_with_references, tmp_path, synth_dir,
                                                   vllm_engine, hf_engine, capsys):
    """Records of two settings in one file (add_beside=true): each job resumes it with its own command; a
    clip re-exported and captioned anew with recaption_changed=true takes every settings' record of the old
    file out; the exports name each settings by what differs and check each record against its file."""
    import csv
    import os

    from caption.export.cli import main as export_main

    folder, out = two_clips_with_references, tmp_path / "o.jsonl"
    base = [f"input_dir={folder}", f"output={out}", "progress=false", "video.workers=0"]
    assert run_job(compose_config(base), engine=vllm_engine)["exit_status"] == 0
    assert run_job(compose_config([*base, "engine=hf", "add_beside=true"]), engine=hf_engine)["exit_status"] == 0
    for change, engine in (([], vllm_engine), (["engine=hf"], hf_engine)):  # each resumes with its own command
        again = run_job(compose_config([*base, *change]), engine=engine)
        assert again["exit_status"] == 0 and again["videos_skipped_resume"] == 2 and again["videos_run"] == 0

    shutil.copy(synth_dir / "clip_00004.mp4", folder / "partial")  # clip 0 re-exported: other pictures
    os.replace(folder / "partial", folder / "clip_00000.mp4")
    assert run_job(compose_config([*base, "recaption_changed=true"]), engine=vllm_engine)["exit_status"] == 0
    now = _records(out)
    superseded = _records(tmp_path / "o.superseded.jsonl")
    assert sorted((r["video"], r["engine"]) for r in superseded) == [("clip_00000.mp4", "hf"), ("clip_00000.mp4", "vllm")]
    assert sorted((r["video"], r["engine"]) for r in now) == \
        [("clip_00000.mp4", "vllm"), ("clip_00001.mp4", "hf"), ("clip_00001.mp4", "vllm")]

    capsys.readouterr()
    assert export_main([str(out), "--format", "vtt", "--out", str(tmp_path / "vtt")]) == 2
    refused = capsys.readouterr().err
    ids = {r["engine"]: r["settings_id"] for r in now}
    assert f"--settings {ids['hf']} (engine=hf)" in refused and f"--settings {ids['vllm']} (engine=vllm)" in refused

    assert export_main([str(out), "--format", "csv", "--out", str(tmp_path / "t.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "t.csv").read_text(encoding="utf-8").splitlines()))
    assert {(row["video"], row["settings_label"]) for row in rows} == \
        {("clip_00000.mp4", "engine=vllm"), ("clip_00001.mp4", "engine=hf"), ("clip_00001.mp4", "engine=vllm")}
    assert all(json.loads(row["source"])["size"] == (folder / row["video"]).stat().st_size for row in rows)
    assert not any(row["changed_since_captioning"] for row in rows)

    shutil.copy(synth_dir / "clip_00005.mp4", folder / "clip_00001.mp4")  # replaced again, not captioned yet
    assert export_main([str(out), "--format", "csv", "--out", str(tmp_path / "t2.csv"), "--input-dir",
                        str(folder)]) == 0
    rows = list(csv.DictReader((tmp_path / "t2.csv").read_text(encoding="utf-8").splitlines()))
    changed = {row["video"]: row["changed_since_captioning"] for row in rows if row["changed_since_captioning"]}
    assert list(changed) == ["clip_00001.mp4"] and changed["clip_00001.mp4"].startswith("it was")
    assert sum(bool(row["changed_since_captioning"]) for row in rows) == 2
    assert "2 row(s) made from another file" in capsys.readouterr().err
