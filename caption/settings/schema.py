"""The job's settings as typed schemas: the one home of each key's type, default, help and checks.

JobSchema holds the top-level settings (JobOptions, which the job reads as one object) and types each
config group (conf/config.yaml lists them) with its schema: the video, lora, spec and runner groups
here, sampling in caption/settings/generation.py, engine in caption/settings/engine_schema.py, gpu, model and quant in
quant/schema.py (GROUP_SCHEMAS lists them all). Hydra validates every override against them while it
composes the config, before anything loads: a wrong type (`limit=abc`, `resume=maybe`) or an unknown
key (`outptu=x`) stops the job in one line (caption/cli.py says it; caption/settings/config.py refuses a `+key`
the schemas lack). caption/settings/config.py then reads the top-level settings as JobOptions and each group as
its schema's dataclass (OmegaConf.to_object), and runs its check(), which holds the ranges and
cross-key rules a type cannot say. `caption --help` prints each key with its default and help text;
docs/development.md shows how a setting is added.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, field, fields
from typing import Any, List, Optional

from omegaconf import MISSING

from caption.prompts import INSTRUCTIONS_KO
from caption.settings.engine_schema import EngineSchema
from caption.settings.generation import SamplingSchema
from caption.settings.option import ConfigError, at_least, one_of, option, preset_key
from quant.schema import GpuSchema, ModelSchema, QuantSchema
from video_io.coverage import SHORT_SHOTS
from video_io.decode import BACKENDS, DecodeSpec
from video_io.sampling import MODES, SamplingSpec
from video_io.segmenting import SEGMENT_MODES, SegmentSpec
from video_io.workers import DECODE_TIMEOUT_S

SCHEMA_NAME = "job_schema"  # conf/config.yaml's defaults list starts with it


# what decides whether a key is read (caption/settings/unread.py checks given keys against it)
BY_SAMPLING, BY_SEGMENTS = "video.sampling", "video.segments"
ABLATIONS = ("none", "reverse", "first_frame")


@dataclass
class BenchmarkSchema:
    # Any, not Optional[Dict]: OmegaConf 2.3 cannot merge a mapping override into a typed dict that is
    # None (AttributeError in dictconfig._get_node); ForcedLengths.from_config checks the value instead
    output_tokens: Any = option(
        None, "engine benchmarks only (caption-bench engines): null, the model stops where it likes; "
              "{median: 40, sigma: 0.6, min: 8, max: 200, seed: 0}: every request generates exactly n tokens, "
              "n drawn from a log-normal by (seed, video, task, adapter), the same on every engine "
              "(caption/settings/forced_lengths.py); needs sampling.max_new_tokens >= max")


# The config groups' schemas. A field without a default (preset_key: MISSING) is set by every preset of
# the group (conf/<group>/*.yaml hold those values and say why); a field with a default is optional, its
# default written here (or, for decoding, in video_io, whose library defaults the job uses) and nowhere
# else. tests/test_config_defaults.py checks that no preset repeats one and that every field has help.

@dataclass
class VideoSchema:
    sampling: str = preset_key("uniform: num_frames spread over each clip; fps: frames at a fixed rate in time")
    num_frames: int = preset_key("uniform sampling: frames per clip (the model preset's `frames`)",
                                 {BY_SAMPLING: ("uniform",)})
    fps: float = option(SamplingSpec.fps, "fps sampling: frames per second of video", {BY_SAMPLING: ("fps",)})
    max_frames: int = option(SamplingSpec.max_frames, "fps sampling: at most this many frames (longer clips "
                                                      "are thinned evenly)", {BY_SAMPLING: ("fps",)})
    min_frames: int = option(SamplingSpec.min_frames, "fps sampling: at least this many frames",
                             {BY_SAMPLING: ("fps",)})
    width: Optional[int] = preset_key("with height: every frame exactly this size (squashes other aspect ratios); "
                                      "null: within max_pixels")
    height: Optional[int] = preset_key("with width: every frame exactly this size; null: within max_pixels")
    max_pixels: Optional[int] = preset_key("pixel budget per frame, aspect ratio kept; null: the model preset's "
                                           "frame_width x frame_height")
    size_multiple: Optional[int] = preset_key("both frame sides a multiple of this; null: the model family's "
                                              "(vidcap_ko/families/<family>.py)")
    seek: str = option(DecodeSpec.seek, "auto: from each sampling segment its keyframe, else its first frame "
                                        "(cheapest; neighbours kept a quarter of a segment apart); exact: the "
                                        "segment's centre frame, decoded from the keyframe before it; keyframe: "
                                        "the keyframe nearest each centre (may repeat). video_io/decode.py")
    backend: str = option(DecodeSpec.backend, "auto: PyAV, frame-accurate in every codec and the faster decoder "
                                              "here in every seek mode (NVDEC only where a filed measurement shows "
                                              "it faster on this GPU: nowhere yet, video_io/nvdec_rule.py); decord: "
                                              "for comparison (not rotated clips); nvdec: PyAV with the GPU's "
                                              "decoder (same frames; video_io/nvdec.py)")
    # Any: OmegaConf has no int-or-str type
    workers: Any = preset_key("decoder processes: auto (the plan's count for this machine), a number, or 0: "
                              "decode in the job's process (no timeout)")
    timeout_s: float = option(DECODE_TIMEOUT_S, "a clip that takes longer gets an error record; its decoder "
                                                "is killed")
    ablation: str = preset_key("diagnostics: none | reverse (frames backwards) | first_frame (no motion)")
    prune_rate: float = option(0.0, "the share of each clip's video tokens vLLM drops before the language model "
                                    "(EVS: tokens that changed least from the frame before; the first frames' "
                                    "are kept), in [0, 1); 0: none. vLLM and the Qwen-VL families only. Fewer "
                                    "tokens per request in the KV cache; the vision encoder still sees every frame")
    segments: str = option(SegmentSpec.mode, "what gets a caption of its own: auto: a clip up to "
                                             "segment_over_s is one caption, a longer one is split at its shots; "
                                             "none: every clip whole; scenes: every clip split at its shots; "
                                             "fixed: a piece every segment_stride_s. A segment's record has "
                                             "segment_index, start_s, end_s, the shots it spans and the spans "
                                             "left out beside it (video_io/segmenting.py)")
    segment_over_s: float = option(SegmentSpec.over_s, "segments=auto: clips longer than this (their header's "
                                                       "duration) are split at their shots", {BY_SEGMENTS: ("auto",)})
    segment_min_s: float = option(SegmentSpec.min_s, "the shortest segment of one shot: shorter shots are "
                                                     "captioned together (a montage) or dropped, as "
                                                     "segment_short_shots says; segments=fixed: a shorter last "
                                                     "piece is dropped", {BY_SEGMENTS: ("auto", "scenes", "fixed")})
    segment_max_s: float = option(SegmentSpec.max_s, "shots longer than this are cut into equal pieces",
                                  {BY_SEGMENTS: ("auto", "scenes")})
    segment_stride_s: float = option(SegmentSpec.stride_s, "segments=fixed: a piece every this many seconds",
                                     {BY_SEGMENTS: ("fixed",)})
    segment_trim_s: float = option(SegmentSpec.trim_s, "seconds left out on each side of a cut (and a "
                                                       "dissolve's or fade's whole span); with montages, at "
                                                       "most 5% of the shot next to the cut", {BY_SEGMENTS: ("auto", "scenes")})
    segment_short_shots: str = option(SegmentSpec.short, "segments=scenes|auto, shots shorter than segment_min_s: "
                                                         "montage: a run of them is one segment that lists its "
                                                         "shots (every second covered but transitions and trims); "
                                                         "drop: dropped, as curation pipelines keep training clips "
                                                         "(video_io/coverage.py)", {BY_SEGMENTS: ("auto", "scenes")})
    scene_threshold: float = option(SegmentSpec.threshold, "shot detection: how much (0-255 levels) frames 1 s "
                                                           "apart must differ beyond a shot's own motion; lower "
                                                           "finds subtler cuts and more false ones "
                                                           "(video_io/scenes.py)", {BY_SEGMENTS: ("auto", "scenes")})

    def check(self) -> None:
        """The values Hydra's types do not bound; ConfigError names the `video.<key>` to fix. (caption/settings/config.py
        builds video_io's DecodeSpec and SegmentSpec from this group, which check their own numbers.)"""
        one_of(self.sampling, MODES, "video.sampling")
        one_of(self.backend, BACKENDS, "video.backend")
        one_of(self.segments, SEGMENT_MODES, "video.segments")
        one_of(self.segment_short_shots, SHORT_SHOTS, "video.segment_short_shots")
        one_of(self.ablation, ABLATIONS, "video.ablation")
        at_least(self.timeout_s, "video.timeout_s")
        if self.size_multiple is not None:
            at_least(self.size_multiple, "video.size_multiple")
        workers = self.workers
        if workers != "auto" and not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 0):
            raise ConfigError(f"`video.workers` must be auto or a whole number >= 0 (0 decodes in the job's process), "
                              f"got {workers!r}")
        if not 0 <= self.prune_rate < 1:
            raise ConfigError(f"`video.prune_rate={self.prune_rate:g}` must be in [0, 1): the share of video tokens "
                              "dropped (0: none)")


