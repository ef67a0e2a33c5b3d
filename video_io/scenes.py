"""Shots of a long video: where one shot gives way to the next (hard cuts, dissolves, fades through
black). The segments a caption is written for are video_io/coverage.py's.

    scan = detect_scenes("walk.mp4")                # decodes the video once
    scan.cuts                                       # [Cut(time_s, kind, start_s, end_s, score, blend)]

The detector decodes with PyAV and reads each frame's planes in place: a small thumbnail of block
means (luma and both chroma planes, about 24 cells on the short side) from a sparse grid of pixels:
with the comparisons, up to a tenth on top of decoding a 1080p frame (caption-bench scenes). At 20 fps
and more, frames no other frame refers to (most B-frames) are not decoded at all: the thumbnails of
the others still come every few hundredths of a second, and the whole costs less than decoding every
frame (0.75-0.89x on one core).

Two differences between thumbnails find the cuts: `change`, the mean absolute difference between a
frame and the one `window_s` (1 s) before it, is as large as the two shots differ wherever the window
spans a transition, however gradual, and small inside a shot (an object or a camera moving changes
little of a 1-s-apart pair, and each difference is the least over shifts of up to a cell, so a shaking
or stepping camera does not count); `step`, the difference between consecutive decoded frames, places
a hard cut on its frame. Where `change` rises by `threshold` (levels of 0-255) above what the shots on
either side show by themselves, a transition lies in the middle of that stretch (for a dissolve of any
length, the stretch is symmetric about its middle); when one step makes up most of the change it is a
hard cut, else a gradual one (dissolve or fade), whose span is where consecutive frames keep changing.
Three checks then drop what real footage showed to pass that rule without a change of shot
(_is_transition): a hard cut whose one step is small (a flicker), a gradual one whose middle frame
is no blend of the frames around it (a camera swinging across the scene), and a gradual one whose two
sides hold the same content, moved (_sides_differ: a character rising and filling the frame changes
within a second as much as a dissolve, and smoothly, yet the picture keeps its levels); a fade is
told by its black frame. Hard cuts themselves come from a frame-by-frame rule (video_io/hard_cuts.py):
on reels edited from real footage (caption-bench scenes-real) two cuts less than a second apart, or a
cut between similar pictures, make one small bump of `change`, and a car crossing the frame makes a
large step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from video_io.hard_cuts import hard_cut_frames
from video_io.scene_thumbnails import Thumbnails, read_thumbnails

DEFAULT_THRESHOLD = 4.0  # mean absolute thumbnail difference (0-255 levels) 1 s apart that counts as a cut
DEFAULT_WINDOW_S = 1.0
SHIFT = 1  # cells a thumbnail may move between two frames without counting as a change
CHROMA_WEIGHT = 2.0  # chroma differences are smaller than luma ones for the same change of colour
MIN_HARD_STEP = 2.0  # x threshold: the one step of a hard cut (_is_transition)
BLACK_LUMA = 32  # a thumbnail whose luma cells are all at most this is black (limited range: black is 16)
MAX_BLEND_RESIDUAL = 0.35  # of the change across it: a gradual transition's middle is a blend (_is_transition)
AROUND_S = 0.25  # s outside a gradual transition's span where its two sides are read (_is_transition)
SIDE_S = 0.25  # s of each side averaged where the content either side of it is compared (_sides_differ)
SAME_LEVELS_MEDIAN = 2.5  # x threshold: the median cell change telling same-levels pictures apart (_sides_differ)
MIN_SHOT_S = 0.15  # two hard cuts closer than this are one (a cut spread over two frames)


@dataclass(frozen=True)
class Cut:
    """Where one shot gives way to the next. `time_s`: the first frame of the new shot (hard cut) or
    the middle of a gradual transition; `start_s`/`end_s`: the span over which the picture changes
    (equal to time_s for a hard cut); `score`: how much the picture changed (0-255 levels); `blend`:
    for a gradual one, what its middle frame is a mix of ("dissolve": the two shots, "fade": a shot
    and black)."""

    time_s: float
    kind: str  # "hard" | "gradual"
    start_s: float
    end_s: float
    score: float
    blend: str = ""


@dataclass(frozen=True)
class Segment:
    """A stretch of a video to caption; `shots`: the indices of the shots it spans, where known
    (video_io/coverage.py), left out of comparisons."""

    start_s: float
    end_s: float
    shots: tuple[int, ...] = field(default=(), compare=False)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class SceneScan:
    """What detect_scenes found: the video's duration, its cuts, and how many frames it decoded."""

    duration_s: float
    cuts: list[Cut]
    frames_decoded: int


