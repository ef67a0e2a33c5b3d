"""Captioning from Python: the `caption` command's job, for notebooks, scripts and workflow tools.

    from caption import Captioner, caption_folder

    with Captioner(model="vidcap_ko_tiny", sampling="greedy", video__num_frames=8) as captioner:
        for record in captioner.caption("clips/"):          # a folder, or a list of video files
            print(record["video"], record["caption"])

    summary = caption_folder("clips/", "captions.jsonl", engine="hf")   # records in a file, like the command

Settings are the command's: a config group's option by its name (`model="qwen2_5_vl_7b"`), a key by
its path with `__` for the dots (`video__num_frames=16`, `gpu__max_num_seqs=32`), or override strings
as the command takes them (`overrides=["video.num_frames=16"]`). A bad one fails when the Captioner is
made, in the same words as the command (ConfigError). The records are the command's records: a
call with settings that need another engine (model, adapters, dtype, quantization, engine options,
sampling...) loads that engine, so each record's settings are the ones that made it.

A script needs no `if __name__ == "__main__":` guard: the decoder processes (and vLLM's engine
process) never run the caller's script again (video_io/decoder_process.py main_script_hidden). Library
output (vLLM, transformers) goes to `log` (default: <output>.log) unless `verbose=True`, only while
the library runs: between records the caller's prints reach its terminal (caption/summary/console.py
quiet_steps). Ctrl-C stops the job cleanly and raises KeyboardInterrupt once the summary is written.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from caption.settings.config import CONF_DIR, ConfigError
from caption.settings.overrides import hydra_quote, paths_as_typed
from caption.settings.unread import check_settings_read
from video_io.store import is_url

_PLAIN = re.compile(r"^[\w./:@+-]+$", re.ASCII)  # values Hydra's override grammar takes unquoted


def _value(value) -> str:
    """A Python value as Hydra's override grammar writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.match(text):
        return text
    return hydra_quote(text)


def overrides_of(settings: dict, overrides: Iterable[str] = ()) -> list[str]:
    """Keyword settings (`video__num_frames=16`) and override strings as the command's overrides (a
    path in an override string as the command takes it: caption/settings/overrides.py)."""
    return [f"{key.replace('__', '.')}={_value(value)}" for key, value in settings.items()] + \
        paths_as_typed(list(overrides))


# what a call names itself: as a setting it would be overridden by the call's own, or override it, unseen
PER_CALL = {"input_dir": 'the videos are a call\'s first argument: captioner.caption("clips/")',
            "output": 'records go where a call says: captioner.caption(videos, output="captions.jsonl")'}


def refuse_per_call(overrides: list[str]) -> None:
    """ConfigError for a setting that names what a call does (its videos, its output)."""
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in PER_CALL:
            raise ConfigError(f"`{key}` is not a setting here: {PER_CALL[key]}")


