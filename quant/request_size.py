"""One request's size, counted from a model preset before anything loads: its `arch:` block, the clip's
frames and frame size, the video tokens the vision encoder sees and those the KV cache keeps
(`video.prune_rate`), and the tokens of the whole request (prompt text + video + caption).

quant/plan.py sizes memory and the model's context from it; quant/server_plan.py checks a request against
a running server's context with the same count.
"""

from __future__ import annotations

from dataclasses import dataclass

from quant.errors import PlanError
from quant.memory import frame_sizes_within, kept_video_tokens, video_text_tokens, vision_tokens
from quant.schema import ModelSchema, preset_values
from vidcap_ko.families import get_family

REQUIRED_ARCH = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "intermediate_size", "vocab_size")

# Tokens of a request's text: the Korean system prompt, the longest instruction and the chat template
# (caption/prompts.py) come to about 60 in the Qwen tokenizers; 80 leaves room for a family's extra
# markers. Only memory sizing reads it.
PROMPT_TEXT_TOKENS = 80


def check_model_keys(model: dict) -> None:
    """A model preset (conf/model/*.yaml, or one caption-make-model writes) sets every required key of
    quant/schema.py ModelSchema and may set the optional ones; anything else is a typo the planner would
    silently ignore. Its `arch:` block must hold the numbers the planner counts with."""
    model_arch(model)  # its own message: which architecture numbers to add
    preset_values(ModelSchema, "model", model)


def model_arch(model: dict) -> dict:
    """The preset's `arch:` block, holding every number in REQUIRED_ARCH (the checkpoint's config.json has them)."""
    arch = model.get("arch")
    if not arch:
        raise PlanError(f"model preset {model.get('name', '?')!r} has no `arch:` block (layers, heads, vision "
                        "sizes): add one to its conf/model yaml (docs/tiers.md lists the keys)")
    missing = [key for key in REQUIRED_ARCH if arch.get(key) is None]
    if missing:
        raise PlanError(f"`model.arch` of {model.get('name', '?')!r} lacks {', '.join(missing)}: copy them from "
                        "the checkpoint's config.json")
    return arch


def clip_size(video: dict | None, model: dict) -> tuple[int, int | None, int | None, int | None, int]:
    """(frames, width, height, max_pixels, multiple): an exact frame size, or (width and height None)
    a pixel budget per frame within which each clip keeps its aspect ratio (video_io/sizing.py)."""
    video = video or {}
    frames = video.get("frames") or video.get("num_frames") or model.get("frames")
    multiple = int(video.get("size_multiple") or get_family(str(model.get("family"))).size_multiple(model_arch(model)))
    width, height = video.get("width"), video.get("height")
    if frames and width and height:
        return int(frames), int(width), int(height), None, multiple
    budget = video.get("max_pixels") or model.get("frame_pixels")
    if not budget and model.get("frame_width") and model.get("frame_height"):
        budget = int(model["frame_width"]) * int(model["frame_height"])
    if not (frames and budget):
        raise PlanError("the clip size is unknown: set `video.num_frames` and `video.max_pixels` (or an exact "
                        "`video.width` and `video.height`; or model.frames / frame_pixels)")
    return int(frames), None, None, int(budget), multiple


def clip_vision_tokens(family: str, arch: dict, frames: int, width: int | None, height: int | None,
                       max_pixels: int | None, multiple: int) -> tuple[int, str | None]:
    """(video tokens per clip, note). With a budget instead of an exact size, each clip's frames
    keep its aspect ratio, so the size differs per clip: the count is the worst case over every
    size the budget allows (the processor may resize small frames up), and the note says so."""
    if width and height:
        return vision_tokens(family, arch, frames, width, height), None
    worst, size = 0, None
    for h, w in frame_sizes_within(multiple, max_pixels):
        tokens = vision_tokens(family, arch, frames, w, h)
        if tokens > worst:
            worst, size = tokens, (w, h)
    return worst, (f"video tokens per clip: {worst}, the worst case over frame sizes within {max_pixels} pixels "
                   f"in multiples of {multiple} (aspect ratio kept per clip; {size[0]}x{size[1]} frames)")



@dataclass
class Request:
    """One request's size: its tokens, its video tokens (kept, and all the vision encoder sees), the
    model's context, how the count was reached."""
    need: int
    video_tokens: int
    encoded_video_tokens: int
    prune_rate: float                   # video.prune_rate: the share of video tokens vLLM drops (0: none)
    context: int | None
    notes: list[str]



def request_size(model: dict, video: dict | None, family: str, arch: dict, engine: str, max_new_tokens: int,
                 prompt_text_tokens: int) -> Request:
    """A request's tokens: prompt text + the clip's video tokens (the worst case over the sizes a pixel
    budget allows) + the text the processor adds around them + the caption."""
    frames, width, height, max_pixels, multiple = clip_size(video, model)
    try:
        encoded, size_note = clip_vision_tokens(family, arch, frames, width, height, max_pixels, multiple)
    except ValueError as exc:
        raise PlanError(f"`video`: {exc}") from None
    notes = [size_note] if size_note else []
    rate = float((video or {}).get("prune_rate") or 0)
    video_tokens = _pruned(family, arch, frames, encoded, rate, engine, notes)
    need = prompt_text_tokens + video_tokens + video_text_tokens(family, arch, frames) + max_new_tokens
    return Request(need, video_tokens, encoded, rate, arch.get("max_position_embeddings"), notes)


def _pruned(family: str, arch: dict, frames: int, tokens: int, rate: float, engine: str, notes: list[str]) -> int:
    """The video tokens a request keeps at `video.prune_rate`: the KV cache and the context hold only
    those; the vision encoder still sees them all."""
    if not 0 <= rate < 1:
        raise PlanError(f"`video.prune_rate={rate:g}` must be in [0, 1): the share of video tokens dropped "
                        "(0: none)")
    if rate == 0:
        return tokens
    if engine != "vllm":
        raise PlanError(f"`video.prune_rate={rate:g}` runs on engine=vllm: transformers' generate has no video-token "
                        "pruning for these families; use engine=vllm (or auto), or video.prune_rate=0")
    groups = get_family(family).temporal_groups
    if groups is None:
        raise PlanError(f"`video.prune_rate={rate:g}`: vLLM 0.32 cannot prune {family}'s video tokens (EVS "
                        "runs in the Qwen2.5-VL and Qwen3-VL families only): set video.prune_rate=0")
    kept = kept_video_tokens(tokens, groups(arch, frames), rate)
    notes.append(f"video.prune_rate={rate:g}: {kept} of {tokens} video tokens kept per clip (vLLM's EVS keeps "
                 "the first frames' tokens and those that changed most)")
    return kept
