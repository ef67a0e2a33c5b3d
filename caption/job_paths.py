"""Where a job reads and writes: the folder it captions, its records file, its summary and the
references METEOR scores against, as the config names them (checked before anything loads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from caption.option import ConfigError


def _require(cfg: DictConfig, key: str) -> Any:
    if OmegaConf.is_missing(cfg, key):
        raise ConfigError(f"`{key}` is required: add `{key}=...` to the command line")
    return cfg[key]


def _default_output() -> Path:
    """captions.jsonl in this run's Hydra folder (each job of a sweep gets its own)."""
    from caption.sweep import run_dir

    folder = run_dir()
    if folder is None:
        raise ConfigError("`output` is required: add `output=captions.jsonl` (a JSONL file path)")
    return folder / "captions.jsonl"  # the job makes the folder (caption/job.py run_job)


def io_paths(cfg: DictConfig) -> tuple[Path, Path, Path, Path | None]:
    input_dir = Path(str(_require(cfg, "input_dir"))).expanduser()
    given = bool(cfg.get("output"))
    output = Path(str(cfg.output)).expanduser() if given else _default_output()
    if not input_dir.is_dir():
        raise ConfigError(f"`input_dir={input_dir}` is not a folder")
    if output.exists() and output.is_dir():
        raise ConfigError(f"`output={output}` is a folder; give a file path such as captions.jsonl")
    # a folder that does not exist yet is made before anything loads (caption/job.py check_outputs), or
    # refused there in one line where its parent cannot take it
    summary = Path(str(cfg.get("summary_path") or f"{output}.summary.json")).expanduser()
    references = cfg.references
    if references == "auto":
        found = input_dir / "references.jsonl"
        references = found if found.is_file() else None
    elif references is not None:
        references = Path(str(references)).expanduser()
        if not references.is_file():
            raise ConfigError(f"`references={references}` is not a file; point it at a references.jsonl "
                              "or set references=null")
    return input_dir, output, summary, references
