"""GPUs per machine: tensor_parallel_size and replicas, worked examples from issue 14."""

from __future__ import annotations

import pytest

from quant.errors import PlanError
from quant.plan import make_plan
from quant.presets import load, load_model


def plan(model: str, tier: str, count: int = 1, tp: int | None = None, quant: str = "auto"):
    gpu = dict(load("gpu", tier), count=count, tensor_parallel_size=tp)
    return make_plan(load_model(model), gpu, load("quant", quant), "auto", max_new_tokens=48)


def test_72b_bf16_on_four_h100_needs_all_four_in_one_engine():
    p = plan("qwen2_5_vl_72b", "h100", count=4)
    # 136.7 GiB of bf16 weights: 68.4 per GPU at TP 2 leaves no KV cache in 71.6; at TP 4, 34.2 does
    assert p.fits and p.tensor_parallel_size == 4 and p.replicas == 1
    assert p.vllm["tensor_parallel_size"] == 4 and p.vllm["max_num_seqs"] == 64
    assert p.memory_gib["weights"] == pytest.approx(136.738 / 4, abs=0.01)
    assert "on each of 4 GPUs" in p.reasons[0]


def test_72b_awq_release_on_four_h100_runs_two_engines_of_two():
    p = plan("qwen2_5_vl_72b_awq", "h100", count=4)
    # one H100 holds the 40 GiB of AWQ weights but only 38 of the tier's 64 sequences; two hold them all
    assert p.fits and p.tensor_parallel_size == 2 and p.replicas == 2 and p.sequences_fit >= 64
    one = plan("qwen2_5_vl_72b_awq", "h100")  # on one GPU it still runs, with a smaller batch
    assert one.fits and one.tensor_parallel_size == 1 and one.vllm["max_num_seqs"] == 38


def test_7b_on_eight_a100_runs_eight_engines_of_one():
    p = plan("qwen2_5_vl_7b", "a100", count=8)
    assert p.fits and p.tensor_parallel_size == 1 and p.replicas == 8 and p.vllm["tensor_parallel_size"] == 1


def test_72b_on_one_h100_is_refused_with_how_many_gpus_would_do():
    p = plan("qwen2_5_vl_72b", "h100")
    assert not p.fits and p.tensor_parallel_size == 1
    assert ("needs 2 GPUs with AWQ (model=qwen2_5_vl_72b_awq) or 4 in bfloat16" in p.reasons[-1]
            and "gpu.count" in p.reasons[-1])
    assert not plan("qwen2_5_vl_72b", "h100", count=2).fits  # two are not enough in bf16 either


def test_the_users_tensor_parallel_size_is_taken_as_given():
    p = plan("qwen2_5_vl_7b", "a100", count=8, tp=2)
    assert p.tensor_parallel_size == 2 and p.replicas == 4
    assert not plan("qwen2_5_vl_72b", "h100", count=4, tp=2).fits  # and checked like any other plan


@pytest.mark.parametrize("count, tp, match", [(0, None, "gpu.count"), (4, 3, "power of two"),
                                              (2, 4, "no larger than gpu.count")])
def test_impossible_counts_are_refused_by_key(count, tp, match):
    with pytest.raises(PlanError, match=match):
        plan("qwen2_5_vl_7b", "a100", count=count, tp=tp)


def test_cpu_replicas_are_one_process_each():
    p = plan("vidcap_ko_tiny", "cpu", count=2)
    assert p.tensor_parallel_size == 1 and p.replicas == 2
    with pytest.raises(PlanError, match="needs GPUs"):
        plan("vidcap_ko_tiny", "cpu", count=2, tp=2)


def test_one_gpu_by_default():
    p = plan("qwen2_5_vl_7b", "a100")
    assert (p.tensor_parallel_size, p.replicas) == (1, 1)
