"""Forced output lengths (benchmark.output_tokens): the draw, the config, and both real engines
producing exactly the drawn number of tokens per request."""

from __future__ import annotations

import gc
import statistics
import weakref

import pytest

from caption.engines.base import Request, RequestStream
from caption.prompts import build_prompt
from caption.settings.config import ConfigError
from caption.settings.forced_lengths import ForcedLengths

LENGTHS = ForcedLengths(median=40, sigma=0.6, min=8, max=200, seed=0)


def test_the_draw_is_a_function_of_the_request_and_the_seed():
    keys = [(f"dir/clip_{i:04d}.mp4", task, adapter) for i in range(300)
            for task in ("caption", "motion") for adapter in (None, "detailed")]
    first = [LENGTHS.draw(*k) for k in keys]
    assert [LENGTHS.draw(*k) for k in reversed(keys)] == first[::-1]  # order does not matter
    reseeded = ForcedLengths(median=40, sigma=0.6, min=8, max=200, seed=1)
    assert sum(a != reseeded.draw(*k) for a, k in zip(first, keys)) > len(keys) // 2
    # the task and the adapter are part of the identity, not only the video
    assert LENGTHS.draw("a.mp4", "caption", None) != LENGTHS.draw("a.mp4", "motion", None) or \
        LENGTHS.draw("b.mp4", "caption", None) != LENGTHS.draw("b.mp4", "motion", None)


def test_the_draw_is_log_normal_around_the_median_within_bounds():
    draws = [LENGTHS.draw(f"clip_{i}.mp4", "caption", None) for i in range(4000)]
    assert min(draws) >= 8 and max(draws) <= 200
    assert 37 <= statistics.median(draws) <= 43
    # sigma 0.6: the 84th percentile sits near median * e^0.6 = 73
    assert 65 <= sorted(draws)[int(0.8413 * len(draws))] <= 81
    assert len(set(draws)) > 60  # varied, which is the point
    fixed = ForcedLengths(median=64, sigma=0.0, min=1, max=200)
    assert {fixed.draw(f"c{i}", "caption", None) for i in range(50)} == {64}


@pytest.mark.parametrize("value, message", [
    ({"sigma": 0.5, "max": 40}, "`median` is required"),
    ({"median": 40, "max": 200, "min": 300}, "min <= max"),
    ({"median": -1, "max": 200}, "median must be > 0"),
    ({"median": 40, "max": 60, "mean": 3}, "unknown key"),
    ({"median": 40, "max": 100}, "sampling.max_new_tokens=100"),  # greedy's 48 < 100
])
def test_bad_settings_are_refused_naming_the_key(compose_config, synth_dir, tmp_path, value, message):
    from caption.planning import load_planned_job

    cfg = compose_config([f"input_dir={synth_dir}", f"output={tmp_path}/o.jsonl"])
    cfg.benchmark.output_tokens = value
    with pytest.raises(ConfigError, match="benchmark.output_tokens") as err:
        load_planned_job(cfg)
    assert message in str(err.value)


def _requests(job, clips, lengths):
    from video_io.decode import decode_clip

    out = []
    for i, n in enumerate(lengths):
        clip = decode_clip(str(clips / f"clip_{i % 6:05d}.mp4"), job.decode)
        out.append(Request(key=f"clip{i}", task="caption", adapter=None, prompt=build_prompt(job.model.family),
                           frames=clip.frames, video_metadata=clip.metadata(), forced_output_tokens=n))
    return out


@pytest.mark.slow
def test_both_engines_produce_exactly_the_forced_lengths(job_config, synth_dir, vllm_engine, hf_engine):
    """Shorter and longer than the model's own captions (~10-20 tokens, then it says stop): the same
    requests get exactly n tokens on vLLM and on transformers (batched, rows of different n)."""
    job = job_config([])
    lengths = [3, 44, 17, 30, 1, 48, 9]
    vllm = {r.request.key: r for r in vllm_engine.run(_requests(job, synth_dir, lengths))}
    hf_engine.reset_stats()
    size, hf_engine.batch_size = hf_engine.batch_size, 3  # three batches, each with its own longest row
    try:
        hf = {r.request.key: r for r in hf_engine.run(_requests(job, synth_dir, lengths))}
    finally:
        hf_engine.batch_size = size
    # a static batch computes every row until its longest is done: the padding bench_engines reports
    assert hf_engine.stats()["output_positions_computed"] == 3 * 44 + 3 * 48 + 1 * 9
    for i, n in enumerate(lengths):
        key = f"clip{i}"
        assert vllm[key].error is None and hf[key].error is None
        assert vllm[key].output_tokens == hf[key].output_tokens == n, (key, n)
        assert vllm[key].finish_reason == hf[key].finish_reason == "length"
        assert vllm[key].text == hf[key].text  # greedy, the same tokens held back: the same text
    assert all(r.ttft_s is not None for r in (*vllm.values(), *hf.values()))


