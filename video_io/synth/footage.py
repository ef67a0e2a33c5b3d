"""Real-size footage: clips the way cameras, phones and stock libraries deliver them, for
measuring decoding and the job on something heavier than the 112x112 training clips.

    python -m video_io.synth.footage --out data/footage --n 6 --seed 0 [--profile mixed]
    python -m video_io.synth.footage --out /tmp/f --n 2 --size 320x180 --seconds 2   # small
    python -m video_io.synth.footage --out data/4k --n 16 --size 3840x2160 --seconds 3 --codec hevc --workers 16

Profiles (each clip draws its own settings from the seed, within the profile):
  camera  1080p or 4K landscape, 24/30/60 fps, H.264 or HEVC, short GOP (1-2 s), moov at the end
  stock   1080p or 4K landscape, 24/30 fps, HEVC or H.264, long GOP (250 frames), faststart
  phone   portrait 1080x1920: stored as a portrait picture, or landscape with a 90-degree display
          matrix as phones write it; 30/60 fps, HEVC or H.264, GOP 1-2 s
  mixed   any of the above
Durations are 10-60 s. Content: the synthetic scene of video_io.synth (sky, ground, weather and
a moving object, with Korean references in references.jsonl) rendered large, with a fine
texture, a slow camera pan and sensor grain, so encoders see real motion and detail.

Frames are made one at a time in YUV 4:2:0 (never a stack of 4K frames), converted by numpy
(video_io.synth.dataset.rgb_to_yuv420p) so pixels depend only on the seed; the encoders are
x264/x265 with fixed settings at camera-like bitrates; --exact makes the files byte-identical
per seed too (single-threaded encoding).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import av
import numpy as np

from video_io.footage_kind import REFERENCES_FILE
from video_io.synth.args import frame_size
from video_io.synth.attributes import draw_attributes
from video_io.synth.captions_ko import reference_captions
from video_io.synth.dataset import in_processes, rgb_to_yuv420p
from video_io.synth.mux import encode_all, timed_frames
from video_io.synth.render import object_track, render_background, render_object

PROFILES = ("camera", "stock", "phone", "mixed")
CODECS = {"h264": "libx264", "hevc": "libx265"}
LANDSCAPE = ((1920, 1080), (3840, 2160))
PORTRAIT = (1080, 1920)
LONG_GOP = 250
BITS_PER_PIXEL = {"h264": 0.25, "hevc": 0.15}


@dataclass(frozen=True)
class FootageSpec:
    """How one clip is delivered. width x height is the stored picture; rotation (counter-
    clockwise degrees in the display matrix) turns it for display."""

    width: int
    height: int
    fps: int
    seconds: float
    codec: str  # h264 | hevc
    gop: int  # frames between keyframes
    rotation: int = 0
    faststart: bool = False  # index (moov) before the data, as web/stock downloads have it
    preset: str = "fast"
    exact: bool = False  # byte-identical files per seed: single-threaded encoders (slow at 4K)
    mbps: float | None = None  # average bitrate; None: BITS_PER_PIXEL's camera-like rate

    @property
    def n_frames(self) -> int:
        return max(2, round(self.seconds * self.fps))

    def __post_init__(self):
        if self.width % 2 or self.height % 4 or self.width < 32 or self.height < 32:
            raise ValueError(f"sizes need an even width and a height divisible by 4, >= 32 px: "
                             f"{self.width}x{self.height}")
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {sorted(CODECS)}, got {self.codec!r}")
        if self.fps <= 0 or self.seconds <= 0 or self.gop <= 0:
            raise ValueError("fps, seconds and gop must be > 0")
        if self.mbps is not None and self.mbps <= 0:
            raise ValueError(f"mbps must be > 0, got {self.mbps}")

    @property
    def bit_rate(self) -> int:
        """Average bits per second: --mbps, else bits per pixel per frame as cameras and phones record
        (4K30 H.264 ~62 Mbit/s, 1080p30 HEVC ~9 Mbit/s)."""
        if self.mbps is not None:
            return int(self.mbps * 1e6)
        return int(BITS_PER_PIXEL[self.codec] * self.width * self.height * self.fps)


def draw_spec(profile: str, rng: np.random.Generator) -> FootageSpec:
    """The delivery settings of one clip of `profile`."""
    if profile == "mixed":
        profile = ("camera", "stock", "phone")[int(rng.integers(0, 3))]
    seconds = float(rng.integers(10, 61))
    codec = ("h264", "hevc")[int(rng.integers(0, 2))]
    if profile == "camera":
        (w, h), fps = LANDSCAPE[int(rng.integers(0, 2))], int(rng.choice([24, 30, 60]))
        return FootageSpec(w, h, fps, seconds, codec, gop=fps * int(rng.integers(1, 3)))
    if profile == "stock":
        (w, h), fps = LANDSCAPE[int(rng.integers(0, 2))], int(rng.choice([24, 30]))
        return FootageSpec(w, h, fps, seconds, codec, gop=LONG_GOP, faststart=True)
    if profile == "phone":
        fps = int(rng.choice([30, 60]))
        if rng.integers(0, 2):  # landscape sensor picture + display matrix
            return FootageSpec(PORTRAIT[1], PORTRAIT[0], fps, seconds, codec, gop=fps * int(rng.integers(1, 3)),
                               rotation=90)
        return FootageSpec(*PORTRAIT, fps, seconds, codec, gop=fps * int(rng.integers(1, 3)))
    raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")


def _resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bilinear resize of a float (H, W[, C]) image (numpy only, so pixels depend on nothing else)."""
    def axis(n_out, n_in):
        pos = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        lo = np.clip(np.floor(pos).astype(int), 0, n_in - 1)
        return lo, np.minimum(lo + 1, n_in - 1), np.clip(pos - lo, 0, 1).astype(np.float32)

    y0, y1, wy = axis(height, image.shape[0])
    x0, x1, wx = axis(width, image.shape[1])
    shape = (-1, 1) + (1,) * (image.ndim - 2)
    rows = image[y0] * (1 - wy.reshape(shape)) + image[y1] * wy.reshape(shape)
    shape = (1, -1) + (1,) * (image.ndim - 2)
    return rows[:, x0] * (1 - wx.reshape(shape)) + rows[:, x1] * wx.reshape(shape)


