"""The sweep table: one row per job, plan columns then measured figures, markdown and CSV agree."""

from __future__ import annotations

import csv

import pytest

from quant.plan import make_plan
from quant.presets import load, load_model
from quant.report import write_sweep_table


@pytest.fixture(scope="module")
def plans():
    clip = {"frames": 16, "width": 448, "height": 448}
    return [make_plan(load_model("qwen2_5_vl_7b_awq"), load("gpu", g), load("quant", "auto"), "vllm", clip, max_new_tokens=48).to_dict()
            for g in ("l4", "h100")] + [make_plan(load_model("qwen2_5_vl_72b"), load("gpu", "h100"),
                                                  load("quant", "none"), "vllm", clip, max_new_tokens=48).to_dict()]


def test_writes_markdown_and_csv_one_row_per_job(plans, tmp_path):
    measured = [{"videos_per_s": 3.25, "meteor": 0.31, "peak_rss_gib": 5.0}, None, {"note": "a|b"}]
    md, csv_path = write_sweep_table(plans, tmp_path / "out", measured)
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [r["tier"] for r in rows] == ["l4", "h100", "h100"] and [r["job"] for r in rows] == ["0", "1", "2"]
    assert rows[0]["videos_per_s"] == "3.25" and rows[1]["videos_per_s"] == "" and rows[2]["note"] == "a|b"
    assert rows[0]["quant"] == "awq" and rows[0]["fits"] == "yes" and rows[2]["fits"] == "no"
    assert rows[0]["max_num_seqs"] == "16" and rows[1]["max_num_seqs"] == "64"
    header = list(rows[0])
    assert header.index("videos_per_s") < header.index("peak_rss_gib") < header.index("meteor") < header.index("note")
    lines = md.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 + 3 and lines[0].startswith("| job | model | tier |")
    assert "a\\|b" in lines[4] and lines[2].count("|") == lines[0].count("|")


def test_rows_may_carry_their_own_job_id_and_figures(plans, tmp_path):
    rows = [dict(plans[0], job="multirun/3", measured={"output_tokens_per_s": 812.5})]
    md, csv_path = write_sweep_table(rows, tmp_path, name="one")
    row = next(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert md.name == "one.md" and row["job"] == "multirun/3" and row["output_tokens_per_s"] == "812.5"


def test_measured_list_must_match(plans, tmp_path):
    with pytest.raises(ValueError, match="one per job"):
        write_sweep_table(plans, tmp_path, [{}])
