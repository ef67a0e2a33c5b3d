"""What the job asks of a runner (caption/job.py): start, the records of the clips to do, its figures,
and closing everything it started."""

from __future__ import annotations

from typing import Callable, Iterator, Protocol

Todo = list[tuple[str, object]]  # (key: the clip's path relative to input_dir, path)


class Runner(Protocol):
    def start(self) -> None:
        """Start decoders and engines (the slow part: seconds to minutes)."""

    def records(self, todo: Todo, done: Callable[[tuple], bool], tally) -> Iterator[dict]:
        """Records of the clips in `todo`, as they come; `done(key)` says which (video, task, adapter)
        already has one; `tally` (caption/summary.py JobTally) counts decoding and engine failures."""

    def stats(self) -> dict:
        """The runner's and its engines' figures for the summary."""

    def close(self) -> None:
        """Stop everything `start` started; safe to call more than once."""