@dataclass
class AdapterSchema:
    name: str = preset_key("the adapter's name, as records and requests give it")
    path: str = preset_key("the adapter's folder (a PEFT LoRA made for the base model)")
    references_field: Optional[str] = option(None, "the references.jsonl field METEOR scores this adapter's "
                                                   "captions on; null: references")


@dataclass
class LoraSchema:
    adapters: List[AdapterSchema] = preset_key("LoRA adapters each clip is also captioned with (name, path, "
                                               "references_field)")
    include_base: bool = preset_key("caption with the base model too (always, when there are no adapters)")
    max_rank: int = preset_key("the largest LoRA rank the engine makes room for")


SPEC_METHODS = ("none", "ngram", "draft_model")


@dataclass
class SpecSchema:
    method: str = preset_key("none | ngram (proposals from the prompt's own text) | draft_model (a small model "
                             "with the target's tokenizer)")
    num_speculative_tokens: int = preset_key("tokens proposed per step, then checked by the target model",
                                             {"spec.method": ("ngram", "draft_model")})
    prompt_lookup_max: Optional[int] = option(None, "ngram: the longest n-gram looked up", {"spec.method": ("ngram",)})
    prompt_lookup_min: Optional[int] = option(None, "ngram: the shortest n-gram looked up", {"spec.method": ("ngram",)})
    model: Optional[str] = option(None, "draft_model: the draft model's folder (the target's tokenizer)",
                                  {"spec.method": ("draft_model",)}, path=True)

    def check(self) -> None:
        """What the chosen method needs; ConfigError names the key. (A draft model's folder and tokenizer
        are files: caption/settings/config.py checks them.)"""
        one_of(self.method, SPEC_METHODS, "spec.method")
        if self.method == "none":
            return
        at_least(self.num_speculative_tokens, "spec.num_speculative_tokens")
        if self.method == "ngram":
            for key in ("prompt_lookup_max", "prompt_lookup_min"):
                if getattr(self, key) is None:
                    raise ConfigError(f"`spec.{key}` is missing: spec=ngram needs it (conf/spec/ngram.yaml sets it)")
                at_least(getattr(self, key), f"spec.{key}")


