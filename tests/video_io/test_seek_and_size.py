"""Aspect-preserving frame sizes (equal to transformers' smart_resize, token counts equal to what the
HF processor makes of those frames), keyframe/exact seek modes on clips whose frames spell their own
index, and no frame decoded twice (PyAV's decode counters)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quant.memory import vision_tokens
from quant.request_size import clip_vision_tokens
from tests.video_io.clipmakers import read_code, write_clip
from vidcap_ko.families import get_family
from video_io import seek as seek_modes
from video_io.decode import DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.seek import MIN_GAP
from video_io.sizing import fit_size

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)

TINY = Path(__file__).resolve().parents[2] / "assets" / "models" / "vidcap-ko-tiny"
SOURCES = {"16:9": (1080, 1920), "portrait": (1920, 1080), "square": (64, 64), "tiny": (10, 12),
           "huge": (4320, 7680), "ultrawide": (100, 4000)}


@pytest.mark.parametrize("name", SOURCES)
@pytest.mark.parametrize("budget", [3136, 448 * 448, 12845056])
def test_sizes_equal_transformers_smart_resize(name, budget):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    h, w = SOURCES[name]
    theirs = smart_resize(h, w, factor=28, min_pixels=28 * 28, max_pixels=budget)
    fh, fw = fit_size(h, w, 28, budget)
    if theirs[0] * theirs[1] <= budget:
        assert (fh, fw) == theirs
    else:  # only a panorama at the smallest budget: smart_resize breaks the budget, fit_size cuts the long side
        assert name == "ultrawide" and fh == theirs[0] and fw < theirs[1]
    assert fh % 28 == 0 and fw % 28 == 0 and fh * fw <= budget
    if name not in ("ultrawide", "tiny") and budget >= 448 * 448:  # room for the grid to follow the shape: never squashed
        assert abs(fw / fh - w / h) / (w / h) < 0.15


def _processor_tokens(processor, frames: np.ndarray) -> int:
    import torch

    out = processor(videos=[torch.from_numpy(frames).permute(0, 3, 1, 2)], return_tensors="pt",
                    do_sample_frames=False, cap_pixels_per_frame=True)
    merge = processor.merge_size
    return int(out["video_grid_thw"].prod()) // (merge * merge)


@pytest.mark.parametrize("name", SOURCES)
def test_planner_counts_the_tokens_the_hf_processor_makes(name):
    """The embedded model's own processor (its processor_config.json) and one with the 7B preset's
    pixel limits, on frames sized by the decoder's rule: the planner's count equals theirs, and the
    budget's worst case is never below it."""
    from omegaconf import OmegaConf
    from transformers import AutoVideoProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    root = Path(__file__).resolve().parents[2]
    for preset, processor in (
            ("vidcap_ko_tiny", AutoVideoProcessor.from_pretrained(str(TINY))),
            ("qwen2_5_vl_7b", None)):
        model = OmegaConf.to_container(OmegaConf.load(root / "conf" / "model" / f"{preset}.yaml"))
        arch = model["arch"]
        multiple = get_family(model["family"]).size_multiple(arch)
        if processor is None:
            processor = Qwen2VLVideoProcessor(size={"shortest_edge": arch["video_min_pixels"],
                                                    "longest_edge": arch["video_max_pixels"]})
        h, w = fit_size(*SOURCES[name], multiple, model["frame_pixels"])
        frames = np.random.default_rng(0).integers(0, 256, (8, h, w, 3), dtype=np.uint8)
        got = _processor_tokens(processor, frames)
        assert vision_tokens(model["family"], arch, 8, w, h) == got
        worst, note = clip_vision_tokens(model["family"], arch, 8, None, None, model["frame_pixels"],
                                         multiple)
        assert worst >= got and "worst case" in note


