"""What every family shares: shapes, tokenizer, the checkpoint folder, and the weights, written
tensor by tensor so a 7B model never sits in memory whole.

A family (vidcap_ko/families/<family>.py, its `checkpoint`) describes only what differs: its built-in shapes,
special tokens, chat template, config, processor and checkpoint key names.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Callable

from caption.prompts import SYSTEM_PROMPT_KO
from caption.settings.config import CONF_DIR, SHIPPED_ROOT
from vidcap_ko.families import FAMILIES, Checkpoint, UnknownFamily, get_family

FAMILY_NAMES = tuple(sorted(FAMILIES))
BUILTIN_SHAPES = ("tiny", "cpu")  # defined by each family (vidcap_ko/families/<family>.py); other shapes come from presets
DTYPES = ("float32", "bfloat16", "float16")
BUILTIN_DTYPE = "float32"  # what vLLM CPU and transformers run fastest here (conf/gpu/cpu.yaml)
# The tokenizer every made checkpoint starts from: the embedded model's byte-level BPE (Korean).
TOKENIZER_SOURCE = SHIPPED_ROOT / "assets" / "models" / "vidcap-ko-tiny"
VOCAB_MULTIPLE = 64  # built-in shapes round the tokenizer's size up to this (as the embedded model)
SHARD_BYTES = 2 << 30  # weights are written in files of at most this size (one file when smaller)
CHUNK_ELEMENTS = 1 << 24  # random numbers are drawn this many at a time (bounds fp32 scratch memory)


class MakeModelError(ValueError):
    """A request that cannot be made (unknown family/shape, output in the way); one clear line."""


def family_spec(name: str) -> Checkpoint:
    try:
        return get_family(name).checkpoint
    except UnknownFamily as exc:
        raise MakeModelError(str(exc)) from None


def _presets(family: str) -> dict[str, Path]:
    """shape -> preset file, for the bf16 releases of `family` in conf/model/ (not the quantized
    ones: their numbers are the base preset's)."""
    from omegaconf import OmegaConf

    found = {}
    for path in sorted((CONF_DIR / "model").glob(f"{family}_*.yaml")):
        preset = OmegaConf.load(path)
        if preset.get("family") == family and "arch" in preset and not preset.get("quantized") \
                and "defaults" not in preset:
            found[path.stem[len(family) + 1:]] = path
    return found


def shapes(family: str) -> list[str]:
    family_spec(family)
    return [*BUILTIN_SHAPES, *_presets(family)]


def shape_arch(family: str, shape: str) -> tuple[dict, str, str]:
    """(arch numbers, default dtype, where the numbers come from) for a family and shape."""
    spec = family_spec(family)
    if shape in BUILTIN_SHAPES:
        return dict(spec.builtin[shape]), BUILTIN_DTYPE, f"vidcap_ko/families/{family}.py"
    presets = _presets(family)
    if shape not in presets:
        raise MakeModelError(
            f"no numbers for {family} at shape {shape!r}: no preset conf/model/{family}_{shape}.yaml; "
            f"shapes for {family}: {', '.join(shapes(family))}")
    from omegaconf import OmegaConf

    preset = OmegaConf.load(presets[shape])
    arch = OmegaConf.to_container(preset.arch, resolve=False)
    return arch, str(preset.dtype), str(presets[shape].relative_to(SHIPPED_ROOT))


def build_tokenizer(spec: Checkpoint):
    """The embedded model's tokenizer with the family's special tokens and chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_SOURCE)
    missing = [t for t in spec.special_tokens if t not in tokenizer.get_vocab()]
    if missing:
        tokenizer.add_special_tokens({"additional_special_tokens": missing},
                                     replace_extra_special_tokens=False)
    tokenizer.eos_token = spec.eos_tokens[0]
    if spec.bos_token is not None:
        tokenizer.bos_token = spec.bos_token
    if spec.chat_template is not None:  # else the source tokenizer's ChatML template
        tokenizer.chat_template = spec.chat_template(SYSTEM_PROMPT_KO)
    return tokenizer


def token_ids(tokenizer, tokens) -> dict[str, int]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in tokens}
    unknown = [t for t, i in ids.items() if i is None or i == tokenizer.unk_token_id]
    assert not unknown, f"tokenizer lacks {unknown}"
    return ids


def build_config(family: str, shape: str, dtype: str | None = None):
    """(transformers config, tokenizer, arch numbers with vocab_size filled in) for a family and shape."""
    import torch

    spec = family_spec(family)
    arch, default_dtype, _ = shape_arch(family, shape)
    dtype = dtype or default_dtype
    if dtype not in DTYPES:
        raise MakeModelError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    tokenizer = build_tokenizer(spec)
    if arch.get("vocab_size") is None:
        arch["vocab_size"] = math.ceil(len(tokenizer) / VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    if len(tokenizer) > arch["vocab_size"]:
        raise MakeModelError(f"tokenizer has {len(tokenizer)} tokens, more than vocab_size {arch['vocab_size']}")
    ids = token_ids(tokenizer, (*spec.special_tokens, *spec.eos_tokens, tokenizer.pad_token))
    ids["<pad>"] = tokenizer.pad_token_id
    tokenizer.model_max_length = int(arch["max_position_embeddings"])
    try:
        config = spec.config(arch, ids)
    except ValueError as exc:  # numbers the architecture cannot take
        raise MakeModelError(f"{family} {shape}: {exc}") from None
    config.dtype = getattr(torch, dtype)
    return config, tokenizer, arch


def meta_model(config):
    """The model with every tensor on the meta device: names and shapes, no memory."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        return AutoModelForImageTextToText.from_config(config)


def release_tensors(model, rename_key: Callable[[str], str]) -> dict[str, tuple[int, ...]]:
    """name -> shape of every tensor a saved checkpoint holds, under the names transformers writes
    (`save_pretrained`: tied weights once, its load-time renamings reverted), then the family's
    own renaming to the released checkpoints' names."""
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    state = remove_tied_weights_from_state_dict(model.state_dict(), model)
    state = revert_weight_conversion(model, state)
    return {rename_key(name): tuple(t.shape) for name, t in state.items()}


# Lookup tables (token and position embeddings): their input is one-hot, a fan-in of 1, so std 1.
# Scaled by their width instead, a token's own embedding is ~sqrt(hidden) times smaller than what
# the first layer adds, and the next token hardly depends on the current one (one repeated token).
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "pos_embed.weight", "position_embedding.weight")
VOCAB_ROWS_SUFFIXES = ("embed_tokens.weight", "lm_head.weight")  # one row per token id


