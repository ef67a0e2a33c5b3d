"""Every tier, model and quant preset loads offline and yields a plan or a clear refusal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from quant import presets
from quant.errors import PlanError
from quant.plan import make_plan
from quant.rules import METHODS, choose_quant
from quant.tiers import Tier

KEYS_TO_CHANGE = ("engine=", "quant", "model=", "gpu=", "gpu.", "video.", "model.", "sampling.")


@pytest.mark.parametrize("name", presets.tiers())
def test_tier_yaml_loads_and_validates(name):
    cfg = OmegaConf.to_container(OmegaConf.load(presets.CONF_DIR / "gpu" / f"{name}.yaml"))
    tier = Tier.from_config(cfg)
    assert tier.name == name and tier.max_num_seqs > 0 and tier.max_num_batched_tokens > 0
    if tier.is_gpu:
        assert 0 < tier.gpu_memory_utilization <= 1 and tier.vram_gib > 0
        assert tier.dtype == ("bfloat16" if tier.supports_bf16 else "float16")


def test_tier_facts():
    tiers = {name: Tier.from_config(presets.load("gpu", name)) for name in ("t4", "l4", "a100", "h100")}
    assert [(t.vram_gib, t.gpu_memory_utilization, t.max_num_seqs, t.max_num_batched_tokens) for t in tiers.values()] \
        == [(15.0, 0.85, 8, 2048), (22.5, 0.90, 16, 4096), (39.5, 0.90, 32, 8192), (79.6, 0.90, 64, 16384)]
    # the design's bands are of cards sold as 16/24/40/80 GB: each tier's GiB lands in its own band
    assert [choose_quant(t.vram_gib, "quality").method for t in tiers.values()] == ["nf4", "awq", "int8", "none"]
    assert not tiers["t4"].supports_bf16 and not tiers["t4"].vllm_vision_ok and tiers["t4"].suggested_engine == "hf"
    assert tiers["a100"].enable_chunked_prefill and tiers["h100"].enable_chunked_prefill
    assert not tiers["l4"].enable_chunked_prefill


def test_kv_block_size_is_the_tiers_and_vllms_default_else():
    assert Tier.from_config(presets.load("gpu", "cpu")).block_size == 32  # conf/gpu/cpu.yaml
    assert Tier.from_config(presets.load("gpu", "l4")).block_size == 16  # vLLM's CacheConfig.DEFAULT_BLOCK_SIZE
    with pytest.raises(PlanError, match="multiple of 32"):
        Tier.from_config(dict(presets.load("gpu", "cpu"), block_size=48))


@pytest.mark.parametrize("name", presets.options("quant"))
def test_quant_options_are_known_methods(name):
    q = presets.load("quant", name)
    assert q["method"] in METHODS + ("auto",) and q["priority"] in ("quality", "memory")


@pytest.mark.parametrize("engine", ["vllm", "hf"])
@pytest.mark.parametrize("tier", presets.tiers())
@pytest.mark.parametrize("model", presets.options("model"))
def test_every_preset_yields_a_plan_or_a_reason(model, tier, engine):
    try:
        plan = make_plan(presets.load_model(model), presets.load("gpu", tier), presets.load("quant", "auto"), engine, max_new_tokens=48)
    except PlanError as exc:
        assert any(key in str(exc) for key in KEYS_TO_CHANGE), exc
        return
    assert isinstance(plan.fits, bool) and plan.reasons and plan.vision_tokens_per_clip > 0
    if not plan.fits:
        assert any(key in " ".join(plan.reasons) for key in KEYS_TO_CHANGE)


def test_real_model_presets_point_at_the_hub_and_carry_arch():
    for name in presets.options("model"):
        model = presets.load_model(name)
        assert {"name", "family", "path", "dtype", "max_model_len", "frames", "frame_width", "frame_height",
                "arch"} <= set(model), name
        if name != "vidcap_ko_tiny":
            assert model["path"].count("/") == 1 and not model["path"].startswith("$"), name
    assert presets.load_model("qwen2_5_vl_72b_awq")["arch"]["intermediate_size"] == 29696  # padded for AWQ


def test_hydra_composes_the_awq_presets_like_the_loader():
    with initialize_config_dir(config_dir=str(presets.CONF_DIR), version_base="1.3"):
        for name in ("qwen2_5_vl_7b_awq", "qwen2_5_vl_72b_awq", "qwen2_5_vl_7b"):
            cfg = compose(config_name="config", overrides=[f"model={name}", "gpu=l4"])
            assert OmegaConf.to_container(cfg.model, resolve=True) == presets.load_model(name), name
            assert cfg.gpu.name == "l4"


def test_quant_imports_no_video_caption_or_eval_code():
    for path in (Path(presets.__file__).parent).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in ("caption", "video_io", "eval") for n in names), (path, names)


def test_a_preset_given_as_a_dict_is_checked_against_its_schema():
    """The planner and the quant CLI take plain dicts: a key the schema lacks or one every preset sets
    left out is named in one line, from the schema's own list of keys (quant/schema.py preset_values)."""
    from quant.request_size import check_model_keys

    with pytest.raises(PlanError, match=r"^`gpu.vram_gb` is not a gpu setting; known: name, device, vram_gib"):
        Tier.from_config(dict(presets.load("gpu", "l4"), vram_gb=24))
    tier = {k: v for k, v in presets.load("gpu", "l4").items() if k != "count"}
    with pytest.raises(PlanError, match=r"^`gpu.count` is missing from gpu preset 'l4'"):
        Tier.from_config(tier)
    assert Tier.from_config(dict(presets.load("gpu", "l4"), tensor_parallel_size=None)).tensor_parallel_size is None
    model = presets.load_model("qwen2_5_vl_7b")
    with pytest.raises(PlanError, match=r"^`model.frame` is not a model setting"):
        check_model_keys(dict(model, frame=8))
    with pytest.raises(PlanError, match=r"^`model.frames` is missing from model preset"):
        check_model_keys(dict(model, frames=None))