@pytest.mark.slow
def test_vllm_takes_at_most_max_inflight_requests_ahead_and_keeps_no_frames(job_config, synth_dir, vllm_engine):
    """Bounded queue: the engine never holds more than max_inflight requests it has not answered; and once
    a result is handed over and dropped, nothing (vLLM's processor cache included) keeps its frames alive."""
    job = job_config([])
    requests = _requests(job, synth_dir, [6] * 12)
    for request in requests:
        request.frames = request.frames.copy()  # one array per request, so each can be watched on its own
    del request
    watched = [weakref.ref(r.frames) for r in requests]
    pulled, answered, most_ahead = 0, 0, 0

    def stream():
        nonlocal pulled
        while requests:
            pulled += 1
            yield requests.pop(0)

    saved, vllm_engine.max_inflight = vllm_engine.max_inflight, 3
    try:
        for result in vllm_engine.run(stream()):
            assert result.error is None
            answered += 1
            most_ahead = max(most_ahead, pulled - answered + 1)
            del result
    finally:
        vllm_engine.max_inflight = saved
    gc.collect()
    assert answered == 12 and most_ahead <= 3
    assert [w() is None for w in watched] == [True] * 12


@pytest.mark.slow
def test_the_job_forces_the_drawn_lengths_and_reports_where_its_time_went(compose_config, synth_dir, tmp_path,
                                                                           hf_engine):
    """The job draws each request's length from its identity and records it; the summary splits the
    generation wall time into stages that add up to it, and says how much of it the engine was idle."""
    import json

    from caption.job import run_job

    out = tmp_path / "o.jsonl"
    cfg = compose_config([f"input_dir={synth_dir}", f"output={out}", "engine=hf", "progress=false",
                          "tasks=[caption,motion]", "references=null", "sampling.max_new_tokens=40",
                          "benchmark.output_tokens={median:12,sigma:0.8,min:2,max:40,seed:3}"])
    summary = run_job(cfg, engine=hf_engine)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    drawn = ForcedLengths(median=12, sigma=0.8, min=2, max=40, seed=3)
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    for r in records:
        assert r["output_tokens"] == r["forced_output_tokens"] == drawn.draw(r["video"], r["task"], None)
        assert r["latency_s"] >= r["generate_s"] > 0 and r["ttft_s"] > 0 and r["frames"] == 8
    assert len({r["output_tokens"] for r in records}) > 3
    stages = dict(summary["stages_s"])
    beside = stages.pop("beside_engine_step", 0.0)  # the next batch prepared while one generates: apart
    assert set(stages) == {"decode_wait", "processor", "engine_step", "write", "other"}
    assert stages["engine_step"] > 0 and stages["processor"] > 0 and beside >= 0
    assert abs(sum(stages.values()) - summary["generation_wall_s"]) < 0.05
    assert summary["engine_idle_fraction"] == pytest.approx(1 - stages["engine_step"] / summary["generation_wall_s"],
                                                            abs=0.01)
    first = summary["first_batch_wait_s"]  # part of what the engine idled: the first batch's requests, processor
    assert first["processor"] <= stages["processor"] and first["requests"] >= 0


class _Gate(RequestStream):
    """A request stream that says which requests are ready (as the job's RequestIntake does for
    decoded clips): `opened` of them; the test opens more as results come back."""

    def __init__(self, requests, opened):
        self.items, self.opened, self.pulled = list(requests), opened, 0

    def __iter__(self):
        return self

    def __next__(self):
        if not self.items:
            raise StopIteration
        self.pulled += 1
        return self.items.pop(0)

    def ready(self):
        return not self.items or self.pulled < self.opened

    def prepend(self, requests):
        self.items[:0] = list(requests)


@pytest.mark.slow
def test_vllm_steps_with_what_is_ready_instead_of_waiting_for_more(job_config, synth_dir, vllm_engine):
    """With requests in flight, vLLM takes only those the stream has ready and goes on stepping: the
    first result comes back while later clips are still being decoded (here: not opened), instead of
    the engine stopping its steps to wait for a scheduler batch of them."""
    job = job_config([])
    gate = _Gate(_requests(job, synth_dir, [6] * 6), opened=2)
    pulled_at_results = []
    for result in vllm_engine.run(gate):
        assert result.error is None
        pulled_at_results.append(gate.pulled)
        gate.opened = 6  # the other clips are decoded now
    assert len(pulled_at_results) == 6 and gate.pulled == 6
    assert pulled_at_results[0] == 2  # only the ready ones were taken before the first result


@pytest.mark.slow
def test_the_engine_only_benchmark_does_the_jobs_work(synth_dir):
    """`caption-bench engine-only` (vLLM alone, the throughput bench_engines holds the job against)
    keys and forces each request as the job does: the clip's path relative to the folder, the length
    drawn from that key. Its output tokens are then exactly the job's; keyed any other way, the draws
    and so the totals differ."""
    import json

    from tests.caption.in_process import run_command
    from video_io.crawl import crawl_videos

    run = run_command("caption-bench", ["engine-only", "--clips", synth_dir, "tasks=[caption,motion]",
                                        "sampling.max_new_tokens=40", "gpu.max_num_seqs=4",
                                        "benchmark.output_tokens={median:12,sigma:0.8,min:2,max:40,seed:3}"])
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    drawn = ForcedLengths(median=12, sigma=0.8, min=2, max=40, seed=3)
    keys = [key for key, _ in crawl_videos(synth_dir)]
    assert result["videos"] == 6 and result["requests"] == 12 and result["max_num_seqs"] == 4
    assert result["output_tokens"] == sum(drawn.draw(key, task, None) for key in keys for task in ("caption", "motion"))
    assert result["engine_steps"] > 0 and 0 < result["engine_step_s"] <= result["wall_s"]
    assert result["videos_per_s"] == pytest.approx(6 / result["wall_s"], rel=0.01)
