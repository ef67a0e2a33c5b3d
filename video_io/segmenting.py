"""Which parts of a video get a caption of their own: the whole clip, its shots, or pieces of fixed length.

    spec = SegmentSpec(mode="auto")                   # the job's default (video.segments)
    parts = plan_segments("reel.mp4", spec)           # None: caption the whole clip; else [Segment]

Modes (`video.segments`):
- "auto": a clip up to `over_s` long is one caption, as it always was (stock clips, the demo); a
  longer one is split at its shots, as "scenes" does. Its length comes from the container's header
  (no frame decoded), so short clips cost nothing more than before.
- "none": every clip is one caption, however long.
- "scenes": every clip is split at its shots (video_io/scenes.py: hard cuts and gradual transitions)
  and every second of it belongs to a segment but a gradual transition's own span and a trim at each
  cut (video_io/coverage.py): shots shorter than `min_s` are captioned together as a "montage"
  segment (`short="montage"`), shots longer than `max_s` cut into equal pieces. `short="drop"` is the
  curation behaviour: `trim_s` off each side of a cut, pieces shorter than `min_s` dropped. A clip
  with no piece left is one segment. What a plan leaves out is named, with its reason.
- "fixed": a piece every `stride_s` seconds, end to end, with no shot detection; a last piece shorter
  than `min_s` is dropped (unless it is the only one).

The defaults follow the clip lengths open curation pipelines caption (cosmos-curate's splitting
stage: at least 2 s per clip, at most 60 s, 0.5 s trimmed at each cut); `over_s` keeps a minute-long
stock clip whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from video_io.coverage import SHORT_SHOTS, CoverPlan, cover_shots, fixed_segments, left_out_spans
from video_io.scenes import DEFAULT_THRESHOLD, Segment, detect_scenes
from video_io.source import DecodeError, first_video_stream, open_source

SEGMENT_MODES = ("auto", "none", "scenes", "fixed")


@dataclass(frozen=True)
class SegmentSpec:
    mode: str = "auto"
    over_s: float = 60.0  # auto: clips longer than this (by their header) are split at their shots
    min_s: float = 2.0  # shots shorter than this are captioned together (short="montage") or dropped ("drop")
    max_s: float = 60.0  # shots longer than this are cut into equal pieces of at most this
    stride_s: float = 10.0  # fixed: a piece every this many seconds
    trim_s: float = 0.5  # left out on each side of a cut (and a gradual transition's whole span)
    threshold: float = DEFAULT_THRESHOLD  # shot detection: video_io/scenes.py detect_scenes
    short: str = "montage"  # shots shorter than min_s: "montage" (captioned together) or "drop" (curation)

    def __post_init__(self):
        if self.mode not in SEGMENT_MODES:
            raise ValueError(f"segments must be one of {', '.join(SEGMENT_MODES)}, got {self.mode!r}")
        if self.short not in SHORT_SHOTS:
            raise ValueError(f"segment_short_shots must be one of {', '.join(SHORT_SHOTS)}, got {self.short!r}")
        for name in ("over_s", "max_s", "stride_s", "threshold"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"segment_{name} must be > 0, got {value!r}" if name != "threshold"
                                 else f"scene_threshold must be > 0, got {value!r}")
        if not (0 <= self.min_s <= self.max_s and 0 <= self.trim_s):
            raise ValueError(f"need 0 <= segment_min_s <= segment_max_s and segment_trim_s >= 0, got "
                             f"min {self.min_s:g}, max {self.max_s:g}, trim {self.trim_s:g}")

    def describe(self) -> str:
        """The settings that change which segments a clip gets, in words (records' `settings`)."""
        if self.mode == "none":
            return "none"
        if self.mode == "fixed":
            return f"fixed every {self.stride_s:g} s, >= {self.min_s:g} s"
        shots = (f"shots (threshold {self.threshold:g}), {self.min_s:g}-{self.max_s:g} s, "
                 + (f"trim {self.trim_s:g} s, short shots dropped" if self.short == "drop"
                    else f"trim up to {self.trim_s:g} s, short shots as montages"))
        return shots if self.mode == "scenes" else f"clips over {self.over_s:g} s at {shots}"


@dataclass(frozen=True)
class SegmentInfo:
    """Where a decoded clip lies in its video: segment `index` of `count`, [start_s, end_s) seconds;
    `shots`: the shots it spans ((index, start_s, end_s) each, where shots were found); `left_out`: the
    spans no segment covers between the segment before it and this one (and after it, for the last),
    LeftOut.to_dict() each; `coverage`: the video's (CoverPlan.coverage)."""

    index: int
    count: int
    start_s: float
    end_s: float
    shots: tuple = ()
    left_out: tuple = ()
    coverage: dict | None = None


def segment_infos(plan: CoverPlan) -> list[SegmentInfo]:
    """The SegmentInfo of each of a plan's parts, each with its shots and the left-out spans before it."""
    count, coverage, out = len(plan.parts), plan.coverage(), []
    for index, part in enumerate(plan.parts):
        after = plan.parts[index - 1].end_s if index else float("-inf")
        until = part.start_s if index < count - 1 else float("inf")
        gaps = tuple(g.to_dict() for g in plan.left_out if after - 1e-6 <= g.start_s and g.end_s <= until + 1e-6)
        shots = tuple((s.index, round(s.start_s, 3), round(s.end_s, 3)) for s in plan.shots if s.index in part.shots)
        out.append(SegmentInfo(index, count, part.start_s, part.end_s, shots, gaps, coverage))
    return out


def header_duration(path: str) -> float | None:
    """The first video stream's duration as the container's header gives it (no frame decoded); None
    where the header does not say. Raises DecodeError for a file PyAV cannot open."""
    with open_source(path) as source, first_video_stream(source.uri) as (container, stream):
        if stream.duration and stream.time_base:
            return float(stream.duration * stream.time_base)
        if container.duration:
            return container.duration / 1_000_000  # AV_TIME_BASE
    return None


def plan_segments(path: str, spec: SegmentSpec, progress: Callable[[], None] | None = None) -> list[Segment] | None:
    """The segments of `path` to caption, in time order; None: caption the whole clip (as always).
    `progress` is called now and then while shots are detected (a long video decodes for minutes).
    Raises DecodeError when the file cannot be read."""
    plan = plan_video(path, spec, progress)
    return None if plan is None else plan.parts


def plan_video(path: str, spec: SegmentSpec, progress: Callable[[], None] | None = None) -> CoverPlan | None:
    """plan_segments with what the segments cover: the shots found and every span left out, with why."""
    if spec.mode == "none":
        return None
    if spec.mode == "auto":
        try:
            length = header_duration(path)
        except DecodeError:  # decoding the whole clip says what is wrong with it, in the words it always has
            return None
        if length is None or length <= spec.over_s:
            return None
    if spec.mode == "fixed":
        length = header_duration(path)
        if length is None:
            length = detect_scenes(path, spec.threshold, progress=progress).duration_s
        parts = fixed_segments(length, spec.stride_s, min_s=spec.min_s) or [Segment(0.0, round(length, 6))]
        return CoverPlan(length, [], parts, left_out_spans(length, parts, [], [], "montage", tail=True))
    scan = detect_scenes(path, spec.threshold, progress=progress)
    if scan.duration_s <= 0:
        raise DecodeError("the video has no duration")
    plan = cover_shots(scan.duration_s, scan.cuts, spec.min_s, spec.max_s, spec.trim_s, spec.short)
    if plan.parts:
        return plan
    whole = Segment(0.0, round(scan.duration_s, 6), tuple(s.index for s in plan.shots))
    return CoverPlan(plan.duration_s, plan.shots, [whole])
