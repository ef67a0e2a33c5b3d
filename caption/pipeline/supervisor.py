"""The engine of one job (or one Ray actor): loaded once, restarted when it breaks mid-run."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import re
import sys
import traceback
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from caption.engines import build_engine
from caption.engines.base import Engine, Request, Result, request_stream
from caption.outcome import EngineDidNotLoad, EngineDied, EngineFailure, stop_if_raised_by_an_interrupt
from caption.settings.option import ConfigError
from vidcap_ko.torchvision_shim import install_line
from video_io.decoder_process import main_script_hidden

if TYPE_CHECKING:
    from caption.settings.config import JobConfig
    from caption.settings.engine_spec import EngineSpec
    from caption.settings.generation import SamplingSchema
    from caption.summary.tally import JobTally


def load_engine(job: JobConfig) -> Engine:
    """The engine a planned job names, loaded from the plan's engine specification (a caller that keeps
    it passes it to run_job, e.g. the Python API across calls). vLLM may spawn its engine process: it
    must not run the caller's script again (video_io/decoder_process.py main_script_hidden)."""
    with main_script_hidden():
        if job.engine_spec is None:
            raise RuntimeError("the job is not planned yet: call caption.planning.plan_job first")
        return build_engine(job.engine_spec)


def check_given_engine(job: JobConfig, engine: Engine) -> None:
    """An engine the caller loaded and passed to the job (run_job's `engine`) must make the captions the
    job's records will describe: one loaded for another sampling, model, adapter set, dtype or quantization
    would write records naming this job's settings over captions made with its own (run_job once took
    sampling.min_new_tokens=64 with an engine loaded for 0 and wrote 8-token captions under a settings_id
    that said 64). ConfigError naming what differs. What the engine is only sized for (requests, frames,
    batch sizes) may differ, as may the model's path where its content is the same (caption/output/fingerprint.py
    says which settings change captions)."""
    loaded, wanted = getattr(engine, "spec", None), job.engine_spec
    if loaded is None or wanted is None:  # an engine of the caller's own making, or a job that loads none
        return
    differ = [name for name, (was, now) in _caption_settings(loaded, wanted, job.forced_lengths is not None).items()
              if was != now]
    if differ:
        raise ConfigError(f"the engine passed to the job was loaded for another {', '.join(differ)} than the "
                          "job's: pass none and the job loads its own, or load one for these settings "
                          "(caption.pipeline.supervisor.load_engine(job)) to reuse across jobs")


def _caption_settings(loaded: EngineSpec, wanted: EngineSpec, forced: bool) -> dict[str, tuple[Any, Any]]:
    """Each setting that changes what an engine generates: (the engine's, the job's)."""
    from caption.output.fingerprint import folder_identity

    def sampling(spec: EngineSpec) -> SamplingSchema:  # forced lengths set each request's own (caption/engines/vllm_engine.py)
        return dataclasses.replace(spec.sampling, max_new_tokens=0, min_new_tokens=0) if forced else spec.sampling

    def weights(spec: EngineSpec) -> tuple[Any, Any]:
        args = spec.vllm or spec.hf or {}
        return args.get("dtype"), args.get("quantization") or args.get("quantization_config")

    same_model = loaded.model_path == wanted.model_path or \
        folder_identity(loaded.model_path) == folder_identity(wanted.model_path)
    settings = {
        "engine": (loaded.engine, wanted.engine),
        "model": (True, same_model),
        "model family": (loaded.family, wanted.family),
        "prompt processing": ((loaded.stop, loaded.processor_kwargs), (wanted.stop, wanted.processor_kwargs)),
        "sampling": (sampling(loaded), sampling(wanted)),
        "LoRA adapter set": (loaded.adapters, wanted.adapters),
        "dtype or quantization": (weights(loaded), weights(wanted)),
        "server": ((loaded.served_model, loaded.server and loaded.server.base_url),
                   (wanted.served_model, wanted.server and wanted.server.base_url)),
    }
    if wanted.sampling.do_sample:  # under greedy decoding neither changes a caption
        settings["seed"] = (loaded.options.seed, wanted.options.seed)
        settings["speculative decoding"] = (loaded.speculative, wanted.speculative)
    return settings


def load_engine_or_say_why(job: JobConfig, failed: type[EngineDied] = EngineDidNotLoad,
                           trace_at: str | None = None) -> Engine:
    """load_engine, or `failed` saying in one line why the model did not load (a damaged or incomplete
    weights file, a model type the installed transformers does not know, memory, a library not installed)
    and what to do about it: the job then ends with its summary and exit status 4, not as a bug. The
    traceback goes to sys.stderr, which is the job's log while the terminal is quiet (caption/summary/console.py);
    `trace_at` says where it lands when that is elsewhere (a Ray actor's output, which Ray passes on to
    the job's log)."""
    try:
        return load_engine(job)
    except Exception as exc:
        stop_if_raised_by_an_interrupt(exc)  # a signal while the model loaded: interrupted, not a model that cannot load
        traceback.print_exc(file=sys.stderr)
        raise failed(_load_failed_message(job, exc, trace_at)) from None


