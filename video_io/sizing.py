"""Frame sizes that keep a clip's aspect ratio: both sides multiples of a step, the area within a
pixel budget, as Qwen2/2.5-VL's processors size frames (transformers 5.19,
models/qwen2_vl/video_processing_qwen2_vl.py and image_processing_qwen2_vl.py `smart_resize`).

Frames sized here already satisfy the model's processor, so it does not resize them again, and a
16:9 clip reaches the model as 16:9 instead of squashed to a square.
"""

from __future__ import annotations

import math

# An image this much wider than tall (or taller than wide) has no sensible patch grid; transformers
# refuses the same ratio.
MAX_ASPECT = 200


def fit_size(height: int, width: int, multiple: int, max_pixels: int,
             min_pixels: int | None = None) -> tuple[int, int]:
    """(height, width) for a `height` x `width` frame: sides multiples of `multiple`, area at most
    `max_pixels` and at least `min_pixels` (default one multiple x multiple block), the aspect
    ratio kept as closely as that grid allows. Same arithmetic as transformers' smart_resize, except
    that the budget always holds (smart_resize exceeds it for extreme panoramas)."""
    if height < 1 or width < 1:
        raise ValueError(f"a frame needs sides >= 1 px, got {width}x{height}")
    if multiple < 1:
        raise ValueError(f"the size multiple must be >= 1, got {multiple}")
    min_pixels = multiple * multiple if min_pixels is None else min_pixels
    if max_pixels < min_pixels:
        raise ValueError(f"the pixel budget ({max_pixels}) is below the smallest frame ({min_pixels} px: "
                         f"{multiple}x{multiple}); raise model.frame_pixels")
    if max(height, width) / min(height, width) > MAX_ASPECT:
        raise ValueError(f"a {width}x{height} frame is more than {MAX_ASPECT} times wider than tall (or "
                         f"taller than wide): no patch grid fits it")
    h_bar = round(height / multiple) * multiple
    w_bar = round(width / multiple) * multiple
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(multiple, math.floor(height / beta / multiple) * multiple)
        w_bar = max(multiple, math.floor(width / beta / multiple) * multiple)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / multiple) * multiple
        w_bar = math.ceil(width * beta / multiple) * multiple
    if h_bar * w_bar > max_pixels:  # smart_resize keeps one block on the short side even when the long
        # side then breaks the budget (a 100x4000 panorama at 3136 px gives 28x336): cut the long side
        if h_bar <= w_bar:
            w_bar = max(multiple, max_pixels // h_bar // multiple * multiple)
        else:
            h_bar = max(multiple, max_pixels // w_bar // multiple * multiple)
    return h_bar, w_bar
