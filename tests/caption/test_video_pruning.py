"""video.prune_rate: vLLM's video-token pruning (EVS) through the real job.

The planner counts the video tokens a request keeps (quant/memory.py kept_video_tokens, vLLM's own
rule); the engine reports the placeholders its processor really put in each prompt (records'
`video_tokens`): with an exact frame size the two are equal. Families and engines that cannot prune
are refused before anything loads, in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caption.job import run_job
from caption.make_model import make_checkpoint
from caption.planning import load_planned_job
from caption.settings.config import ConfigError
from quant.memory import kept_video_tokens

SIDE = 56  # the embedded model's frame size: exact, so the plan's count is the clip's, not a bound


def test_kept_tokens_follow_vllms_rule():
    """vllm/multimodal/video_prune/evs.py compute_retained_tokens_count: the share 1 - rate, rounded
    down, never below the first temporal group."""
    assert [kept_video_tokens(16, 4, r) for r in (0, 0.25, 0.5, 0.75, 0.9)] == [16, 12, 8, 4, 4]
    assert kept_video_tokens(1000, 8, 0.5) == 500 and kept_video_tokens(1001, 7, 0.5) == 500


def _job(compose_config, synth_dir, tmp_path, *extra):
    return [f"input_dir={synth_dir}", f"output={tmp_path / 'out.jsonl'}", "progress=false",
            f"video.width={SIDE}", f"video.height={SIDE}", *extra]


@pytest.mark.parametrize("rate, kept", [(0.0, 16), (0.5, 8), (0.75, 4)])
def test_the_plan_counts_the_tokens_vllm_keeps(compose_config, synth_dir, tmp_path, rate, kept):
    job = load_planned_job(compose_config(_job(compose_config, synth_dir, tmp_path, f"video.prune_rate={rate}")))
    assert job.plan.vision_tokens_per_clip == kept
    assert job.plan.vllm.get("video_pruning_rate") == (rate or None)
    assert (job.settings.get("prune_rate") == rate) if rate else "prune_rate" not in job.settings


@pytest.mark.parametrize("overrides, message", [
    (["video.prune_rate=0.5", "engine=hf"], "runs on engine=vllm"),
    (["video.prune_rate=1.0"], r"must be in \[0, 1\)"),
    (["video.prune_rate=-0.1"], r"must be in \[0, 1\)"),
])
def test_what_cannot_prune_is_refused_in_one_line(compose_config, synth_dir, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as refused:
        load_planned_job(compose_config(_job(compose_config, synth_dir, tmp_path, *overrides)))
    assert "\n" not in str(refused.value)


def test_a_family_vllm_cannot_prune_is_refused(compose_config, synth_dir, tmp_path):
    made = Path(make_checkpoint("llava_next_video", "tiny", tmp_path / "llava", seed=0)["out"])
    [preset] = (made / "vidcap_preset" / "model").glob("*.yaml")
    overrides = [f"hydra.searchpath=[file://{preset.parent.parent}]", f"model={preset.stem}",
                 f"input_dir={synth_dir}", f"output={tmp_path / 'out.jsonl'}", "video.prune_rate=0.5"]
    with pytest.raises(ConfigError, match="vLLM 0.32 cannot prune llava_next_video's video tokens") as refused:
        load_planned_job(compose_config(overrides))
    assert "\n" not in str(refused.value)


def test_engine_auto_runs_pruning_on_vllm(compose_config, synth_dir, tmp_path):
    job = load_planned_job(compose_config(_job(compose_config, synth_dir, tmp_path, "video.prune_rate=0.5")))
    assert job.engine == "vllm"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_the_embedded_model_captions_pruned_video_with_the_planned_tokens(compose_config, synth_dir, tmp_path):
    """Qwen2.5-VL: every record keeps the planned video tokens (8 of 16), and the captions still score."""
    overrides = _job(compose_config, synth_dir, tmp_path, "video.prune_rate=0.5")
    job = load_planned_job(compose_config(overrides))
    summary = run_job(compose_config(overrides))
    records = _records(tmp_path / "out.jsonl")
    assert summary["exit_status"] == 0 and len(records) == 6
    assert {r["video_tokens"] for r in records} == {job.plan.vision_tokens_per_clip} == {8}
    assert summary["meteor"] > 0.8  # the embedded model, half its video tokens (1.0 with all of them)


@pytest.mark.slow
def test_qwen3_vl_prunes_through_the_job(compose_config, synth_dir, tmp_path):
    """Qwen3-VL keeps its per-group timestamps and drops video tokens: the records' count is the plan's."""
    made = Path(make_checkpoint("qwen3_vl", "tiny", tmp_path / "qwen3", seed=0)["out"])
    [preset] = (made / "vidcap_preset" / "model").glob("*.yaml")
    side = 64  # the family's multiple (patch 16 x merge 2)
    base = [f"hydra.searchpath=[file://{preset.parent.parent}]", f"model={preset.stem}", f"input_dir={synth_dir}",
            "progress=false", "references=null", f"video.width={side}", f"video.height={side}"]
    counts = {}
    for rate in (0.0, 0.5):
        out = tmp_path / f"out{rate}.jsonl"
        overrides = [*base, f"output={out}", f"video.prune_rate={rate}"]
        planned = load_planned_job(compose_config(overrides)).plan.vision_tokens_per_clip
        assert run_job(compose_config(overrides))["exit_status"] == 0
        counts[rate] = {r["video_tokens"] for r in _records(out)}
        assert counts[rate] == {planned}, (rate, counts[rate], planned)
    assert max(counts[0.5]) < max(counts[0.0])
