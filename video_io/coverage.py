"""Which parts of a video its segments cover, and why the rest is left out.

    plan = cover_shots(duration_s, cuts, min_s=2, max_s=60, trim_s=0.5)   # short="montage" (default)
    plan.parts        # [Segment], each with the shots it spans (Segment.shots: indices into plan.shots)
    plan.left_out     # [LeftOut(start_s, end_s, reason)]: every second no segment covers, with its reason
    plan.coverage()   # {"duration_s", "segments_s", "transitions_s", "left_out_s"}

With `short="montage"` every second of a video belongs to a segment but for a gradual transition's own
span (a dissolve, a fade through black) and a trim at each cut: a hard cut is found to within a frame
(caption-bench scenes), so the trim is at most TRIM_SHARE of the shot next to it (and never more than
`trim_s`): a 1.2-s shot loses 0.06 s at a cut, a 20-s one 0.5 s. A shot shorter than `min_s` is not
dropped: a run of such shots whose total reaches `min_s` is one "montage" segment that lists its
shots (split at shot boundaries where it would pass `max_s`); a run shorter than `min_s` joins the
segment of the shot before it (or after it, at the video's start). A shot longer than `max_s` is cut
into equal pieces.

`short="drop"` is the curation behaviour (cosmos-curate's splitting stage keeps training clips of at
least 2 s): every shot trimmed by `trim_s` at each cut, a piece shorter than `min_s` dropped; what it
drops is left out with that reason (video_io/scenes.py `segments`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from video_io.scenes import Cut, Segment

SHORT_SHOTS = ("montage", "drop")
TRIM_SHARE = 0.05  # of the shot next to a cut, trimmed at it (short="montage"); at most trim_s
LEFT_OUT_REASONS = {
    "dissolve": "a dissolve's own span (both shots mixed)",
    "fade": "a fade through black",
    "trim": "trimmed at a cut (segment_trim_s, at most 5% of the shot)",
    "short": "a shot shorter than segment_min_s, dropped (segment_short_shots=drop)",
    "tail": "the last piece, shorter than segment_min_s (segments=fixed)",
}


@dataclass(frozen=True)
class Shot:
    """A stretch between two cuts (a gradual transition's own span belongs to neither shot)."""

    index: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class LeftOut:
    """A span of the video no segment covers; `reason`: a key of LEFT_OUT_REASONS."""

    start_s: float
    end_s: float
    reason: str

    def to_dict(self) -> dict:
        return {"start_s": round(self.start_s, 3), "end_s": round(self.end_s, 3), "reason": self.reason}


@dataclass(frozen=True)
class CoverPlan:
    duration_s: float
    shots: list[Shot]
    parts: list[Segment]
    left_out: list[LeftOut] = field(default_factory=list)

    def coverage(self) -> dict:
        """Seconds of the video, of its segments, of its transitions' own spans, and left out in all."""
        spans = sum(g.end_s - g.start_s for g in self.left_out)
        moves = sum(g.end_s - g.start_s for g in self.left_out if g.reason in ("dissolve", "fade"))
        return {"duration_s": round(self.duration_s, 3), "segments_s": round(sum(p.duration_s for p in self.parts), 3),
                "transitions_s": round(moves, 3), "left_out_s": round(spans, 3)}


def shots_between(duration_s: float, cuts: list[Cut]) -> list[Shot]:
    """The shots between `cuts` (in time order), each without a gradual transition's span."""
    edges = [(0.0, 0.0), *sorted((max(0.0, c.start_s), min(duration_s, c.end_s)) for c in cuts
                                 if 0 < c.end_s and c.start_s < duration_s), (duration_s, duration_s)]
    spans = [(left, right) for (_, left), (right, _) in zip(edges, edges[1:]) if right > left]
    return [Shot(i, a, b) for i, (a, b) in enumerate(spans)]


def cover_shots(duration_s: float, cuts: list[Cut], min_s: float = 2.0, max_s: float | None = 60.0,
                trim_s: float = 0.5, short: str = "montage") -> CoverPlan:
    """The segments of a video of `duration_s` with these cuts, and what they leave out (module docstring)."""
    if short not in SHORT_SHOTS:
        raise ValueError(f"short must be one of {', '.join(SHORT_SHOTS)}, got {short!r}")
    if duration_s <= 0 or not math.isfinite(duration_s):
        return CoverPlan(0.0, [], [])
    shots = shots_between(duration_s, cuts)
    if short == "drop":
        parts = segments(duration_s, cuts, min_s, max_s, trim_s)
    else:
        parts = [piece for group in _groups(shots, min_s, max_s)
                 for piece in _pieces(shots, group, duration_s, trim_s, max_s)]
    parts = [_with_shots(p, shots) for p in parts]
    return CoverPlan(duration_s, shots, parts, left_out_spans(duration_s, parts, cuts, shots, short))


def _groups(shots: list[Shot], min_s: float, max_s: float | None) -> list[list[int]]:
    """Shot indices per segment: a long shot alone; a run of short ones as montages of at least min_s
    (at most max_s where shot boundaries allow); a run too short for one joins the segment before it."""
    groups: list[list[int]] = []
    i = 0
    while i < len(shots):
        if shots[i].end_s - shots[i].start_s >= min_s:
            groups.append([i])
            i += 1
            continue
        j = i
        while j < len(shots) and shots[j].end_s - shots[j].start_s < min_s:
            j += 1
        run = list(range(i, j))
        if shots[run[-1]].end_s - shots[run[0]].start_s >= min_s:
            groups += _montages(shots, run, min_s, max_s)
        elif groups:
            groups[-1] += run
        elif j < len(shots):  # at the video's start: joins the shot after it
            shots_after = [*run, j]
            groups.append(shots_after)
            j += 1
        else:
            groups.append(run)  # the whole video is one short run
        i = j
    return groups


def _montages(shots: list[Shot], run: list[int], min_s: float, max_s: float | None) -> list[list[int]]:
    """A run of short shots in montages of at least min_s, split at shots before passing max_s."""
    out: list[list[int]] = [[]]
    for k in run:
        current = out[-1]
        if current and max_s is not None and shots[k].end_s - shots[current[0]].start_s > max_s:
            out.append([])
        out[-1].append(k)
    if len(out) > 1 and shots[out[-1][-1]].end_s - shots[out[-1][0]].start_s < min_s:
        out[-2] += out.pop()
    return out


def _pieces(shots: list[Shot], group: list[int], duration_s: float, trim_s: float,
            max_s: float | None) -> list[Segment]:
    """A group's span, trimmed at its cuts (TRIM_SHARE of the shot there, at most trim_s), in equal
    pieces of at most max_s."""
    first, last = shots[group[0]], shots[group[-1]]
    start = first.start_s + (min(trim_s, TRIM_SHARE * (first.end_s - first.start_s)) if first.start_s > 0 else 0.0)
    end = last.end_s - (min(trim_s, TRIM_SHARE * (last.end_s - last.start_s)) if last.end_s < duration_s else 0.0)
    length = end - start
    if length <= 0:
        return []
    pieces = 1 if max_s is None else max(1, math.ceil(length / max_s - 1e-9))
    edges = [start + length * i / pieces for i in range(pieces + 1)]
    return [Segment(round(a, 6), round(b, 6)) for a, b in zip(edges, edges[1:])]


def _with_shots(part: Segment, shots: list[Shot]) -> Segment:
    inside = tuple(s.index for s in shots if s.start_s < part.end_s and s.end_s > part.start_s)
    return Segment(part.start_s, part.end_s, inside)


def left_out_spans(duration_s: float, parts: list[Segment], cuts: list[Cut], shots: list[Shot], short: str,
                   tail: bool = False) -> list[LeftOut]:
    """Every span of [0, duration_s) no part covers, cut where its reason changes: a gradual
    transition's own span (fade or dissolve), a shot `short="drop"` dropped, a fixed plan's
    last piece (`tail`), else a trim at a cut."""
    labels = [(c.start_s, c.end_s, "fade" if c.blend == "fade" else "dissolve") for c in cuts if c.kind == "gradual"]
    if short == "drop":  # a shot no part overlaps: left shorter than min_s by its trims
        labels += [(s.start_s, s.end_s, "short") for s in shots
                   if not any(p.start_s < s.end_s and p.end_s > s.start_s for p in parts)]
    out: list[LeftOut] = []
    for a, b in _gaps(duration_s, parts):
        points = sorted({a, b, *(x for s, e, _ in labels for x in (s, e) if a < x < b)})
        for lo, hi in zip(points, points[1:]):
            mid = (lo + hi) / 2
            reason = "tail" if tail else next((r for s, e, r in labels if s <= mid < e), "trim")
            if out and out[-1].reason == reason and abs(out[-1].end_s - lo) < 1e-9:
                out[-1] = LeftOut(out[-1].start_s, hi, reason)
            elif hi - lo > 1e-6:
                out.append(LeftOut(lo, hi, reason))
    return out


def _gaps(duration_s: float, parts: list[Segment]) -> list[tuple[float, float]]:
    out, at = [], 0.0
    for p in sorted(parts, key=lambda p: p.start_s):
        if p.start_s > at + 1e-6:
            out.append((at, p.start_s))
        at = max(at, p.end_s)
    if duration_s > at + 1e-6:
        out.append((at, duration_s))
    return out


# --- the curation rule, and fixed pieces ----------------------------------------------------------

def segments(duration_s: float, cuts: list[Cut] | list[float], min_s: float = 1.0, max_s: float | None = None,
             trim_s: float = 0.0) -> list[Segment]:
    """The stretches between cuts: each shot, without `trim_s` on each side of a cut (a gradual
    transition's whole span is left out too), split into equal pieces of at most `max_s`; a piece
    shorter than `min_s` is dropped (a flash, a shot too short to caption). `cuts`: Cut objects or
    times in seconds."""
    if duration_s <= 0 or not math.isfinite(duration_s):
        return []
    if max_s is not None and max_s <= 0:
        raise ValueError(f"max_s must be > 0, got {max_s}")
    if min_s < 0 or trim_s < 0 or (max_s is not None and min_s > max_s):
        raise ValueError(f"need 0 <= min_s <= max_s and trim_s >= 0, got {min_s}, {max_s}, {trim_s}")
    spans = [(c, c) if isinstance(c, (int, float)) else (c.start_s, c.end_s) for c in cuts]
    edges = [(0.0, 0.0), *sorted((s, e) for s, e in spans if 0 < e and s < duration_s), (duration_s, duration_s)]
    out = []
    for (_, left), (right, _) in zip(edges, edges[1:]):
        start = left + (trim_s if left > 0 else 0.0)
        end = right - (trim_s if right < duration_s else 0.0)
        out += _split(start, end, min_s, max_s)
    return out


def _split(start: float, end: float, min_s: float, max_s: float | None) -> list[Segment]:
    length = end - start
    if length <= 0 or length < min_s:
        return []
    pieces = 1 if max_s is None else max(1, math.ceil(length / max_s - 1e-9))
    edges = [start + length * i / pieces for i in range(pieces + 1)]
    return [Segment(round(a, 6), round(b, 6)) for a, b in zip(edges, edges[1:])]


def fixed_segments(duration_s: float, stride_s: float, length_s: float | None = None,
                   min_s: float = 0.0) -> list[Segment]:
    """Segments every `stride_s` seconds, each `length_s` long (default: stride_s, end to end), the
    last cut at the video's end and dropped if shorter than `min_s`."""
    if stride_s <= 0 or (length_s is not None and length_s <= 0):
        raise ValueError(f"stride_s and length_s must be > 0, got {stride_s}, {length_s}")
    length_s = stride_s if length_s is None else length_s
    out, start = [], 0.0
    while start < duration_s - 1e-9:
        end = min(start + length_s, duration_s)
        if end - start >= min_s and end > start:
            out.append(Segment(round(start, 6), round(end, 6)))
        start += stride_s
    return out
