"""caption-meteor: matching, reporting and bad-input handling."""

import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.cli import main
from eval.meteor import meteor_score

ROOT = Path(__file__).resolve().parents[2]

REFS = [
    {"video": "a.mp4", "references": ["a man walks in a park", "a man is walking", "man walks"],
     "references_detailed": ["a tall man walks slowly in a green park"], "attributes": {}},
    {"video": "b.mp4", "references": ["waves break on a beach", "the sea is rough", "waves"], "attributes": {}},
    {"video": "c.mp4", "references": ["cars drive at night", "a city street at night", "night traffic"],
     "attributes": {}},
    {"video": "d.mp4", "references": ["snow covers the forest", "a snowy forest", "winter trees"],
     "attributes": {}},
]
PREDS = [
    {"video": "clips/a.mp4", "caption": "a man walks in the park", "status": "ok", "error": None},
    {"video": "clips/b.mp4", "caption": None, "status": "error", "error": "decode failed"},
    {"video": "clips/c.mp4", "caption": "cars at night", "status": "ok", "error": None, "elapsed_s": 1.2},
    {"video": "clips/z.mp4", "caption": "a cat", "status": "ok", "error": None},
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    return write_jsonl(tmp_path / "pred.jsonl", PREDS), write_jsonl(tmp_path / "references.jsonl", REFS)


def run_cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def expect_input_error(capsys, *args, contains=()):
    rc, out, err = run_cli(capsys, *args)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for c in contains:
        assert c in lines[0], lines[0]
    return lines[0]


def test_scores_counts_and_last_line_json(capsys, files):
    pred, refs = files
    rc, out, err = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert rc == 0, err
    res = last_json(out)
    assert set(res) == {"meteor", "n", "missing", "errors", "extra", "extra_captioned", "references", "field"}
    assert (res["n"], res["missing"], res["errors"], res["extra"], res["references"]) == (2, 1, 1, 1, 4)
    # the score is over the captions that exist: the error and the missing video are counted beside it
    expected = meteor_score(["a man walks in the park", "cars at night"],
                            [REFS[0]["references"], REFS[2]["references"]], tokenizer="whitespace")
    assert res["meteor"] == pytest.approx(expected["meteor"], abs=1e-12)
    for word in ("not captioned (no record)", "d.mp4", "failed (error records)", "b.mp4", "extra predictions",
                 "clips/z.mp4", "corpus METEOR", "over 2 captioned references of 4 (1 not captioned, 1 failed; 1 more captioned, no references: not scored)",
                 "mean segment METEOR", "precision", "recall", "fragmentation penalty"):
        assert word in out


def test_matches_by_video_key_not_position(capsys, tmp_path, files):
    pred, refs = files
    _, out1, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    shuffled = list(PREDS)
    random.Random(0).shuffle(shuffled)
    write_jsonl(pred, shuffled)
    _, out2, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert last_json(out1) == last_json(out2)


def test_exact_path_preferred_and_perfect_caption(capsys, tmp_path):
    refs = write_jsonl(tmp_path / "r.jsonl", [{"video": "x/a.mp4", "references": ["p q r"]},
                                             {"video": "y/a.mp4", "references": ["s t"]}])
    pred = write_jsonl(tmp_path / "p.jsonl", [{"video": "y/a.mp4", "caption": "s t", "status": "ok"},
                                             {"video": "x/a.mp4", "caption": "p q r", "status": "ok"}])
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out)["meteor"] == 1.0


def test_per_item_csv(capsys, tmp_path, files):
    pred, refs = files
    csv_path = tmp_path / "items.csv"
    rc, _, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--per-item", csv_path)
    assert rc == 0
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [r["video"] for r in rows] == ["a.mp4", "b.mp4", "c.mp4", "d.mp4"]
    assert [r["status"] for r in rows] == ["ok", "error", "ok", "missing"]
    assert rows[1]["meteor"] == "" and rows[1]["error"] == "decode failed" and rows[3]["meteor"] == ""
    assert 0 < float(rows[0]["meteor"]) < 1 and rows[0]["caption"] == "a man walks in the park"


def test_field_selects_reference_list(capsys, files):
    pred, refs = files
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--field", "references")
    base = last_json(out)["meteor"]
    msg = expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace", "--field", "references_detailed",
                             contains=("references.jsonl:2", "references_detailed", "--field"))
    assert msg.startswith("caption-meteor: error:")
    assert base > 0


