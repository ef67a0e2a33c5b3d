"""What every engine takes and gives back. The engine never sees a file path, only frames."""

from __future__ import annotations

import time
from collections import defaultdict, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from video_io.segmenting import SegmentInfo


@dataclass
class Request:
    key: str  # the clip's key (its path relative to input_dir)
    task: str
    adapter: str | None
    prompt: str  # full prompt text with the model family's video placeholder
    frames: np.ndarray  # (T, H, W, 3) uint8
    video_metadata: dict  # total_num_frames, fps, duration, frames_indices, ...
    context: dict = field(default_factory=dict)  # the job's own data, passed through untouched
    forced_output_tokens: int | None = None  # benchmarks only: generate exactly this many tokens (caption/settings/forced_lengths.py)
    segment: SegmentInfo | None = None  # the part of a long video the frames come from

    @property
    def request_id(self) -> str:
        part = "" if self.segment is None else f"\x1f{self.segment.index}"
        return f"{self.key}{part}\x1f{self.task}\x1f{self.adapter or ''}"


@dataclass
class Result:
    request: Request
    text: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    generate_s: float = 0.0  # seconds from the request entering the engine to its result: on vLLM its own
    #   submit-to-finish time; on transformers its batch's `generate` call, which all its requests share
    ttft_s: float | None = None  # time to first token, where the engine reports it
    tpot_s: float | None = None  # time per output token after the first, where the engine reports it
    video_tokens: int | None = None  # the video placeholder tokens of the prompt the model saw (after pruning)
    error: str | None = None


def count_token(token_ids, token_id: int | None) -> int | None:
    """How often `token_id` stands in a prompt's ids (None where the id is unknown)."""
    if token_id is None or token_ids is None:
        return None
    return sum(1 for t in token_ids if t == token_id)


def reply_text(tokenizer, token_ids) -> str:
    """A reply's text from its token ids. A reply cut by its token limit can end inside a character's UTF-8
    bytes: vLLM's incremental detokenizer holds such a tail back, tokenizer.decode() renders it as U+FFFD;
    every engine path that decodes ids itself drops it, so both engines give the same text."""
    return tokenizer.decode(token_ids, skip_special_tokens=True).strip().rstrip("\ufffd")


@runtime_checkable
class RequestStream(Protocol):
    """What an engine pulls its requests from. `next()` gives the next request, waiting for one (for a
    clip still decoding) if need be; `ready()` says, without waiting, whether `next()` would return at
    once, so that an engine with requests in flight takes only those ready instead of stopping its
    steps; `prepend()` puts requests back at the front (a broken engine's unsubmitted requests, for the
    next engine: caption/pipeline/supervisor.py). The job's stream is caption/pipeline/requests.py's
    RequestIntake; any other iterable becomes one with `request_stream`."""

    def __iter__(self) -> Iterator[Request]: ...

    def __next__(self) -> Request: ...

    def ready(self) -> bool: ...

    def prepend(self, requests: Iterable[Request]) -> None: ...


class ListedRequests:
    """Any iterable of requests (a list, a generator) as a RequestStream: it cannot say what is ready
    without waiting, so every request counts as ready and `next()` waits for each as it comes."""

    def __init__(self, requests: Iterable[Request]):
        self.rest, self.front = iter(requests), deque[Request]()

    def __iter__(self) -> "ListedRequests":
        return self

    def __next__(self) -> Request:
        return self.front.popleft() if self.front else next(self.rest)

    def ready(self) -> bool:
        return True

    def prepend(self, requests: Iterable[Request]) -> None:
        self.front.extendleft(reversed(list(requests)))


def request_stream(requests: Iterable[Request]) -> RequestStream:
    """`requests` as the stream an engine pulls from: a RequestStream as it is, anything else listed."""
    return requests if isinstance(requests, RequestStream) else ListedRequests(requests)


class Engine(Protocol):
    name: str

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Generate for a stream of requests (request_stream(requests): a RequestStream, or any iterable);
        yields results in completion order."""

    def stats(self) -> dict[str, Any]:
        """Engine counters since the last reset_stats(), for the job summary (e.g. prefix-cache hits)."""

    def reset_stats(self) -> None:
        """Start counting afresh (called at the start of each job)."""

    def close(self) -> None:
        """Free the model and any engine processes."""


def pull(requests: Iterator[Request], n: int) -> list[Request]:
    """Up to n requests from the stream (fewer at its end)."""
    batch = []
    for request in requests:
        batch.append(request)
        if len(batch) >= n:
            break
    return batch


def take_ready(requests: RequestStream, n: int, wait_for_one: bool) -> tuple[list[Request], bool]:
    """Up to n requests that the stream has ready now, and whether it has ended; with `wait_for_one`,
    the first is waited for (a ListedRequests has every request ready: up to n as they come)."""
    batch: list[Request] = []
    while len(batch) < n:
        if not (wait_for_one and not batch) and not requests.ready():
            return batch, False
        request = next(requests, None)
        if request is None:
            return batch, True
        batch.append(request)
    return batch, False


class StageClock:
    """Seconds spent per named stage of one thread's loop (`with clock("engine_step"): ...`).
    Stages timed by one clock never overlap, so their sum is at most the wall time."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, stage: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - started

    def reset(self) -> None:
        self.seconds.clear()

    def as_dict(self) -> dict[str, float]:
        # unrounded: the summary rounds each stage once (caption/summary/tally.py stage_breakdown), and a stage rounded
        # twice could read less than a part of it rounded once (first_batch_wait_s)
        return dict(self.seconds)
