"""video.backend=nvdec (video_io/nvdec.py): decoding on the GPU where FFmpeg opens a CUDA device, and a
clear refusal, naming the cause, where it cannot. These machines have no GPU, so CI checks the
refusal; on a GPU machine the same tests decode, and compare with software decoding."""

from __future__ import annotations

import numpy as np
import pytest

from tests.video_io.clipmakers import read_code, write_clip
from video_io.decode import DecodeError, DecodeSpec, decode_clip
from video_io.nvdec import probe_in_child, unavailable_reason
from video_io.sampling import SamplingSpec

# NVDEC decodes nothing smaller than 144x144 in HEVC (NVIDIA's NVDEC support matrix)
WIDTH, HEIGHT = 256, 192


def _spec(backend: str, seek: str = "exact") -> DecodeSpec:
    return DecodeSpec(sampling=SamplingSpec(num_frames=6), backend=backend, seek=seek, width=WIDTH, height=HEIGHT)


@pytest.mark.parametrize("codec", ["libx264", "libx265"])
def test_nvdec_decodes_the_frames_software_does_or_says_why_it_cannot(tmp_path, codec):
    path = str(write_clip(tmp_path / f"{codec}.mp4", 60, WIDTH, HEIGHT, codec=codec))
    reason = unavailable_reason()
    if reason is not None:  # no GPU (every CI machine): the clip fails with FFmpeg's cause and the fix
        with pytest.raises(DecodeError) as caught:
            decode_clip(path, _spec("nvdec"))
        message = str(caught.value)
        assert message.startswith("video.backend=nvdec: no CUDA device to decode on (")
        assert reason in message and message.endswith("use video.backend=auto to decode on the CPU")
        return
    for seek in ("exact", "keyframe", "auto"):
        gpu, cpu = decode_clip(path, _spec("nvdec", seek)), decode_clip(path, _spec("pyav", seek))
        assert gpu.backend == "nvdec" and gpu.decode_stats["on_gpu"] == gpu.decode_stats["decoded"] > 0
        assert cpu.decode_stats["on_gpu"] == 0
        assert (gpu.indices, gpu.times, gpu.seek) == (cpu.indices, cpu.times, cpu.seek)
        assert [read_code(f) for f in gpu.frames] == gpu.indices
        assert np.abs(gpu.frames.astype(int) - cpu.frames.astype(int)).mean() < 4  # same pictures, other rounding


def test_the_jobs_probe_asks_a_child_process_and_agrees_with_this_one():
    """The job asks a child (video_io/nvdec.py: CUDA must not start in the job's process before the
    engine forks); the child's answer is the one this process gets."""
    assert probe_in_child() == unavailable_reason()
