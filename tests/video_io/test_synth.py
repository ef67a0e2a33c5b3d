"""caption-synth: deterministic clips whose references name what the frames show."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from video_io.decode import DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.synth.attributes import DIRECTIONS, OBJECTS, SCENES, SPEEDS, TIMES, WEATHERS, ClipAttributes
from video_io.synth.captions_ko import canonical_caption, keywords_answer, parse_attributes, reference_captions
from video_io.synth.cli import main as synth_main
from video_io.synth.dataset import SynthSpec, make_clip
from video_io.synth.render import render_clip

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_seed_gives_byte_identical_files(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, seed in ((a, 5), (b, 5), (c, 6)):
        assert synth_main(["--out", str(folder), "--n", "3", "--seed", str(seed), "--frames", "8",
                           "--size", "64x48"]) == 0
    assert _digests(a) == _digests(b)
    assert _digests(a)["references.jsonl"] != _digests(c)["references.jsonl"]


def test_clips_made_in_several_processes_are_the_same_bytes(tmp_path):
    """--workers (bench clip sets use every core): each clip depends only on (seed, index), so the folder
    is byte for byte the one a single process writes, references.jsonl in clip order included."""
    one, three = tmp_path / "one", tmp_path / "three"
    for folder, workers in ((one, 1), (three, 3)):
        assert synth_main(["--out", str(folder), "--n", "4", "--seed", "5", "--frames", "8", "--size", "64x48",
                           "--workers", str(workers)]) == 0
    assert _digests(one) == _digests(three) and len(_digests(one)) == 5


def test_references_file_format(synth_dir):
    lines = [json.loads(line) for line in open(synth_dir / "references.jsonl", encoding="utf-8")]
    assert [r["video"] for r in lines] == [f"clip_{i:05d}.mp4" for i in range(6)]
    for record in lines:
        assert (synth_dir / record["video"]).stat().st_size > 0
        assert len(record["references"]) >= 3
        assert len(set(record["references"])) == len(record["references"]), "paraphrases must differ"
        assert set(record["attributes"]) == {"scene", "time", "weather", "object", "direction", "speed"}
        for ref in record["references"]:
            assert any("가" <= ch <= "힣" for ch in ref), ref
            # every reference names every attribute the clip varies in
            assert parse_attributes(ref) == record["attributes"], ref


def test_attribute_space_and_constraints():
    rng = np.random.default_rng(0)
    from video_io.synth.attributes import draw_attributes

    seen = [draw_attributes(rng) for _ in range(2000)]
    for field, values in (("scene", SCENES), ("time", TIMES), ("weather", WEATHERS),
                          ("direction", DIRECTIONS), ("speed", SPEEDS), ("object", tuple(OBJECTS))):
        assert {getattr(a, field) for a in seen} == set(values), field
    for a in seen:
        scenes, directions = OBJECTS[a.object]
        assert a.scene in scenes and a.direction in directions


def test_canonical_caption_and_particles():
    a = ClipAttributes("sea", "sunset", "rain", "boat", "right", "slow")
    assert canonical_caption(a) == "비 내리는 해질녘의 바다 위에서 배 한 척이 천천히 오른쪽으로 움직인다."
    b = ClipAttributes("sky", "night", "clear", "cloud", "left", "fast")
    assert "구름 한 조각이 " in canonical_caption(b)  # 이 after a final consonant
    assert keywords_answer(b) == "밤, 맑음, 하늘, 구름, 왼쪽, 빠름"
    refs = reference_captions(a, np.random.default_rng(1))
    assert refs[0] == canonical_caption(a) and len(refs) == 4


def _object_centre(frames: np.ndarray) -> np.ndarray:
    """Centroid of pixels that change over the clip, per frame (the moving object)."""
    background = np.median(frames.astype(np.float32), axis=0)
    centres = []
    for frame in frames.astype(np.float32):
        moving = np.abs(frame - background).sum(-1) > 60
        ys, xs = np.nonzero(moving)
        centres.append((xs.mean(), ys.mean()))
    return np.array(centres)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_object_moves_in_the_stated_direction_and_speed(direction):
    travel = {}
    for speed in SPEEDS:
        a = ClipAttributes("sky", "day", "clear", "bird", direction, speed)
        frames = render_clip(a, np.random.default_rng(3), 16, 112, 112)
        dx, dy = _object_centre(frames)[-1] - _object_centre(frames)[0]
        expected = {"left": (dx < 0), "right": (dx > 0), "up": (dy < 0), "down": (dy > 0)}[direction]
        assert expected, (direction, speed, dx, dy)
        travel[speed] = abs(dx) + abs(dy)
    assert travel["fast"] > 1.5 * travel["slow"]


def test_single_frame_does_not_reveal_direction():
    """Shapes are mirror-symmetric: a left-moving and a right-moving clip share their middle frame."""
    frames = {}
    for direction in ("left", "right"):
        a = ClipAttributes("sky", "day", "clear", "airplane", direction, "fast")
        frames[direction] = render_clip(a, np.random.default_rng(9), 9, 112, 112)
    assert np.array_equal(frames["left"][4], frames["right"][4])
    assert not np.array_equal(frames["left"][0], frames["right"][0])


def test_decoded_frames_match_rendered_frames(synth_dir):
    _, _, rendered = make_clip(11, 2, SynthSpec())
    clip = decode_clip(str(synth_dir / "clip_00002.mp4"), DecodeSpec(EIGHT_FRAMES))
    error = np.abs(clip.frames.astype(np.int16) - rendered[clip.indices].astype(np.int16)).mean()
    assert error < 6, f"H.264 round trip changed frames too much (mean abs error {error:.1f})"


@pytest.mark.parametrize("argv, message", [
    (["--n", "0"], "--n"), (["--n", "2", "--size", "63x64"], "--size"),
    (["--n", "2", "--size", "big"], "--size"), (["--n", "2", "--frames", "1"], "--frames"),
])
def test_cli_rejects_bad_arguments(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        synth_main(["--out", str(tmp_path / "x"), *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
