"""caption-synth-long: long videos made of several synthetic scenes joined by hard cuts, dissolves
and fades through black, with the true cut times and each scene's reference captions.

    caption-synth-long --out data/long --n 4 --seed 0 [--scenes 6 --scene-seconds 4-10 --size 112x112 --fps 8]
    caption-synth-long --out data/long-clips --n 4 --seed 0 --style clip    # caption-synth's pictures
    caption-synth-long --out data/long1080 --n 1 --size 1920x1080 --fps 30 --seconds 60 --mbps 16

Scene j of video v is caption-synth clip `v * 1000 + j'` of the same seed (its attributes and
references are the ones caption-synth writes for that clip), drawn as caption-footage draws it:
a textured panorama with a slow pan, the object crossing it, sensor grain. j' skips clips whose
background (scene, time of day, weather) equals the previous scene's, so every cut changes what
the picture shows. Video v depends only on (seed, v) and the options; the same seed gives the same
bytes (x264 on one thread, without mbtree, as caption-synth).

Each scene's references also go to <out>/references.jsonl, one line per scene with its times
({"video", "start_s", "end_s", "clip", "references"}), which caption-meteor and the caption job
score a segment's caption against (eval/inputs.py match).

Ground truth, one JSON line per video in <out>/scenes.jsonl:
  {"video", "duration_s", "fps", "frames", "width", "height",
   "cuts": [{"kind": "cut" | "dissolve" | "fade", "time_s", "start_s", "end_s"}],
   "scenes": [{"start_s", "end_s", "clip", "attributes", "references"}]}
A cut's time_s is where one shot gives way to the next: for a hard cut the first frame of the
new shot (start_s = end_s = time_s); for a dissolve or a fade through black the middle of its
span [start_s, end_s), start_s being its first mixed frame and end_s the first frame of the new
shot alone. Scenes run from one cut's time_s to the next (0 and duration_s at the ends).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from video_io.footage_kind import REFERENCES_FILE
from video_io.synth.args import frame_size
from video_io.synth.attributes import draw_attributes
from video_io.synth.dataset import SynthSpec, make_clip, rgb_to_yuv420p
from video_io.synth.footage import FootageScene, FootageSpec
from video_io.synth.mux import encode_all, timed_frames

SCENES_FILE = "scenes.jsonl"
KINDS = ("cut", "dissolve", "fade")
STYLES = ("footage", "clip")
CLIPS_PER_VIDEO = 1000  # clip indices v*1000 .. v*1000+999 belong to video v


@dataclass(frozen=True)
class LongSpec:
    """How every video of a data set is made. Scene lengths are drawn in [min, max] seconds; a
    transition's kind by `mix` (probabilities of cut, dissolve, fade) and its length in
    `transition_s`. `seconds`, when set, fixes the video's length (scenes are drawn until it is
    filled, the last one cut to fit) instead of `n_scenes`."""

    width: int = 112
    height: int = 112
    fps: int = 8
    n_scenes: int = 6
    scene_s: tuple[float, float] = (4.0, 10.0)
    transition_s: tuple[float, float] = (0.5, 1.5)
    mix: tuple[float, float, float] = (0.5, 0.35, 0.15)
    seconds: float | None = None
    crf: int = 18
    mbps: float | None = None  # average bitrate instead of constant quality (camera-like files)
    preset: str = "fast"
    gop_s: float = 2.0
    # "footage": each scene drawn as caption-footage draws it (texture, pan, grain); "clip": as caption-synth
    # draws its clips, the pictures the embedded model was trained on (what per-segment METEOR is measured on)
    style: str = "footage"

    def __post_init__(self):
        if self.width % 2 or self.height % 4 or self.width < 32 or self.height < 32:
            raise ValueError(f"sizes need an even width and a height divisible by 4, >= 32 px: "
                             f"{self.width}x{self.height}")
        if not 0 < self.transition_s[0] <= self.transition_s[1]:
            raise ValueError(f"transition lengths must be > 0, got {self.transition_s}")
        if self.scene_s[0] < self.transition_s[1] + 1.0 or self.scene_s[0] > self.scene_s[1]:
            raise ValueError(f"scenes must last at least 1 s more than the longest transition "
                             f"({self.transition_s[1]} s), got {self.scene_s}")
        if self.fps <= 0 or self.n_scenes < 1 or (self.seconds is not None and self.seconds <= 0):
            raise ValueError("fps, n_scenes and seconds must be > 0")
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}, got {self.style!r}")


@dataclass(frozen=True)
class Transition:
    kind: str
    start: int  # first mixed frame (the first frame of the new shot for a hard cut)
    end: int  # first frame of the new shot alone

    def times(self, fps: int) -> dict:
        return {"kind": self.kind, "time_s": round((self.start + self.end) / 2 / fps, 6),
                "start_s": round(self.start / fps, 6), "end_s": round(self.end / fps, 6)}


@dataclass(frozen=True)
class Plan:
    """One video: its scenes' clip indices and the transitions between them (len(clips) - 1)."""

    clips: list[int]
    transitions: list[Transition]
    n_frames: int

    def visible(self, k: int) -> tuple[int, int]:
        """Frames [first, end) in which scene k shows, mixed or alone."""
        first = self.transitions[k - 1].start if k else 0
        end = self.transitions[k].end if k < len(self.transitions) else self.n_frames
        return first, end