# --- the rule --------------------------------------------------------------------------------------

def _distance(features: np.ndarray, i: np.ndarray, j: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """_pair_distance of thumbnails i and j, a chunk of pairs at a time (bounded memory on long videos)."""
    out = np.empty(len(i), np.float32)
    weights = np.array([1.0, CHROMA_WEIGHT, CHROMA_WEIGHT], np.float32)[:, None, None]
    for k in range(0, len(i), chunk):
        a = features[i[k:k + chunk]].astype(np.float32) * weights
        b = features[j[k:k + chunk]].astype(np.float32) * weights
        out[k:k + chunk] = _pair_distance(a, b)
    return out


def _pair_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean absolute difference of thumbnails (..., 3, rows, cols), the least over shifts of up to
    SHIFT cells: a camera that shakes or pans a little moves the picture, a cut replaces it."""
    rows, cols = a.shape[-2:]
    best = None
    for dy in range(-SHIFT, SHIFT + 1):
        for dx in range(-SHIFT, SHIFT + 1):
            ys, yd = slice(max(dy, 0), rows + min(dy, 0)), slice(max(-dy, 0), rows + min(-dy, 0))
            xs, xd = slice(max(dx, 0), cols + min(dx, 0)), slice(max(-dx, 0), cols + min(-dx, 0))
            d = np.abs(a[..., ys, xs] - b[..., yd, xd]).mean(axis=(-3, -2, -1))
            best = d if best is None else np.minimum(best, d)
    return best


def _shots_floor(values: np.ndarray, times: np.ndarray, gap_s: float, reach_s: float, q: float = 25) -> np.ndarray:
    """The motion of the shots on either side of each time: the q-th percentile of `values` over
    [t - reach_s, t - gap_s] and over [t + gap_s, t + reach_s], the larger of the two (a change
    counts as a cut only beyond what the busier shot does by itself); one side near the ends."""
    out = np.empty(len(times))
    bounds = [np.searchsorted(times, times + d, side=side) for d, side in
              ((-reach_s, "left"), (-gap_s, "right"), (gap_s, "left"), (reach_s, "right"))]
    everywhere = float(np.percentile(values, q))
    for i, (a, b, c, d) in enumerate(zip(*bounds)):
        sides = [float(np.percentile(values[x:y], q)) for x, y in ((a, b), (c, d)) if y > x]
        out[i] = max(sides) if sides else everywhere
    return out


def find_cuts(thumbs: Thumbnails, threshold: float = DEFAULT_THRESHOLD,
              window_s: float = DEFAULT_WINDOW_S) -> list[Cut]:
    """The cuts in a video's thumbnails (see the module's docstring for the rule)."""
    t, f = thumbs.times, thumbs.features
    if len(t) < 3:
        return []
    lag = np.maximum(np.searchsorted(t, t - window_s, side="right") - 1, 0)  # the frame window_s before
    valid = t - t[lag] >= window_s * 0.75  # the first second has no frame a window before it
    centre = (t + t[lag]) / 2
    index = np.arange(len(t))
    change = np.where(valid, _distance(f, index, lag), 0.0)
    step = np.concatenate([[0.0], _distance(f, index[1:], index[:-1])])
    floor = _shots_floor(change[valid], centre[valid], window_s, 4 * window_s) if valid.any() else np.array([])
    excess = np.zeros(len(t))
    excess[valid] = change[valid] - floor
    cuts = []
    for a, b in _runs(excess >= threshold):
        cut = _classify(t, centre, excess, step, a, b, window_s)
        cuts.append(cut)
        if cut.kind == "hard":  # what of the run the hard cut does not explain: another change close by
            rest = np.zeros(len(t), bool)
            rest[a:b] = ~((t[lag[a:b]] < cut.time_s) & (cut.time_s <= t[a:b]))
            quiet = np.where(t == cut.time_s, 0.0, step)  # its step is not the other change's
            cuts += [_classify(t, centre, excess, quiet, x, y, window_s) for x, y in _runs(rest)]
    frames = hard_cut_frames(t, step, MIN_HARD_STEP * threshold, lambda i, j: _distance(f, i, j))
    hard = [Cut(float(t[i]), "hard", float(t[i]), float(t[i]), round(float(step[i]), 2)) for i in frames]
    shots_s = t[np.asarray(frames, int)]  # where a shot starts: a gradual transition's sides stop there
    checked = [_is_transition(c, thumbs, step, threshold, shots_s) for c in cuts]
    # a hard cut is one the frame rule finds: a step the window rule took for one is a gradual
    # transition if its middle is a blend (a fast fade's first frame out of black), else large
    # motion inside a shot (a car crossing the frame), however large
    gradual = [c for c in checked if c is not None and c.kind == "gradual"]
    for c in checked:
        if c is not None and c.kind == "hard" and not any(abs(h.time_s - c.time_s) < MIN_SHOT_S for h in hard):
            start, end = _span(t, step, c.time_s, window_s)
            blended = _is_transition(Cut(c.time_s, "gradual", start, end, c.score), thumbs, step, threshold, shots_s)
            gradual += [blended] if blended is not None else []
    return _merge(gradual + hard, window_s)


def _is_transition(cut: Cut, thumbs: Thumbnails, step: np.ndarray, threshold: float,
                   shots_s: np.ndarray | None = None) -> Cut | None:
    """Changes that pass the rule yet are no change of shot, seen in hand-held real footage
    (caption-bench scenes-real): a 'hard cut' whose one step is small (a flicker, a compression
    pulse: true cuts step 17-56 levels there and in the synthetic sets, these 4-6), a 'gradual'
    one whose middle frame is no blend of the frames around it (a camera swinging across the scene
    within a second: its middle is another view, 0.44-0.64 of the way apart against at most 0.22
    for dissolves and fades), and a 'gradual' one whose two sides hold the same content
    (_sides_differ; `shots_s`: the hard cuts' times, where a side stops). A fade through black is
    kept by its black frame. The cut kept (a gradual one saying what it blends), or None."""
    t = thumbs.times
    if cut.kind == "hard":
        return cut if float(step[int(np.argmin(np.abs(t - cut.time_s)))]) >= MIN_HARD_STEP * threshold else None
    if _through_black(cut, thumbs, threshold):
        return replace(cut, blend="fade")
    weights = np.array([1.0, CHROMA_WEIGHT, CHROMA_WEIGHT], np.float32)[:, None, None]
    frame = [thumbs.features[min(len(t) - 1, max(0, int(np.searchsorted(t, x))))].astype(np.float32) * weights
             for x in (cut.start_s - AROUND_S, cut.time_s, cut.end_s + AROUND_S)]
    before, middle, after = frame
    black = np.array([16.0, 128.0, 128.0], np.float32)[:, None, None] * weights  # limited-range YUV black
    mixes = {"dissolve": (before, after), "fade": (before, black), "fade in": (after, black)}
    residual, blend = min((float(np.abs(middle - (a * (1 - k) + b * k)).mean()), name)
                          for name, (a, b) in mixes.items() for k in np.linspace(0.0, 1.0, 21))
    if residual > MAX_BLEND_RESIDUAL * float(np.abs(before - after).mean()):
        return None
    if not _sides_differ(cut, thumbs, threshold, shots_s):
        return None
    return replace(cut, blend="fade" if blend.startswith("fade") else "dissolve")


def _sides_differ(cut: Cut, thumbs: Thumbnails, threshold: float, shots_s: np.ndarray | None = None) -> bool:
    """Whether the content on either side of a gradual transition differs as a change of shot's does.
    Its sides: the mean thumbnail of the SIDE_S before its span (from AROUND_S out, not back past the
    hard cut, of `shots_s`, that starts that shot) and of the SIDE_S after it (not up to the next hard
    cut). They differ when their levels do (_content_distance at least `threshold`: another shot
    brings other levels, motion inside one shot moves them about), or, with the same levels, when most
    of the picture changed (the median cell, _cell_distance, by SAME_LEVELS_MEDIAN x `threshold`).

    On reels edited from real footage, Big Buck Bunny's character crawling out and rising changes by
    9-10 levels a second apart (4-7 beyond the shots beside it where they move less) and smoothly (its
    middle is a blend of its sides), yet its sides' levels are 3.4-3.6 apart and its median cell 6.7-7.1
    (a hand-held swing's: 2.7 and 1.9). Dissolves and fades without a black frame: levels 9.3 or more
    apart on reels of different scenes (13.8 or more on caption-bench scenes-real's sets, 303 and 404),
    6.2 or more on the synthetic sets (caption-synth-long); between similar pictures (the same footage
    mirrored, two shots of one scene) 0.7-3.1, but their median cell 13.3-38.5 (hence 2.5 x 4, between)."""
    t = thumbs.times
    shots = np.asarray([] if shots_s is None else shots_s, np.float64)
    start, end = cut.start_s - AROUND_S, cut.end_s + AROUND_S
    first = float(shots[shots <= start].max(initial=-np.inf))  # the shot before the transition starts here
    last = float(shots[shots > end].min(initial=np.inf))  # the shot after it ends here
    weights = np.array([1.0, CHROMA_WEIGHT, CHROMA_WEIGHT], np.float32)[:, None, None]
    sides = []
    for inside, edge in (((t >= max(start - SIDE_S, first)) & (t <= start), start),
                         ((t >= end) & (t <= end + SIDE_S) & (t < last), end)):
        pick = np.flatnonzero(inside)
        if not len(pick):  # a side shorter than the gap between two frames: the frame at its edge
            pick = np.array([min(len(t) - 1, max(0, int(np.searchsorted(t, edge))))])
        sides.append(thumbs.features[pick].astype(np.float32).mean(axis=0) * weights)
    return _content_distance(*sides) >= threshold or _cell_distance(*sides) >= SAME_LEVELS_MEDIAN * threshold


def _content_distance(a: np.ndarray, b: np.ndarray) -> float:
    """How far apart the levels of two thumbnails (3, rows, cols) are, wherever in the frame they lie:
    the mean absolute difference of their cells sorted plane by plane (the earth mover's distance
    between their histograms), the least mean absolute difference over any rearrangement of the
    cells. Content that moves keeps its levels (only what it covers or uncovers changes them);
    another shot brings its own, unless it is a similar picture (_cell_distance tells those)."""
    planes = len(a)
    return float(np.abs(np.sort(a.reshape(planes, -1), axis=1) - np.sort(b.reshape(planes, -1), axis=1)).mean())


def _cell_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The median cell's absolute difference (over the planes) of two thumbnails (3, rows, cols), the
    least over shifts of up to SHIFT cells, as _pair_distance: one object moving changes the cells it
    crosses, a picture replaced by another changes most of them."""
    rows, cols = a.shape[-2:]
    best = np.inf
    for dy in range(-SHIFT, SHIFT + 1):
        for dx in range(-SHIFT, SHIFT + 1):
            ys, yd = slice(max(dy, 0), rows + min(dy, 0)), slice(max(-dy, 0), rows + min(-dy, 0))
            xs, xd = slice(max(dx, 0), cols + min(dx, 0)), slice(max(-dx, 0), cols + min(-dx, 0))
            best = min(best, float(np.median(np.abs(a[:, ys, xs] - b[:, yd, xd]).mean(axis=0))))
    return best


def _through_black(cut: Cut, thumbs: Thumbnails, threshold: float) -> bool:
    """A fade through black: a frame of the span is black (every luma cell at most BLACK_LUMA) between
    pictures that are not. A fade next to a moving shot fails the blend test (its span runs into the
    motion, caption-bench scenes-real), not this one."""
    t = thumbs.times
    lo, hi = np.searchsorted(t, cut.start_s - AROUND_S), np.searchsorted(t, cut.end_s + AROUND_S, side="right")
    luma = thumbs.features[lo:hi, 0].reshape(hi - lo, -1)
    if not len(luma) or int(luma.max(axis=1).min()) > BLACK_LUMA:
        return False
    around = [thumbs.features[max(0, lo - 1), 0], thumbs.features[min(len(t) - 1, hi), 0]]
    return all(float(a.mean()) >= BLACK_LUMA + 2 * threshold for a in around)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[a, b) index ranges where mask holds."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2], edges[1::2]))


def _classify(t, centre, excess, step, a: int, b: int, window_s: float) -> Cut:
    """One run [a, b) of large change: a hard cut where one step makes most of it, else gradual."""
    peak = float(excess[a:b].max())
    weights = np.clip(excess[a:b] - peak / 2, 0, None)  # the top half of the (symmetric) bump
    middle = float((centre[a:b] * weights).sum() / weights.sum()) if weights.sum() > 0 else float(centre[a:b].mean())
    near = (t >= middle - window_s) & (t <= middle + window_s)
    idx = np.flatnonzero(near)
    best = int(idx[np.argmax(step[idx])]) if len(idx) else a
    # a hard cut: one step, beyond the shots' frame-to-frame motion, makes at least half the change
    if len(idx) and step[best] - float(np.median(step[idx])) >= 0.5 * peak:
        return Cut(float(t[best]), "hard", float(t[best]), float(t[best]), round(peak, 2))
    start, end = _span(t, step, middle, window_s)
    return Cut(round(middle, 4), "gradual", start, end, round(peak, 2))


def _span(t: np.ndarray, step: np.ndarray, middle: float, window_s: float) -> tuple[float, float]:
    """Around `middle`, the stretch where consecutive frames keep changing more than the shots do."""
    around = np.flatnonzero(np.abs(t - middle) <= 4 * window_s)
    base = float(np.percentile(step[around], 25)) if len(around) else 0.0
    inner = np.flatnonzero(np.abs(t - middle) <= 1.5 * window_s)
    if not len(inner):
        return middle, middle
    lift = step[inner] - base
    busy = lift >= 0.25 * max(float(lift.max()), 1e-6)
    i = int(inner[np.argmin(np.abs(t[inner] - middle))])
    lo = hi = i
    while lo - 1 >= inner[0] and busy[lo - 1 - inner[0]]:
        lo -= 1
    while hi + 1 <= inner[-1] and busy[hi + 1 - inner[0]]:
        hi += 1
    return float(t[lo]), float(t[hi])  # step i is frame i's change from frame i - 1


def _merge(cuts: list[Cut], gap_s: float) -> list[Cut]:
    """Of cuts closer than gap_s, the stronger (a fade through black can rise twice), unless they are
    _apart (a shot shorter than gap_s between them)."""
    kept: list[Cut] = []
    for cut in sorted(cuts, key=lambda c: (c.time_s, c.kind != "hard")):
        last = kept[-1] if kept else None
        if last is None or cut.time_s - last.time_s >= gap_s:
            kept.append(cut)
        elif _apart(last, cut):
            kept.append(cut)
        elif cut.score > last.score:
            kept[-1] = cut
    return kept


def _apart(a: Cut, b: Cut) -> bool:
    """Two changes of shot, not one seen twice: hard cuts MIN_SHOT_S apart or more, or a hard cut
    outside a gradual transition's span (a short shot between them)."""
    if a.kind == "hard" and b.kind == "hard":
        return abs(b.time_s - a.time_s) >= MIN_SHOT_S
    if a.kind == b.kind:
        return False
    hard, gradual = (a, b) if a.kind == "hard" else (b, a)
    return not gradual.start_s - MIN_SHOT_S <= hard.time_s <= gradual.end_s + MIN_SHOT_S


def detect_scenes(path: str, threshold: float = DEFAULT_THRESHOLD, window_s: float = DEFAULT_WINDOW_S,
                  threads: int = 0, skip: str = "auto", progress: Callable[[], None] | None = None) -> SceneScan:
    """Decode `path` once and find its cuts. `threshold`: how far (mean absolute difference of the
    thumbnails, 0-255 levels) frames `window_s` apart must differ beyond the shot's own motion to
    count as a cut; lower finds subtler cuts and more false ones. Raises DecodeError."""
    thumbs = read_thumbnails(path, threads, skip, progress)
    return SceneScan(thumbs.duration_s, find_cuts(thumbs, threshold, window_s), len(thumbs.times))


def detect_cuts(path: str, threshold: float = DEFAULT_THRESHOLD, **options) -> list[Cut]:
    """detect_scenes(path, threshold, ...).cuts."""
    return detect_scenes(path, threshold, **options).cuts


def match_cuts(true_s: list[float], found_s: list[float], tolerance_s: float = 0.5) -> list[tuple[int, int]]:
    """(true index, found index) pairs of cuts at most tolerance_s apart, one to one, nearest first:
    how a detector is scored against known cut times (precision = pairs / found, recall = pairs / true)."""
    pairs = sorted((abs(a - b), i, j) for i, a in enumerate(true_s) for j, b in enumerate(found_s)
                   if abs(a - b) <= tolerance_s)
    used_t, used_f, out = set(), set(), []
    for _, i, j in pairs:
        if i not in used_t and j not in used_f:
            used_t.add(i)
            used_f.add(j)
            out.append((i, j))
    return sorted(out)
