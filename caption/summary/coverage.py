"""How much of each segmented video a job's records caption, and why the rest has none.

A segment's record (caption/pipeline/record.py coverage_fields) carries its video's coverage (seconds
of the video, of its segments, of its transitions) and the spans left out next to it, each with its
reason (video_io/coverage.py LEFT_OUT_REASONS). This module reads a job's records back and adds up:

    coverage = video_coverage(records)        # {video: {...}} for the videos split into segments
    summary["coverage"] = job_coverage(coverage)

A segment counts as captioned when every record it has is ok; a failed one is left out with the
reason "failed" (its records say why). Whole clips are not counted: a whole clip's caption covers it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

FAILED = "failed"  # a left-out reason of this module's: the segment's caption failed (its records say why)


KEPT = ("video", "segment_index", "status", "start_s", "end_s", "left_out", "coverage")  # what video_coverage reads


def segment_records(path: Path, settings_ids: set[str]) -> Iterator[dict]:
    """The records in `path` of segments made with one of `settings_ids` (this job's), each cut down to
    KEPT: a job of 100,000 segments does not hold its captions twice to count its seconds."""
    try:
        lines = open(path, encoding="utf-8")
    except OSError:
        return
    with lines:
        for line in lines:
            if '"segment_index"' not in line:  # a whole clip's record: not parsed at all
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a cut-off last line (an interrupted job)
            if isinstance(record, dict) and record.get("segment_index") is not None \
                    and record.get("settings_id") in settings_ids:
                yield {k: record[k] for k in KEPT if k in record}


def video_coverage(records: Iterable[dict]) -> dict[str, dict]:
    """Per video: its duration, seconds captioned (segments whose records are all ok), of transitions,
    and every span left out, with its reason, in time order."""
    parts: dict[str, dict[int, dict]] = defaultdict(dict)
    for record in records:
        seen = parts[record["video"]].setdefault(record["segment_index"], {"ok": True, **_span(record)})
        seen["ok"] &= record.get("status") == "ok"
        seen.setdefault("left_out", [])
        for gap in record.get("left_out") or []:
            if gap not in seen["left_out"]:
                seen["left_out"].append(gap)
        if "coverage" in record:
            seen["coverage"] = record["coverage"]
    out = {}
    for video, segments in parts.items():
        known = next((s["coverage"] for s in segments.values() if "coverage" in s), None)
        if known is None:  # records made before coverage was recorded (or segments=fixed of old)
            continue
        gaps = [g for s in segments.values() for g in s["left_out"]]
        gaps += [{"start_s": s["start_s"], "end_s": s["end_s"], "reason": FAILED} for s in segments.values() if not s["ok"]]
        captioned = sum(s["end_s"] - s["start_s"] for s in segments.values() if s["ok"])
        out[video] = {"duration_s": known["duration_s"], "captioned_s": round(captioned, 3),
                      "transitions_s": known["transitions_s"], "segments": len(segments),
                      "left_out": sorted(gaps, key=lambda g: g["start_s"])}
    return out


def _span(record: dict) -> dict:
    return {"start_s": float(record.get("start_s") or 0.0), "end_s": float(record.get("end_s") or 0.0)}


def job_coverage(videos: dict[str, dict]) -> dict | None:
    """The summary's `coverage`: totals over the segmented videos, seconds left out per reason, and
    each video's own figures and left-out spans. None when the job split no video."""
    if not videos:
        return None
    duration = sum(v["duration_s"] for v in videos.values())
    captioned = sum(v["captioned_s"] for v in videos.values())
    transitions = sum(v["transitions_s"] for v in videos.values())
    reasons: dict[str, float] = defaultdict(float)
    for v in videos.values():
        for gap in v["left_out"]:
            reasons[gap["reason"]] += gap["end_s"] - gap["start_s"]
    return {"videos": len(videos), "duration_s": round(duration, 3), "captioned_s": round(captioned, 3),
            "transitions_s": round(transitions, 3), "fraction": _share(captioned, duration),
            "fraction_outside_transitions": _share(captioned, duration - transitions),
            "left_out_s": {k: round(v, 3) for k, v in sorted(reasons.items())},
            "per_video": {name: {**v, "fraction": _share(v["captioned_s"], v["duration_s"]),
                                 "fraction_outside_transitions": _share(v["captioned_s"],
                                                                        v["duration_s"] - v["transitions_s"])}
                          for name, v in sorted(videos.items())}}


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole > 0 else None


def coverage_of_job(job: JobConfig) -> dict | None:
    """job_coverage over the job's output: its segment records (this job's settings), earlier runs' too."""
    ids = job.expected_ids().own_ids(segmented=True)
    return job_coverage(video_coverage(segment_records(job.files().output, ids))) if ids else None


def coverage_line(coverage: dict | None) -> str | None:
    """The terminal summary's line: seconds captioned of the segmented videos, and what is left out."""
    if not coverage:
        return None
    left = ", ".join(f"{reason} {seconds:.1f} s" for reason, seconds in coverage["left_out_s"].items())
    outside = coverage["fraction_outside_transitions"]
    return (f"{coverage['captioned_s']:.1f} of {coverage['duration_s']:.1f} s captioned in {coverage['videos']} long "
            f"video(s) ({coverage['fraction']:.0%}" + (f"; {outside:.0%} outside transitions" if outside else "")
            + f"); left out: {left or 'nothing'}")


def subtitle_note(records: list[dict]) -> str | None:
    """caption-export's note for the long videos among `records`: how much of them the cues cover,
    and that every gap between cues is a span the records leave out, by reason."""
    coverage = job_coverage(video_coverage([r for r in records if r.get("segment_index") is not None]))
    if not coverage:
        return None
    left = ", ".join(f"{reason} {seconds:.1f} s" for reason, seconds in coverage["left_out_s"].items())
    return (f"{coverage['videos']} long video(s): cues cover {coverage['captioned_s']:.1f} of "
            f"{coverage['duration_s']:.1f} s; the records name every gap ({left or 'none'})")


WARN_BELOW = 0.9  # of a video's duration outside its transitions


def coverage_warning(coverage: dict | None) -> str | None:
    """A run warning (summary, terminal, caption.log) when long videos have less than WARN_BELOW of
    their footage outside transitions captioned: the share left without a caption is not a silent one."""
    if not coverage:
        return None
    low = {name: v["fraction_outside_transitions"] for name, v in coverage["per_video"].items()
           if v["fraction_outside_transitions"] is not None and v["fraction_outside_transitions"] < WARN_BELOW}
    if not low:
        return None
    worst = min(low, key=low.get)
    return (f"{len(low)} long video(s) have less than {WARN_BELOW:.0%} of their footage outside transitions "
            f"captioned (least: {worst}, {low[worst]:.0%}); the summary's coverage and the records' left_out "
            "say what has no caption and why")
