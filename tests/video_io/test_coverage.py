"""video_io/coverage.py: every second of a video in a segment or named as left out, short shots kept."""

from __future__ import annotations

import pytest

from video_io.coverage import TRIM_SHARE, cover_shots, segments
from video_io.scenes import Cut, Segment
from video_io.segmenting import segment_infos


def _hard(t):
    return Cut(t, "hard", t, t, 30.0)


# the fast-cut clip: five shots of 1.2-2.5 s between longer ones, a dissolve and a fade
FAST = [_hard(10.0), _hard(11.2), _hard(12.5), _hard(14.8), _hard(16.0),
        Cut(20.0, "gradual", 19.5, 20.5, 30.0, "dissolve"), _hard(22.0), Cut(30.0, "gradual", 29.5, 30.5, 20.0, "fade")]


def _tiles(plan):
    """The plan's segments and left-out spans, in time order: they must tile [0, duration)."""
    spans = sorted([(p.start_s, p.end_s, "segment") for p in plan.parts] +
                   [(g.start_s, g.end_s, g.reason) for g in plan.left_out])
    at = 0.0
    for start, end, _ in spans:
        assert start == pytest.approx(at, abs=1e-6) and end > start
        at = end
    assert at == pytest.approx(plan.duration_s, abs=1e-6)
    return spans


def test_every_second_is_in_a_segment_or_named_and_no_shot_is_dropped():
    plan = cover_shots(39.0, FAST)
    spans = _tiles(plan)
    assert {reason for *_, reason in spans} == {"segment", "trim", "fade"}  # the dissolve sits inside a montage
    assert sorted(i for p in plan.parts for i in p.shots) == [s.index for s in plan.shots]  # every shot, once
    assert all(p.duration_s >= 2.0 for p in plan.parts)
    assert [p.shots for p in plan.parts][1:3] == [(1, 2), (3, 4)]  # 1.2 + 1.3 s: a montage; 1.2 s joins 2.3 s
    c = plan.coverage()
    assert c["transitions_s"] == 1.0 and c["segments_s"] / (c["duration_s"] - c["transitions_s"]) >= 0.9
    # a trim is in proportion to the shot beside the cut, never more than trim_s
    assert plan.parts[1].start_s == pytest.approx(10.0 + TRIM_SHARE * 1.2)
    assert plan.parts[0].end_s == pytest.approx(9.5)  # a 10-s shot: trim_s (0.5)


def test_short_runs_join_a_neighbour_and_montages_stop_at_max_s():
    # a 1-s shot at the start joins the shot after it; one at the end joins the one before
    plan = cover_shots(12.0, [_hard(1.0), _hard(11.0)])
    assert [p.shots for p in plan.parts] == [(0, 1, 2)] and _tiles(plan)
    # eight 1.5-s shots: montages of at most max_s, split between shots
    plan = cover_shots(12.0, [_hard(1.5 * k) for k in range(1, 8)], max_s=5.0)
    assert [p.shots for p in plan.parts] == [(0, 1, 2), (3, 4, 5), (6, 7)]
    assert all(p.duration_s <= 5.0 for p in plan.parts) and _tiles(plan)


def test_drop_is_the_curation_rule_with_what_it_drops_named():
    plan = cover_shots(39.0, FAST, short="drop")
    assert plan.parts == segments(39.0, FAST, 2.0, 60.0, 0.5)  # the behaviour before montages, unchanged
    spans = _tiles(plan)
    short = [(a, b) for a, b, reason in spans if reason == "short"]
    assert (10.0, 16.0) in short  # the fast cuts (and a 2.3-s shot less its trims), dropped and named
    assert {"dissolve", "fade", "trim", "short"} <= {reason for *_, reason in spans}
    with pytest.raises(ValueError, match="short must be one of"):
        cover_shots(10.0, [], short="skip")


def test_each_segment_carries_its_shots_and_the_gaps_before_it():
    plan = cover_shots(39.0, FAST)
    infos = segment_infos(plan)
    assert [(i.start_s, i.end_s) for i in infos] == [(p.start_s, p.end_s) for p in plan.parts]
    named = [g for i in infos for g in i.left_out]
    assert named == [g.to_dict() for g in plan.left_out]  # every left-out span on exactly one record
    assert all(i.coverage == plan.coverage() for i in infos)
    assert [s[0] for s in infos[1].shots] == [1, 2] and infos[1].shots[0][1:] == (10.0, 11.2)
    assert Segment(1.0, 2.0, (3,)) == Segment(1.0, 2.0)  # shots are not part of a segment's identity
