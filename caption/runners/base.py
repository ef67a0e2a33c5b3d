"""What the job asks of a runner (caption/job.py): start, the records of the clips to do, its figures,
and closing everything it started."""

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
    def start(self, todo: Todo) -> None:
        """Start decoders and engines (the slow part: seconds to minutes); the decoders may begin on
        `todo`, the clips `records` will be asked for, while the engines load."""

    def records(self, todo: Todo, store: Written, tally: JobTally) -> Iterator[Record]:
        """Records of the clips in `todo`, as they come; `store` says which records are written already;
        `tally` (caption/summary/tally.py JobTally) counts decoding and engine failures."""

    def stats(self) -> dict[str, Any]:
        """The runner's and its engines' figures for the summary."""

    def close(self) -> None:
        """Stop everything `start` started; safe to call more than once."""
