"""PyAV's side of decoding: a clip's frame index from its packets, and the frames wanted from it,
decoded from the keyframe before each, scaled and converted one at a time (only those kept).

Frames are numbered as decode_clip records them (`frame_indices`): packets with a timestamp, in
timestamp order. decode.py samples clips with these functions; thumbnails.py reads a record's frames
back with `frames_at`, so a review page shows exactly the frames the model was given.
"""

from __future__ import annotations

import bisect
from typing import Callable

import numpy as np

from video_io.mp4_index import Read, composition_offsets
from video_io.source import DecodeError, Source, display_rotation, library_reason, no_video_reason

# (rotation, coded width, coded height) -> the coded size to scale to, or None to keep it
SizeFor = Callable[[int, int, int], "tuple[int, int] | None"]


def packet_index(container, stream) -> tuple[list[int], list[int]]:
    """(timestamps of the frames, timestamps of the keyframes), ascending, from the packets alone
    (demuxing reads no picture data)."""
    pts, keys = set(), set()
    for packet in container.demux(stream):
        if packet.pts is not None and packet.size:
            pts.add(packet.pts)
            if packet.is_keyframe:
                keys.add(packet.pts)
    return sorted(pts), sorted(keys)


def indexed_timeline(container, stream, read: Read | None, size: int) -> tuple[list[int], list[int]] | None:
    """packet_index's answer from an MP4/MOV's own index, without demuxing the packets: for an object in a
    store, where demuxing fetches every byte. FFmpeg's index gives each sample's decode timestamp and
    keyframe flag; the sample table's composition offsets (video_io/mp4_index.py, read through `read`)
    give its presentation timestamp, calibrated on the first packet (the only one demuxed). None where
    the index cannot stand for the packets: another container, or a sample table that does not count the
    index's samples."""
    if read is None or "mp4" not in container.format.name.split(","):
        return None
    entries = list(stream.index_entries)
    offsets = composition_offsets(read, size, stream.index)
    if offsets is None or len(offsets) != len(entries) or len(entries) < 2:
        return None
    first = next((p for p in container.demux(stream) if p.size), None)
    at = None if first is None or first.pts is None else \
        next((i for i, e in enumerate(entries) if e.timestamp == first.dts), None)
    if at is None:
        return None
    shift = first.pts - first.dts - offsets[at]
    kept = [(e.timestamp + offset + shift, e.is_keyframe) for e, offset in zip(entries, offsets)
            if not e.is_discard and e.size > 0]
    pts = sorted(t for t, _ in kept)
    if len(set(pts)) != len(pts) or (stream.frames and len(pts) != stream.frames):
        return None
    return pts, sorted(t for t, key in kept if key)


def decode_counters() -> dict:
    """One clip's decoding counted: packets fed to the decoder (skipped ones too), frames it output,
    frames it output again (a frame decoded twice), frames converted to RGB, and of the frames
    output those NVDEC decoded (video_io/nvdec.py; 0 in software)."""
    return {"packets": 0, "decoded": 0, "repeated": 0, "converted": 0, "on_gpu": 0}


def decode_sampled(uri: str, size_for: SizeFor, wanted: list[int], keys: list[int], mode: str = "exact",
                   stats: dict | None = None, on_gpu: bool = False) -> tuple[dict[int, np.ndarray], int, int]:
    """decode_wanted with seeking, sequentially where a seek lands wrong (a damaged index, MPEG-TS);
    DecodeError when a wanted frame cannot be decoded. `on_gpu`: decode with NVDEC (video_io/nvdec.py)."""
    stats = decode_counters() if stats is None else stats
    hwaccel = None
    if on_gpu:
        from video_io.nvdec import hwaccel as nvdec_hwaccel

        hwaccel = nvdec_hwaccel()
    try:
        images, rotation, rejected = decode_wanted(uri, size_for, wanted, keys, True, mode=mode, stats=stats,
                                                   hwaccel=hwaccel)
        if len(images) < len(wanted):
            images, rotation, rejected = decode_wanted(uri, size_for, wanted, [], False, stats=stats,
                                                       hwaccel=hwaccel)
    except Exception as exc:
        if on_gpu:  # a damaged packet is skipped (decode_wanted); what fails here is more likely the device
            raise DecodeError("decoding on the GPU failed: " + library_reason(exc, "nvdec")) from None
        raise DecodeError("damaged video data: " + library_reason(exc, "pyav")) from None
    missing = len(wanted) - len(images)
    if missing:
        raise DecodeError(f"damaged video data: {missing} of the {len(wanted)} sampled frames could not "
                          f"be decoded ({rejected} packets rejected by the decoder); re-copy or re-export "
                          f"the file")
    return images, rotation, rejected


