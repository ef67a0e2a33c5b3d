"""video.backend=auto picks NVDEC only where a filed measurement says it pays (video_io/nvdec_rule.py)."""

from __future__ import annotations

from video_io.nvdec_rule import auto_picks_nvdec, load_measurements


def _row(gpu="NVIDIA L4", cores=8, clip="4k_hevc", nvdec_s=0.3, pyav_s=0.9, nvdec_fps=300, software_fps=120):
    return {"gpu": gpu, "cores": cores, "clip": clip, "codec": "hevc", "height": 2160, "pyav_s_per_clip": pyav_s,
            "nvdec_s_per_clip": nvdec_s, "software_fps": software_fps, "nvdec_fps": nvdec_fps}


def test_the_filed_measurements_pick_nvdec_nowhere():
    rows = load_measurements()
    assert {r["gpu"] for r in rows} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"} and all(r["cores"] == 16 for r in rows)
    for gpus, cores in ((["NVIDIA H200"], 16), (["NVIDIA H200"], 4), (["NVIDIA H100 80GB HBM3"], 8), ([], 2)):
        pays, why = auto_picks_nvdec(gpus, cores)
        assert not pays and why.startswith("video.backend=auto decodes in software"), why
    assert "slower than software on NVIDIA H200 (16 cores)" in auto_picks_nvdec(["NVIDIA H200"], 16)[1]
    # the H100 decoded 1080p HEVC and 4K faster than its 16 Xeon cores, but not 360p or 1080p H.264
    said = auto_picks_nvdec(["NVIDIA H100 80GB HBM3"], 16)[1]
    assert "slower than software on NVIDIA H100 80GB HBM3 (16 cores) for 360p_h264" in said, said
    assert "1080p_hevc" not in said and "4k_hevc" not in said
    assert "not been measured on NVIDIA A10G" in auto_picks_nvdec(["NVIDIA A10G"], 4)[1]


def test_nvdec_is_picked_only_where_it_was_faster_on_every_clip_with_as_many_cores_or_more():
    faster = [_row(), _row(clip="1080p_h264", nvdec_s=0.1, pyav_s=0.2, nvdec_fps=900, software_fps=700)]
    pays, why = auto_picks_nvdec(["NVIDIA L4"], 8, faster)
    assert pays and "decodes with NVDEC" in why
    assert auto_picks_nvdec(["NVIDIA L4"], 4, faster)[0]  # fewer cores than measured: software is slower still
    assert not auto_picks_nvdec(["NVIDIA L4"], 16, faster)[0]  # more cores: not measured
    assert not auto_picks_nvdec(["NVIDIA T4"], 8, faster)[0]  # another card
    # faster per clip but not in frames per second (the job's decoders share NVDEC's engines): no
    assert not auto_picks_nvdec(["NVIDIA L4"], 8, [*faster, _row(clip="360p_h264", nvdec_fps=100)])[0]
