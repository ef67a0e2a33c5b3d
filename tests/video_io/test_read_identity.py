"""The identity of a clip is taken where its bytes are read: the decoder opens the file, fingerprints it,
decodes, and checks that the path still leads to that file (video_io/identity.py OpenedFile). A clip
re-exported while it is decoded (copied and renamed into place, or rewritten in place) gets no frames
under either file's name. Real files, the real decoder; the replacement happens inside the decode, at the
moment a slow decoder (or a long GPU batch) leaves open."""

from __future__ import annotations

import os
import shutil

from video_io.decode import DecodeSpec, decode_clip
from video_io.decoder_process import DecodeResult, SegmentPlan, decode_path
from video_io.identity import OpenedFile, file_identity
from video_io.sampling import SamplingSpec
from video_io.segmenting import SegmentSpec

SPEC = DecodeSpec(sampling=SamplingSpec(num_frames=4))


def _replace(path, by) -> None:
    """What a re-export does: write a copy beside it, rename it onto the name."""
    partial = f"{path}.partial"
    shutil.copy(by, partial)
    os.replace(partial, path)


def _results(messages) -> list[DecodeResult]:
    return [m for m in messages if not isinstance(m, SegmentPlan)]


def test_a_decoded_clip_names_the_file_it_was_read_from(tmp_path, synth_dir):
    clip = tmp_path / "C0001.MP4"
    shutil.copy(synth_dir / "clip_00000.mp4", clip)
    [result] = _results(decode_path(str(clip), SPEC))
    assert result.ok
    assert result.source == {k: v for k, v in file_identity(clip, tmp_path).items() if k != "input_dir"}


def test_a_file_replaced_while_it_is_decoded_gets_no_frames_under_either_name(tmp_path, synth_dir):
    clip, other = tmp_path / "C0001.MP4", synth_dir / "clip_00001.mp4"
    shutil.copy(synth_dir / "clip_00000.mp4", clip)
    before = OpenedFile.open(clip).identity

    def decode_then_reexport(path, spec):  # the real decoder; the new file lands before the check
        decoded = decode_clip(path, spec)
        _replace(path, other)
        return decoded

    [result] = _results(decode_path(str(clip), SPEC, decode_fn=decode_then_reexport))
    assert not result.ok and result.clip is None
    assert result.error.startswith("the file changed while it was read (it was ")
    assert "another file put in its place" in result.error
    assert result.source == before  # the error is the old file's: the next run captions the new one

    # rewritten in place (same inode, new bytes): the same
    shutil.copy(synth_dir / "clip_00000.mp4", clip)

    def decode_then_overwrite(path, spec):
        decoded = decode_clip(path, spec)
        with open(path, "r+b") as f:
            f.seek(0, os.SEEK_END)
            f.write(b"\0" * 10)
        return decoded

    [result] = _results(decode_path(str(clip), SPEC, decode_fn=decode_then_overwrite))
    assert not result.ok and "the same file, written to" in result.error

    # replaced after the decoder checked: the frames are the old file's, and the result says so
    shutil.copy(synth_dir / "clip_00000.mp4", clip)
    old = OpenedFile.open(clip).identity
    [result] = _results(decode_path(str(clip), SPEC))
    _replace(clip, other)
    assert result.ok and result.source == old != OpenedFile.open(clip).identity


def test_a_long_video_replaced_between_its_segments_keeps_the_segments_read_before(tmp_path, long_dir):
    video = tmp_path / "long.mp4"
    source = sorted(long_dir.glob("*.mp4"))
    shutil.copy(source[0], video)
    before = OpenedFile.open(video).identity
    calls = []

    def reexported_during_the_second_segment(path, spec):
        calls.append(spec.window)
        decoded = decode_clip(path, spec)
        if len(calls) == 2:
            _replace(path, source[1])
        return decoded

    results = _results(decode_path(str(video), SPEC, SegmentSpec(mode="scenes"),
                                   decode_fn=reexported_during_the_second_segment))
    assert len(results) >= 3 and all(r.segment is not None for r in results)
    assert results[0].ok and results[0].source == before
    for later in results[1:]:  # the segment being read when it changed, and those after it (never read)
        assert not later.ok and "the file changed while it was read" in later.error and later.source == before
    assert len(calls) == 2 and results[-1].last