def _texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Fractal value noise in [-1, 1]: grass, water and cloud detail at every scale."""
    out = np.zeros((height, width), np.float32)
    for octave in range(5):
        cells = 8 * 2 ** octave
        grid = rng.uniform(-1, 1, (max(2, cells * height // width), cells)).astype(np.float32)
        out += _resize(grid, width, height) / 2 ** octave
    return out / 1.94


class FootageScene:
    """A panorama larger than the frame (room for the pan) plus the object sprite, in YUV."""

    def __init__(self, seed: int, index: int, spec: FootageSpec):
        rng = np.random.default_rng([seed, index])
        self.attributes = draw_attributes(rng)
        self.references = reference_captions(self.attributes, rng)
        # the picture as displayed: a phone's sensor picture is turned back at the end
        self.w, self.h = (spec.height, spec.width) if spec.rotation in (90, 270) else (spec.width, spec.height)
        self.pan = (int(self.w * 0.08) // 2 * 2, int(self.h * 0.08) // 4 * 4)
        pw, ph = self.w + self.pan[0], self.h + self.pan[1]
        art = render_background(self.attributes, rng, max(64, pw // 3) // 2 * 2, max(64, ph // 3) // 4 * 4)
        panorama = _resize(art, pw, ph) * (1 + 0.10 * _texture(rng, pw, ph)[..., None])
        self.yuv = rgb_to_yuv420p(np.clip(panorama, 0, 255))
        self.panorama_h = ph
        sprite_w = max(8, int(self.w * 0.3)) // 4 * 4
        sprite, alpha = render_object(self.attributes, sprite_w)
        self.sprite = rgb_to_yuv420p(np.clip(sprite, 0, 255))
        self.alpha, self.sprite_w = alpha, sprite_w
        self.xs, self.ys = object_track(self.attributes, rng, spec.n_frames)
        self.grain_seed = [seed, index, 2]

    def frame(self, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """Frame i as displayed, I420 planes stacked (H * 3/2, W)."""
        w, h, ph = self.w, self.h, self.panorama_h
        t = i / max(1, n - 1)
        ox = int(round(self.pan[0] * t)) // 2 * 2  # slow pan right and down, on chroma sites
        oy = int(round(self.pan[1] * (0.5 - 0.5 * np.cos(np.pi * t)))) // 2 * 2
        y = self.yuv[:ph, ox:ox + w][oy:oy + h].astype(np.int16)
        u = self._chroma(0, ox, oy)
        v = self._chroma(1, ox, oy)
        sw = self.sprite_w
        cx, cy = int(self.xs[i] * w) - sw // 2, int(self.ys[i] * h) - sw // 2
        self._paste(y, self.sprite[:sw].astype(np.int16), self.alpha, cx, cy)
        for plane, k in ((u, 0), (v, 1)):
            self._paste(plane, self._sprite_chroma(k).astype(np.int16), self.alpha[::2, ::2], cx // 2, cy // 2)
        y += rng.integers(-3, 4, y.shape, dtype=np.int16)  # sensor grain
        planes = [np.clip(p, 0, 255).astype(np.uint8) for p in (y, u, v)]
        return np.concatenate([planes[0], planes[1].reshape(h // 4, w), planes[2].reshape(h // 4, w)])

    def _chroma(self, k: int, ox: int, oy: int) -> np.ndarray:
        pw, ph = self.w + self.pan[0], self.panorama_h
        flat = self.yuv[ph + k * ph // 4: ph + (k + 1) * ph // 4].reshape(ph // 2, pw // 2)
        return flat[oy // 2: oy // 2 + self.h // 2, ox // 2: ox // 2 + self.w // 2].astype(np.int16)

    def _sprite_chroma(self, k: int) -> np.ndarray:
        sw = self.sprite_w
        return self.sprite[sw + k * sw // 4: sw + (k + 1) * sw // 4].reshape(sw // 2, sw // 2)

    @staticmethod
    def _paste(plane: np.ndarray, sprite: np.ndarray, alpha: np.ndarray, x: int, y: int) -> None:
        h, w = plane.shape
        sh, sw = sprite.shape
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + sw, w), min(y + sh, h)
        if x0 >= x1 or y0 >= y1:
            return
        region = (slice(y0 - y, y1 - y), slice(x0 - x, x1 - x))
        target = plane[y0:y1, x0:x1]
        np.copyto(target, sprite[region], where=alpha[region])


def _stored(yuv: np.ndarray, w: int, h: int, rotation: int) -> np.ndarray:
    """The displayed picture turned back the way a phone sensor stores it (for rotation 90)."""
    if not rotation:
        return yuv
    k = -rotation // 90
    y = np.rot90(yuv[:h], k)
    u = np.rot90(yuv[h:h + h // 4].reshape(h // 2, w // 2), k)
    v = np.rot90(yuv[h + h // 4:].reshape(h // 2, w // 2), k)
    sw, sh = y.shape[1], y.shape[0]
    return np.ascontiguousarray(np.concatenate([y, u.reshape(sh // 4, sw), v.reshape(sh // 4, sw)]))


def write_footage(path: Path, seed: int, index: int, spec: FootageSpec) -> dict:
    """Write clip `index` of data set `seed`; returns its references record."""
    scene = FootageScene(seed, index, spec)
    grain = np.random.default_rng(scene.grain_seed)
    options = {"movflags": "+faststart"} if spec.faststart else {}
    container = av.open(str(path), "w", options=options)
    try:
        stream = container.add_stream(CODECS[spec.codec], rate=spec.fps)
        stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, "yuv420p"
        stream.bit_rate = spec.bit_rate  # an average the encoder varies around (VBR), as cameras do
        # Pictures depend only on the seed; the bitstream also on encoder threading, so `exact`
        # runs both encoders on one thread (and x264 without mbtree: see dataset.write_mp4).
        if spec.codec == "h264":
            stream.codec_context.options = {"preset": spec.preset, "g": str(spec.gop),
                                            "keyint_min": str(min(spec.gop, spec.fps)), "bf": "3",
                                            **({"threads": "1", "mbtree": "0"} if spec.exact else {})}
        else:
            exact = ":pools=1:frame-threads=1:lookahead-threads=0" if spec.exact else ""
            stream.codec_context.options = {"preset": spec.preset, "x265-params":
                                            f"keyint={spec.gop}:min-keyint={min(spec.gop, spec.fps)}:"
                                            f"bframes=3:log-level=error{exact}"}
        if spec.rotation:
            stream.set_display_rotation(spec.rotation)
        n = spec.n_frames

        pictures = (_stored(scene.frame(i, n, grain), scene.w, scene.h, spec.rotation) for i in range(n))
        encode_all(container, stream, timed_frames(pictures, spec.fps))
    finally:
        container.close()
    return {"video": path.name, "references": scene.references, "attributes": scene.attributes.as_dict(),
            "delivery": asdict(spec)}


def _timed_footage(path: Path, seed: int, index: int, spec: FootageSpec) -> tuple[dict, float]:
    started = time.perf_counter()
    return write_footage(path, seed, index, spec), time.perf_counter() - started


def _written(clips: list[tuple[Path, int, FootageSpec]], seed: int, workers: int) -> Iterator[tuple[dict, float]]:
    """(references record, seconds) of each clip (path, index, spec) written, in order: here, or in `workers`
    spawned processes (a 4K clip takes its one process tens of seconds, mostly x265 and one frame at a time)."""
    paths, indices, specs = zip(*clips)
    return in_processes(_timed_footage, workers, paths, [seed] * len(clips), indices, specs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m video_io.synth.footage", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the clips and references.jsonl")
    parser.add_argument("--n", type=int, required=True, help="number of clips")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same pictures")
    parser.add_argument("--profile", choices=PROFILES, default="mixed")
    parser.add_argument("--size", type=frame_size, help="stored picture WxH, overriding the profile (small tests)")
    parser.add_argument("--seconds", type=float, help="override the drawn duration")
    parser.add_argument("--fps", type=int, help="override the drawn frame rate")
    parser.add_argument("--codec", choices=sorted(CODECS), help="override the drawn codec")
    parser.add_argument("--gop", type=int, help="override the drawn keyframe interval (frames)")
    parser.add_argument("--preset", default="fast", help="x264/x265 preset (slower: smaller files)")
    parser.add_argument("--mbps", type=float, help="average bitrate in Mbit/s (default: camera-like, by pixels "
                                                   "per second: 4K30 HEVC ~37, 1080p30 H.264 ~16)")
    parser.add_argument("--workers", type=int, default=1,
                        help="clips made at once, each in its own process (a clip depends only on the seed and its "
                             "index; x265 and x264 also thread within a clip)")
    parser.add_argument("--exact", action="store_true",
                        help="byte-identical files per seed (single-threaded encoding; without it "
                             "the pictures are identical, the bitstreams may differ by threading)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    clips = []
    for index in range(args.n):
        spec = draw_spec(args.profile, np.random.default_rng([args.seed, index, 3]))
        overrides = {k: v for k, v in (("seconds", args.seconds), ("fps", args.fps), ("codec", args.codec),
                                       ("gop", args.gop), ("mbps", args.mbps)) if v is not None}
        if args.size:
            overrides["width"], overrides["height"] = args.size
        try:
            spec = replace(spec, preset=args.preset, exact=args.exact, **overrides)
        except ValueError as exc:
            parser.error(str(exc))
        clips.append((args.out / f"footage_{index:05d}_{spec.width}x{spec.height}_{spec.fps}fps_{spec.codec}.mp4",
                      index, spec))
    records = []
    for (path, _, spec), (record, seconds) in zip(clips, _written(clips, args.seed, args.workers)):
        records.append(record)
        print(f"{path.name}: {spec.n_frames} frames, GOP {spec.gop}, rotation {spec.rotation}, "
              f"{path.stat().st_size / 2**20:.1f} MiB in {seconds:.1f}s", flush=True)
    with open(args.out / REFERENCES_FILE, "w", encoding="utf-8") as refs:
        for record in records:
            refs.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {args.n} clips and {args.out / REFERENCES_FILE} in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    # Run as `python -m video_io.synth.footage`, this file is __main__, which the spawned workers are not told
    # of (video_io/synth/dataset.py in_processes): they find a clip's function and spec by this module's name.
    from video_io.synth.footage import main as footage_main

    sys.exit(footage_main())
