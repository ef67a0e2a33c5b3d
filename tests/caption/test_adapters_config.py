"""LoRA adapters and speculative decoding settings are checked before anything loads."""

from __future__ import annotations

import json
import shutil

import pytest

from caption.planning import load_planned_job
from caption.settings.config import ConfigError

ADAPTER = "assets/adapters/vidcap-ko-detailed"


def _job(compose_config, synth_dir, tmp_path, *overrides):
    return load_planned_job(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'o.jsonl'}", *overrides]))


def test_the_shipped_adapter_loads_with_its_name(compose_config, synth_dir, tmp_path):
    job = _job(compose_config, synth_dir, tmp_path, "lora=detailed")
    assert job.adapter_names == ("detailed",) and job.variants() == ["detailed"]
    job = _job(compose_config, synth_dir, tmp_path, "lora=detailed", "lora.include_base=true")
    assert job.variants() == [None, "detailed"]


def _copy_adapter(tmp_path, model_dir, edit_config=None, edit_weights=None):
    folder = tmp_path / "adapter"
    shutil.copytree(model_dir.parents[1] / "adapters" / "vidcap-ko-detailed", folder)
    if edit_config:
        config = json.loads((folder / "adapter_config.json").read_text())
        edit_config(config)
        (folder / "adapter_config.json").write_text(json.dumps(config))
    if edit_weights:
        from safetensors.numpy import load_file, save_file

        weights = load_file(folder / "adapter_model.safetensors")
        save_file(edit_weights(weights), folder / "adapter_model.safetensors")
    return folder


def _with(folder):
    return [f"lora.adapters=[{{name: mine, path: '{folder}'}}]"]


def test_missing_adapter(compose_config, synth_dir, tmp_path):
    with pytest.raises(ConfigError, match="adapter 'mine': folder .* does not exist"):
        _job(compose_config, synth_dir, tmp_path, *_with(tmp_path / "nope"))


def test_rank_above_max_rank(compose_config, synth_dir, tmp_path, model_dir):
    folder = _copy_adapter(tmp_path, model_dir)
    with pytest.raises(ConfigError, match=r"rank 16, above `lora.max_rank=8`; raise lora.max_rank to 16"):
        _job(compose_config, synth_dir, tmp_path, *_with(folder), "lora.max_rank=8")
    with pytest.raises(ConfigError, match="not a rank vLLM accepts"):
        _job(compose_config, synth_dir, tmp_path, *_with(folder), "lora.max_rank=12")


def test_wrong_base_model(compose_config, synth_dir, tmp_path, model_dir):
    import numpy as np

    def wider(weights):  # as if trained on a model with a 256-wide hidden layer
        return {k: (np.zeros((v.shape[0], 256), v.dtype) if "lora_A" in k and "q_proj" in k else v)
                for k, v in weights.items()}

    folder = _copy_adapter(tmp_path, model_dir, edit_weights=wider)
    with pytest.raises(ConfigError, match="trained for another base model"):
        _job(compose_config, synth_dir, tmp_path, *_with(folder))


def test_adapters_on_the_vision_tower_are_refused(compose_config, synth_dir, tmp_path, model_dir):
    import numpy as np

    def vision(weights):
        weights = dict(weights)
        weights["base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight"] = np.zeros((16, 128), np.float32)
        return weights

    folder = _copy_adapter(tmp_path, model_dir, edit_weights=vision)
    with pytest.raises(ConfigError, match="vision tower"):
        _job(compose_config, synth_dir, tmp_path, *_with(folder))


def test_duplicate_names_and_non_lora(compose_config, synth_dir, tmp_path, model_dir):
    folder = _copy_adapter(tmp_path, model_dir, edit_config=lambda c: c.update(peft_type="IA3"))
    with pytest.raises(ConfigError, match="IA3 adapter; only LoRA"):
        _job(compose_config, synth_dir, tmp_path, *_with(folder))
    folder = model_dir.parents[1] / "adapters" / "vidcap-ko-detailed"
    with pytest.raises(ConfigError, match="two adapters are named 'a'"):
        _job(compose_config, synth_dir, tmp_path,
             f"lora.adapters=[{{name: a, path: '{folder}'}}, {{name: a, path: '{folder}'}}]")


def test_speculative_settings(compose_config, synth_dir, tmp_path):
    job = _job(compose_config, synth_dir, tmp_path, "spec=ngram")
    assert job.speculative == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                               "prompt_lookup_min": 2}
    job = _job(compose_config, synth_dir, tmp_path, "spec=draft")
    assert job.speculative["method"] == "draft_model" and job.speculative["model"].endswith("vidcap-ko-draft")
    with pytest.raises(ConfigError, match="not a model folder"):
        _job(compose_config, synth_dir, tmp_path, "spec=draft", "spec.model=/nonexistent")
    with pytest.raises(ConfigError, match="spec.num_speculative_tokens"):
        _job(compose_config, synth_dir, tmp_path, "spec=ngram", "spec.num_speculative_tokens=0")