def compose_config(overrides: list[str]):
    """The job's config as the `caption` command composes it, or ConfigError in the command's words."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from caption.settings.help import explain_composition_error

    try:
        if GlobalHydra.instance().is_initialized():  # called from inside a Hydra app: compose in its context
            return compose(config_name="config", overrides=overrides)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(explain_composition_error(exc)) from None


def _videos(videos) -> tuple[Path | str, list[tuple[str, str]] | None]:
    """(input_dir, (key, path) pairs or None to crawl it) for a folder or a list of files; an object-store
    URL (s3://bucket/prefix) is listed as a folder is crawled, a list of object URLs is keyed below the
    prefix they share."""
    if is_url(videos):
        return str(videos).rstrip("/"), None
    if not isinstance(videos, (str, os.PathLike)) and any(is_url(v) for v in videos):
        urls = [str(v) for v in videos]
        if not all(is_url(u) for u in urls):
            raise ConfigError("a list of videos mixes object URLs and local files: caption each kind in its own call")
        parts = [u.split("/") for u in urls]
        shared = next((i for i in range(min(map(len, parts)) - 1) if len({p[i] for p in parts}) > 1),
                      min(map(len, parts)) - 1)
        if shared < 3:  # ["s3:", "", bucket, ...]
            raise ConfigError("the object URLs given are in different buckets or stores: caption each in its own call")
        return "/".join(parts[0][:shared]), [("/".join(p[shared:]), u) for p, u in zip(parts, urls)]
    if isinstance(videos, (str, os.PathLike)) and Path(videos).is_dir():
        return Path(videos), None
    paths = [Path(videos)] if isinstance(videos, (str, os.PathLike)) else [Path(v) for v in videos]
    if not paths:
        raise ConfigError("no videos given: pass a folder or a list of video files")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ConfigError(f"not a file: {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    resolved = [p.resolve() for p in paths]
    folder = Path(os.path.commonpath([str(p.parent) for p in resolved]))
    return folder, [(str(p.relative_to(folder)), str(p)) for p in resolved]  # keys as the crawl makes them


@contextmanager
def _ctrl_c_stops_the_job():
    """Ctrl-C during a call: the job stops as the command's does (records kept, the summary written, even
    while it closes down), then KeyboardInterrupt reaches the caller. Only the main thread gets signals."""
    from caption.outcome import interrupts, quiet_unraisable_interrupts

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        interrupts.received = True
        if not interrupts.shielded:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    unraisable = quiet_unraisable_interrupts()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = unraisable


def _quiet(log: Path) -> None:
    """Library output to `log` from now until console.restore(); a log that cannot be written: WriteFailed."""
    from caption.summary.console import console
    from vidcap_ko.writing import writing

    with writing(log, "log file", setting="log"):
        console.quiet(log, lines_to_terminal=False)


class Captioner:
    """One configuration, any number of `caption()` calls; the engine loads at the first and is kept for
    the next calls that need the same one (a call with settings that need another engine loads it)."""

    def __init__(self, model: str | None = None, engine: str | None = None, *, overrides: Iterable[str] = (),
                 log: str | os.PathLike | None = None, verbose: bool = False, **settings):
        from caption.planning import load_planned_job

        named = {k: v for k, v in (("model", model), ("engine", engine)) if v is not None}
        self.overrides = overrides_of({**named, **settings}, overrides)
        refuse_per_call(self.overrides)
        self.verbose, self.log = verbose, Path(log) if log is not None else None
        self._tmp = tempfile.TemporaryDirectory(prefix="vidcap-")
        self._calls = 0
        # validated and planned now, so a slip fails here rather than at the first video
        probe = compose_config(["input_dir=" + self._tmp.name, *self._with_output(Path(self._tmp.name) / "x.jsonl")])
        self.job = load_planned_job(probe)
        check_settings_read(self.overrides, probe, self.job)
        self.engine, self._engine_spec = None, None

    def _with_output(self, output) -> list[str]:
        if output is None:
            self._calls += 1
            output = Path(self._tmp.name) / f"captions-{self._calls}.jsonl"
        return [*self.overrides, f"output={_value(str(output))}", "progress=false"]

    def caption(self, videos, output: str | os.PathLike | None = None, **settings) -> Iterator[dict]:
        """Caption a folder (crawled as the command does) or a list of files; yields each record as it
        is written. Records go to `output` (resumed as the command resumes); without one, only to the
        caller: the job keeps them meanwhile in a temporary file that goes when the Captioner closes, so
        the summary names no file (`output` is None) and nothing resumes them.
        Settings given here apply to this call (the Captioner's own, then these); where they need
        another engine (another model, adapter set, dtype, quantization, engine option, sampling...),
        the loaded one is closed and that one loaded, so every record says the settings that made it."""
        from caption.summary.console import quiet_steps

        folder, pairs = _videos(videos)
        extra = overrides_of(settings)
        refuse_per_call(extra)
        if pairs is not None and not any(o.startswith("references=") for o in self.overrides + extra):
            extra.append("references=null")  # a file list has no references.jsonl of its own
        cfg = compose_config([f"input_dir={_value(str(folder))}", *self._with_output(output), *extra])
        log = self.log or Path(str(cfg.output)).with_suffix(".log")
        # the plan and summary lines go to the log too; warnings reach stderr. Only while the job runs:
        # between records the caller's own prints reach its terminal
        quiet = None if self.verbose else (lambda: _quiet(log))
        with _ctrl_c_stops_the_job():
            summary = yield from quiet_steps(self._job(cfg, pairs, [*self.overrides, *extra]), quiet)
        self.summary = summary if output is not None else {**summary, "output": None}
        if summary.get("stopped") == "interrupted":
            raise KeyboardInterrupt

    def _job(self, cfg, pairs, given: list[str]):
        """One call's job, its engine first (loading it is part of the quiet steps)."""
        from caption.job import job_records
        from caption.outcome import interrupts

        interrupts.received = False
        engine = self._engine_for(cfg, given)
        return (yield from job_records(cfg, engine=engine, videos=pairs))

    def _engine_for(self, cfg, given: list[str]):
        """The engine this call's plan needs: the loaded one where its specification (caption/settings/engine_spec.py:
        model, dtype, quantization, adapters, engine options, sampling, ...) is this call's, else a new one,
        the old one closed first. None where the job loads none here (runner=ray, plan_only)."""
        from caption.job import check_outputs
        from caption.pipeline.supervisor import load_engine_or_say_why
        from caption.planning import load_planned_job
        from caption.summary.scoring import check_references

        job = load_planned_job(cfg)
        check_settings_read(given, cfg, job)
        if job.options.plan_only or not job.plan.fits:
            return None
        check_outputs(job).release()  # the output is the job's to write and no other job's, before an engine loads
        check_references(job, warn=False)  # named references METEOR cannot read: ConfigError, before it loads too
        if job.runner.name != "local":  # runner=ray loads its engines in its actors, per call: room for them
            self._close_engine()
            return None
        if self.engine is not None and self._engine_spec == job.engine_spec:
            return self.engine
        self._close_engine()
        self.engine = load_engine_or_say_why(job)  # EngineDidNotLoad: the model's folder and why
        self._engine_spec = job.engine_spec
        return self.engine

    def _close_engine(self) -> None:
        if self.engine is not None:
            engine, self.engine, self._engine_spec = self.engine, None, None
            engine.close()

    def close(self) -> None:
        self._close_engine()
        self._tmp.cleanup()

    def __enter__(self) -> "Captioner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def caption_folder(input_dir: str | os.PathLike, output: str | os.PathLike, *, overrides: Iterable[str] = (),
                   log: str | os.PathLike | None = None, verbose: bool = False, **settings) -> dict:
    """Caption a folder into a JSONL file, as `caption input_dir=... output=...` does; returns the summary."""
    with Captioner(overrides=overrides, log=log, verbose=verbose, **settings) as captioner:
        for _ in captioner.caption(input_dir, output=output):
            pass
        return captioner.summary
