"""The transformers engine prepares the next batch while one generates (caption/engines/hf_engine.py):
the next batch's requests are taken from the stream and processed during `generate`, never while the
job handles results, and the batches and captions are those of one batch after the other."""

from __future__ import annotations

import threading
import time

import pytest

from caption.engines.base import Request
from caption.prompts import build_prompt

pytestmark = pytest.mark.slow


def _requests(job, clips, n):
    from video_io.decode import decode_clip

    decoded = [decode_clip(str(clips / f"clip_{i:05d}.mp4"), job.decode) for i in range(6)]
    return [Request(key=f"clip{i}", task="caption", adapter=None, prompt=build_prompt(job.model.family),
                    frames=decoded[i % 6].frames, video_metadata=decoded[i % 6].metadata(), forced_output_tokens=12)
            for i in range(n)]


class _WatchedStream:
    """The requests, noting when and on which thread each is taken, and whether the consumer was
    handling a result at that moment (the job writes records then: the stream must be left alone)."""

    def __init__(self, requests):
        self.items, self.taken, self.consumer_busy = iter(requests), [], threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        request = next(self.items)
        self.taken.append((request.key, time.perf_counter(), threading.current_thread().name,
                           self.consumer_busy.is_set()))
        return request


@pytest.mark.parametrize("ahead", [True, False], ids=["prepare_ahead", "after_generate"])
def test_the_next_batch_is_taken_and_processed_while_one_generates(job_config, synth_dir, hf_engine, ahead):
    """engine.prepare_ahead (always; auto on a GPU): the next batch leaves the stream during this one's
    generate; without it (never; auto on a CPU, as this engine is), after it."""
    assert hf_engine.prepare_ahead is False  # auto, on the CPU
    job = job_config(["engine=hf"])
    requests = _requests(job, synth_dir, 9)
    calls, real_generate = [], hf_engine.model.generate

    def timed_generate(**kwargs):
        started = time.perf_counter()
        try:
            return real_generate(**kwargs)
        finally:
            calls.append((started, time.perf_counter(), kwargs["input_ids"].shape[0]))

    size, hf_engine.batch_size = hf_engine.batch_size, 3
    hf_engine.prepare_ahead = ahead
    hf_engine.reset_stats()
    hf_engine.model.generate = timed_generate
    stream = _WatchedStream(requests)
    try:
        results = []
        for result in hf_engine.run(stream):
            stream.consumer_busy.set()  # the job writes the record now
            results.append(result)
            time.sleep(0.01)
            stream.consumer_busy.clear()
        # one batch after the other, on the same requests: the captions the engine gave before
        one_by_one = [r for start in range(0, 9, 3) for r in hf_engine._run_batch(requests[start:start + 3])]
    finally:
        del hf_engine.model.generate
        hf_engine.batch_size, hf_engine.prepare_ahead = size, False

    assert [c[2] for c in calls[:3]] == [3, 3, 3]
    assert [r.request.key for r in results] == [r.request.key for r in one_by_one]
    assert [r.text for r in results] == [r.text for r in one_by_one] and all(r.error is None for r in results)
    assert not any(busy for *_, busy in stream.taken), "the stream was read while the job handled a result"
    taken = {key: (at, thread) for key, at, thread, _ in stream.taken}
    for batch, (_, ended, _) in zip((("clip3", "clip4", "clip5"), ("clip6", "clip7", "clip8")), calls):
        for key in batch:  # batch k+1's requests left the stream before batch k's generate ended, or after it
            at, thread = taken[key]
            assert (at < ended) is ahead, f"{key} taken {at - ended:+.3f} s after the previous generate ended"
            assert thread.startswith("hf-next-batch"), thread
    stages = hf_engine.stats()["engine_stages_s"]
    assert (stages.get("processor_beside_step", 0) > 0) is ahead

