"""How a record was made: the settings that change captions, readable and as one short id.

Every record carries `settings` (what a user filters on: model, its identity, engine, dtype,
quantization, sampling, frames) and `settings_id`, a hash of those (all but `model_path`: the model is
known by its content, `model_id`) plus the record's own prompt text and adapter (caption/settings/settings_ids.py).
Resuming into an output counts a record as done only when its id is the one this job would give it; an
output holding records made another way is refused before anything loads, naming what differs
(caption/output/checks.py). With engine=server the server's address and the model it reports stand
where the local checkpoint would. Settings that do not change captions are left out: the tier's batch
sizes, the decoder processes, speculative decoding under greedy decoding (it verifies every token
against the target model, so greedy captions are the same with it or without).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

from caption.settings.settings_ids import digest

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

SAMPLE_BYTES = 1 << 20  # bytes hashed at each of three places of a weights file


def _file_sample(path: Path) -> bytes:
    """A weights file's identity without reading all of it: its size, its safetensors header (every
    tensor's name, dtype, shape and place) and 1 MiB at its start, middle and end of the data. A
    fine-tune of the same architecture keeps the header and changes every value, so the samples differ."""
    size = path.stat().st_size
    parts = [str(size).encode()]
    with open(path, "rb") as f:
        if path.suffix == ".safetensors" and size >= 8:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if 0 < header_len < size:
                parts.append(f.read(header_len))
        for offset in (0, max(0, size // 2 - SAMPLE_BYTES // 2), max(0, size - SAMPLE_BYTES)):
            f.seek(offset)
            parts.append(f.read(SAMPLE_BYTES))
    return b"".join(parts)


IDENTITY_FILES = ("config.json", "preprocessor_config.json", "video_preprocessor_config.json",
                  "adapter_config.json", "model.safetensors.index.json")


def folder_identity(path: str) -> str:
    """A checkpoint's (or adapter's) content identity: its config files and a sample of each weights
    file; a hub id that is not a folder is identified by its name."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return digest("hub", path)[:16]
    parts = []
    for name in IDENTITY_FILES:
        if (folder / name).is_file():
            parts += [name, (folder / name).read_bytes()]
    for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        parts += [weights.name, _file_sample(weights)]
    return digest(*parts)[:16]


def job_settings(job: JobConfig) -> dict:
    """The settings of a planned job that change its captions, shared by all its records."""
    from caption.prompts import SYSTEM_PROMPT_KO

    s, d, plan = job.sampling, job.decode, job.plan
    q = plan.quantization or {}
    frames = (f"{d.sampling.num_frames} uniform" if d.sampling.mode == "uniform"
              else f"{d.sampling.fps:g}/s, {d.sampling.min_frames}-{d.sampling.max_frames}")
    size = f"{d.width}x{d.height}" if d.width else f"<= {d.max_pixels} px" if d.max_pixels else "source size"
    settings = {
        "model": job.model.name,
        "model_path": job.model.path,  # what the engine loads (a quantized copy, where the plan made one)
        "model_id": folder_identity(job.model.path),
        "engine": plan.engine,
        "dtype": plan.dtype,
        "quant": q.get("method") or "none",
        "sampling": s.name,
        "sampling_id": digest(sorted(vars(s).items()))[:8],  # the values too: sampling.temperature=... overrides
        "system_prompt_id": digest(job.model.family, SYSTEM_PROMPT_KO)[:8],
        "frames": f"{frames}, {size} /{d.size_multiple}, seek {d.seek}",
    }
    if plan.server is not None:
        settings = _served(settings, plan.server)
    if s.do_sample:  # the seed, and speculation's use of the random stream, change sampled captions
        settings["seed"] = job.engine_options.seed
        if job.speculative is not None:
            settings["speculative"] = job.speculative["method"]
    if job.ablation != "none":
        settings["ablation"] = job.ablation
    if job.prune_rate:  # fewer video tokens, other captions
        settings["prune_rate"] = job.prune_rate
    if job.forced_lengths is not None:
        settings["forced_output_tokens"] = digest(vars(job.forced_lengths))[:8]
    return settings


def _served(settings: dict, server: dict) -> dict:
    """engine=server: the weights are the server's, so what it reports names them: its address (no
    credentials: caption/settings/engine_schema.py public_url), the model name and what it loaded (its `root`).
    The local checkpoint, dtype and quantization are not what made the captions."""
    named = {"server": server["base_url"], "served_model": server["served_model"], "served_root": server.get("root")}
    rest = {k: v for k, v in settings.items() if k not in ("model_path", "model_id", "dtype", "quant")}
    return {"model": rest.pop("model"), **named, **rest}


def adapter_identities(job: JobConfig) -> dict[str | None, str | None]:
    """{adapter name: content identity} for the job's variants (None: the base model)."""
    return {None: None, **{a.name: folder_identity(a.path) for a in job.adapters}}


def differences(old: dict | None, new: dict) -> list[str]:
    """What changed between two `settings` blocks, in words ("engine vllm -> hf")."""
    if not old:
        return ["the records carry no settings (written by a vidcap-ko from before settings were recorded)"]
    changed = [f"{key} {old.get(key, '-')} -> {new.get(key, '-')}" for key in dict.fromkeys([*new, *old])
               if old.get(key) != new.get(key)]
    return changed or ["the prompt's instruction or the adapter's weights"]
