"""What a stage of the pipeline is (caption/pipeline/__init__.py lists them): a class that declares
what one copy of it needs where it runs, sets itself up once (the slow part: decoder processes, a model),
and turns the items of a batch into the next stage's items (`process`), lazily: a stage pulls from
the one before as it goes, so a batch may be a stream (runner=local: every clip of the job) or a list
(runner=ray: the clips one actor was handed).

A runner decides only where the stages run: it builds each stage with a Place (how many decoder
processes, an engine already loaded), sets it up, and runs the list over its batches (run_stages);
runner=local runs them all in this process, runner=ray puts the decoder stages in decoder actors and
the others in engine actors, each with the cores and GPUs the stages there declare (Needs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Literal, Sequence

if TYPE_CHECKING:
    from caption.engines.base import Engine
    from caption.settings.config import JobConfig
    from caption.summary.tally import JobTally
    from vidcap_ko.record import RecordKey
    from video_io.identity import StrPath

Worker = Literal["decoder", "engine"]  # a process that decodes (CPU only), or the one that holds an engine


@dataclass(frozen=True)
class Needs:
    """What one copy of a stage holds where it runs: cores and GPUs."""

    cpus: float = 0.0
    gpus: int = 0


@dataclass(frozen=True)
class Place:
    """What a runner decides for the copies of the stages it builds: how many decoder processes one
    copy of the decode stage runs, an engine already loaded (runner=local, kept by its caller across
    jobs), and where a load's traceback lands when not in the job's log (a Ray actor's output)."""

    decoders: int = 1
    engine: Engine | None = None
    trace_at: str | None = None


@dataclass
class Batch:
    """What the stages share over one batch of clips: each clip's path and key, which records are
    written already (`done`), and the tally that counts the job's figures."""

    clips: Sequence[tuple[str, StrPath]]  # (key: the clip's path relative to input_dir, path or object URL)
    done: Callable[[RecordKey], bool]
    tally: JobTally

    def keys(self) -> dict[str, str]:
        """Each clip's path, as the decoders name it -> its key."""
        return {str(path): key for key, path in self.clips}


class Stage:
    """One stage: `name`, the worker it runs on, what it takes and gives (docs/architecture.md lists them),
    what a copy holds there (`needs`)."""

    name: ClassVar[str]
    worker: ClassVar[Worker]
    takes: ClassVar[str]
    gives: ClassVar[str]

    def __init__(self, job: JobConfig, place: Place):
        self.job, self.place = job, place

    @classmethod
    def needs(cls, job: JobConfig) -> Needs:
        """The cores and GPUs one copy holds; none of its own by default (it runs in its worker's process)."""
        return Needs()

    def setup(self) -> None:
        """The slow part, once per copy (processes, a model); nothing by default."""

    def process(self, items: Any, batch: Batch) -> Any:
        """The next stage's items for `items` of one batch, made as the next stage asks for them."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """Its figures for the job's summary; none by default."""
        return {}

    def close(self) -> None:
        """Stop what setup started; safe to call more than once."""


def run_stages(stages: Iterable[Stage], items: Any, batch: Batch) -> Any:
    """`items` through each stage in turn: the last stage's items, made as they are asked for."""
    for stage in stages:
        items = stage.process(items, batch)
    return items


def on_worker(stages: Iterable[type[Stage]], worker: Worker) -> list[type[Stage]]:
    """The stage classes that run on `worker`, in their order."""
    return [stage for stage in stages if stage.worker == worker]
