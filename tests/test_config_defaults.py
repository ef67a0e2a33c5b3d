"""Every config key has one default, in one place.

Each config group has a typed schema (caption/settings/schema.py GROUP_SCHEMAS; gpu, model and quant from
quant/schema.py) that Hydra validates while composing. A key without a schema default is set by every
preset of the group (conf/<group>/*.yaml, the one home of those values); a key with a schema default is
optional, and a preset may set it only to say something else. These tests compose every preset with the
real Hydra and read every preset file, so a preset that leaves a key out, repeats a default, or a
reader that takes other keys than its schema, fails here by name.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import fields

import pytest
from omegaconf import MISSING, OmegaConf

from caption.settings.config import CONF_DIR
from caption.settings.schema import GROUP_SCHEMAS, EngineSchema, SamplingSchema
from quant.presets import options
from quant.tiers import Tier

PRESETS = [(group, option) for group in GROUP_SCHEMAS for option in options(group)]


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def _schema_defaults(group: str) -> dict:
    out = {}
    for f in fields(GROUP_SCHEMAS[group]):
        if f.default is not MISSING:
            out[f.name] = f.default_factory() if f.default is NO_DEFAULT else f.default
    return out


@pytest.mark.parametrize("group,option", PRESETS)
def test_every_preset_sets_each_key_its_schema_leaves_to_the_presets(compose_config, group, option):
    composed = compose_config([f"{group}={option}"])[group]
    unset = [f.name for f in fields(GROUP_SCHEMAS[group]) if OmegaConf.is_missing(composed, f.name)]
    assert not unset, f"conf/{group}/{option}.yaml leaves {unset} unset (the schema has no default for them)"


@pytest.mark.parametrize("group,option", PRESETS)
def test_no_preset_repeats_a_default_written_elsewhere(compose_config, group, option):
    """A value a preset sets must differ from what it would get anyway: its parent preset's (a
    `defaults:` list) or, with no parent, the schema's default."""
    own = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{option}.yaml"), resolve=False)
    parents = [p for p in own.pop("defaults", []) if p != "_self_"]
    inherited = (OmegaConf.to_container(compose_config([f"{group}={parents[-1]}"])[group], resolve=False)
                 if parents else _schema_defaults(group))
    repeated = sorted(k for k, v in own.items() if k in inherited and inherited[k] == v)
    assert not repeated, f"conf/{group}/{option}.yaml repeats {repeated}: the value is already " \
                         f"{'conf/' + group + '/' + parents[-1] + '.yaml' if parents else 'the schema'}'s"


def test_the_job_reads_each_group_as_its_schema_declares_it(compose_config, synth_dir):
    """No typed copy of a group: the job holds the schema's own dataclass, so a key has one type, one
    default and one help text; engine=server's keys are the engine group's own."""
    from caption.settings.config import load_job_config
    from caption.settings.schema import RunnerSchema

    job = load_job_config(compose_config([f"input_dir={synth_dir}", "output=/tmp/unused.jsonl", "engine=server",
                                          "engine.base_url=http://localhost:9/v1/"]))
    assert type(job.engine_options) is EngineSchema and type(job.sampling) is SamplingSchema
    assert type(job.runner) is RunnerSchema
    assert job.server is job.engine_options and job.server.base_url == "http://localhost:9/v1"


def test_readers_keep_no_defaults_of_their_own():
    """A dataclass default would be a second home for a value the presets or the schema already hold."""
    from caption.settings.config import JobConfig, ModelSettings

    for cls in (Tier, ModelSettings):
        assert all(f.default is NO_DEFAULT and f.default_factory is NO_DEFAULT for f in fields(cls)), cls.__name__
    # the job: only what caption/planning.py plan_job fills in starts empty
    defaulted = {f.name for f in fields(JobConfig) if f.default is not NO_DEFAULT or f.default_factory is not NO_DEFAULT}
    assert defaulted == {"plan", "settings", "segment_settings", "settings_ids", "caption_warnings", "foreign_footage",
                         "engine_spec"}


