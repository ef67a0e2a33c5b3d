"""The job's configuration: read the composed Hydra config into typed settings and validate them.

Everything here runs before any model or video is loaded, so a bad config fails in a second with
a message that says which key to change, instead of after a model has loaded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

import vidcap_ko.files as shipped
from caption.adapters import Adapter, AdapterError, load_adapters
from caption.settings import schema
from caption.settings.engine_choice import requested_engine
from caption.settings.engine_schema import EngineSchema
from caption.settings.engine_spec import EngineSpec
from caption.settings.forced_lengths import ForcedLengths
from caption.settings.generation import SamplingSchema
from caption.settings.option import ConfigError as ConfigError  # where callers have always found it
from caption.settings.option import at_least, closest, one_of
from caption.settings.paths import JobPaths, io_paths
from caption.settings.schema import GROUP_SCHEMAS, JobOptions, LoraSchema, RunnerSchema, SpecSchema, VideoSchema
from caption.settings.settings_ids import SettingsIds
from quant.plan import Plan
from vidcap_ko.families import UnknownFamily, get_family
from video_io.decode import DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.segmenting import SegmentSpec

# conf/ and assets/: the checkout's, or the copies an installed wheel carries (vidcap_ko/)
SHIPPED_ROOT = shipped.ROOT
CONF_DIR = SHIPPED_ROOT / "conf"
# where benchmarks, training and the docs tools keep data/: the checkout (installed: the current folder)
REPO_ROOT = shipped.WORK_ROOT
ENGINES = ("auto", "vllm", "hf", "server")
RUNNERS = ("local", "ray")


def register_resolvers() -> None:
    """`${vidcap_root:}` in presets points at the folder holding assets/ (the checkout, or an installed
    package's copy), so shipped assets load from anywhere; the job's typed settings (caption/settings/schema.py)
    are where conf/config.yaml's defaults list finds them."""
    if not OmegaConf.has_resolver("vidcap_root"):
        OmegaConf.register_new_resolver("vidcap_root", lambda: str(SHIPPED_ROOT))
    schema.register()


register_resolvers()


@dataclass(frozen=True)
class ForeignFootage:
    """A model that knows only one kind of footage over a folder that holds some (`known`, the clips its
    references.jsonl describes as that kind) and maybe other clips: `warning` goes into each other clip's
    records (caption/pipeline/record.py), decided per clip (caption/planning.py foreign_footage)."""

    kind: str
    known: frozenset[str]
    warning: str

    def warns(self, video: str) -> bool:
        return video not in self.known


@dataclass(frozen=True)
class ModelSettings:
    name: str
    family: str
    path: str
    dtype: str
    max_model_len: int
    trained_on: str | None  # what the checkpoint knows, where its preset says (the embedded one: caption-synth)
    preset: dict[str, Any] = field(repr=False)  # the whole `model` group, as the planner reads it


@dataclass(frozen=True)
class JobConfig:
    # the top-level settings as given (input_dir, output, tasks, resume, limit, ...): declared once, in
    # caption/settings/schema.py JobOptions, and checked by its check()
    options: JobOptions
    paths: JobPaths | None  # the files options name, resolved (caption/settings/paths.py); None with plan_only
    model: ModelSettings  # path and dtype as the preset gives them until the plan says what runs
    requested_engine: str  # auto, vllm, hf or server, after what sampling and speculative decoding decide
    engine_options: EngineSchema  # the `engine` group as composed and checked (caption/settings/engine_schema.py)
    gpu: dict[str, Any]  # the `gpu` group (quant/schema.py GpuSchema); the plan resolves it to a tier
    quant: dict[str, Any]  # the `quant` group (quant/schema.py QuantSchema); the plan resolves it
    sampling: SamplingSchema  # the `sampling` group as composed and checked (caption/settings/generation.py)
    decode: DecodeSpec
    decode_workers: int | str  # a number, or "auto" until caption/planning.py plan_job resolves it
    decode_timeout_s: float
    ablation: str
    prune_rate: float  # video.prune_rate: the share of video tokens vLLM drops (0: none); the plan checks it
    segments: SegmentSpec  # video.segments and its settings: which parts of a video get a record of their own
    runner: RunnerSchema  # the `runner` group as composed (runner=local reads only its name)
    include_base: bool  # caption with the base model too (always, when there are no adapters)
    lora_max_rank: int
    # what the groups above resolve to (no defaults: every one is the config's, load_job_config passes it)
    adapters: tuple[Adapter, ...]
    speculative: dict[str, Any] | None  # vLLM speculative_config; None: off
    forced_lengths: ForcedLengths | None  # benchmark.output_tokens: every request generates exactly n tokens
    server: EngineSchema | None  # engine=server: engine_options, its server keys checked (check_server)
    # the settings declared `recorded` (vidcap_ko/settings.py setting()) that are not at their defaults, by
    # `key` or `group.key`: caption/planning.py adds them to the records' settings (recorded_settings)
    recorded: dict[str, Any]
    # engine, dtype, quantization, engine settings, memory: None until caption/planning.py plan_job
    plan: Plan | None = None
    # how the records are made (caption/output/fingerprint.py): the job's settings (a segment's record adds how
    # the video was cut: segment_settings) and the id of each (task, adapter, segmented); None until plan_job
    settings: dict[str, Any] | None = None
    segment_settings: dict[str, Any] | None = None
    settings_ids: SettingsIds | None = None
    caption_warnings: tuple[str, ...] = ()  # plan warnings about the captions: every record carries them
    foreign_footage: ForeignFootage | None = None  # a folder mixing the model's footage with other clips
    engine_spec: EngineSpec | None = None  # what the engine is given (caption/planning.py engine_spec)

    @property
    def engine(self) -> str:
        """vllm or hf, as the plan resolved it."""
        return self.planned().engine

    def planned(self) -> Plan:
        """The plan; RuntimeError before caption/planning.py plan_job made it."""
        if self.plan is None:
            raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
        return self.plan

    def expected_ids(self) -> SettingsIds:
        """The settings_id of each (task, adapter, segmented) record, and which records are this job's own
        (caption/output/fingerprint.py SettingsIds); RuntimeError before plan_job."""
        if self.settings_ids is None:
            raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
        return self.settings_ids

    def record_settings(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `settings` a whole clip's record carries and a segment's; RuntimeError before plan_job."""
        if self.settings is None or self.segment_settings is None:
            raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
        return self.settings, self.segment_settings

    def files(self) -> JobPaths:
        """The folder captioned and the files read and written; RuntimeError for a plan_only job, which has
        none."""
        if self.paths is None:
            raise RuntimeError("a plan_only job captions no folder and writes no records")
        return self.paths

    @property
    def adapter_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.adapters)

    def variants(self) -> list[str | None]:
        """What each clip is captioned with: None is the base model, else an adapter name."""
        return ([None] if self.include_base or not self.adapters else []) + list(self.adapter_names)


def _mapping(node: Any) -> dict[str, Any]:
    """A config group (a DictConfig node) as a plain dict, interpolations resolved."""
    value = OmegaConf.to_container(node, resolve=True)
    if not isinstance(value, dict):
        raise ConfigError(f"expected a mapping of settings, got {value!r}")
    return {str(k): v for k, v in value.items()}


def _model(cfg: DictConfig) -> ModelSettings:
    m = cfg.model
    try:
        get_family(m.family)
    except UnknownFamily as exc:
        raise ConfigError(f"`model.family`: {exc}") from None
    path = str(m.path)
    if path.startswith("~"):  # a folder of the user's (a hub id never starts so): as the engines must open it
        path = str(Path(path).expanduser())
    if not Path(path).is_dir() and not _is_hub_id(path):
        raise ConfigError(f"`model.path={path}` is not a folder; point it at a local checkpoint "
                          "or a hub id (e.g. Qwen/Qwen2.5-VL-7B-Instruct) on a machine with hub access")
    _check_checkpoint(m, path)
    return ModelSettings(name=str(m.name), family=str(m.family), path=path,
                         dtype=str(m.dtype),  # the plan sets the dtype the engine runs in
                         max_model_len=int(at_least(m.max_model_len, "model.max_model_len")),
                         trained_on=m.get("trained_on"), preset=_mapping(m))


def _check_checkpoint(m: DictConfig, path: str) -> None:
    """A local checkpoint must be what its preset describes (architecture, sizes, position table): a
    preset pointed at another model would load, then fail deep inside the engine, or run with the
    planner's memory figures wrong."""
    config_path = Path(path).expanduser() / "config.json"
    if not config_path.is_file() or not m.get("arch"):
        return
    import json

    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"`model.path={path}`: its config.json cannot be read ({exc})") from None
    arch = _mapping(m.arch)
    wrong = get_family(m.family).config_mismatches(arch, config)
    if wrong:
        shown = "; ".join(wrong[:3]) + (f"; and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        raise ConfigError(f"`model.path={path}` is not the checkpoint preset {m.name} describes ({shown}): point "
                          "model.path at that checkpoint, or use a preset made for this one (caption-make-model "
                          "writes one for the checkpoints it makes)")


def _is_hub_id(path: str) -> bool:
    """`org/name`, the form a model hub takes; anything else must be a local folder."""
    parts = path.split("/")
    return len(parts) == 2 and all(parts) and not path.startswith((".", "~"))


Group = TypeVar("Group")


def _group(cfg: DictConfig, name: str, schema: type[Group]) -> Group:
    """Config group `name` as its schema's dataclass (caption/settings/schema.py GROUP_SCHEMAS), which Hydra typed
    while composing; a key a preset leaves unset is named in one line."""
    try:
        value = OmegaConf.to_object(cfg[name])
    except MissingMandatoryValue as exc:
        raise ConfigError(f"`{exc.full_key}` is missing: the conf/{name}/ preset in use must set it") from None
    assert isinstance(value, schema), f"the {name} group is not typed by {schema.__name__}"
    return value


def _options(cfg: DictConfig) -> JobOptions:
    """The top-level settings as JobOptions: the composed values (interpolations resolved where they stand),
    typed by the schema again. Built from to_container, not to_object, which refuses a key left unset:
    `input_dir` may be, with plan_only (it then keeps MISSING, and caption/settings/paths.py names it otherwise)."""
    given = {}
    for f in fields(JobOptions):
        if not OmegaConf.is_missing(cfg, f.name):
            value = cfg[f.name]
            given[f.name] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    node = OmegaConf.structured(JobOptions)
    node.merge_with(given)
    return JobOptions(**_mapping(node))


def _check_keys(cfg: DictConfig) -> None:
    """Hydra refuses a key its schemas lack, except one added with `+` (`+outptu=x`, `+engine.batchsize=4`),
    which the job would never read: refused here, in the words `caption --help` uses."""
    unknown = sorted(set(cfg) - set(schema.known_keys()))
    if unknown:
        raise ConfigError(f"`{unknown[0]}` is not a setting{closest(unknown[0], schema.known_keys())} "
                          "(caption --help lists them)")
    for name, group_schema in GROUP_SCHEMAS.items():
        known = [f.name for f in fields(group_schema)]
        extra = sorted(set(cfg[name]) - set(known))
        if extra:
            raise ConfigError(f"`{name}.{extra[0]}` is not a setting{closest(extra[0], known, f'{name}.')} "
                              "(caption --help lists them)")


def _size_multiple(cfg: DictConfig, given: int | None) -> int:
    """`video.size_multiple`, or the model family's (null in conf/video/, the one home of the rule)."""
    if given is not None:
        return given
    arch = _mapping(cfg.model.arch) if cfg.model.get("arch") else {}
    try:
        return get_family(cfg.model.family).size_multiple(arch)
    except KeyError as exc:
        raise ConfigError(f"`model.arch` of {cfg.model.get('name')!r} lacks {exc.args[0]}, which sets the frame "
                          "size multiple: add it, or set video.size_multiple") from None


def _decode(cfg: DictConfig, v: VideoSchema) -> DecodeSpec:
    """The frames the decoder gives: the video group's sampling and size, within the model preset's."""
    try:
        sampling = SamplingSpec(mode=v.sampling, num_frames=v.num_frames, fps=v.fps, max_frames=v.max_frames,
                                min_frames=v.min_frames)
        max_pixels = v.max_pixels
        if max_pixels is None and not (v.width and v.height):  # a preset without a budget: its square size
            max_pixels = int(cfg.model.frame_width) * int(cfg.model.frame_height)
        return DecodeSpec(sampling=sampling, width=v.width, height=v.height, backend=v.backend,
                          max_pixels=max_pixels, size_multiple=_size_multiple(cfg, v.size_multiple), seek=v.seek)
    except ValueError as exc:
        raise ConfigError(f"`video`: {exc}") from None


def _segments(v: VideoSchema) -> SegmentSpec:
    try:
        return SegmentSpec(mode=v.segments, over_s=v.segment_over_s, min_s=v.segment_min_s, max_s=v.segment_max_s,
                           stride_s=v.segment_stride_s, trim_s=v.segment_trim_s, threshold=v.scene_threshold,
                           short=v.segment_short_shots)
    except ValueError as exc:
        raise ConfigError(f"`video`: {exc}") from None


def _runner(cfg: DictConfig) -> RunnerSchema:
    runner = _group(cfg, "runner", RunnerSchema)
    one_of(runner.name, RUNNERS, "runner")
    runner.check()
    if runner.name == "ray":
        try:
            import ray.data  # noqa: F401
        except ImportError:
            raise ConfigError("runner=ray needs Ray: `make setup` installs it (pip install -c constraints.txt "
                              "-e '.[cpu,test]'), or pip install 'ray[data]==2.60.0'") from None
    return runner


def _spec(cfg: DictConfig, model_path: str) -> dict[str, Any] | None:
    """The `spec` group as vLLM's speculative_config (None: off)."""
    spec = _group(cfg, "spec", SpecSchema)
    spec.check()
    if spec.method == "none":
        return None
    config: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.method == "ngram":
        config.update(prompt_lookup_max=spec.prompt_lookup_max, prompt_lookup_min=spec.prompt_lookup_min)
    else:
        draft = Path(str(spec.model or "")).expanduser()
        if not (draft / "config.json").is_file():
            raise ConfigError(f"`spec.model={spec.model}` is not a model folder; point it at a draft model "
                              "that shares the target's tokenizer (python -m scripts.training.train_draft makes one)")
        target = Path(model_path) / "tokenizer.json"
        if target.is_file() and (draft / "tokenizer.json").read_bytes() != target.read_bytes():
            raise ConfigError(f"draft model {draft} has a different tokenizer from the target model: speculative "
                              "decoding needs the same tokenizer (e.g. Qwen2.5-0.5B-Instruct for Qwen2.5-VL-7B)")
        config["model"] = str(draft)
    return config


def _forced_lengths(cfg: DictConfig, sampling: SamplingSchema) -> ForcedLengths | None:
    """`benchmark.output_tokens`: forced lengths, within what the plan sized memory for."""
    value = cfg.benchmark.output_tokens
    try:
        if value is not None and not OmegaConf.is_dict(value):
            raise ValueError(f"expected null or a mapping, got {value!r}")
        lengths = ForcedLengths.from_config(None if value is None else _mapping(value))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"`benchmark.output_tokens`: {exc}") from None
    if lengths is not None and lengths.max > sampling.max_new_tokens:
        raise ConfigError(f"`benchmark.output_tokens.max={lengths.max}` exceeds `sampling.max_new_tokens="
                          f"{sampling.max_new_tokens}`, which the plan sizes memory for: add "
                          f"sampling.max_new_tokens={lengths.max} (or lower the max)")
    if lengths is not None and sampling.num_beams > 1:
        raise ConfigError("`benchmark.output_tokens` forces lengths per request, which beam search does not "
                          "have: use a sampling preset with num_beams=1")
    return lengths


