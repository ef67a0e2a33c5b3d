"""Random-weight checkpoints of real model families and shapes, made on demand, without any hub.

`caption-make-model --family qwen2_5_vl --shape cpu --out DIR` writes a folder that transformers
and vLLM load exactly like a downloaded release of that family: config.json, safetensors weights
(with the key names of the real releases), tokenizer, processor configs and chat template. The
weights are random but deterministic (same family, shape, seed and dtype: byte-identical files),
scaled by fan-in so that greedy outputs vary from token to token.

Shapes: `tiny` and `cpu` are defined by each family (vidcap_ko/families/<family>.py); every other shape takes the
architecture numbers of a preset in conf/model/ (`<family>_<shape>.yaml`, its `arch:` block).
"""

from caption.make_model.common import FAMILY_NAMES, MakeModelError, build_config, make_checkpoint, shapes

__all__ = ["FAMILY_NAMES", "MakeModelError", "build_config", "make_checkpoint", "shapes"]
