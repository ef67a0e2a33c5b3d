"""Where a job reads and writes: the folder it captions, its records file, its summary and the
references METEOR scores against, resolved from the top-level settings that name them (caption/settings/schema.py
JobOptions) and checked before anything loads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING

from caption.settings.manifest import Manifest, read_manifest
from caption.settings.option import ConfigError
from caption.settings.schema import JobOptions
from video_io.store import StoreError, check_reachable, check_url, fetched_copy, is_url


@dataclass(frozen=True)
class JobPaths:
    """What a job that captions reads and writes (a plan_only job has none of them)."""
    input_dir: Path | str  # a folder, or an object-store URL kept as typed (video_io/store.py)
    output: Path  # the records file itself: where `output=` names a symbolic link, the file it leads to
    summary_path: Path
    references: Path | None  # score the captions against these after the job; None: no scoring
    output_link: Path | None = None  # `output=` as given, where it is a symbolic link (the start lines say so)
    manifest: Manifest | None = None  # input_list=: the videos it names, in place of a crawl of input_dir


def _default_output() -> Path:
    """captions.jsonl in this run's Hydra folder (each job of a sweep gets its own)."""
    from caption.sweep import run_dir

    folder = run_dir()
    if folder is None:
        raise ConfigError("`output` is required: add `output=captions.jsonl` (a JSONL file path)")
    return folder / "captions.jsonl"  # the job makes the folder (caption/job.py run_job)


def io_paths(options: JobOptions) -> JobPaths:
    """The files the settings name, as paths; ConfigError where one is missing or cannot be what it must."""
    manifest = None
    if options.input_list is not None:
        if options.input_dir != MISSING:
            raise ConfigError("give `input_dir` (a folder to crawl) or `input_list` (a file listing the videos), "
                              "not both")
        manifest = read_manifest(options.input_list)
    elif options.input_dir == MISSING:
        raise ConfigError("`input_dir` is required: add `input_dir=...` (or `input_list=...`) to the command line")
    input_dir: Path | str
    if manifest is not None:
        input_dir = manifest.input_dir
        if is_url(input_dir):
            check_reachable(str(input_dir))
    elif is_url(options.input_dir):  # s3://bucket/prefix: a str (Path would eat one slash of "//")
        try:
            input_dir = check_url(options.input_dir)
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
        # a store that does not answer, or refuses the credentials: StoreError now, before the plan's
        # other reads (its references.jsonl) and before any model loads (caption/cli.py: exit status 7)
        check_reachable(input_dir)
    else:
        input_dir = Path(options.input_dir).expanduser()
        if not input_dir.is_dir():
            raise ConfigError(f"`input_dir={input_dir}` is not a folder")
    output = Path(options.output).expanduser() if options.output else _default_output()
    link = None
    if output.is_symlink():  # one records file, whatever name reaches it: lock, appends, tidies and
        # renames act on the file itself, so a job through the link and one through the file exclude each
        # other, and the link stays a link (os.replace onto its name would turn it into a plain file)
        link, output = output, Path(os.path.realpath(output))
    if output.exists() and output.is_dir():
        raise ConfigError(f"`output={link or output}` is a folder; give a file path such as captions.jsonl")
    # a folder that does not exist yet is made before anything loads (caption/job.py check_outputs), or
    # refused there in one line where its parent cannot take it
    summary = Path(options.summary_path or f"{output}.summary.json").expanduser()
    references: Path | None = None
    if options.references == "auto" and manifest is not None:
        references = None  # a list's videos have no folder of their own: name the references file
    elif options.references == "auto" and isinstance(input_dir, str):
        references = fetched_copy(f"{input_dir}/references.jsonl")  # beside the clips in the store, if there
    elif options.references == "auto":
        found = Path(input_dir) / "references.jsonl"
        references = found if found.is_file() else None
    elif options.references is not None:
        references = Path(options.references).expanduser()
        if not references.is_file():
            raise ConfigError(f"`references={references}` is not a file; point it at a references.jsonl "
                              "or set references=null")
    return JobPaths(input_dir, output, summary, references, link, manifest)