def _load_failed_message(job: JobConfig, exc: Exception, trace_at: str | None) -> str:
    from caption.summary.console import console

    cause = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line, whatever the library's message
    cause = cause if len(cause) <= 600 else cause[:600] + "..."
    trace_at = trace_at or (str(console.quiet_log) if console.quiet_log is not None else None)
    trace = f"the traceback is in {trace_at}" if trace_at else "the traceback is above"
    server = job.planned().server
    if server is not None:
        return (f"the server engine could not start: {cause} ({trace}): check that engine.base_url "
                f"({server.get('base_url')}) answers")
    path = job.engine_spec.model_path if job.engine_spec is not None else job.model.path
    missing = _missing_package(exc)
    if missing is not None:  # the environment, not the checkpoint: remaking it would change nothing
        what = _install_hint(missing)
    elif isinstance(exc, MemoryError) or "out of memory" in cause.lower():  # torch's OutOfMemoryError says so
        what = ("the GPU's memory did not hold it: see what else holds the GPU (nvidia-smi), or plan for less "
                "(gpu.gpu_memory_utilization, gpu.max_num_seqs, a quantized model with quant=...)"
                if job.gpu.get("device") == "cuda" else
                "the host's memory did not hold it: close what else uses it, or pick a smaller or quantized model")
    else:
        what = "check that folder (config.json, and every weights file whole) and model.path, or make the checkpoint again"
    return f"the {job.engine} engine could not load the model {path}: {cause} ({trace}): {what}"


# transformers' requires_backends (transformers/utils/import_utils.py), e.g. for a video processor without
# torchvision: "Qwen2VLVideoProcessor requires the Torchvision library but it was not found in your environment"
_LIBRARY_NOT_FOUND = re.compile(r"requires the (\S+) library but it was not found")
_PIP_NAMES = {"pyav": "av", "pil": "pillow", "cv2": "opencv-python-headless"}  # import or library name -> pip's


def _missing_package(exc: BaseException) -> str | None:
    """The package (as pip names it) whose absence made the load fail, from the error or the one it came
    from: a module that is not installed at all, or a library transformers requires and did not find."""
    error: BaseException | None = exc
    for _ in range(8):  # the chain a library's own wrapping makes, not an endless one
        if error is None:
            break
        if isinstance(error, ModuleNotFoundError) and error.name:
            top = error.name.partition(".")[0]
            if importlib.util.find_spec(top) is None:  # a module missing inside an installed package is no install's
                return _PIP_NAMES.get(top.lower(), top)
        elif isinstance(error, ImportError) and (found := _LIBRARY_NOT_FOUND.search(str(error))):
            return _PIP_NAMES.get(found[1].lower(), found[1].lower())
        error = error.__cause__ or error.__context__
    return None


def _install_hint(package: str) -> str:
    """What to install. torchvision (not among the base install's requirements: a GPU image brings one built
    for its torch) must be the build for the torch there, which a plain `pip install torchvision` may replace."""
    if package != "torchvision":
        return f"the package {package} is not installed here: pip install {package}, then run the same command again"
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "the package torchvision is not installed here: install the release built for your torch"
    return (f"the package torchvision is not installed here (transformers' video processors need it): install "
            f"the build for this torch {torch}, leaving torch as it is: {install_line(torch)}; then run the same "
            "command again")


class EngineSupervisor:
    """Owns the engine for one job: loads it, and restarts it when it breaks mid-run (at most
    `engine.max_restarts` times), handing the new engine the requests the old one had not started.
    An engine passed in by the caller is used as it is and never restarted or closed. `trace_at`: where
    a load's traceback lands, when not in the job's log (load_engine_or_say_why)."""

    def __init__(self, job: JobConfig, engine: Engine | None = None, trace_at: str | None = None):
        self.job, self.owned, self.trace_at = job, engine is None, trace_at
        self.engine: Engine | None = engine
        self.restarts = 0

    def start(self) -> None:
        self._running().reset_stats()  # a reused engine reports this job's counters only

    def _running(self) -> Engine:
        """The engine, loaded first if it is not yet."""
        if self.engine is None:
            self.engine = load_engine_or_say_why(self.job, trace_at=self.trace_at)
        return self.engine

    def run(self, requests: Iterable[Request], tally: JobTally) -> Iterator[Result]:
        stream = request_stream(requests)  # one stream through restarts: a new engine pulls where the old one stopped
        while True:
            try:
                yield from self._running().run(stream)
                return
            except EngineFailure as failure:
                tally.engine_failures.append(str(failure))
                if not self.owned or self.restarts >= self.job.engine_options.max_restarts:
                    raise EngineDied(self._died_message(failure)) from None
                self.restarts += 1
                tally.engine_restarts = self.restarts
                self._running().close()
                self.engine = None  # a restart that does not load: the engine died (EngineDied)
                self.engine = load_engine_or_say_why(self.job, EngineDied, self.trace_at)
                stream.prepend(failure.unsubmitted)

    def _died_message(self, failure: EngineFailure) -> str:
        plan, video = self.job.planned(), self.job.decode
        if plan.server is not None:  # engine=server: nothing of the plan's to lower, the server is away
            return (f"{failure} after {self.restarts} restart(s) (engine.max_restarts="
                    f"{self.job.engine_options.max_restarts}, each after engine.retries tries): the records written "
                    "are whole; run the same command again once the server answers, and the job resumes")
        settings = plan.vllm if plan.vllm is not None else plan.hf
        return (f"the {self.job.engine} engine failed ({failure}) after {self.restarts} restart(s) "
                f"(engine.max_restarts={self.job.engine_options.max_restarts}). Plan: model {plan.model}, tier {plan.tier}, "
                f"{settings}, {video.sampling.num_frames} frames of {video.width}x{video.height}. If it ran out of "
                "memory, lower gpu.max_num_seqs, video.num_frames or the frame size (video.width/height)")

    def stats(self) -> dict[str, Any]:
        if self.engine is None:
            return {}
        try:
            return self.engine.stats()
        except Exception:  # a broken engine may not answer; the job's own counts still stand
            return {}

    def close(self) -> None:
        if self.owned and self.engine is not None:
            self.engine.close()
        self.engine = None
