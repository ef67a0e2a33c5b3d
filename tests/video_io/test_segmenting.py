"""video.segments: which parts of a video get a caption, and the decoders' one result per segment."""

from __future__ import annotations

import json

import pytest

from tests.video_io.hanging_decoders import crash_in_third_segment
from video_io.decode import DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.scenes import Segment
from video_io.segmenting import SegmentSpec, plan_segments
from video_io.synth.dataset import generate_dataset
from video_io.synth.long import LongSpec, generate_long
from video_io.workers import DecodePool

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


@pytest.fixture(scope="module")
def long_dir(tmp_path_factory):
    """Two 112x112 videos of six scenes (4-10 s each) joined by cuts, dissolves and fades, and a 4-s clip."""
    folder = tmp_path_factory.mktemp("segments")
    generate_long(folder, 2, seed=11, spec=LongSpec(style="clip"))
    generate_dataset(folder / "short", 1, seed=3)
    return folder


def _truth(folder):
    return {json.loads(line)["video"]: json.loads(line) for line in open(folder / "scenes.jsonl")}


def test_each_mode_picks_its_segments(long_dir):
    video, short = str(long_dir / "long_00000.mp4"), str(long_dir / "short" / "clip_00000.mp4")
    truth = _truth(long_dir)["long_00000.mp4"]
    assert plan_segments(video, SegmentSpec(mode="none")) is None
    assert plan_segments(video, SegmentSpec(mode="auto")) is None  # shorter than over_s (60 s): whole, as before
    assert plan_segments(short, SegmentSpec(mode="auto", over_s=5.0)) is None  # 4 s
    assert plan_segments(short, SegmentSpec(mode="auto", over_s=1.0)) == [Segment(0.0, 4.0)]  # no cut: one
    scenes = plan_segments(video, SegmentSpec(mode="scenes"))
    assert plan_segments(video, SegmentSpec(mode="auto", over_s=10.0)) == scenes
    # one segment per scene, each inside its scene, cut 0.5 s away from every cut
    assert len(scenes) == len(truth["scenes"])
    for part, scene in zip(scenes, truth["scenes"]):
        assert scene["start_s"] - 0.5 <= part.start_s < part.end_s <= scene["end_s"] + 0.5
        assert part.duration_s >= 2.0
    # a scene shorter than min_s is dropped; a clip left with none is one segment
    assert plan_segments(short, SegmentSpec(mode="scenes")) == [Segment(0.0, 4.0)]
    assert plan_segments(short, SegmentSpec(mode="scenes", min_s=5.0, max_s=10.0)) == [Segment(0.0, 4.0)]
    # fixed: every stride_s, no detection; the last piece shorter than min_s dropped
    fixed = plan_segments(video, SegmentSpec(mode="fixed", stride_s=10.0))
    assert [p.start_s for p in fixed] == [0.0, 10.0, 20.0, 30.0, 40.0][:len(fixed)]
    assert all(p.duration_s <= 10.0 for p in fixed) and fixed[-1].end_s <= truth["duration_s"]
    # long shots cut into equal pieces of at most max_s
    pieces = plan_segments(video, SegmentSpec(mode="scenes", max_s=3.0))
    assert len(pieces) > len(scenes) and all(p.duration_s <= 3.0 + 1e-6 for p in pieces)


@pytest.mark.parametrize("bad, why", [({"mode": "shots"}, "segments must be one of"),
                                      ({"max_s": 0.0}, "segment_max_s must be > 0"),
                                      ({"min_s": 5.0, "max_s": 4.0}, "segment_min_s <= segment_max_s"),
                                      ({"threshold": -1.0}, "scene_threshold must be > 0")])
def test_bad_segment_settings_say_what_to_change(bad, why):
    with pytest.raises(ValueError, match=why):
        SegmentSpec(**bad)


def test_a_segment_is_told_to_the_model_as_a_clip_of_its_own(long_dir):
    """The frames keep the file's indices and times (records); the model's metadata is the segment's:
    Qwen's processor spaces frames by samples / total frames x fps (transformers VideoMetadata.sampled_fps)."""
    path = str(long_dir / "long_00000.mp4")
    whole = decode_clip(path, DecodeSpec(EIGHT_FRAMES))
    clip = decode_clip(path, DecodeSpec(EIGHT_FRAMES, window=(20.0, 24.0)))
    meta = clip.metadata()
    assert all(20.0 <= t < 24.0 for t in clip.times) and min(clip.indices) >= 20 * 8
    assert meta["total_num_frames"] == 32 and meta["duration"] == pytest.approx(4.0)
    assert meta["frames_indices"] == [i - 160 for i in clip.indices] and min(meta["frames_indices"]) >= 0
    # samples per second as the processor computes it: the segment's own (8 frames over 4 s), not the file's
    rate = len(meta["frames_indices"]) / meta["total_num_frames"] * meta["fps"]
    assert rate == pytest.approx(2.0)
    assert whole.metadata()["total_num_frames"] == whole.total_frames  # a whole clip: as before


