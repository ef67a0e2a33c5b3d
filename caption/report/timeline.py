"""Each long video's timeline for the review page: its segments (captioned or failed), the cuts
between its shots, and the spans no segment covers, with their reasons (caption/summary/coverage.py)."""

from __future__ import annotations

from caption.summary.coverage import video_coverage


def timelines(clips) -> dict[str, dict]:
    """{video: {"d": duration, "c": seconds captioned, "seg": [[start, end, ok], ...], "cuts": [shot
    starts after the first], "gap": [[start, end, reason], ...]}} for the videos whose segment records
    say what they cover (clips: caption/report/data.py ClipEntry)."""
    records = [r for c in clips if c.segment is not None for r in c.records]
    covered = video_coverage(records)
    out = {}
    for video, v in covered.items():
        entries = [c for c in clips if c.video == video and c.segment is not None]
        shots = sorted({s["start_s"] for c in entries for r in c.records for s in r.get("shots") or []})
        out[video] = {"d": v["duration_s"], "c": v["captioned_s"],
                      "seg": [[c.segment[1], c.segment[2], c.status == "ok"] for c in entries],
                      "cuts": [s for s in shots if s > 0],
                      "gap": [[g["start_s"], g["end_s"], g["reason"]] for g in v["left_out"]]}
    return out