ON_RAY = {"runner.name": ("ray",)}  # runner=local reads none of the runner's keys but its name


@dataclass
class RunnerSchema:
    name: str = preset_key("local: this machine | ray: a Ray cluster (docs/scale-out.md)")
    address: Optional[str] = option(None, "ray: a running cluster (`ray start --head` printed it), e.g. "
                                          "10.0.0.5:6379 or auto; null: RAY_ADDRESS's where it is set (`ray job "
                                          "submit` sets it), else a Ray instance on this machine for the job, "
                                          "stopped after it", ON_RAY)
    actors: Optional[int] = option(None, "ray: engine actors; null: one per engine the cluster can hold (its "
                                         "GPUs / tensor_parallel_size; the cpu tier: the plan's replicas, gpu.count)",
                                   ON_RAY)
    engine_cpus: float = option(1.0, "ray: CPUs each engine actor reserves (on the cpu tier it binds that many cores)",
                                ON_RAY)
    decode_cpus: float = option(1.0, "ray: CPUs each decoding task reserves", ON_RAY)
    batch_clips: Optional[int] = option(None, "ray: clips per batch handed to an engine actor; null: the "
                                              "plan's max_num_seqs", ON_RAY)
    max_retries: int = option(2, "ray: times a clip is retried after its actor died or failed; then error records",
                              ON_RAY)

    def check(self) -> None:
        """The ranges Hydra's types do not say; ConfigError names the key. An empty address is none."""
        self.address = self.address or None
        for key in ("actors", "batch_clips", "engine_cpus", "decode_cpus"):
            if key in ("engine_cpus", "decode_cpus") or getattr(self, key) is not None:
                at_least(getattr(self, key), f"runner.{key}")
        at_least(self.max_retries, "runner.max_retries", inclusive=True)


GROUP_SCHEMAS = {"model": ModelSchema, "engine": EngineSchema, "gpu": GpuSchema, "quant": QuantSchema,
                 "lora": LoraSchema, "spec": SpecSchema, "sampling": SamplingSchema, "video": VideoSchema,
                 "runner": RunnerSchema}