def test_square_clips_keep_the_embedded_models_56x56_frames(tmp_path):
    clip = decode_clip(str(write_clip(tmp_path / "sq.mp4", 30, 64, 64)),
                       DecodeSpec(EIGHT_FRAMES, max_pixels=3136, size_multiple=28, backend="pyav"))
    assert clip.frames.shape[1:3] == (56, 56)
    wide = decode_clip(str(write_clip(tmp_path / "wide.mp4", 30, 192, 108)),
                       DecodeSpec(EIGHT_FRAMES, max_pixels=448 * 448, size_multiple=28, backend="pyav"))
    assert wide.frames.shape[1:3] == (112, 196)  # 16:9 kept (transformers: 112 x 196 for 108 x 192)


def _coded_clip(tmp_path, codec: str, gop: int, n: int = 240) -> Path:
    options = {"libx264": {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0", "bf": "2"},
               "libx265": {"x265-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=2:log-level=none"}}
    return write_clip(tmp_path / f"{codec}_{gop}.mp4", n, 128, 96, codec=codec, options=options[codec])


def _spec(backend, seek, frames=8):
    return DecodeSpec(sampling=SamplingSpec(num_frames=frames), backend=backend, seek=seek, width=128, height=96)


@pytest.mark.parametrize("backend, codec", [("decord", "libx264"), ("pyav", "libx264"), ("pyav", "libx265")])
def test_keyframe_mode_returns_the_nearest_keyframes_and_their_times(tmp_path, backend, codec):
    path = str(_coded_clip(tmp_path, codec, gop=30))  # 240 frames at 25 fps: keyframes every 1.2 s
    clip = decode_clip(path, _spec(backend, "keyframe"))
    exact = decode_clip(path, _spec(backend, "exact"))
    assert clip.seek == "keyframe" and exact.seek == "exact"
    assert [read_code(f) for f in clip.frames] == clip.indices  # the frames are the ones named
    assert all(i % 30 == 0 for i in clip.indices)
    assert clip.times == pytest.approx([i / 25 for i in clip.indices], abs=1e-3)
    # each keyframe is the one nearest its exact sample, within half a keyframe gap (0.6 s)
    assert all(abs(k - e) <= 15 for k, e in zip(clip.indices, exact.indices))
    assert [read_code(f) for f in exact.frames] == exact.indices == [15, 45, 75, 105, 135, 165, 195, 225]
    assert exact.times == pytest.approx([i / 25 for i in exact.indices], abs=1e-3)


@pytest.mark.parametrize("backend, codec", [("decord", "libx264"), ("pyav", "libx264"), ("pyav", "libx265")])
def test_auto_takes_from_each_segment_its_keyframe_or_its_first_frame(tmp_path, backend, codec):
    """240 frames at 25 fps, 8 samples: segments of 30 frames, exact samples at their centres (15, 45, ...)."""
    short = str(_coded_clip(tmp_path, codec, gop=10))  # 3 keyframes in every segment
    got = decode_clip(short, _spec(backend, "auto"))
    # the keyframe nearest each centre (165 is as near 160 as 170: the earlier)
    assert got.seek == "keyframe" and got.indices == [10, 40, 70, 100, 130, 160, 190, 220]
    assert [read_code(f) for f in got.frames] == got.indices
    assert any("keyframe seek" in n for n in got.notes)

    long = str(_coded_clip(tmp_path, codec, gop=100))  # keyframes 0, 100, 200: 5 segments have none
    got = decode_clip(long, _spec(backend, "auto"))
    exact = decode_clip(long, _spec(backend, "exact"))
    assert got.seek == "nearby" and got.indices == [0, 30, 60, 100, 120, 150, 200, 210]
    assert [read_code(f) for f in got.frames] == got.indices  # the frames are the ones named
    assert got.times == pytest.approx([i / 25 for i in got.indices], abs=1e-3)
    assert all(30 * k <= i < 30 * (k + 1) for k, i in enumerate(got.indices))  # each in its own segment
    assert any("nearby seek: 3 of 8 frames are keyframes" in n for n in got.notes)
    if backend == "pyav":  # decoded up to each segment's start, not to its centre
        assert got.decode_stats["decoded"] < exact.decode_stats["decoded"]
        assert got.decode_stats["repeated"] == 0 and got.decode_stats["converted"] == 8


def test_auto_spreads_frames_a_keyframe_at_a_segments_end_would_crowd(tmp_path, monkeypatch):
    """The keyframes of a phone clip (scene cuts at 30, 76, 103, 137, 187, 242 of 250 frames) put the
    cheapest frames of neighbouring segments side by side: [30, 32, 76, 103, 137, 187, 188, 242]. Spread:
    segment 0's other keyframe (0, one packet like 30) and, where no other keyframe exists, segment 6's
    frame a quarter of a segment after 187 (decoded on from 187: 7 frames more than 188)."""
    keys = {0, 30, 76, 103, 137, 187, 242}
    path = write_clip(tmp_path / "phone.mp4", 250, 128, 96, fps=30, keyframes=keys,
                      options={"g": "1000", "keyint_min": "1000", "sc_threshold": "0", "bf": "2", "forced-idr": "1"})
    got = decode_clip(str(path), _spec("pyav", "auto"))
    assert got.indices == [0, 32, 76, 103, 137, 187, 195, 242] and got.seek == "nearby"
    assert [read_code(f) for f in got.frames] == got.indices
    width = 250 / 8
    gaps = [b - a for a, b in zip(got.indices, got.indices[1:])]
    assert min(gaps) >= MIN_GAP * width  # no neighbours: at least a quarter of a segment apart
    assert all(width * k <= i < width * (k + 1) for k, i in enumerate(got.indices))  # each in its own segment
    # the cost of the spread: one keyframe and the frames from 188 to 195, nothing else (9 -> 15 frames
    # decoded here; exact takes 51); clips whose cheapest frames do not crowd are decoded as before
    monkeypatch.setattr(seek_modes, "spread_neighbours", lambda times, keys, picked, edges: picked)
    before = decode_clip(str(path), _spec("pyav", "auto"))
    assert before.indices == [30, 32, 76, 103, 137, 187, 188, 242]
    assert got.decode_stats["decoded"] - before.decode_stats["decoded"] <= 1 + (195 - 188)
    assert got.decode_stats["repeated"] == 0


@pytest.mark.parametrize("codec", ["libx264", "libx265"])
def test_pyav_decodes_no_frame_twice_and_converts_only_kept_frames(tmp_path, codec):
    path = str(_coded_clip(tmp_path, codec, gop=60))
    # 12 samples over 4 GOPs: several per GOP, so a re-seek into a decoded GOP would show as a repeat
    exact = decode_clip(path, _spec("pyav", "exact", frames=12))
    stats = exact.decode_stats
    assert [read_code(f) for f in exact.frames] == exact.indices
    assert stats["repeated"] == 0
    assert stats["converted"] == len(set(exact.indices)) == 12
    assert stats["decoded"] <= exact.indices[-1] + 1  # never more than one pass up to the last sample
    keyed = decode_clip(path, _spec("pyav", "keyframe", frames=4))
    assert keyed.decode_stats == {"packets": 4, "decoded": 4, "repeated": 0, "converted": 4,
                                  "on_gpu": 0}  # one per sample, in software


@pytest.mark.parametrize("codec", ["libx264", "libx265"])
def test_a_sampled_keyframe_alone_in_its_gop_costs_one_packet(tmp_path, codec):
    """Exact samples 15, 45, ... of a clip with a keyframe every 15 frames are all keyframes, each the only
    sample of its GOP: the decoder is drained after its packet, instead of being fed the GOP's next packets
    until B-frame reordering lets the keyframe out (40 packets for x264, 56 for x265 here without it)."""
    exact = decode_clip(str(_coded_clip(tmp_path, codec, gop=15)), _spec("pyav", "exact"))
    assert exact.seek == "exact" and exact.indices == [15, 45, 75, 105, 135, 165, 195, 225]
    assert [read_code(f) for f in exact.frames] == exact.indices
    assert exact.decode_stats == {"packets": 8, "decoded": 8, "repeated": 0, "converted": 8, "on_gpu": 0}


def test_bad_seek_mode_and_half_a_size_are_refused():
    with pytest.raises(ValueError, match="seek"):
        DecodeSpec(EIGHT_FRAMES, seek="nearest")
    with pytest.raises(ValueError, match="both"):
        DecodeSpec(EIGHT_FRAMES, width=56)
