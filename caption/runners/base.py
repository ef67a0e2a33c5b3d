"""What the job asks of a runner (caption/job.py): start the pipeline's stages where it puts them, the
records of the clips to do, its figures, and closing everything it started."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

from video_io.identity import StrPath

if TYPE_CHECKING:
    from caption.summary.tally import JobTally
    from vidcap_ko.record import Record, RecordKey

Todo = Sequence[tuple[str, StrPath]]  # (key: the clip's path relative to input_dir, path)


class Written(Protocol):
    """What the job has written (caption/output/checks.py RecordStore)."""

    segments: dict[str, int]  # video -> how many segments its records say it has

    def done(self, key: RecordKey) -> bool:
        """Whether (video, task, adapter, segment index or None) has its record."""


class Runner(Protocol):
    def start(self, todo: Todo, store: Written, tally: JobTally) -> None:
        """Set up the stages (the slow part: decoder processes, engines, seconds to minutes), to caption the
        clips in `todo`; the decoders may begin on them while the engines load. `store` says which records
        are written already; `tally` (caption/summary/tally.py JobTally) counts the job's figures."""

    def records(self) -> Iterator[Record]:
        """The records of the clips in `todo`, each whole, as they come."""

    def stats(self) -> dict[str, Any]:
        """The runner's and its engines' figures for the summary."""

    def close(self) -> None:
        """Stop everything `start` started; safe to call more than once."""
