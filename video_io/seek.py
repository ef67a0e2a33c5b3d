"""Which frames of a clip its samples take: the seek modes (DecodeSpec.seek; a record's `seek`).

"exact" decodes the frame nearest each sampled time (the centre of its segment: video_io/sampling.py
cuts the clip in equal time segments, one frame each), starting from the keyframe before it.
"keyframe" takes the keyframe nearest each sampled time instead (one frame decoded per sample,
nothing else). "auto" (the default) takes from each segment the frame cheapest to decode: the
segment's keyframe nearest the sampled time when it has one, else the segment's first frame (decoded
from the keyframe before it up to the segment, not to its centre), and spreads neighbours closer than
a quarter of a segment (spread_neighbours). Every frame then stays in its own segment, in order, at
most half a segment from the exact sample. A record's `seek` says "keyframe" (all were keyframes),
"nearby" (some were not) or "exact" (a segment held no frame of its own: more samples than frames).

Only frame times and keyframe indices come in: video_io/decode.py reads them from the file (PyAV's
packet index, or decord's) and decodes what comes out.
"""

from __future__ import annotations

import numpy as np

from video_io.sampling import TIE_S, SamplingSpec, sample_indices, segment_edges

SEEK_MODES = ("auto", "keyframe", "exact")


def pick_frames(times: np.ndarray, key_indices: list[int], sampling: SamplingSpec, window: tuple[float, float] | None,
                seek: str) -> tuple[list[int], str, str | None]:
    """(indices, seek mode used, note) for frames starting at `times` whose keyframes are `key_indices`:
    `sampling`'s frames, in `window` (seconds of the file) when given, the way `seek` says."""
    span = frame_span(times)
    exact = sample_indices(times, span, sampling, window)
    if seek == "exact" or not key_indices or len(times) < 2:
        return exact, "exact", None
    keys = np.asarray(sorted(key_indices))
    if window is not None:  # another shot's keyframe is not this segment's frame
        keys = keys[(times[keys] >= window[0] - TIE_S) & (times[keys] < window[1])]
        if not len(keys):
            return exact, "exact", None
    spacing = (window[1] - window[0] if window else span) / max(1, len(exact))
    if seek == "auto":
        edges = segment_edges(times, span, sampling, window)
        picked = _in_segments(times, keys, exact, edges)
        if picked is None:
            return exact, "exact", None
        picked = spread_neighbours(times, keys, picked, edges)
    else:
        picked = _nearest_keyframes(times, keys, exact)
    off = float(np.max(np.abs(times[picked] - times[exact])))
    key_set = set(keys.tolist())
    if set(picked) <= key_set:
        return picked, "keyframe", (f"keyframe seek: the nearest keyframe to each sampled time (at most "
                                    f"{off:.3f} s from it; samples {spacing:.3f} s apart)")
    found = sum(i in key_set for i in picked)
    return picked, "nearby", (f"nearby seek: {found} of {len(picked)} frames are keyframes, the others near "
                              f"their segment's start, decoded on from the keyframe before them (at most "
                              f"{off:.3f} s from the exact sample; samples {spacing:.3f} s apart)")


def _nearest_keyframes(times: np.ndarray, keys: np.ndarray, exact: list[int]) -> list[int]:
    """The keyframe nearest each exact sample (ties: the earlier)."""
    if len(keys) == 1:
        return [int(keys[0])] * len(exact)
    key_times, targets = times[keys], times[exact]
    right = np.clip(np.searchsorted(key_times, targets), 1, len(keys) - 1)
    left = right - 1
    nearer_left = targets - key_times[left] <= key_times[right] - targets + TIE_S
    return [int(i) for i in np.where(nearer_left, keys[left], keys[right])]


def _in_segments(times: np.ndarray, keys: np.ndarray, exact: list[int], edges: np.ndarray) -> list[int] | None:
    """seek=auto: one frame from each sampling segment (the exact sample is its centre), the cheapest to
    decode: the keyframe of the segment nearest the exact sample (one packet), else the segment's first
    frame (decoded from the keyframe before it, up to the segment only). None when a segment holds no
    frame of its own (more samples than frames): the exact frames are the only choice then."""
    picked: list[int] = []
    for segment, target in enumerate(exact):
        first = int(np.searchsorted(times, edges[segment] - TIE_S))
        end = int(np.searchsorted(times, edges[segment + 1] - TIE_S))  # the next segment's first frame
        inside = keys[(keys >= first) & (keys < end)]
        if len(inside):
            off = np.abs(times[inside] - times[target])
            choice = int(inside[np.argmax(off <= off.min() + TIE_S)])  # ties: the earlier
        else:
            choice = first
        if first >= end or (picked and choice <= picked[-1]):
            return None
        picked.append(choice)
    return picked


MIN_GAP = 0.25  # seek=auto: neighbouring frames at least this fraction of the segment width apart


def spread_neighbours(times: np.ndarray, keys: np.ndarray, picked: list[int], edges: np.ndarray) -> list[int]:
    """seek=auto's picks, with no two neighbours closer than MIN_GAP x the segment width.

    The cheapest frame of each segment crowds its neighbour where a segment's keyframe sits at its end
    and the next segment has none (that one's first frame comes right after: frames 187 and 188 of a
    phone clip). A crowded pair is spread, cheapest first: another keyframe of either segment (one packet,
    as the one it replaces), else a later frame of the second segment (decoded on from the keyframe
    before it: a few frames more, only for this pair). Every frame stays in its own segment."""
    gap = MIN_GAP * float(edges[1] - edges[0])
    picked = list(picked)

    def clear(i: int, frame: int) -> bool:  # frame, as segment i's pick, keeps its distance from both neighbours
        return ((i == 0 or times[frame] - times[picked[i - 1]] >= gap - TIE_S)
                and (i == len(picked) - 1 or times[picked[i + 1]] - times[frame] >= gap - TIE_S))

    def segment(i: int) -> tuple[int, int]:
        return int(np.searchsorted(times, edges[i] - TIE_S)), int(np.searchsorted(times, edges[i + 1] - TIE_S))

    for i in range(1, len(picked)):
        if times[picked[i]] - times[picked[i - 1]] >= gap - TIE_S:
            continue
        centre = [(edges[j] + edges[j + 1]) / 2 for j in (i - 1, i)]
        options = [(abs(times[k] - centre[j - i + 1]), j, int(k)) for j in (i - 1, i)
                   for k in keys[(keys >= segment(j)[0]) & (keys < segment(j)[1])] if k != picked[j]]
        fits = sorted(o for o in options if clear(o[1], o[2]))
        if fits:
            _, j, frame = fits[0]
            picked[j] = frame
            continue
        first, end = segment(i)
        later = int(np.searchsorted(times, times[picked[i - 1]] + gap - TIE_S))
        if first <= later < end and clear(i, later):
            picked[i] = later
    return picked


def frame_span(times: np.ndarray) -> float:
    """Start of the first frame to the end of the last (one typical frame step after its start)."""
    if len(times) < 2:
        return 0.0
    return float(times[-1] - times[0] + np.median(np.diff(times)))