def test_kiwi_tokenizer_default(capsys, tmp_path, kiwi_tokenizer):
    refs = write_jsonl(tmp_path / "r.jsonl", [
        {"video": "a.mp4", "references": ["남자가 공원에서 걷는다.", "공원을 산책하는 남자."]},
        {"video": "b.mp4", "references": ["바닷가에 파도가 친다.", "해변으로 파도가 밀려온다."]}])
    pred = write_jsonl(tmp_path / "p.jsonl", [
        {"video": "b.mp4", "caption": "파도가 해변에 밀려온다", "status": "ok", "error": None},
        {"video": "a.mp4", "caption": "남자가 공원을 걷고 있다.", "status": "ok", "error": None}])
    rc, out, err = run_cli(capsys, pred, refs)
    assert rc == 0, err
    expected = meteor_score(["남자가 공원을 걷고 있다.", "파도가 해변에 밀려온다"],
                            [["남자가 공원에서 걷는다.", "공원을 산책하는 남자."],
                             ["바닷가에 파도가 친다.", "해변으로 파도가 밀려온다."]], tokenizer="kiwi")
    assert last_json(out)["meteor"] == pytest.approx(expected["meteor"], abs=1e-12)
    assert 0.2 < expected["meteor"] < 1.0


def test_multiple_records_per_video_need_selection(capsys, tmp_path):
    refs = write_jsonl(tmp_path / "r.jsonl", [{"video": "a.mp4", "references": ["p q"]},
                                             {"video": "b.mp4", "references": ["r s"]}])
    recs = [{"video": "a.mp4", "caption": "p q", "status": "ok", "adapter": "lora1", "task": "short"},
            {"video": "a.mp4", "caption": "x", "status": "ok", "adapter": "base", "task": "short"},
            {"video": "b.mp4", "caption": "r s", "status": "ok", "adapter": "lora1", "task": "short"},
            {"video": "b.mp4", "caption": "y", "status": "ok", "task": "short"}]
    pred = write_jsonl(tmp_path / "p.jsonl", recs)
    expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace",
                       contains=("p.jsonl:2", "a.mp4", "--adapter lora1", "--adapter base"))
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--adapter", "lora1")
    assert rc == 0 and last_json(out)["meteor"] == 1.0 and "lora1/short" in out
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--adapter", "none")
    res = last_json(out)
    assert rc == 0 and res["missing"] == 1 and res["n"] == 1 and res["meteor"] == 0.0
    expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace", "--adapter", "lora9",
                       contains=("no record matches", "adapter=lora1"))
    # two lines for one caption (a retried clip's old error and its new record, before the job tidied the
    # file): the later one counts, as it does for a resumed job, caption-report and caption-export
    retried = {**recs[0], "status": "error", "caption": None, "error": "decode: timed out"}
    write_jsonl(pred, [retried, recs[2], recs[0]])
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out)["meteor"] == 1.0


def test_empty_prediction_file_has_no_score(capsys, tmp_path, files):
    _, refs = files
    pred = tmp_path / "empty.jsonl"
    pred.write_text("\n", encoding="utf-8")
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out) == {"meteor": None, "n": 0, "missing": 4, "errors": 0, "extra": 0, "extra_captioned": 0,
                                          "references": 4, "field": "references"}
    assert "no reference has an ok caption" in out


BAD_PRED = [
    ('{"video": "a.mp4", "caption": "x", "status": "ok"}\n{"video": "b.mp4", "capt', ("pred.jsonl:2", "malformed JSON")),
    ('["a.mp4", "x"]\n', ("pred.jsonl:1", "JSON object")),
    ('{"caption": "x", "status": "ok"}\n', ("pred.jsonl:1", "'video'")),
    ('{"video": "a.mp4", "status": "ok"}\n', ("pred.jsonl:1", "'caption'")),
    ('{"video": "a.mp4", "caption": null, "status": "ok"}\n', ("pred.jsonl:1", "'caption'")),
    ('{"video": "a.mp4", "caption": "x"}\n', ("pred.jsonl:1", "'status'")),
    ('{"video": "a.mp4", "caption": "x", "status": "done"}\n', ("pred.jsonl:1", "'status'")),
    ('{"video": "", "caption": "x", "status": "ok"}\n', ("pred.jsonl:1", "'video'")),
    ('{"video": "q.mp4", "caption": "x", "status": "ok"}\n', ("pred.jsonl", "no prediction matches", "q.mp4")),
]


@pytest.mark.parametrize("text,contains", BAD_PRED)
def test_bad_prediction_files(capsys, tmp_path, files, text, contains):
    _, refs = files
    pred = tmp_path / "pred.jsonl"
    pred.write_text(text, encoding="utf-8")
    expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace", contains=contains)


