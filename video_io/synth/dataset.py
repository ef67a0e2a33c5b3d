"""Write a folder of synthetic clips (H.264 .mp4) and their Korean references (references.jsonl).

Clip i of a data set depends only on (seed, i), so a data set of n clips is a prefix of one of
n + k clips, and the same seed gives byte-identical files (x264 runs single-threaded, and the
MP4 muxer writes bit-exact headers; see write_mp4 for the x264 settings this takes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import av
import numpy as np

from video_io.footage_kind import REFERENCES_FILE
from video_io.synth.attributes import ClipAttributes, draw_attributes
from video_io.synth.captions_ko import detailed_references, reference_captions
from video_io.synth.mux import encode_all, timed_frames
from video_io.synth.render import render_clip

T = TypeVar("T")


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


def detailed_clip_references(seed: int, index: int, attributes: ClipAttributes) -> list[str]:
    """The detailed-style references of a clip, from a random stream of their own: adding
    them changed neither the frames nor the other references of any existing data set."""
    return detailed_references(attributes, np.random.default_rng([seed, index, 1]))


def rgb_to_yuv420p(image: np.ndarray) -> np.ndarray:
    """BT.601 limited-range I420 planes stacked as (H * 3 / 2, W), the layout PyAV takes.

    Converting here rather than in FFmpeg's scaler keeps the bytes independent of its
    (thread- and CPU-dependent) code paths: the same frames always give the same file.
    """
    rgb = image.astype(np.float64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    cb = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    cr = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    h, w = y.shape

    def half(plane):
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))

    planes = [np.clip(np.rint(p), 0, 255).astype(np.uint8) for p in (y, half(cb), half(cr))]
    return np.concatenate([planes[0], planes[1].reshape(h // 4, w), planes[2].reshape(h // 4, w)])


def write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    """Encode (T, H, W, 3) uint8 frames as H.264 in MP4, deterministically."""
    container = av.open(str(path), mode="w", options={"fflags": "+bitexact"})
    try:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        # x264's macroblock-tree rate control gave run-to-run different bitstreams for the same
        # frames (seen here: 4 variants in 100 encodes); without it, 300 encodes were identical.
        stream.codec_context.options = {"crf": "18", "preset": "medium", "threads": "1", "mbtree": "0"}
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        encode_all(container, stream, timed_frames((rgb_to_yuv420p(image) for image in frames), fps))
    finally:
        container.close()


def _write_clip(out_dir: Path, seed: int, index: int, spec: SynthSpec) -> dict:
    """Clip `index` written to out_dir; its references.jsonl record."""
    attributes, references, frames = make_clip(seed, index, spec)
    write_mp4(out_dir / clip_name(index), frames, spec.fps)
    return {"video": clip_name(index), "references": references,
            "references_detailed": detailed_clip_references(seed, index, attributes),
            "attributes": attributes.as_dict()}


def generate_dataset(out_dir: Path, n: int, seed: int, spec: SynthSpec = SynthSpec(),
                     start: int = 0, workers: int = 1) -> Path:
    """Write clips start..start+n-1 and references.jsonl into out_dir; returns the references path.
    `workers` > 1 makes the clips in that many processes (each clip depends only on (seed, index), and
    x264 runs single-threaded, so the files are the same bytes): 64 clips of 640x360 took 146 s in one
    process on a 16-core GPU machine, most of a lease's minutes."""
    if spec.width % 2 or spec.height % 4:
        raise ValueError(f"frame width must be even and height a multiple of 4 (yuv420p planes), "
                         f"got {spec.width}x{spec.height}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    refs_path = out_dir / REFERENCES_FILE
    partial = out_dir / (REFERENCES_FILE + ".partial")  # renamed when complete: a folder with
    indices = range(start, start + n)
    with open(partial, "w", encoding="utf-8") as refs:  # references.jsonl is a whole data set
        for record in _clips_written(out_dir, seed, indices, spec, workers):
            refs.write(json.dumps(record, ensure_ascii=False) + "\n")
    partial.replace(refs_path)
    return refs_path


def _clips_written(out_dir: Path, seed: int, indices: range, spec: SynthSpec, workers: int) -> Iterator[dict]:
    """The clips written, their records in index order: here, or in `workers` spawned processes."""
    n = len(indices)
    return in_processes(_write_clip, workers, [out_dir] * n, [seed] * n, indices, [spec] * n)


def in_processes(function: Callable[..., T], workers: int, *arguments: Sequence) -> Iterator[T]:
    """function(*a) for each a of zip(*arguments), in order: here when workers <= 1 or there is one call, else
    in up to `workers` spawned processes. Spawned, as the decoders are, and told of no __main__: a child must
    not run the caller's script again (video_io/decoder_process.py main_script_hidden). So `function` and
    what it is given are found by their modules' names: a module run with `python -m` calls its own main by
    its name (video_io/synth/footage.py)."""
    calls = len(arguments[0]) if arguments else 0
    if workers <= 1 or calls <= 1:
        yield from (function(*call) for call in zip(*arguments))
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from video_io.decoder_process import main_script_hidden

    with main_script_hidden(), ProcessPoolExecutor(min(workers, calls), mp.get_context("spawn")) as pool:
        yield from pool.map(function, *arguments)
