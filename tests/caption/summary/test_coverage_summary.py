"""caption/summary/coverage.py: a job's seconds captioned, read back from its segment records."""

from __future__ import annotations

from caption.summary.coverage import coverage_line, coverage_warning, job_coverage, video_coverage

COVER = {"duration_s": 20.0, "segments_s": 17.0, "transitions_s": 1.0, "left_out_s": 3.0}


def _record(index, start, end, status="ok", left_out=(), task="caption"):
    return {"video": "reel.mp4", "segment_index": index, "segments": 3, "start_s": start, "end_s": end,
            "status": status, "task": task, "left_out": list(left_out), "coverage": COVER}


def test_a_failed_segment_is_left_out_and_the_job_is_warned():
    trim = {"start_s": 6.0, "end_s": 7.0, "reason": "dissolve"}
    records = [_record(0, 0.0, 6.0), _record(1, 7.0, 14.0, left_out=[trim]), _record(2, 16.0, 20.0),
               _record(1, 7.0, 14.0, "error", task="tags"),  # one of its records failed: not captioned
               {**_record(2, 14.0, 16.0), "segment_index": 3}]
    videos = video_coverage(records)
    video = videos["reel.mp4"]
    assert video["captioned_s"] == 12.0 and video["segments"] == 4
    assert [(g["start_s"], g["reason"]) for g in video["left_out"]] == [(6.0, "dissolve"), (7.0, "failed")]
    job = job_coverage(videos)
    assert job["fraction"] == 0.6 and job["fraction_outside_transitions"] == round(12 / 19, 4)
    assert job["left_out_s"] == {"dissolve": 1.0, "failed": 7.0}
    assert coverage_line(job).startswith("12.0 of 20.0 s captioned in 1 long video(s) (60%; 63% outside")
    assert "reel.mp4, 63%" in coverage_warning(job)
    full = job_coverage(video_coverage([_record(0, 0.0, 19.0, left_out=[trim])]))
    assert coverage_warning(full) is None and job_coverage({}) is None