BAD_REFS = [
    ('{"video": "a.mp4", "references": ["x"]}\n{oops}\n', ("references.jsonl:2", "malformed JSON")),
    ('{"video": "a.mp4", "references": []}\n', ("references.jsonl:1", "empty reference list")),
    ('{"video": "a.mp4", "references": ["x", ""]}\n', ("references.jsonl:1", "reference 1")),
    ('{"video": "a.mp4", "references": "x"}\n', ("references.jsonl:1", "list of strings")),
    ('{"video": "a.mp4", "refs": ["x"]}\n', ("references.jsonl:1", "'references'")),
    ('{"video": "a.mp4", "references": ["x"]}\n{"video": "a.mp4", "references": ["y"]}\n',
     ("references.jsonl:2", "already listed on line 1")),
    ("\n\n", ("references.jsonl", "no reference records")),
]


@pytest.mark.parametrize("text,contains", BAD_REFS)
def test_bad_reference_files(capsys, tmp_path, files, text, contains):
    pred, _ = files
    refs = tmp_path / "references.jsonl"
    refs.write_text(text, encoding="utf-8")
    expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace", contains=contains)


def test_missing_unreadable_files(capsys, tmp_path, files):
    pred, refs = files
    expect_input_error(capsys, tmp_path / "nope.jsonl", refs, contains=("nope.jsonl", "not found"))
    expect_input_error(capsys, pred, tmp_path, contains=("directory",))
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes('{"video": "a.mp4", "references": ["caf\xe9"]}\n'.encode("latin-1"))
    expect_input_error(capsys, pred, bad, contains=("latin1.jsonl", "UTF-8"))
    # a missing folder for --per-item is made; one that cannot be (its parent is a file) ends in one line, exit 5
    rc, _, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--per-item", tmp_path / "new" / "x.csv")
    assert rc == 0 and (tmp_path / "new" / "x.csv").is_file()
    rc, out, err = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--per-item", pred / "x.csv")
    assert rc == 5 and out == "" and len(err.strip().splitlines()) == 1
    assert "cannot write the per-item CSV" in err and "x.csv" in err and "--per-item" in err


