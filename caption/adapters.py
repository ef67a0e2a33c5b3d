"""LoRA adapters named in the config: checked against the base model before anything loads.

A missing folder, a rank above `lora.max_rank`, weights trained for another base model, or
adapters on modules vLLM cannot serve (the vision tower, embeddings) fail here, with a message
that says what to change, instead of deep inside an engine after the model has loaded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# vLLM's accepted max_lora_rank values (vllm.config.lora.MaxLoRARanks in 0.32)
VLLM_MAX_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_LAYER_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


class AdapterError(ValueError):
    """An adapter that cannot be served; the message names it and says what to change."""


@dataclass(frozen=True)
class Adapter:
    name: str
    path: str
    rank: int
    int_id: int  # vLLM's LoRARequest id, 1-based and unique within the job
    references_field: str = "references"  # which references.jsonl field its captions are scored on


def _linear_shapes(text_config: dict) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each language-model linear layer of the base model."""
    hidden, inter = text_config["hidden_size"], text_config["intermediate_size"]
    heads = text_config["num_attention_heads"]
    head_dim = text_config.get("head_dim") or hidden // heads
    kv = text_config.get("num_key_value_heads") or heads
    return {"q_proj": (hidden, heads * head_dim), "k_proj": (hidden, kv * head_dim),
            "v_proj": (hidden, kv * head_dim), "o_proj": (heads * head_dim, hidden),
            "gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden)}


def _check_weights(name: str, folder: Path, base_config: dict, base_name: str, rank: int,
                   vision_modules: tuple[str, ...]) -> None:
    from safetensors import safe_open

    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise AdapterError(f"adapter '{name}': {weights} is missing (a peft LoRA folder holds "
                           "adapter_config.json and adapter_model.safetensors)")
    text = base_config.get("text_config", base_config)
    shapes, layers = _linear_shapes(text), text["num_hidden_layers"]
    with safe_open(str(weights), framework="numpy") as f:
        keys = list(f.keys())
        if not keys:
            raise AdapterError(f"adapter '{name}': {weights} holds no weights")
        for key in keys:
            if any(f".{module}." in f".{key}" for module in vision_modules):
                raise AdapterError(f"adapter '{name}' adapts the vision tower ({key}); vLLM serves LoRA on "
                                   "the language model only: retrain it with target modules in the LM")
            if "embed_tokens" in key or "lm_head" in key:
                raise AdapterError(f"adapter '{name}' adapts {key.split('.')[-3]}; only the language model's "
                                   "linear layers are supported: retrain without embeddings/lm_head")
            match = _LAYER_KEY.search(key)
            if match is None:
                raise AdapterError(f"adapter '{name}': unexpected weight {key}; expected LoRA weights of the "
                                   f"language model's linear layers ({', '.join(shapes)})")
            layer, module, ab = int(match[1]), match[2], match[3]
            if module not in shapes:
                raise AdapterError(f"adapter '{name}' targets '{module}', which {base_name} does not have")
            if layer >= layers:
                raise AdapterError(f"adapter '{name}' has weights for layer {layer} but {base_name} has "
                                   f"{layers} layers: it was trained for another base model")
            fan_in, fan_out = shapes[module]
            expected = (rank, fan_in) if ab == "A" else (fan_out, rank)
            got = tuple(f.get_slice(key).get_shape())
            if got != expected:
                raise AdapterError(f"adapter '{name}': {key} has shape {got}, but {base_name}'s {module} "
                                   f"needs {expected}: it was trained for another base model")


def load_adapters(specs: list[dict], base_path: str, base_name: str, max_rank: int,
                  vision_modules: tuple[str, ...]) -> list[Adapter]:
    """Validate the configured adapters against the base model (its family's `vision_modules`: what
    an adapter may not touch); returns them with vLLM ids."""
    if max_rank not in VLLM_MAX_RANKS:
        raise AdapterError(f"`lora.max_rank={max_rank}` is not a rank vLLM accepts; use one of "
                           f"{', '.join(map(str, VLLM_MAX_RANKS))}")
    base_config_path = Path(base_path) / "config.json"
    base_config = json.loads(base_config_path.read_text()) if base_config_path.is_file() else None
    adapters, seen = [], set()
    for index, spec in enumerate(specs, 1):
        name, path = str(spec.get("name") or ""), spec.get("path")
        if not _NAME.match(name):
            raise AdapterError(f"`lora.adapters[{index - 1}].name={name!r}`: give each adapter a name of "
                               "letters, digits, '.', '_' or '-' (it names the adapter in every record)")
        if name in seen:
            raise AdapterError(f"two adapters are named '{name}'; names must be unique")
        seen.add(name)
        folder = Path(str(path or "")).expanduser()
        if not path or not folder.is_dir():
            raise AdapterError(f"adapter '{name}': folder {path} does not exist; set "
                               f"`lora.adapters[{index - 1}].path` to a peft LoRA folder")
        config_file = folder / "adapter_config.json"
        if not config_file.is_file():
            raise AdapterError(f"adapter '{name}': {config_file} is missing; is {folder} a peft adapter?")
        adapter_config = json.loads(config_file.read_text())
        if adapter_config.get("peft_type", "LORA") != "LORA":
            raise AdapterError(f"adapter '{name}' is a {adapter_config.get('peft_type')} adapter; only LoRA is served")
        rank = int(adapter_config.get("r", 0))
        if rank > max_rank:
            raise AdapterError(f"adapter '{name}' has rank {rank}, above `lora.max_rank={max_rank}`; raise "
                               f"lora.max_rank to {min(r for r in VLLM_MAX_RANKS if r >= rank)} or more")
        if base_config is not None:  # a hub id cannot be checked offline; vLLM checks on load
            _check_weights(name, folder, base_config, base_name, rank, vision_modules)
        adapters.append(Adapter(name=name, path=str(folder), rank=rank, int_id=index,
                                references_field=str(spec.get("references_field") or "references")))
    return adapters