def check_indices(indices: list[int], total: int) -> None:
    """Indices a record names must still be frames of the clip (thumbnails read them back later)."""
    bad = [i for i in indices if not 0 <= i < total]
    if bad:
        raise DecodeError(f"frame index {bad[0]} is outside the clip's {total} frames "
                          "(was the file replaced after captioning?)")


def frames_at(source: Source, indices: list[int], size: tuple[int, int] | None = None,
              stats: dict | None = None) -> np.ndarray:
    """(len(indices), H, W, 3) uint8 RGB: the frames decode_clip numbers `indices`, in the order given,
    turned upright and scaled to the upright `size` (width, height; None keeps the stored size).
    `stats` counts the frames decoded and converted (decode_wanted)."""
    import av

    try:
        with av.open(source.uri, metadata_errors="replace") as container:
            if not container.streams.video:
                raise DecodeError(no_video_reason(container))
            pts, keys = packet_index(container, container.streams.video[0])
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(library_reason(exc, "pyav")) from None
    check_indices(indices, len(pts))

    def size_for(rotation: int, width: int, height: int):
        if size is None:
            return None
        return (size[1], size[0]) if rotation in (90, 270) else size

    wanted = sorted({pts[i] for i in indices})
    # frames the job took in keyframe mode are keyframes: decode them as it did (one packet each)
    mode = "keyframe" if set(wanted) <= set(keys) else "exact"
    images, _, _ = decode_sampled(source.uri, size_for, wanted, keys, mode=mode, stats=stats)
    return np.stack([images[pts[i]] for i in indices])


def decode_wanted(uri: str, size_for: SizeFor, wanted: list[int], keys: list[int], seek: bool,
                  mode: str = "exact", stats: dict | None = None,
                  hwaccel=None) -> tuple[dict[int, np.ndarray], int, int]:
    """({pts: frame} for the `wanted` timestamps (ascending), rotation, packets rejected).

    With `seek`, jumps to the keyframe before each wanted frame when that keyframe lies beyond
    what has been decoded (8 frames of a 60 s clip then cost 8 GOPs, not the whole clip) and
    skips unwanted non-reference frames (mode "keyframe": every unwanted frame that is not a
    keyframe, as the wanted frames are keyframes); otherwise decodes everything from the start.
    Packets the decoder rejects (damaged data) are skipped. `stats`: decode_counters. `hwaccel`:
    av.open's, to decode on a GPU (video_io/nvdec.py); the wanted pictures come back to host memory."""
    import av

    with av.open(uri, metadata_errors="replace", hwaccel=hwaccel) as container:
        run = _WantedFrames(container, size_for, wanted, keys, seek, mode,
                            decode_counters() if stats is None else stats, hwaccel is not None)
        for n, target in enumerate(wanted):
            if target in run.images or (run.last is not None and run.last > target):
                continue  # already decoded, or passed (damaged): nothing better to find
            if not run.go_to(n, target):
                break  # a drained decoder takes packets again only after a seek: the caller goes sequential
            for packet in container.demux(run.stream):
                if run.feed(packet, target):
                    break
    return run.images, run.rotation or 0, run.rejected