def test_the_top_level_settings_are_declared_once_and_the_job_holds_them(compose_config, synth_dir):
    """JobOptions declares each top-level setting (type, default, help, its check()); JobSchema composes
    it and the job holds it as one object. A typed copy on JobConfig (`limit: int | None`) would be a
    second declaration to keep in step, and a top-level setting declared in JobSchema itself would
    never reach the job."""
    from caption.settings.config import JobConfig, load_job_config
    from caption.settings.schema import JobOptions, JobSchema

    top = _names(JobOptions)
    assert {"input_dir", "output", "tasks", "resume", "limit", "plan_only"} <= top
    assert {f.name for f in fields(JobSchema) if "help" in f.metadata} == top
    copied = sorted(top & (_names(JobConfig) | set(vars(JobConfig))))
    assert not copied, f"JobConfig declares {copied} again: read them as job.options.<key> (caption/settings/schema.py)"
    job = load_job_config(compose_config([f"input_dir={synth_dir}", "output=/tmp/unused.jsonl", "limit=3",
                                          "tasks=[caption,motion]", "resume=false"]))
    assert type(job.options) is JobOptions
    assert (job.options.limit, job.options.tasks, job.options.resume) == (3, ["caption", "motion"], False)
    assert job.files().input_dir == synth_dir and job.options.input_dir == str(synth_dir)


def test_unknown_keys_and_wrong_types_fail_while_composing(compose_config):
    from hydra.errors import ConfigCompositionException

    for override in ("gpu.vram_gb=16", "runner.actorz=2", "video.fps=fast", "sampling.top_k=1.5", "quant.bitz=4"):
        with pytest.raises(ConfigCompositionException):
            compose_config([override])


def test_the_decoder_library_keeps_no_second_default_for_what_the_job_sets():
    """Frames per clip are the model preset's and decoder processes the plan's: video_io asks its caller
    for both rather than holding a number of its own that the job's could be mistaken for."""
    import inspect

    from video_io.decode import DecodeSpec
    from video_io.sampling import SamplingSpec
    from video_io.workers import DecodePool

    assert inspect.signature(DecodePool).parameters["workers"].default is inspect.Parameter.empty
    assert {f.name: f.default for f in fields(DecodeSpec)}["sampling"] is NO_DEFAULT
    with pytest.raises(ValueError, match="uniform sampling needs num_frames"):
        SamplingSpec()
    assert SamplingSpec("fps").num_frames is None  # fps sampling counts its frames from the rate


def test_the_job_reads_the_runner_group_as_its_schema_declares_it(compose_config, synth_dir):
    from caption.settings.config import load_job_config
    from caption.settings.schema import RunnerSchema

    job = load_job_config(compose_config([f"input_dir={synth_dir}", "output=/tmp/unused.jsonl"]))
    assert job.runner == RunnerSchema(name="local")  # every other key the schema's default, not a None of its own


@pytest.mark.parametrize("overrides,pixels", [
    ([], 3136),  # the embedded preset's pixel budget (model.frame_pixels)
    (["video.width=28", "video.height=84"], 28 * 84),  # an exact size
    (["model.frame_pixels=null", "model.frame_width=112", "model.frame_height=56"], 112 * 56),
])
def test_the_engines_memory_estimate_sizes_frames_as_the_decoder_will(compose_config, synth_dir, overrides, pixels):
    """vLLM's cache budget counts each clip's frames at the size the decoder gives them (the plan's),
    not at a size of its own."""
    from caption.planning import load_planned_job

    job = load_planned_job(compose_config([f"input_dir={synth_dir}", "output=/tmp/unused.jsonl", *overrides]))
    assert job.engine_spec is not None and job.engine_spec.frame_pixels == pixels


def _leaf_fields(schema, prefix: str = ""):
    """(key, field) of every setting a user can give, nested schemas (a group, benchmark, a list of
    adapters) walked into rather than listed."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(schema)
    for f in fields(schema):
        kind = hints[f.name]
        inner = [a for a in typing.get_args(kind) if dataclasses.is_dataclass(a)]
        if dataclasses.is_dataclass(kind):
            yield from _leaf_fields(kind, f"{prefix}{f.name}.")
            continue
        yield prefix + f.name, f
        for nested in inner:  # List[AdapterSchema]: the list is a setting, and so is each key of its items
            yield from _leaf_fields(nested, f"{prefix}{f.name}[].")


def test_every_setting_says_what_it_does():
    """Each key of every schema (the job's, each group's, recursively) carries its help text in its one
    declaration (option(), preset_key(), vidcap_ko/settings.py setting()): `caption --help` and the
    configuration reference read it there."""
    from caption.settings.schema import JobSchema

    keys = dict(_leaf_fields(JobSchema))
    assert len(keys) > 100 and "lora.adapters[].references_field" in keys and "gpu.vram_gib" in keys
    silent = sorted(key for key, f in keys.items() if not str(f.metadata.get("help", "")).strip())
    assert not silent, f"settings without help text (give it in their declaration): {silent}"