def _background(seed: int, clip: int) -> tuple[str, str, str]:
    a = draw_attributes(np.random.default_rng([seed, clip]))  # the draw caption-synth's clip starts with
    return a.scene, a.time, a.weather


def _scene_clips(seed: int, video: int, n: int) -> list[int]:
    clips, clip = [], video * CLIPS_PER_VIDEO
    while len(clips) < n:
        if not clips or _background(seed, clip) != _background(seed, clips[-1]):
            clips.append(clip)
        clip += 1
    return clips


def _scene_lengths(rng: np.random.Generator, spec: LongSpec) -> list[int]:
    """Frames from one cut to the next, per scene."""
    lo, hi = (round(s * spec.fps) for s in spec.scene_s)
    if spec.seconds is None:
        return [int(rng.integers(lo, hi + 1)) for _ in range(spec.n_scenes)]
    total, lengths = round(spec.seconds * spec.fps), []
    while sum(lengths) < total:
        lengths.append(int(rng.integers(lo, hi + 1)))
    lengths[-1] -= sum(lengths) - total
    if len(lengths) > 1 and lengths[-1] < lo:  # a stub of a last scene joins the one before
        stub = lengths.pop()
        lengths[-1] += stub
    return lengths


def plan_video(seed: int, video: int, spec: LongSpec) -> Plan:
    """Scene lengths, clips and transitions of video `video` (a random stream of its own)."""
    rng = np.random.default_rng([seed, video, 7])
    lengths = _scene_lengths(rng, spec)
    transitions, edge = [], 0
    for length in lengths[:-1]:
        edge += length
        kind = KINDS[int(rng.choice(len(KINDS), p=np.asarray(spec.mix) / sum(spec.mix)))]
        span = 0 if kind == "cut" else max(2, round(rng.uniform(*spec.transition_s) * spec.fps))
        transitions.append(Transition(kind, edge - span // 2, edge - span // 2 + span))
    return Plan(_scene_clips(seed, video, len(lengths)), transitions, sum(lengths))


BLACK = (16, 128, 128)  # limited-range Y, Cb, Cr


def _mix(a: np.ndarray, b: np.ndarray, kind: str, alpha: float, height: int) -> np.ndarray:
    """The I420 picture `alpha` of the way from a to b: a dissolve mixes the two, a fade goes
    through black at alpha 0.5."""
    if kind == "dissolve":
        out = a * (1 - alpha) + b * alpha
    else:
        black = np.empty(a.shape, np.float32)
        black[:height], black[height:] = BLACK[0], BLACK[1]
        shot, weight = (a, 1 - 2 * alpha) if alpha < 0.5 else (b, 2 * alpha - 1)
        out = shot * weight + black * (1 - weight)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


class _Scenes:
    """The scenes of one video, made on first use and dropped once past, so only the two
    of a transition are ever held (a 4K panorama each)."""

    def __init__(self, seed: int, plan: Plan, spec: LongSpec):
        self.seed, self.plan, self.spec, self.made = seed, plan, spec, {}

    def frame(self, k: int, i: int) -> np.ndarray:
        if k not in self.made:
            for old in [s for s in self.made if s < k - 1]:
                del self.made[old]
            first, end = self.plan.visible(k)
            if self.spec.style == "clip":  # caption-synth's clip, its frames spread over the scene
                _, _, frames = make_clip(self.seed, self.plan.clips[k],
                                         SynthSpec(n_frames=end - first, width=self.spec.width, height=self.spec.height))
                self.made[k] = (frames, None, first, end - first)
            else:
                footage = FootageSpec(self.spec.width, self.spec.height, self.spec.fps, (end - first) / self.spec.fps,
                                      "h264", gop=1)
                scene = FootageScene(self.seed, self.plan.clips[k], footage)
                self.made[k] = (scene, np.random.default_rng(scene.grain_seed), first, end - first)
        scene, grain, first, n = self.made[k]
        if grain is None:
            return rgb_to_yuv420p(scene[i - first].astype(np.float32))
        return scene.frame(i - first, n, grain)


def video_frames(seed: int, plan: Plan, spec: LongSpec):
    """The video's I420 pictures ((H * 3/2, W) uint8), in order."""
    scenes = _Scenes(seed, plan, spec)
    k = 0
    for i in range(plan.n_frames):
        while k < len(plan.transitions) and i >= plan.transitions[k].end:
            k += 1
        t = plan.transitions[k] if k < len(plan.transitions) else None
        if t is None or i < t.start:
            yield scenes.frame(k, i)
        else:  # inside transition k: scene k gives way to scene k + 1
            alpha = (i - t.start + 1) / (t.end - t.start + 1)
            yield _mix(scenes.frame(k, i).astype(np.float32), scenes.frame(k + 1, i).astype(np.float32),
                       t.kind, alpha, spec.height)


def write_video(path: Path, seed: int, plan: Plan, spec: LongSpec) -> None:
    container = av.open(str(path), mode="w", options={"fflags": "+bitexact"})
    try:
        stream = container.add_stream("libx264", rate=spec.fps)
        stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, "yuv420p"
        rate = {"b": str(int(spec.mbps * 1e6))} if spec.mbps else {"crf": str(spec.crf)}
        stream.codec_context.options = {**rate, "preset": spec.preset, "threads": "1", "mbtree": "0",
                                        "g": str(max(1, round(spec.gop_s * spec.fps))), "bf": "3"}
        stream.codec_context.flags |= av.codec.context.Flags.bitexact

        encode_all(container, stream, timed_frames(video_frames(seed, plan, spec), spec.fps))
    finally:
        container.close()


def ground_truth(name: str, seed: int, plan: Plan, spec: LongSpec) -> dict:
    """The scenes.jsonl record of one video."""
    from video_io.synth.captions_ko import reference_captions

    cuts = [t.times(spec.fps) for t in plan.transitions]
    duration = plan.n_frames / spec.fps
    edges = [0.0, *(c["time_s"] for c in cuts), round(duration, 6)]
    scenes = []
    for k, clip in enumerate(plan.clips):
        rng = np.random.default_rng([seed, clip])  # caption-synth's draws for this clip, in its order
        attributes = draw_attributes(rng)
        scenes.append({"start_s": edges[k], "end_s": edges[k + 1], "clip": clip,
                       "attributes": attributes.as_dict(), "references": reference_captions(attributes, rng)})
    return {"video": name, "duration_s": round(duration, 6), "fps": spec.fps, "frames": plan.n_frames,
            "width": spec.width, "height": spec.height, "cuts": cuts, "scenes": scenes}


def video_name(index: int) -> str:
    return f"long_{index:05d}.mp4"


def generate_long(out_dir: Path, n: int, seed: int, spec: LongSpec = LongSpec(), start: int = 0,
                  log=None) -> Path:
    """Write videos start..start+n-1 and scenes.jsonl into out_dir; returns the scenes.jsonl path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    truth, partial = out_dir / SCENES_FILE, out_dir / (SCENES_FILE + ".partial")
    refs, refs_partial = out_dir / REFERENCES_FILE, out_dir / (REFERENCES_FILE + ".partial")
    with open(partial, "w", encoding="utf-8") as lines, open(refs_partial, "w", encoding="utf-8") as ref_lines:
        for video in range(start, start + n):
            plan = plan_video(seed, video, spec)
            write_video(out_dir / video_name(video), seed, plan, spec)
            record = ground_truth(video_name(video), seed, plan, spec)
            lines.write(json.dumps(record, ensure_ascii=False) + "\n")
            for scene in record["scenes"]:
                ref_lines.write(json.dumps(scene_references(record["video"], scene, spec), ensure_ascii=False) + "\n")
            if log:
                log(f"{record['video']}: {record['duration_s']:.1f} s, {len(record['scenes'])} scenes, "
                    f"cuts {[c['kind'] for c in record['cuts']]}")
    refs_partial.replace(refs)  # both renamed once whole
    partial.replace(truth)
    return truth


def scene_references(video: str, scene: dict, spec: LongSpec) -> dict:
    """A references.jsonl line for one scene (caption-meteor and the job score each segment's caption
    against the scene it overlaps most). Drawn as caption-synth draws its clips, the scenes are what
    the embedded model knows: those lines carry the attributes, as caption-synth's do
    (video_io/footage_kind.py footage_kind)."""
    known = {"attributes": scene["attributes"]} if spec.style == "clip" else {}
    return {"video": video, "start_s": scene["start_s"], "end_s": scene["end_s"], "clip": scene["clip"],
            **known, "references": scene["references"]}


def read_truth(folder: Path) -> list[dict]:
    """The records of a folder's scenes.jsonl."""
    with open(Path(folder) / SCENES_FILE, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _pair(text: str) -> tuple[float, float]:
    try:
        lo, _, hi = text.partition("-")
        pair = (float(lo), float(hi or lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SECONDS or MIN-MAX, got {text!r}") from None
    return pair


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="caption-synth-long", description=__doc__.splitlines()[0],
                                     epilog="Ground truth: <out>/scenes.jsonl (see the module's docstring).")
    parser.add_argument("--out", type=Path, required=True, help="folder for the .mp4 files and scenes.jsonl")
    parser.add_argument("--n", type=int, required=True, help="number of videos")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes")
    parser.add_argument("--start", type=int, default=0, help="index of the first video")
    parser.add_argument("--scenes", type=int, default=LongSpec.n_scenes, help="scenes per video")
    parser.add_argument("--seconds", type=float, help="video length instead of --scenes")
    parser.add_argument("--scene-seconds", type=_pair, default=LongSpec.scene_s, help="MIN-MAX scene length")
    parser.add_argument("--transition-seconds", type=_pair, default=LongSpec.transition_s,
                        help="MIN-MAX length of dissolves and fades")
    parser.add_argument("--mix", default="0.5,0.35,0.15", help="probabilities of cut,dissolve,fade")
    parser.add_argument("--size", type=frame_size, default=(LongSpec.width, LongSpec.height), help="WxH")
    parser.add_argument("--fps", type=int, default=LongSpec.fps)
    parser.add_argument("--crf", type=int, default=LongSpec.crf, help="x264 constant quality")
    parser.add_argument("--mbps", type=float, help="average bitrate instead of --crf (1080p30 camera: ~16)")
    parser.add_argument("--preset", default=LongSpec.preset, help="x264 preset")
    parser.add_argument("--style", choices=STYLES, default=LongSpec.style,
                        help="footage: scenes drawn as caption-footage draws them; clip: as caption-synth draws "
                             "its clips (the embedded model's pictures)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    try:
        mix = tuple(float(p) for p in args.mix.split(","))
        spec = LongSpec(args.size[0], args.size[1], args.fps, args.scenes, args.scene_seconds,
                        args.transition_seconds, mix, args.seconds, args.crf, args.mbps, args.preset,
                        style=args.style)
        if len(mix) != 3 or min(mix) < 0 or not sum(mix):
            raise ValueError(f"--mix needs three non-negative probabilities, got {args.mix!r}")
    except ValueError as exc:
        parser.error(str(exc))
    started = time.perf_counter()
    truth = generate_long(args.out, args.n, args.seed, spec, args.start, log=lambda s: print(s, flush=True))
    print(f"wrote {args.n} videos ({spec.width}x{spec.height}, {spec.fps} fps) and {truth} "
          f"in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
