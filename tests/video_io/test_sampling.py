"""Frame sampling: uniform over the clip or at a rate, by timestamp (so VFR clips sample evenly)."""

from __future__ import annotations

import numpy as np
import pytest

from video_io.sampling import SamplingSpec, sample_indices

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)


def test_uniform_takes_segment_centres():
    times = np.arange(32) / 8.0  # 4 s at 8 fps
    assert sample_indices(times, 4.0, SamplingSpec("uniform", num_frames=8)) == [2, 6, 10, 14, 18, 22, 26, 30]


def test_uniform_with_fewer_frames_than_asked_repeats_frames():
    times = np.arange(3) / 8.0
    indices = sample_indices(times, 3 / 8.0, SamplingSpec("uniform", num_frames=8))
    assert len(indices) == 8 and sorted(indices) == indices and set(indices) <= {0, 1, 2}


def test_fps_mode_follows_duration_and_caps():
    times = np.arange(240) / 24.0  # 10 s at 24 fps
    spec = SamplingSpec("fps", fps=2.0, max_frames=32)
    indices = sample_indices(times, 10.0, spec)
    assert len(indices) == 20
    assert np.allclose(np.diff(times[indices]), 0.5, atol=1 / 24)
    capped = sample_indices(times, 10.0, SamplingSpec("fps", fps=2.0, max_frames=8))
    assert len(capped) == 8
    short = sample_indices(np.arange(4) / 24.0, 4 / 24.0, SamplingSpec("fps", fps=2.0, min_frames=2))
    assert len(short) == 2


def test_variable_frame_rate_is_sampled_evenly_in_time():
    # first 2 s at 30 fps, then 2 s at 5 fps: index-uniform picks would crowd into the first half
    times = np.concatenate([np.arange(60) / 30.0, 2.0 + np.arange(10) / 5.0])
    indices = sample_indices(times, 4.0, SamplingSpec("uniform", num_frames=8))
    picked = times[indices]
    assert np.allclose(picked, [0.25, 0.75, 1.25, 1.75, 2.2, 2.8, 3.2, 3.8], atol=0.11)
    assert sum(t < 2.0 for t in picked) == 4


def test_empty_clip_and_bad_specs():
    with pytest.raises(ValueError, match="no frames"):
        sample_indices(np.array([]), 0.0, EIGHT_FRAMES)
    for kwargs in ({"mode": "random"}, {"mode": "uniform"}, {"num_frames": 0}, {"mode": "fps", "fps": 0},
                   {"min_frames": 9, "max_frames": 4}):
        with pytest.raises(ValueError):
            SamplingSpec(**kwargs)