@dataclass
class JobOptions:
    """The top-level settings (`key=value` on the command line), declared once: JobSchema composes them
    with the groups, and the job holds them as this object (caption/settings/config.py JobConfig.options)."""
    input_dir: str = option(MISSING, "folder crawled recursively for video files, or an object-store prefix "
                                     "(s3://bucket/prefix: docs/object-storage.md)", path=True)
    input_list: Optional[str] = option(None, "instead of input_dir: a Parquet, CSV or JSONL file (local or s3://) "
                                             "listing the videos: a uri (or path) column, an optional id column "
                                             "that keys the records, other columns copied into each record's "
                                             "`manifest`", path=True)
    output: Optional[str] = option(None, "JSONL, one record per (video, task, adapter), appended to on resume; "
                                         "null: captions.jsonl in the run's folder (runs/...); a folder that "
                                         "does not exist is made", path=True)
    tasks: List[str] = option(["caption"], "instructions per video (caption/prompts.py): caption, keywords, motion")
    resume: bool = option(True, "skip videos that already have records (made with these settings) in `output`")
    overwrite: bool = option(False, "start `output` afresh even though it exists; the old file is kept beside it, "
                                    "renamed <stem>.<UTC time><suffix>")
    add_beside: bool = option(False, "`output` holds records made with other settings (another model, engine, "
                                     "sampling...): false refuses to resume into it unless it holds this job's "
                                     "own records too, true adds this job's records beside them (every record "
                                     "names its settings)")
    fail_fast: bool = option(False, "stop at the first record that is an error (exit status 3)")
    retry_errors: bool = option(False, "with resume: run again the videos whose records are errors (each error "
                                       "record stays until its new record replaces it)")
    recaption_changed: bool = option(False, "with resume: a clip whose file is not the one its records were made "
                                            "from (another file under the same name) is captioned again, its old "
                                            "records moved to <stem>.superseded.jsonl; false: such a job is refused")
    limit: Optional[int] = option(None, "caption at most this many videos (after resume), e.g. for a dry run")
    progress: bool = option(True, "progress bar on stderr")
    verbose: bool = option(False, "false: the terminal shows the plan, progress and summary, and every other "
                                  "line goes to caption.log in the run's folder")
    summary_path: Optional[str] = option(None, "null: <output>.summary.json", path=True)
    references: Optional[str] = option("auto", "score captions with METEOR after the job: a references.jsonl path; "
                                               "auto: <input_dir>/references.jsonl if it exists; null: do not score",
                                       path=True)
    plan_only: bool = option(False, "resolve and save the plan (engine, dtype, quantization, memory), run nothing")

    def check(self) -> None:
        """The rules Hydra's types do not say; ConfigError names the key. (Whether input_dir, output,
        summary_path and references name usable files is caption/settings/paths.py's, which resolves them.)"""
        if not self.tasks:
            raise ConfigError("`tasks` is empty; use e.g. tasks=[caption]")
        for task in self.tasks:
            one_of(task, tuple(INSTRUCTIONS_KO), "tasks")
        if len(set(self.tasks)) != len(self.tasks):
            raise ConfigError(f"`tasks` lists a task twice: {list(self.tasks)}")
        if self.limit is not None:
            at_least(self.limit, "limit")


@dataclass
class JobSchema(JobOptions):
    """The composed config: the top-level settings (JobOptions), then the benchmark settings and the groups."""
    benchmark: BenchmarkSchema = field(default_factory=BenchmarkSchema)
    # the config groups: conf/<group>/<option>.yaml, chosen as `group=option`, typed by the schemas above
    model: ModelSchema = MISSING
    engine: EngineSchema = MISSING
    gpu: GpuSchema = MISSING
    quant: QuantSchema = MISSING
    lora: LoraSchema = MISSING
    spec: SpecSchema = MISSING
    sampling: SamplingSchema = MISSING
    video: VideoSchema = MISSING
    runner: RunnerSchema = MISSING


GROUPS = tuple(GROUP_SCHEMAS)


def register() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=JobSchema)


def documented_keys(schema=JobSchema, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(key, default, help) of every documented setting, nested ones as `benchmark.output_tokens`."""
    rows = []
    for f in fields(schema):
        if f.name in GROUPS:
            continue
        if "help" not in f.metadata:  # a nested schema
            rows += documented_keys(f.default_factory, f"{prefix}{f.name}.")
            continue
        default = f.default_factory() if f.default is NO_DEFAULT else f.default
        rows.append((prefix + f.name, "???" if default is MISSING else default, f.metadata["help"]))
    return rows


def path_keys() -> list[str]:
    """Every path-valued setting (a field marked `path`), as `key` or `group.key`."""
    found = [f.name for f in fields(JobSchema) if f.metadata.get("path")]
    for group, schema in GROUP_SCHEMAS.items():
        found += [f"{group}.{f.name}" for f in fields(schema) if f.metadata.get("path")]
    return found


def recorded_keys() -> list[tuple[str, Any]]:
    """(key, default) of every setting declared `recorded` (it changes what a caption says), top-level ones
    as `key`, a group's as `group.key`; the default is MISSING where every preset sets the key."""
    found = [(f.name, f) for f in fields(JobOptions) if f.metadata.get("recorded")]
    for group, group_schema in GROUP_SCHEMAS.items():
        found += [(f"{group}.{f.name}", f) for f in fields(group_schema) if f.metadata.get("recorded")]
    return [(key, f.default_factory() if f.default is NO_DEFAULT else f.default) for key, f in found]


def known_keys() -> list[str]:
    """Every top-level key and group name (for "did you mean")."""
    return [f.name for f in fields(JobSchema)]
