"""Write a folder of synthetic clips (H.264 .mp4) and their Korean references (references.jsonl).

Clip i of a data set depends only on (seed, i), so a data set of n clips is a prefix of one of
n + k clips, and the same seed gives byte-identical files (x264 runs single-threaded, and the
MP4 muxer is told to write no creation time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from video_io.synth.attributes import ClipAttributes, draw_attributes
from video_io.synth.captions_ko import reference_captions
from video_io.synth.render import render_clip

REFERENCES_FILE = "references.jsonl"


@dataclass(frozen=True)
class SynthSpec:
    n_frames: int = 32
    width: int = 112
    height: int = 112
    fps: int = 8


def clip_name(index: int) -> str:
    return f"clip_{index:05d}.mp4"


def make_clip(seed: int, index: int, spec: SynthSpec) -> tuple[ClipAttributes, list[str], np.ndarray]:
    """Attributes, references and frames of clip `index` of the data set `seed`."""
    rng = np.random.default_rng([seed, index])
    attributes = draw_attributes(rng)
    references = reference_captions(attributes, rng)
    frames = render_clip(attributes, rng, spec.n_frames, spec.width, spec.height)
    return attributes, references, frames


def write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    """Encode (T, H, W, 3) uint8 frames as H.264 in MP4, deterministically."""
    container = av.open(str(path), mode="w", options={"fflags": "+bitexact"})
    try:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.codec_context.options = {"crf": "18", "preset": "medium", "threads": "1"}
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()


def generate_dataset(out_dir: Path, n: int, seed: int, spec: SynthSpec = SynthSpec(),
                     start: int = 0) -> Path:
    """Write clips start..start+n-1 and references.jsonl into out_dir; returns the references path."""
    if spec.width % 2 or spec.height % 2:
        raise ValueError(f"H.264 in yuv420p needs even frame sizes, got {spec.width}x{spec.height}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    refs_path = out_dir / REFERENCES_FILE
    with open(refs_path, "w", encoding="utf-8") as refs:
        for index in range(start, start + n):
            attributes, references, frames = make_clip(seed, index, spec)
            write_mp4(out_dir / clip_name(index), frames, spec.fps)
            record = {"video": clip_name(index), "references": references,
                      "attributes": attributes.as_dict()}
            refs.write(json.dumps(record, ensure_ascii=False) + "\n")
    return refs_path