def test_a_batch_the_processor_refuses_runs_one_request_at_a_time(job_config, synth_dir, hf_engine):
    """A clip the processor cannot take fails alone, as before: prepared ahead, its batch is run again
    request by request."""
    job = job_config(["engine=hf"])
    requests = _requests(job, synth_dir, 4)
    broken = requests[1]
    broken.prompt = "no video placeholder"  # the processor refuses a batch whose videos have no place
    size, hf_engine.batch_size = hf_engine.batch_size, 2
    try:
        results = {r.request.key: r for r in hf_engine.run(iter(requests))}
    finally:
        hf_engine.batch_size = size
    assert results["clip1"].error and "transformers generate failed" in results["clip1"].error
    assert all(results[k].error is None and results[k].text for k in ("clip0", "clip2", "clip3"))


class _LateStream(_WatchedStream):
    """Requests that come late (index -> seconds), as clips do while decoders start or catch up."""

    def __init__(self, requests, late: dict[int, float]):
        super().__init__(requests)
        self.late, self.n = late, 0

    def __next__(self):
        time.sleep(self.late.get(self.n, 0.0))
        self.n += 1
        return super().__next__()


@pytest.mark.parametrize("ahead", [True, False], ids=["prepare_ahead", "after_generate"])
def test_the_summary_says_how_long_the_first_batch_kept_the_engine_waiting(job_config, synth_dir, hf_engine, ahead):
    """Nothing generates before the first batch to hide its wait: `first_batch_wait_s` splits it into
    waiting for its requests (here the first is 0.4 s late) and its processor; the second batch's late
    request (1 s) is not the first batch's."""
    requests = _requests(job_config(["engine=hf"]), synth_dir, 4)
    size, hf_engine.batch_size = hf_engine.batch_size, 2
    hf_engine.prepare_ahead = ahead
    hf_engine.reset_stats()
    assert hf_engine.stats()["first_batch_wait_s"] is None
    try:
        results = list(hf_engine.run(_LateStream(requests, {0: 0.4, 2: 1.0})))
    finally:
        hf_engine.batch_size, hf_engine.prepare_ahead = size, False
    assert len(results) == 4 and all(r.error is None for r in results)
    first = hf_engine.stats()["first_batch_wait_s"]
    assert set(first) == {"requests", "processor"}
    assert 0.4 <= first["requests"] < 1.0, first
    assert first["processor"] > 0
    hf_engine.reset_stats()
    assert hf_engine.stats()["first_batch_wait_s"] is None



class _EndsLate(_WatchedStream):
    """Requests, then an end that takes `late` seconds to come (the decoders finishing the last files)."""

    def __init__(self, requests, late: float):
        super().__init__(requests)
        self.late = late

    def __next__(self):
        try:
            return super().__next__()
        except StopIteration:
            time.sleep(self.late)
            raise


@pytest.mark.parametrize("ahead", [True, False], ids=["prepare_ahead", "after_generate"])
def test_the_streams_end_waited_for_beside_the_last_generate_is_counted_apart(job_config, synth_dir, hf_engine,
                                                                            ahead):
    """Prepared ahead, the pull that finds the stream's end runs beside the last batch's generate: the
    decoders' time it waited there did not keep the engine idle, so it is counted apart (the summary's
    stages would otherwise add up to more than the generation wall). After the generate, none is."""
    requests = _requests(job_config(["engine=hf"]), synth_dir, 2)
    size, hf_engine.batch_size = hf_engine.batch_size, 2
    hf_engine.prepare_ahead = ahead
    hf_engine.reset_stats()
    try:
        results = list(hf_engine.run(_EndsLate(requests, late=0.3)))
    finally:
        hf_engine.batch_size, hf_engine.prepare_ahead = size, False
    assert len(results) == 2 and all(r.error is None for r in results)
    stages = hf_engine.stats()["engine_stages_s"]
    # one batch: the only pull beside a generate is the one that found the end
    beside = stages.get("decode_wait_beside_step", 0.0)
    if ahead:  # at least half what it could hide: the helper thread may start its pull a little late
        assert beside >= min(0.3, stages["engine_step"]) / 2 > 0, stages
    else:
        assert beside == 0.0, stages