class _WantedFrames:
    """decode_wanted's pass over one container: where it is, what it has, what it counted."""

    def __init__(self, container, size_for: SizeFor, wanted: list[int], keys: list[int], seek: bool, mode: str,
                 stats: dict, on_gpu: bool):
        self.stream = container.streams.video[0]
        self.stream.thread_type = "AUTO"
        if on_gpu:  # the CPU only parses; every frame thread would hold GPU surfaces of its own
            self.stream.thread_count = 1
        self.container, self.size_for, self.wanted, self.keys, self.seek = container, size_for, wanted, keys, seek
        self.stats, self.on_gpu = stats, on_gpu
        self.wanted_set, self.seen = set(wanted), set()
        self.unwanted_skip = "NONKEY" if mode == "keyframe" else "NONREF"
        self.images: dict[int, np.ndarray] = {}
        self.rotation, self.size, self.rejected, self.last = None, None, 0, None
        # A decoder holds each frame back until it has decoded the frames that may come before it on
        # screen (B-frame reordering, frame threads): for a wanted keyframe, the next keyframes (keyframe
        # mode skips every other frame) or the rest of its GOP. So when a wanted keyframe is the last
        # frame wanted before the next GOP, the decoder is drained once its packet is in, and the seek
        # to the next target resets it.
        self.drained, self.drain = False, False

    def go_to(self, n: int, target: int) -> bool:
        """Seek to the keyframe before wanted frame n where that is ahead; False where the decoder is
        drained and no seek would reset it."""
        keys = self.keys
        key = keys[bisect.bisect_right(keys, target) - 1] if self.seek and keys and keys[0] <= target else None
        after = self.wanted[n + 1] if n + 1 < len(self.wanted) else None
        self.drain = key == target and (after is None or keys[bisect.bisect_right(keys, after) - 1] > target)
        if key is not None and (self.last is None or key > self.last or self.drained):
            self.container.seek(key, stream=self.stream, backward=True)
            self.drained = False
        elif self.drained:
            return False
        return True

    def feed(self, packet, target: int) -> bool:
        """Decode one packet, keeping the wanted frames it gives; True once `target` is reached."""
        import av

        if self.seek:  # frames nothing refers to are not decoded unless wanted (about half of
            # an H.264/HEVC stream with B-frames); the decoder reads this per packet
            self.stream.codec_context.skip_frame = "DEFAULT" if packet.pts in self.wanted_set else self.unwanted_skip
        self.stats["packets"] += bool(packet.size)
        try:
            frames = packet.decode()
            if self.drain and packet.pts == target:
                frames = [*frames, *self.stream.codec_context.decode(None)]
                self.drained = True
        except av.error.InvalidDataError:
            self.rejected += 1
            return False
        for frame in frames:
            if frame.pts is not None:
                self._keep(frame)
        return self.drained or (self.last is not None and self.last >= target)

    def _keep(self, frame) -> None:
        stats = self.stats
        self.last = frame.pts
        stats["decoded"] += 1
        # FFmpeg sets the context's format to the device's ("cuda") once NVDEC decodes, and to a
        # software format where it fell back (a profile the GPU lacks)
        stats["on_gpu"] += self.on_gpu and self.stream.codec_context.pix_fmt == "cuda"
        stats["repeated"] += frame.pts in self.seen
        self.seen.add(frame.pts)
        if self.rotation is None:
            self.rotation = display_rotation(frame)
            self.size = self.size_for(self.rotation, frame.width, frame.height)
        if frame.pts in self.wanted_set and frame.pts not in self.images:
            self.images[frame.pts] = small_rgb(frame, self.size, self.rotation)
            stats["converted"] += 1


def small_rgb(frame, size: tuple[int, int] | None, rotation: int) -> np.ndarray:
    """One decoded frame scaled (bicubic, as FFmpeg's scale filter and so decord do by default)
    and converted to RGB in one swscale call, turned upright."""
    if size:
        frame = frame.reformat(width=size[0], height=size[1], format="rgb24", interpolation="BICUBIC")
    else:
        frame = frame.reformat(format="rgb24")
    return turn_upright(frame.to_ndarray(), rotation)


def turn_upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """Turn a decoded frame counter-clockwise by `rotation` degrees, as a player does."""
    return np.ascontiguousarray(np.rot90(image, k=rotation // 90)) if rotation else image