def _quant(cfg: DictConfig) -> dict[str, Any]:
    """The `quant` group; a checkpoint in the user's home (`~/...`) as the engines must open it."""
    quant = _mapping(cfg.quant)
    if str(quant.get("checkpoint") or "").startswith("~"):
        quant["checkpoint"] = str(Path(quant["checkpoint"]).expanduser())
    return quant


def recorded_settings(cfg: DictConfig) -> dict[str, Any]:
    """The value of each setting declared `recorded` (it changes what a caption says) that is not its schema
    default (one every preset sets: always), by `key` or `group.key`. plan_job adds them to every record's
    `settings`, so a new one is recorded from its declaration alone, with no line in
    caption/output/fingerprint.py; at its default it is left out, so records made before the setting existed
    keep their settings_id and a resumed job still counts them as its own."""
    found = {}
    for key, default in schema.recorded_keys():
        try:
            value = OmegaConf.select(cfg, key, throw_on_missing=True)
        except MissingMandatoryValue:
            raise ConfigError(f"`{key}` is missing: the preset in use must set it") from None
        value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        if default is MISSING or value != default:
            found[key] = value
    return found


def load_job_config(cfg: DictConfig) -> JobConfig:
    """Validate the composed config and return it as a JobConfig; raises ConfigError naming the key to
    fix. Reads files the config names (adapters, a draft model) but probes no device, builds no plan
    and writes nothing: that is caption/planning.py `plan_job`, the job's next step."""
    _check_keys(cfg)
    options = _options(cfg)
    paths = None if options.plan_only else io_paths(options)  # a plan needs no clips
    options.check()
    one_of(cfg.engine.name, ENGINES, "engine")
    model, sampling, video = _model(cfg), _group(cfg, "sampling", SamplingSchema), _group(cfg, "video", VideoSchema)
    sampling.check()
    video.check()
    decode = _decode(cfg, video)
    forced_lengths = _forced_lengths(cfg, sampling)
    spec = _spec(cfg, model.path)
    lora = _group(cfg, "lora", LoraSchema)
    try:
        adapters = load_adapters([asdict(a) for a in lora.adapters], model.path, model.name, lora.max_rank,
                                 get_family(model.family).vision_modules)
    except AdapterError as exc:
        raise ConfigError(str(exc)) from None
    engine_options = _group(cfg, "engine", EngineSchema)
    engine_options.check()
    if engine_options.name == "server":
        engine_options.check_server()
    return JobConfig(
        options=options, paths=paths,
        model=model, requested_engine=requested_engine(cfg, sampling, spec),
        engine_options=engine_options,
        gpu=_mapping(cfg.gpu), quant=_quant(cfg),
        sampling=sampling, decode=decode,
        decode_workers=video.workers, decode_timeout_s=video.timeout_s, ablation=video.ablation,
        prune_rate=video.prune_rate, segments=_segments(video), adapters=tuple(adapters), include_base=lora.include_base,
        lora_max_rank=lora.max_rank, speculative=spec, forced_lengths=forced_lengths,
        runner=_runner(cfg), server=engine_options if engine_options.name == "server" else None,
        recorded=recorded_settings(cfg),
    )
