"""The llm-compressor side of caption-quantize; runs in .venv-quant only (see quant/quantize.py)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from vidcap_ko.families import family_of_checkpoint

# processor and tokenizer files copied unchanged next to the quantized weights
SIDE_FILES = ("chat_template.jinja", "processor_config.json", "preprocessor_config.json",
              "video_preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json")


def _cpu_safe_pin_memory() -> None:
    """llm-compressor's AWQ pins host memory, which raises "Cannot access accelerator device" on a
    machine without one (the AWQ copy in assets/models/ was made on such a machine); pinning only matters
    for GPU copies, so skip it there."""
    import torch

    if not torch.cuda.is_available():
        torch.Tensor.pin_memory = lambda self, *args, **kwargs: self


def _recipe(method: str, group_size: int, vision_modules: tuple[str, ...]):
    weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": group_size,
               "symmetric": method == "gptq"}  # AWQ's scales come with zero points (asymmetric)
    groups = {"group_0": {"targets": ["Linear"], "weights": weights}}
    # the vision tower stays 16-bit, as in Qwen's AWQ releases (modules_to_not_convert: ["visual"])
    ignore = ["lm_head", *(f"re:.*{module}.*" for module in vision_modules)]
    if method == "gptq":
        from llmcompressor.modifiers.quantization import GPTQModifier

        return GPTQModifier(config_groups=groups, ignore=ignore)
    from llmcompressor.modifiers.awq import AWQModifier

    return AWQModifier(config_groups=groups, ignore=ignore)


def quantize(model_dir: Path, method: str, texts: list[str], out: Path, group_size: int, instruction: str) -> None:
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    _cpu_safe_pin_memory()
    torch.manual_seed(0)
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    chats = [tokenizer.apply_chat_template([{"role": "user", "content": instruction},
                                            {"role": "assistant", "content": text}], tokenize=False)
             for text in texts]
    encoded = tokenizer(chats, add_special_tokens=False)
    dataset = Dataset.from_dict({"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]})
    oneshot(model=model, processor=tokenizer, dataset=dataset, recipe=_recipe(method, group_size, family_of_checkpoint(model_dir).vision_modules),
            num_calibration_samples=len(texts), max_seq_length=max(map(len, encoded["input_ids"])),
            shuffle_calibration_samples=False, pipeline="basic")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, save_compressed=True)
    for name in SIDE_FILES:
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, out / name)
    log = {"base": str(model_dir), "method": method, "scheme": "W4A16", "group_size": group_size,
           "calibration_captions": len(texts), "instruction": instruction,
           "minutes": round((time.perf_counter() - started) / 60, 2)}
    (out / "quantization_log.json").write_text(json.dumps(log, indent=2, ensure_ascii=False) + "\n")
    print(f"{method} W4A16 (group {group_size}) checkpoint written to {out}")
