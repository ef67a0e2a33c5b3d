"""Build the embedded model's tokenizer, processor and (untrained) Qwen2.5-VL network.

The result is a folder that transformers (`AutoProcessor`, `AutoModelForImageTextToText`) and
vLLM load exactly like a real Qwen2.5-VL checkpoint: same architecture class, same tokenizer
class and special tokens, same processor classes, a ChatML chat template.

Used by scripts/training/train_toy.py; not imported by the pipeline.

    python -m scripts.training.toy_model /tmp/vidcap-ko-untrained   # an untrained folder, to inspect its layout
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from caption.prompts import INSTRUCTIONS_KO, SYSTEM_PROMPT_KO
from video_io.synth.attributes import draw_attributes
from video_io.synth.captions_ko import TASK_ANSWERS, detailed_references, reference_captions

# Qwen's special tokens, in Qwen's order (ids follow the learned vocabulary here).
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]

# A ChatML template written for this model (string or list content, image/video parts).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\\n" + SYSTEM_PROMPT_KO + "<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'video' -%}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

MODEL_DEFAULTS = {
    "text": dict(hidden_size=192, intermediate_size=512, num_hidden_layers=3, num_attention_heads=3,
                 num_key_value_heads=1, max_position_embeddings=1024, rms_norm_eps=1e-6),
    "vision": dict(depth=2, hidden_size=128, intermediate_size=256, num_heads=2, patch_size=14,
                   spatial_merge_size=2, temporal_patch_size=2, tokens_per_second=2, window_size=112,
                   fullatt_block_indexes=[1]),
    # pixels of one frame the processor keeps: 56x56 frames pass through unchanged
    "min_pixels": 56 * 56,
    "max_pixels": 56 * 56,
}


def caption_corpus(n_clips: int = 4000, seed: int = 12345) -> list[str]:
    """Text the tokenizer is trained on: every caption style (the detailed one, which the LoRA
    adapter learns, included), task answer and prompt text."""
    rng = np.random.default_rng(seed)
    texts = [SYSTEM_PROMPT_KO, *INSTRUCTIONS_KO.values()]
    for _ in range(n_clips):
        attributes = draw_attributes(rng)
        texts.extend(reference_captions(attributes, rng))
        texts.extend(detailed_references(attributes, rng))
        texts.extend(answer(attributes) for answer in TASK_ANSWERS.values())
    return texts


def build_tokenizer(corpus: list[str], vocab_size: int = 1024):
    """Byte-level BPE with Qwen2's normaliser and pre-tokeniser, wrapped as a Qwen2Tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(corpus, trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    vocab = dict(model["vocab"])
    for token in SPECIAL_TOKENS:
        vocab.setdefault(token, len(vocab))
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, errors="replace",
                               unk_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               extra_special_tokens=None)
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = MODEL_DEFAULTS["text"]["max_position_embeddings"]
    return tokenizer


def build_processor(tokenizer):
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    size = {"shortest_edge": MODEL_DEFAULTS["min_pixels"], "longest_edge": MODEL_DEFAULTS["max_pixels"]}
    vision = MODEL_DEFAULTS["vision"]
    common = dict(size=size, patch_size=vision["patch_size"], merge_size=vision["spatial_merge_size"],
                  temporal_patch_size=vision["temporal_patch_size"])
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**common),
        video_processor=Qwen2VLVideoProcessor(**common, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )


def build_model(tokenizer, seed: int = 0):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    text = dict(MODEL_DEFAULTS["text"])
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    # M-RoPE splits head_dim/2 rotary frequencies over (time, height, width)
    section = [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16]
    assert sum(section) == head_dim // 2, section
    vocab_size = int(np.ceil(len(tokenizer) / 64) * 64)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text.update(vocab_size=vocab_size, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                         "mrope_section": section},
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"], tie_word_embeddings=True)
    vision = dict(MODEL_DEFAULTS["vision"], out_hidden_size=text["hidden_size"])
    config = Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=True,
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = ids["<|endoftext|>"]
    model.generation_config.do_sample = False
    return model


def save_model_folder(folder: Path, model, processor) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


if __name__ == "__main__":  # build an untrained folder, for inspecting the layout
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/vidcap-ko-untrained")
    tok = build_tokenizer(caption_corpus())
    save_model_folder(out, build_model(tok), build_processor(tok))
    print(f"untrained model written to {out}; vocab {len(tok)}")