def test_module_entry_point_subprocess(tmp_path, files):
    pred, refs = files
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ok = subprocess.run([sys.executable, "-m", "eval.cli", str(pred), str(refs), "--tokenizer", "whitespace"],
                        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["n"] == 2
    bad = subprocess.run([sys.executable, "-m", "eval.cli", str(tmp_path / "missing.jsonl"), str(refs)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "missing.jsonl" in bad.stderr


def test_console_script_is_declared():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["caption-meteor"] == "eval.cli:main"


def test_a_few_hundred_korean_predictions_in_seconds(capsys, tmp_path, kiwi_tokenizer):
    kiwi_tokenizer.load()
    rng = random.Random(3)
    words = ["남자가", "여자가", "공원에서", "바닷가에서", "천천히", "걷는다", "달린다", "파도가", "친다",
             "하늘에", "구름이", "떠", "있다", "자동차가", "밤거리를", "지나간다", "아이들이", "논다"]
    refs, preds = [], []
    for k in range(300):
        refs.append({"video": f"v{k}.mp4", "references": [" ".join(rng.choices(words, k=rng.randint(4, 12)))
                                                          for _ in range(3)]})
        preds.append({"video": f"dir/v{k}.mp4", "caption": " ".join(rng.choices(words, k=rng.randint(3, 12))),
                      "status": "ok", "error": None})
    r = write_jsonl(tmp_path / "r.jsonl", refs)
    p = write_jsonl(tmp_path / "p.jsonl", preds)
    t = time.perf_counter()
    rc, out, _ = run_cli(capsys, p, r)
    assert rc == 0 and last_json(out)["n"] == 300
    assert time.perf_counter() - t < 10


def test_caption_task_is_scored_by_default_when_records_carry_tasks(capsys, tmp_path):
    refs = write_jsonl(tmp_path / "r.jsonl", [{"video": "a.mp4", "references": ["p q"]}])
    pred = write_jsonl(tmp_path / "p.jsonl", [
        {"video": "a.mp4", "caption": "p q", "status": "ok", "task": "caption", "adapter": None},
        {"video": "a.mp4", "caption": "x, y", "status": "ok", "task": "keywords", "adapter": None}])
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out)["meteor"] == 1.0
    # the job's keywords task has no references: refused in the job's words, unless a list is named
    expect_input_error(capsys, pred, refs, "--tokenizer", "whitespace", "--task", "keywords",
                       contains=("METEOR is not computed for task keywords", "tasks=[caption,keywords]"))
    rc, out, _ = run_cli(capsys, pred, refs, "--tokenizer", "whitespace", "--task", "keywords", "--field", "references")
    assert rc == 0 and last_json(out)["meteor"] == 0.0


def test_segments_are_scored_against_the_scene_they_overlap_most(capsys, tmp_path):
    """A long video's references per scene (start_s/end_s); its records per segment: each scene is scored
    with the segment covering most of it, pieces of one scene beyond that count as extra."""
    first, second = "맑은 낮의 산 위에서 새 한 마리가 천천히 왼쪽으로 움직인다.", "비 내리는 밤의 도시에서 자동차 한 대가 빠르게 오른쪽으로 움직인다."
    refs = write_jsonl(tmp_path / "refs.jsonl", [
        {"video": "walk.mp4", "start_s": 0.0, "end_s": 6.0, "references": [first]},
        {"video": "walk.mp4", "start_s": 6.0, "end_s": 20.0, "references": [second]},
        {"video": "clip.mp4", "references": [first]}])
    pred = write_jsonl(tmp_path / "pred.jsonl", [
        {"video": "walk.mp4", "segment_index": 0, "start_s": 0.0, "end_s": 5.5, "status": "ok", "caption": first},
        {"video": "walk.mp4", "segment_index": 1, "start_s": 6.5, "end_s": 13.0, "status": "ok", "caption": second},
        {"video": "walk.mp4", "segment_index": 2, "start_s": 13.0, "end_s": 19.5, "status": "ok", "caption": "x"},
        {"video": "clip.mp4", "status": "ok", "caption": first}])
    rc, out, _ = run_cli(capsys, str(pred), str(refs))
    result = last_json(out)
    assert rc == 0 and result["n"] == 3 and result["meteor"] > 0.99  # the piece of scene 2 that overlaps it most: segment 1
    assert result["extra"] == 1 and result["missing"] == 0
    # the other segments swapped: scene 2 is scored with the longer piece's caption
    swapped = write_jsonl(tmp_path / "swapped.jsonl", [
        {"video": "walk.mp4", "segment_index": 0, "start_s": 0.0, "end_s": 5.5, "status": "ok", "caption": first},
        {"video": "walk.mp4", "segment_index": 1, "start_s": 6.5, "end_s": 9.0, "status": "ok", "caption": second},
        {"video": "walk.mp4", "segment_index": 2, "start_s": 9.0, "end_s": 19.5, "status": "ok", "caption": "x"},
        {"video": "clip.mp4", "status": "ok", "caption": first}])
    assert last_json(run_cli(capsys, str(swapped), str(refs))[1])["meteor"] < 0.9


def test_a_videos_references_are_whole_or_per_scene_not_both(capsys, tmp_path):
    refs = write_jsonl(tmp_path / "refs.jsonl", [
        {"video": "walk.mp4", "references": ["a"]},
        {"video": "walk.mp4", "start_s": 0.0, "end_s": 6.0, "references": ["b"]}])
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"video": "walk.mp4", "status": "ok", "caption": "a"}])
    expect_input_error(capsys, str(pred), str(refs), contains=("refs.jsonl:2", "whole clip and per scene"))
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"video": "walk.mp4", "start_s": 6.0, "end_s": 2.0, "references": ["b"]}])
    expect_input_error(capsys, str(pred), str(bad), contains=("bad.jsonl:1", "0 <= start_s < end_s"))


def test_an_adapters_captions_are_scored_on_the_list_its_adapter_declares(capsys, tmp_path):
    """The records name it (the job writes `references_field`); records from before that: the conf/lora/
    preset declaring an adapter of that name (lora=detailed: references_detailed); --field names another."""
    refs = write_jsonl(tmp_path / "r.jsonl", [{"video": "a.mp4", "references": ["p q"], "references_long": ["x y z"],
                                              "references_detailed": ["d e f"]}])
    mine = write_jsonl(tmp_path / "mine.jsonl", [{"video": "a.mp4", "caption": "x y z", "status": "ok", "task": "caption",
                                                 "adapter": "long", "references_field": "references_long"}])
    rc, out, _ = run_cli(capsys, mine, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out)["meteor"] == 1.0 and last_json(out)["field"] == "references_long"
    older = write_jsonl(tmp_path / "older.jsonl", [{"video": "a.mp4", "caption": "d e f", "status": "ok",
                                                   "task": "caption", "adapter": "detailed"}])
    rc, out, _ = run_cli(capsys, older, refs, "--tokenizer", "whitespace")
    assert rc == 0 and last_json(out)["field"] == "references_detailed" and last_json(out)["meteor"] == 1.0
    rc, out, _ = run_cli(capsys, older, refs, "--tokenizer", "whitespace", "--field", "references")
    assert rc == 0 and last_json(out)["meteor"] == 0.0
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"video": "a.mp4", "references": ["p q"]}])
    expect_input_error(capsys, older, bare, "--tokenizer", "whitespace",
                       contains=("missing field 'references_detailed'", "the list adapter detailed declares",
                                 "--adapter-field detailed=LIST"))