def is_embedding(name: str) -> bool:
    return name.endswith(EMBEDDING_SUFFIXES)


def _seed_for(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def random_tensor(name: str, shape: tuple[int, ...], seed: int, dtype, tokens: int | None = None):
    """One tensor, from its own generator seeded by (seed, name): the same whatever else the model
    holds or the order it is written in.

    Matrices, convolutions and embeddings: normal with std 1/sqrt(fan-in), so every layer keeps
    its input's scale and logits spread (the usual 0.02 gives one repeated token: see
    measurements on these machines (2026-11)). Vectors: norm scales 1, biases 0, other vectors
    (CLIP's class embedding, LLaVA-NeXT's image_newline) normal with std 1. Token rows past the
    tokenizer's `tokens` (vocab_size is padded) are zero, so no engine ever emits an id that no
    text decodes to, as with a trained release."""
    import torch

    if len(shape) == 1 and name.endswith(".bias"):
        return torch.zeros(shape, dtype=dtype)
    if len(shape) == 1 and name.endswith(".weight"):
        return torch.ones(shape, dtype=dtype)
    generator = torch.Generator().manual_seed(_seed_for(seed, name))
    fan_in = math.prod(shape[1:]) if len(shape) > 1 and not is_embedding(name) else 1
    std = fan_in ** -0.5
    out = torch.empty(shape, dtype=dtype)
    rows = max(1, CHUNK_ELEMENTS // max(1, fan_in)) if len(shape) > 1 else len(out)
    for start in range(0, shape[0], rows):
        part = torch.randn((min(rows, shape[0] - start), *shape[1:]), generator=generator)
        out[start:start + len(part)] = part.mul_(std)
    if tokens is not None and name.endswith(VOCAB_ROWS_SUFFIXES):
        out[tokens:] = 0
    return out


def plan_shards(tensors: dict[str, tuple[int, ...]], itemsize: int, limit: int) -> list[list[str]]:
    """Tensor names per file, in name order, each file at most `limit` bytes (a bigger tensor alone)."""
    shards, current, size = [], [], 0
    for name in sorted(tensors):
        nbytes = math.prod(tensors[name]) * itemsize
        if current and size + nbytes > limit:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
    return shards + [current] if current else shards


def write_weights(out: Path, tensors: dict[str, tuple[int, ...]], dtype: str, seed: int, tokens: int,
                  shard_bytes: int = SHARD_BYTES) -> list[str]:
    """Write the weights file by file (one file's tensors in memory at a time); returns file names."""
    import torch
    from safetensors.torch import save_file

    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size()
    shards = plan_shards(tensors, itemsize, shard_bytes)
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    weight_map = {}
    for file_name, shard in zip(names, shards):
        block = {name: random_tensor(name, tensors[name], seed, torch_dtype, tokens) for name in shard}
        save_file(block, str(out / file_name), metadata={"format": "pt"})
        (out / file_name).chmod(0o644)  # safetensors creates it owner-only; the rest of the folder is 0644
        weight_map.update({name: file_name for name in shard})
        del block
    if len(shards) > 1:
        total = sum(math.prod(s) for s in tensors.values())
        index = {"metadata": {"total_parameters": total, "total_size": total * itemsize},
                 "weight_map": dict(sorted(weight_map.items()))}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return names


PRESET_DIR = "vidcap_preset"  # <out>/vidcap_preset/model/<name>.yaml: a model preset for the job


def job_preset(family: str, shape: str, arch: dict, out: Path, dtype: str, parameters: int) -> dict:
    """A conf/model preset for the made checkpoint: the job's planner counts memory from `arch`, so
    a made model runs through `caption` with its own numbers (not those of the preset it imitates)."""
    if shape in BUILTIN_SHAPES:
        job = dict(family_spec(family).job[shape])
        side = job.pop("frame_side")
        job.update(frame_width=side, frame_height=side)
    else:
        from omegaconf import OmegaConf

        preset = OmegaConf.load(_presets(family)[shape])
        job = {k: preset[k] for k in ("max_model_len", "frames", "frame_width", "frame_height")}
    return {"name": f"random-{family}-{shape}", "family": family, "path": str(out.resolve()), "dtype": dtype,
            **job, "quantized": None, "awq_preset": None, "arch": {**arch, "params_card": parameters}}


def write_job_preset(out: Path, preset: dict) -> Path:
    import yaml

    path = out / PRESET_DIR / "model" / f"{preset['name'].replace('-', '_')}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Written by caption-make-model: {preset['name']}, random weights. Run the job with\n"
              f"#   caption hydra.searchpath=[file://{out.resolve() / PRESET_DIR}] "
              f"model={path.stem} input_dir=... output=...\n")
    path.write_text(header + yaml.safe_dump(preset, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _refuse_occupied_out(out: Path, force: bool) -> None:
    if not force and out.exists() and any(out.iterdir()):
        raise MakeModelError(f"{out} is not empty; choose another --out or pass --force to replace it")


def _prepare_out(out: Path, force: bool) -> None:
    _refuse_occupied_out(out, force)
    if out.exists() and any(out.iterdir()):
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def make_checkpoint(family: str, shape: str, out: str | Path, seed: int = 0, dtype: str | None = None,
                    config_only: bool = False, force: bool = False, shard_bytes: int = SHARD_BYTES) -> dict:
    """Write a checkpoint folder; returns what was written (parameters, bytes, files, source)."""
    # the refusals that need no model code come before transformers' and torch's imports (~2 s), so a
    # mistyped shape or an occupied folder is said at once
    spec = family_spec(family)
    shape_arch(family, shape)
    _refuse_occupied_out(Path(out), force)
    from transformers import GenerationConfig

    config, tokenizer, arch = build_config(family, shape, dtype)
    dtype = str(config.dtype).removeprefix("torch.")
    out = Path(out)
    _prepare_out(out, force)
    config.save_pretrained(out)
    eos = [tokenizer.convert_tokens_to_ids(t) for t in spec.eos_tokens]
    GenerationConfig(bos_token_id=tokenizer.bos_token_id if spec.bos_token else None, eos_token_id=eos,
                     pad_token_id=tokenizer.pad_token_id, do_sample=False).save_pretrained(out)
    spec.processor(tokenizer, arch, tokenizer.chat_template).save_pretrained(out)
    tensors = release_tensors(meta_model(config), spec.rename_key)
    files = [] if config_only else write_weights(out, tensors, dtype, seed, len(tokenizer), shard_bytes)
    parameters = sum(math.prod(s) for s in tensors.values())
    preset = write_job_preset(out, job_preset(family, shape, arch, out, dtype, parameters))
    return {"family": family, "shape": shape, "dtype": dtype, "seed": seed, "out": str(out),
            "source": shape_arch(family, shape)[2], "parameters": parameters,
            "weight_bytes": sum((out / f).stat().st_size for f in files), "weight_files": files,
            "tokenizer_size": len(tokenizer), "job_preset": str(preset)}
