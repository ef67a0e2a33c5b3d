"""The job's top-level settings as a typed schema: the one home of their defaults and their help.

conf/config.yaml lists the config groups (model, engine, gpu, ...); this schema is the rest. Hydra
validates every override against it while it composes the config, before anything loads: a wrong
type (`limit=abc`, `resume=maybe`) or an unknown key (`outptu=x`, even as `+outptu=x`) stops the job in
one line (caption/cli.py says it). `caption --help` prints each key with its default and help text.
"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, field, fields
from typing import Any, List, Optional

from omegaconf import MISSING

SCHEMA_NAME = "job_schema"  # conf/config.yaml's defaults list starts with it


def option(default, help: str):
    """A schema field with its help text (`caption --help`); lists and dicts take a copy per config."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class BenchmarkSchema:
    # Any, not Optional[Dict]: OmegaConf 2.3 cannot merge a mapping override into a typed dict that is
    # None (AttributeError in dictconfig._get_node); ForcedLengths.from_config checks the value instead
    output_tokens: Any = option(
        None, "engine benchmarks only (scripts/bench_engines.py): null, the model stops where it likes; "
              "{median: 40, sigma: 0.6, min: 8, max: 200, seed: 0}: every request generates exactly n tokens, "
              "n drawn from a log-normal by (seed, video, task, adapter), the same on every engine "
              "(caption/forced_lengths.py); needs sampling.max_new_tokens >= max")


@dataclass
class JobSchema:
    input_dir: str = option(MISSING, "folder crawled recursively for video files")
    output: Optional[str] = option(None, "JSONL, one record per (video, task, adapter), appended to on resume; "
                                         "null: captions.jsonl in the run's folder (runs/...)")
    tasks: List[str] = option(["caption"], "instructions per video (caption/prompts.py): caption, keywords, motion")
    resume: bool = option(True, "skip videos that already have records (made with these settings) in `output`")
    overwrite: bool = option(False, "start `output` afresh even though it exists; the old file is kept beside it, "
                                    "renamed <stem>.<UTC time><suffix>")
    add_beside: bool = option(False, "`output` holds records made with other settings (another model, engine, "
                                     "sampling...): false refuses to resume into it, true adds this job's records "
                                     "beside them (every record names its settings)")
    fail_fast: bool = option(False, "stop at the first record that is an error (exit status 3)")
    retry_errors: bool = option(False, "with resume: run again the videos whose records are errors")
    limit: Optional[int] = option(None, "caption at most this many videos (after resume), e.g. for a dry run")
    progress: bool = option(True, "progress bar on stderr")
    verbose: bool = option(False, "false: the terminal shows the plan, progress and summary, and every other "
                                  "line goes to caption.log in the run's folder")
    summary_path: Optional[str] = option(None, "null: <output>.summary.json")
    references: Optional[str] = option("auto", "score captions with METEOR after the job: a references.jsonl path; "
                                               "auto: <input_dir>/references.jsonl if it exists; null: do not score")
    plan_only: bool = option(False, "resolve and save the plan (engine, dtype, quantization, memory), run nothing")
    benchmark: BenchmarkSchema = field(default_factory=BenchmarkSchema)
    # the config groups: conf/<group>/<option>.yaml, chosen as `group=option`
    model: Any = MISSING
    engine: Any = MISSING
    gpu: Any = MISSING
    quant: Any = MISSING
    lora: Any = MISSING
    spec: Any = MISSING
    sampling: Any = MISSING
    video: Any = MISSING
    runner: Any = MISSING


GROUPS = ("model", "engine", "gpu", "quant", "lora", "spec", "sampling", "video", "runner")


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


def known_keys() -> list[str]:
    """Every top-level key and group name (for "did you mean")."""
    return [f.name for f in fields(JobSchema)]


def closest(word: str, candidates, prefix: str = "") -> str:
    """ "; did you mean X?" for the nearest candidate, or "" when none is near."""
    import difflib

    found = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{found[0]}?" if found else ""
