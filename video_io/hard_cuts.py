"""Hard cuts frame by frame: where one decoded frame differs from the one before far more than the
frames around it differ from each other, and the new picture stays.

video_io/scenes.py finds changes between frames a second apart; two hard cuts less than a second
apart (a run of short shots) make one bump of that signal, and a cut between two similar pictures
makes a small one. This rule looks at consecutive frames only (as PySceneDetect's content detector
and FFmpeg's scdet do). On reels edited from real footage (caption-bench scenes-real) a cut steps
9-54 levels, at least 2.2x the steps just before and after it and 3.7x the median step on its calmer
side; a car crossing the frame, a fast pan or a character rising steps up to 11, at most 1.5x the
steps next to it.
"""

from __future__ import annotations

import numpy as np

RATIO = 3.0  # a cut's step over the median step on the calmer side of it (NEIGHBOURS_S each way)
NEIGHBOURS_S = 0.5
ADJACENT = 2.0  # a cut's step over the larger of the steps just before and after it
FLOOR = 1.0  # levels: the least a step is compared with (a still picture steps ~0)
STAYS = 0.5  # the new picture, AFTER_S later, still differs from the old by this share of the step
AFTER_S = 0.2


def hard_cut_frames(times: np.ndarray, step: np.ndarray, min_step: float, distance) -> list[int]:
    """Indices of the frames that start a new shot: step[i] (frame i's difference from frame i - 1)
    at least `min_step`, ADJACENT times the steps next to it and RATIO times the median step on the
    calmer side of it (a cut into a busy shot still has a calm one before it), the picture AFTER_S
    later still differing from frame i - 1 (a flash or a one-frame glitch returns to it).
    `distance(i, j)`: the thumbnail difference of frames i and j (arrays of indices)."""
    kept = []
    for i in np.flatnonzero(step >= min_step):
        if i < 1:
            continue
        a = np.searchsorted(times, times[i] - NEIGHBOURS_S, side="left")
        b = np.searchsorted(times, times[i] + NEIGHBOURS_S, side="right")
        sides = [float(np.median(x)) for x in (step[a:i], step[i + 1:b]) if len(x)]
        adjacent = max(float(step[i - 1]), float(step[i + 1]) if i + 1 < len(step) else 0.0)
        if step[i] >= ADJACENT * max(FLOOR, adjacent) and step[i] >= RATIO * max(FLOOR, min(sides or [0.0])):
            kept.append(int(i))
    if not kept:
        return []
    kept = np.asarray(kept)
    after = np.minimum(np.searchsorted(times, times[kept] + AFTER_S), len(times) - 1)
    stays = distance(after, kept - 1) >= STAYS * step[kept]
    return [int(i) for i in kept[stays]]