@pytest.mark.parametrize("workers", [0, 2])
def test_the_pool_gives_one_result_per_segment_in_time_order(long_dir, workers):
    paths = [str(long_dir / "long_00000.mp4"), str(long_dir / "short" / "clip_00000.mp4"),
             str(long_dir / "long_00001.mp4")]
    spec = SegmentSpec(mode="auto", over_s=10.0)
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=workers, segments=spec) as pool:
        results = list(pool.imap(paths))
    by_path = {p: [r for r in results if r.path == p] for p in paths}
    assert [r.segment for r in by_path[paths[1]]] == [None] and by_path[paths[1]][0].last  # short: whole
    for path in (paths[0], paths[2]):
        got = by_path[path]
        assert [r.segment.index for r in got] == list(range(len(got))) and all(r.ok for r in got)
        assert [r.last for r in got] == [False] * (len(got) - 1) + [True]
        assert [(r.segment.start_s, r.segment.end_s) for r in got] == \
            [(p.start_s, p.end_s) for p in plan_segments(path, spec)]
        for r in got:
            assert all(r.segment.start_s <= t < r.segment.end_s for t in r.clip.times)
            assert r.segment.count == len(got) and r.scan_s > 0


def test_a_decoder_that_dies_mid_video_gives_its_remaining_segments_as_errors(long_dir):
    paths = [str(long_dir / "long_00000.mp4"), str(long_dir / "short" / "clip_00000.mp4")]
    spec = SegmentSpec(mode="scenes")
    parts = plan_segments(paths[0], spec)
    dies_on = next(i for i, p in enumerate(parts) if 15.0 <= p.start_s < 30.0)
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=1, timeout_s=30, segments=spec,
                    decode_fn=crash_in_third_segment) as pool:
        results = list(pool.imap(paths))
        assert pool.restarts == 1
    video = [r for r in results if r.path == paths[0]]
    assert [r.segment.index for r in video] == list(range(len(parts)))  # every segment, once
    assert all(r.ok for r in video[:dies_on]) and not any(r.ok for r in video[dies_on:])
    assert "decoder process died (killed by" not in video[dies_on].error  # os._exit: an exit code
    assert "decoder process died" in video[dies_on].error
    assert all(f"lost on segment {dies_on}" in r.error for r in video[dies_on + 1:])
    assert [(r.segment.start_s, r.segment.end_s) for r in video] == [(p.start_s, p.end_s) for p in parts]
    assert video[-1].last and [r.ok for r in results if r.path == paths[1]] == [True]  # the next file decodes


def test_a_file_that_is_no_video_is_one_error_before_any_segment(tmp_path):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=0, segments=SegmentSpec(mode="scenes")) as pool:
        [result] = list(pool.imap([str(bad)]))
    assert result.segment is None and result.last and "finding its segments" in result.error
    # the default (auto) leaves it to the decoder: the error a short clip always got, word for word
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=0, segments=SegmentSpec(mode="auto")) as pool:
        [result] = list(pool.imap([str(bad)]))
    assert result.segment is None and result.error == decode_error(str(bad))


def decode_error(path: str) -> str:
    with DecodePool(DecodeSpec(EIGHT_FRAMES), workers=0) as pool:
        return next(iter(pool.imap([path]))).error


def test_synthetic_long_videos_come_with_references_per_scene(long_dir, tmp_path):
    truth = _truth(long_dir)
    lines = [json.loads(line) for line in open(long_dir / "references.jsonl", encoding="utf-8")]
    assert [(r["video"], r["start_s"], r["end_s"], r["references"]) for r in lines] == \
        [(v, s["start_s"], s["end_s"], s["references"]) for v, t in truth.items() for s in t["scenes"]]
    assert all(r["attributes"] for r in lines)  # --style clip: what the embedded model knows (video_io/footage_kind.py)
    generate_long(tmp_path, 1, seed=11, spec=LongSpec(n_scenes=2))  # footage style: drawn otherwise
    assert not any("attributes" in json.loads(line) for line in open(tmp_path / "references.jsonl"))
    with pytest.raises(ValueError, match="style must be one of footage, clip"):
        LongSpec(style="cartoon")
