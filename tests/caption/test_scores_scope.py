"""Scores over what was scored, and advice that fits the case: the job's summary, a sweep's table, the
review page and caption-meteor give one METEOR for one records file (eval/scope.py decides for all four),
computed over the clips that have a caption, with the clips not captioned and failed beside it; the
references field an adapter declares; tasks without references refused in the job's words."""

from __future__ import annotations

import csv
import json
import os

import pytest

from eval.meteor import meteor_score
from tests.caption.clips import clips_with_references
from tests.caption.in_process import run_command

pytestmark = pytest.mark.slow
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
FAST = ["engine=hf", "video.workers=0", "progress=false"]


def _run(tool, *args, cwd):
    return run_command(tool, args, env=ENV, cwd=cwd)


def _caption(tmp_path, folder, out, *overrides, name="run"):
    done = _run("caption", f"input_dir={folder}", f"output={out}", *FAST, *overrides,
                f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
    summary = json.loads(out.with_name(out.name + ".summary.json").read_text(encoding="utf-8"))
    return done, summary


def _meteor(tmp_path, records, refs, *args):
    done = _run("caption-meteor", records, refs, *args, cwd=tmp_path)
    return done, json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None


@pytest.fixture
def four_clips(tmp_path, synth_dir):
    return clips_with_references(tmp_path, synth_dir, 4)


def _refs(folder):
    return {r["video"]: r for r in map(json.loads, (folder / "references.jsonl").read_text(encoding="utf-8").splitlines())}


def test_a_trial_run_is_scored_over_the_clips_it_captioned_everywhere(tmp_path, four_clips):
    out = tmp_path / "captions.jsonl"
    done, summary = _caption(tmp_path, four_clips, out, "limit=2")
    assert done.returncode == 0, done.stderr[-2000:]
    made = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    refs = _refs(four_clips)
    expected = round(meteor_score([r["caption"] for r in made], [refs[r["video"]]["references"] for r in made])["meteor"], 4)
    # the summary: the 2 captioned clips' score, the 2 left out counted beside it
    assert summary["meteor"] == expected
    assert (summary["meteor_n"], summary["meteor_missing"], summary["meteor_errors"]) == (2, 2, 0)
    assert f"METEOR       {expected} over 2 captioned clips of 4 (2 not captioned, 0 failed" in done.stdout
    # caption-meteor on the same files says the same
    scored, result = _meteor(tmp_path, out, four_clips / "references.jsonl")
    assert scored.returncode == 0 and round(result["meteor"], 4) == expected
    assert (result["n"], result["missing"], result["errors"]) == (2, 2, 0)
    # the review page too
    page = _run("caption-report", out, "--out", tmp_path / "report.html", "--workers", 0, cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    assert f"corpus METEOR adapter=none: {expected:.4f} over 2 captioned of 4 (2 not captioned, 0 failed" in page.stdout
    # and a sweep's rows: each job's score over its own captioned clips
    sweep = tmp_path / "sweep"
    swept = _run("caption", "-m", f"input_dir={four_clips}", *FAST, "limit=1,2", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert swept.returncode == 0, swept.stderr[-2000:]
    rows = list(csv.DictReader(open(sweep / "sweep.csv", encoding="utf-8")))
    assert [(r["meteor_n"], r["meteor_missing"]) for r in rows] == [("1", "3"), ("2", "2")]
    assert float(rows[1]["meteor"]) == expected


def test_an_adapters_captions_are_scored_on_its_references_by_every_tool(tmp_path, four_clips):
    out = tmp_path / "detailed.jsonl"
    done, summary = _caption(tmp_path, four_clips, out, "lora=detailed", "limit=2")
    assert done.returncode == 0, done.stderr[-2000:]
    made = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    refs = _refs(four_clips)
    expected = round(meteor_score([r["caption"] for r in made],
                                  [refs[r["video"]]["references_detailed"] for r in made])["meteor"], 4)
    assert summary["meteor[detailed]"] == expected
    scored, result = _meteor(tmp_path, out, four_clips / "references.jsonl")  # no --field: the adapter's list
    assert scored.returncode == 0 and round(result["meteor"], 4) == expected
    assert result["field"] == "references_detailed" and result["n"] == 2
    assert {r["references_field"] for r in made} == {"references_detailed"}  # what the records say it is
    assert summary["meteor_field[detailed]"] == "references_detailed"
    page = _run("caption-report", out, "--out", tmp_path / "report.html", "--workers", 0, cwd=tmp_path)
    assert f"adapter=detailed: {expected:.4f} over 2 captioned of 4" in page.stdout


def test_tasks_without_references_are_refused_in_the_jobs_words(tmp_path, four_clips):
    out = tmp_path / "motion.jsonl"
    done, summary = _caption(tmp_path, four_clips, out, "tasks=[motion]", "limit=1")
    assert done.returncode == 0, done.stderr[-2000:]
    said = summary["meteor_error"]
    assert said.startswith("METEOR is not computed for task motion") and "tasks=[caption,motion]" in said
    assert f"METEOR       not computed: {said}" in done.stdout
    scored, _ = _meteor(tmp_path, out, four_clips / "references.jsonl")
    assert scored.returncode == 2 and scored.stderr.strip() == f"caption-meteor: error: {said}"
    page = _run("caption-report", out, "--out", tmp_path / "report.html", "--workers", 0, cwd=tmp_path)
    assert page.returncode == 0 and "corpus METEOR" not in page.stdout


def test_segments_against_whole_clip_references_get_advice_that_fits(tmp_path, four_clips):
    out = tmp_path / "scenes.jsonl"
    done, summary = _caption(tmp_path, four_clips, out, "video.segments=scenes", "limit=1")
    assert done.returncode == 0, done.stderr[-2000:]
    said = summary["meteor_error"]
    assert "records are segments" in said and "references are for whole clips" in said
    assert "video.segments=none" in said and "right files" not in said
    scored, _ = _meteor(tmp_path, out, four_clips / "references.jsonl")
    assert scored.returncode == 2 and said in scored.stderr


def test_records_added_beside_under_other_settings_are_scored_per_settings(tmp_path, four_clips):
    out = tmp_path / "both.jsonl"
    first, _ = _caption(tmp_path, four_clips, out, "limit=2", name="first")
    second, summary = _caption(tmp_path, four_clips, out, "limit=2", "video.num_frames=4", "add_beside=true",
                               name="second")
    assert first.returncode == second.returncode == 0, second.stderr[-2000:]
    made = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = list(dict.fromkeys(r["settings_id"] for r in made))
    page = _run("caption-report", out, "--out", tmp_path / "report.html", "--workers", 0, cwd=tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.returncode == 0 and "duplicates" not in page.stdout + page.stderr + html
    assert len(ids) == 2 and summary["meteor_n"] == 2  # the job scores its own records only
    for settings_id in ids:  # one score per settings, each what caption-meteor gives for it
        _, result = _meteor(tmp_path, out, four_clips / "references.jsonl", "--settings", settings_id)
        assert f"adapter=none settings={settings_id}: {result['meteor']:.4f} over 2 captioned of 4" in page.stdout
    scored, _ = _meteor(tmp_path, out, four_clips / "references.jsonl")  # without a choice: which to pick
    assert scored.returncode == 2 and "--settings" in scored.stderr and "duplicates" not in scored.stderr


def test_references_meteor_cannot_read_are_said_before_the_captions(tmp_path, four_clips):
    """Named by references=: refused in one line before anything loads (the list an adapter is scored on,
    missing). Found beside the clips: a warning at the start, the captions made, the reason in the summary."""
    refs = four_clips / "references.jsonl"
    named = tmp_path / "named.jsonl"
    named.write_text("".join(json.dumps({"video": r["video"], "references": r["references"]}) + "\n"
                             for r in _refs(four_clips).values()), encoding="utf-8")  # no references_detailed list
    out = tmp_path / "refused.jsonl"
    done = _run("caption", f"input_dir={four_clips}", f"output={out}", *FAST, "lora=detailed",
                f"references={named}", f"hydra.run.dir={tmp_path / 'refused'}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == (f"caption: invalid config: `references`: {named}:1: missing field "
                                   "'references_detailed' (adapter detailed's captions are scored on this list); "
                                   "mend the file, or set references=null to caption without scoring")
    assert not out.exists()
    lines = refs.read_text(encoding="utf-8").splitlines()
    refs.write_text("\n".join([lines[0][:-5], *lines[1:]]) + "\n", encoding="utf-8")  # line 1 cut short
    out = tmp_path / "warned.jsonl"
    done, summary = _caption(tmp_path, four_clips, out, "limit=1", name="warned")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"caption: warning: METEOR will not be computed: {refs}:1: malformed JSON" in done.stderr
    assert summary["captions_ok"] == 1 and summary["meteor_error"].startswith(f"{refs}:1: malformed JSON")


def test_a_folder_mixing_known_and_real_clips_is_warned_and_scored_per_clip(tmp_path, four_clips, compose_config,
                                                                            hf_engine, capsys):
    """caption-synth clips with their references beside a real clip the references do not list: only the
    real clip's record says its caption is nonsense (the model knows caption-synth's clips), the start
    lines count it, and the METEOR line names the captioned clip it could not score."""
    from caption.job import run_job
    from tests.video_io.real_footage import sample_clips

    (four_clips / "a_real.mp4").write_bytes((sample_clips() / "carphone_pristine.mp4").read_bytes())
    out = tmp_path / "o.jsonl"
    args = [f"input_dir={four_clips}", f"output={out}", "engine=hf", "progress=false", "video.workers=0"]
    summary = run_job(compose_config([*args, "limit=3"]), engine=hf_engine)  # the real clip and two known ones
    said = capsys.readouterr().out
    records = {r["video"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert sorted(records) == ["a_real.mp4", "clip_00000.mp4", "clip_00001.mp4"]
    assert any("this clip is not one" in w and "nonsense" in w for w in records["a_real.mp4"]["warnings"])
    assert all(not records[v].get("warnings") for v in ("clip_00000.mp4", "clip_00001.mp4"))
    assert "1 of 5 clips (e.g. 'a_real.mp4') are not caption-synth clips" in said
    [entry] = summary["meteor_scores"]
    assert (entry["n"], entry["missing"], entry["extra_captioned"]) == (2, 2, 1)
    assert "over 2 captioned clips of 4 (2 not captioned, 0 failed; 1 more captioned, no references: not scored;" \
        in said

    summary = run_job(compose_config(args), engine=hf_engine)  # resumed: all five
    said = capsys.readouterr().out
    assert "over 4 captioned clips of 4 (0 not captioned, 0 failed; 1 more captioned, no references" in said
