"""engine=server: the job's requests sent to an OpenAI-compatible server, many at a time.

Each request is sent from a worker thread (its frames encoded there, then one blocking HTTP call), at
most engine.max_inflight at once, and results come back in completion order. As the vLLM engine does,
the loop takes only the clips decoded by then while requests are in flight (base.take_ready), so the
server is never left waiting for a clip that is still decoding while others are ready.

A request the server refuses, or does not answer in time after its tries, becomes an error result
with the server's reason. A server that cannot be reached any more breaks the engine as a crash does
in process: the answers already in come out, the requests in flight go back to the supervisor
(EngineFailure), which tries them again on a fresh client (engine.max_restarts) and then stops the job
(exit status 4); the records written stay whole and a re-run resumes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Iterable, Iterator

from caption.engines.base import Request, Result, request_stream, take_ready
from caption.engines.server_api import ServerError, ServerGone, call, chat_body, connect, read_answer, sampling_fields
from caption.outcome import EngineFailure
from caption.settings.engine_spec import EngineSpec

POLL_S = 0.02  # with room in flight, how often the loop looks for newly decoded clips


class _Workers:
    """Daemon threads that run calls and settle their futures. A call still waiting on the server must
    not hold up the process's exit after Ctrl-C, as a ThreadPoolExecutor's threads would (Python joins
    them at exit: concurrent/futures/thread.py _python_exit)."""

    def __init__(self, count: int):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"server-request-{i}", daemon=True)
                        for i in range(count)]
        for thread in self.threads:
            thread.start()

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the loop, which decides
                    future.set_exception(exc)

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self.jobs.put((future, fn, args))
        return future

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)


class ServerEngine:
    name = "server"

    def __init__(self, spec: EngineSpec):
        self.spec = spec  # what it was loaded for: a job given it checks it makes that job's captions (caption/pipeline/supervisor.py)
        logging.getLogger("httpx").setLevel(logging.WARNING)  # else one log line per request
        self.options, self.model = spec.server, spec.served_model
        self.max_inflight = spec.options.max_inflight
        self.processor_kwargs = dict(spec.processor_kwargs)
        self.sampling, self.stop_strings, self.seed = spec.sampling, spec.stop, spec.options.seed
        started = time.perf_counter()
        self.client = connect(self.options, self.max_inflight)
        self.workers = _Workers(self.max_inflight)
        self.load_s = time.perf_counter() - started  # nothing loads here: the model is the server's
        self.lock = threading.Lock()
        self.reset_stats()

    def _count(self, **seconds) -> None:
        with self.lock:
            for key, value in seconds.items():
                self.counts[key] = self.counts.get(key, 0) + value

    def _send(self, request: Request, stop: threading.Event) -> Result:
        """One request, in a worker thread: its answer, or an error result with the server's reason.
        ServerGone (nobody answers at that address) goes up to the loop."""
        started = time.perf_counter()
        body = chat_body(request.adapter or self.model, request.task, request.frames, request.video_metadata,
                         self.processor_kwargs,
                         sampling_fields(self.sampling, self.stop_strings, self.seed, request.forced_output_tokens))
        sent = time.perf_counter()
        counts: dict = {}
        try:
            answer = read_answer(call(self.client, "POST", "chat/completions", self.options, body, stop, counts))
        except ServerGone:
            raise
        except ServerError as exc:
            if stop.is_set():  # given up because another request found the server gone: it goes again too
                raise ServerGone(str(exc)) from None
            return Result(request, error=f"the server at {self.options.public_url}: {exc}",
                          generate_s=time.perf_counter() - sent)
        finally:
            self._count(requests=1, retries=counts.get("retries", 0), encode_s=sent - started,
                        request_s=time.perf_counter() - sent)
        return Result(request, text=answer.text, prompt_tokens=answer.prompt_tokens,
                      output_tokens=answer.output_tokens, finish_reason=answer.finish_reason,
                      generate_s=time.perf_counter() - sent)

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        stream, flight, exhausted, stop = request_stream(requests), {}, False, threading.Event()
        try:
            while True:
                room = self.max_inflight - len(flight)
                if not exhausted and room > 0:  # top up with the clips decoded by now (wait only when idle)
                    batch, exhausted = take_ready(stream, room, wait_for_one=not flight)
                    for request in batch:
                        flight[self.workers.submit(self._send, request, stop)] = request
                if not flight:
                    if exhausted:
                        return
                    continue
                full = exhausted or len(flight) >= self.max_inflight
                done, _ = wait(list(flight), timeout=None if full else POLL_S, return_when=FIRST_COMPLETED)
                for future in done:
                    request = flight.pop(future)
                    try:
                        yield future.result()
                    except ServerGone as exc:
                        yield from self._server_gone(exc, request, flight, stop)
        finally:  # stopped early (interrupted, fail_fast): requests still out give up their retries
            stop.set()

    def _server_gone(self, exc: ServerGone, request: Request, flight: dict, stop: threading.Event) -> Iterator[Result]:
        """Nobody answers at the server's address: the other requests stop retrying, the answers that
        came in meanwhile come out, and the rest go back to the supervisor (EngineFailure)."""
        stop.set()
        again = [request]
        for future in list(flight):
            other = flight.pop(future)
            try:
                result = future.result()
            except ServerGone:
                again.append(other)
                continue
            yield result
        raise EngineFailure(f"the server at {self.options.public_url} cannot be reached: {exc}", unsubmitted=again)

    def reset_stats(self) -> None:
        with self.lock:
            self.counts: dict = {}
        self.since = time.perf_counter()

    def stats(self) -> dict:
        """No engine step runs in this process: the summary's stage breakdown and engine idle share are
        the server's to tell. What the job saw: requests sent, tries again, the mean requests in flight
        (seconds spent waiting on answers over the time since the job started), frame encoding."""
        with self.lock:
            counts = dict(self.counts)
        wall = time.perf_counter() - self.since
        return {"engine_load_s": round(self.load_s, 3), "server": self.options.public_url,
                "server_model": self.model, "server_requests": int(counts.get("requests", 0)),
                "server_retries": int(counts.get("retries", 0)),
                "server_mean_in_flight": round(counts.get("request_s", 0.0) / wall, 2) if wall > 0 else None,
                "frames_encode_s": round(counts.get("encode_s", 0.0), 3)}

    def close(self) -> None:
        workers, self.workers = getattr(self, "workers", None), None
        if workers is not None:
            workers.close()
        client, self.client = getattr(self, "client", None), None
        if client is not None:
            client.close()
