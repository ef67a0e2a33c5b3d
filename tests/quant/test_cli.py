"""The CLI prints what the README quotes."""

from __future__ import annotations

import json

from quant.cli import main


def test_table_lists_the_four_gpu_tiers(capsys):
    assert main(["table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["t4", "l4", "a100", "h100"]
    t4 = [cell.strip() for cell in lines[2].split("|")]
    assert t4[3:6] == ["float16", "hf", "nf4"] and t4[9].startswith("yes")


def test_plan_prints_json_and_refusals_exit_2(capsys):
    assert main(["plan", "--model", "qwen2_5_vl_7b_awq", "--gpu", "l4"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm"]["quantization"] == "awq"
    assert main(["plan", "--model", "qwen2_5_vl_7b", "--gpu", "l4", "--quant", "nf4"]) == 2
    assert "engine=hf" in capsys.readouterr().err


def test_presets_table_has_every_model(capsys):
    assert main(["presets"]) == 0
    assert "| qwen3_vl_8b | qwen3_vl | 8.77 B |" in capsys.readouterr().out
