"""Paths as users type them, and outputs checked before the work: a folder name with spaces, Korean
letters, `~`, `=` or quotes passed as one shell word reaches the job; a missing output folder is made;
an output that cannot be written stops each command in one line (exit status 5) before its expensive
part."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from caption.settings.overrides import hydra_quote, paths_as_typed
from tests.caption.in_process import run_command

BIN = os.path.dirname(sys.executable)
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
ODD = "내 영상 =it's \"q\" ~"  # one folder name with every character Hydra's grammar rejects unquoted


def _run(tool, *args, cwd, env=None, timeout=600):
    return run_command(tool, args, env={**ENV, **(env or {})}, cwd=cwd)


def test_hydra_reads_a_quoted_path_back_as_typed():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for text in ["/data/내 영상", "/a/it's", "/a\\b", "/a/b\\", "/a\\'b", "/x/${y}/z", '/a/"q" =1', "~/클립"]:
        assert parser.parse_override("input_dir=" + hydra_quote(text)).value().replace("\\${", "${") == text
    assert paths_as_typed(["input_dir=/data/내 영상", "references=null", "video.fps=1", "input_dir='/x y'"]) == \
        ["input_dir='/data/내 영상'", "references=null", "video.fps=1", "input_dir='/x y'"]
    assert paths_as_typed(["-m", "output=a.jsonl,b.jsonl"]) == ["-m", "output=a.jsonl,b.jsonl"]  # a sweep stays one
    assert paths_as_typed(["output=/data/a,b.jsonl"]) == ["output='/data/a,b.jsonl'"]


@pytest.fixture
def odd_home(tmp_path, synth_dir):
    """HOME with a clips folder named ODD (two clips and their references) under it."""
    folder = tmp_path / "home" / ODD
    folder.mkdir(parents=True)
    for i in range(2):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    lines = (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:2]
    (folder / "references.jsonl").write_text("".join(lines), encoding="utf-8")
    return tmp_path / "home"


@pytest.mark.slow
def test_the_command_takes_paths_as_typed_and_makes_the_output_folder(tmp_path, odd_home):
    out = tmp_path / "새 결과" / "a=b" / "captions.jsonl"  # two folders that do not exist yet
    done = _run("caption", f"input_dir=~/{ODD}", f"output={out}", f"summary_path=~/{ODD} summary.json",
                "engine=hf", "video.workers=0", "progress=false", f"hydra.run.dir={tmp_path / 'run dir'}",
                cwd=tmp_path, env={"HOME": str(odd_home)})
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["video"] for r in records) == ["clip_00000.mp4", "clip_00001.mp4"]
    summary = json.loads((odd_home / f"{ODD} summary.json").read_text(encoding="utf-8"))
    assert summary["input_dir"] == str(odd_home / ODD) and summary["meteor_n"] == 2


@pytest.mark.slow
def test_the_api_takes_the_same_paths(tmp_path, odd_home):
    from caption import caption_folder

    out = tmp_path / "영상" / "captions.jsonl"  # Korean letters only: a word the API used to pass unquoted
    summary = caption_folder(str(odd_home / ODD), str(out), engine="hf", video__workers=0)  # as a script's argv
    assert (summary["captions_ok"], summary["meteor_n"]) == (2, 2) and out.is_file()


@pytest.fixture
def records(tmp_path, synth_dir):
    """A job's records for two clips (what caption-report, -export and -meteor read), and a plain file
    where an output folder should be."""
    lines = [json.loads(line) for line in (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines()[:2]]
    path = tmp_path / "captions.jsonl"
    path.write_text("".join(json.dumps({"video": r["video"], "task": "caption", "adapter": None, "status": "ok",
                                        "caption": r["references"][0], "error": None, "frame_indices": [0, 8, 16, 24],
                                        "decoder": "pyav"}, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    (tmp_path / "a file").write_text("not a folder\n", encoding="utf-8")
    return path


def _one_line_write_failure(done, tool: str, name: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 5 and len(lines) == 1, (done.returncode, done.stderr[-2000:])
    assert lines[0].startswith(f"{tool}: cannot write the ") and name in lines[0] and "Traceback" not in done.stderr


def test_every_command_checks_its_output_before_its_work(tmp_path, records, synth_dir):
    blocked = tmp_path / "a file"
    refs = synth_dir / "references.jsonl"
    # the review page: before scoring and decoding any thumbnail (they log a line each 200 clips and at the end)
    page = _run("caption-report", records, "--out", blocked / "report.html", "--input-dir", synth_dir, "--workers", 0,
                cwd=tmp_path)
    _one_line_write_failure(page, "caption-report", "report.html")
    export = _run("caption-export", records, "--format", "csv", "--out", blocked / "t.csv", cwd=tmp_path)
    _one_line_write_failure(export, "caption-export", "t.csv")  # the CSV file
    scored = _run("caption-meteor", records, refs, "--per-item", blocked / "items.csv", cwd=tmp_path)
    _one_line_write_failure(scored, "caption-meteor", "items.csv")
    bench = _run("caption-bench", "meteor", "--n", "20", "--out", blocked / "bench", cwd=tmp_path)
    _one_line_write_failure(bench, "caption-bench", "results.json")
    job = _run("caption", f"input_dir={synth_dir}", f"output={blocked / 'x' / 'c.jsonl'}", "engine=hf",
               f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    _one_line_write_failure(job, "caption", "a file")
    # a folder that does not exist yet is made, for each of them
    made = tmp_path / "new" / "deeper"
    assert _run("caption-report", records, "--out", made / "report.html", "--input-dir", synth_dir, "--workers", 0,
                cwd=tmp_path).returncode == 0 and (made / "report.html").is_file()
    assert _run("caption-export", records, "--format", "csv", "--out", made / "t.csv", cwd=tmp_path).returncode == 0
    assert _run("caption-meteor", records, refs, "--per-item", made / "items.csv", cwd=tmp_path).returncode == 0
    assert (made / "t.csv").is_file() and (made / "items.csv").is_file()
