"""The pipeline's stages (caption.pipeline.STAGES), run as the runners run them (run_stages over a Batch),
on real clips, a real decoder and a real engine: what each declares, what the stages hand on and in which
order records come."""

from __future__ import annotations

import pytest

from caption.engines.base import ListedRequests, Request, request_stream


def _request(key: str) -> Request:
    import numpy as np

    return Request(key=key, task="caption", adapter=None, prompt="", frames=np.zeros((1, 2, 2, 3), np.uint8),
                   video_metadata={})


def test_any_iterable_is_a_request_stream_that_takes_requests_back_at_its_front():
    stream = request_stream(iter([_request("a"), _request("b"), _request("c")]))
    assert isinstance(stream, ListedRequests) and stream.ready()
    first, second = next(stream), next(stream)
    stream.prepend([second])  # a broken engine's unsubmitted requests go again first, in their order
    stream.prepend([first])
    assert [r.key for r in stream] == ["a", "b", "c"]
    assert request_stream(stream) is stream  # a stream stays the one stream, through restarts


def test_each_stage_declares_where_it_runs_and_what_it_holds(job_config):
    """The decoder stage holds runner.decode_cpus on a decoder worker; the engine's stages run beside it, and
    the generate stage holds the engine's cores (runner.engine_cpus), on the cpu tier no GPU."""
    from caption.pipeline import STAGES
    from caption.pipeline.stage import Needs

    job = job_config(["runner=ray", "runner.engine_cpus=2", "runner.decode_cpus=0.5"])
    assert [(stage.name, stage.worker) for stage in STAGES] == [
        ("decode", "decoder"), ("requests", "engine"), ("generate", "engine"), ("record", "engine")]
    assert [stage.needs(job) for stage in STAGES] == [Needs(cpus=0.5), Needs(), Needs(cpus=2.0, gpus=0), Needs()]


@pytest.mark.slow
def test_a_clip_that_does_not_decode_is_recorded_before_the_next_result(job_config, synth_dir, hf_engine, tmp_path):
    """A clip the decoder cannot read becomes a Refusal in the requests stage; the generate stage hands it
    on just before the engine's next result, and the record stage makes its error record, whole: with
    the file its decoder read."""
    from caption.pipeline import STAGES
    from caption.pipeline.stage import Batch, Place, run_stages
    from caption.summary.tally import JobTally

    job = job_config(["engine=hf"])
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video")
    clips = [("clip_00000.mp4", synth_dir / "clip_00000.mp4"), ("broken.mp4", broken),
             ("clip_00001.mp4", synth_dir / "clip_00001.mp4")]
    stages = [stage(job, Place(decoders=0, engine=hf_engine)) for stage in STAGES]  # decoding in order, here
    batch = Batch(clips, lambda key: False, JobTally())
    try:
        for stage in stages:
            stage.setup()
        records = list(run_stages(stages, [str(path) for _, path in clips], batch))
    finally:
        for stage in stages:
            stage.close()
    assert [(r["video"], r["status"]) for r in records] == [
        ("broken.mp4", "error"), ("clip_00000.mp4", "ok"), ("clip_00001.mp4", "ok")]
    assert records[0]["error"].startswith("decode: ") and "decode_s" in records[0]
    assert all(list(r)[-1] == "source" for r in records)  # made whole, the file's identity last
    assert records[0]["source"]["size"] == len(b"not a video")
    assert records[1]["source"]["size"] == (synth_dir / "clip_00000.mp4").stat().st_size
    assert batch.tally.decode_s > 0 and not batch.tally.engine_failures


@pytest.mark.parametrize("engine, overrides, first", [
    ("hf", ["engine.batch_size=6"], 3),  # a batch: 6 requests, 2 a clip
    ("vllm", ["engine.max_inflight=64", "gpu.max_num_seqs=10"], 5),  # the first scheduler batch
    ("vllm", ["engine.max_inflight=4", "gpu.max_num_seqs=10"], 2),  # no more than engine.max_inflight
])
def test_the_clips_an_engine_takes_at_its_start(job_config, engine, overrides, first):
    """What runner=local decodes while the engine loads: the requests it takes before generating anything,
    as clips (two tasks: two requests a clip)."""
    job = job_config([f"engine={engine}", "tasks=[caption,motion]", *overrides])
    assert job.engine_spec.requests_per_clip == 2
    assert job.engine_spec.first_clips == first


@pytest.mark.slow
def test_the_first_batch_is_decoded_while_the_engine_loads(job_config, synth_dir, hf_engine):
    """runner=local starts the decoders while the engine loads (caption/runners/local.py,
    video_io/workers.py DecodeStream.meanwhile), and they go on until the clips the engine takes at its
    start are decoded (engine.batch_size=4 here: 4 of 6 clips, 2 decoders): its first batch is decoded
    when it is ready. And no further: the stream holds those 4, and each decoder at most one more. The engine's load is held here until the 4
    are in, or 60 s."""
    import time

    from caption.runners.local import LocalRunner
    from caption.summary.tally import JobTally

    job = job_config(["engine=hf", "engine.batch_size=4", "video.workers=2"])
    assert job.engine_spec.first_clips == 4
    runner = LocalRunner(job, hf_engine)
    generate, decode = runner.beside_engine[1], runner.decoders[0]
    load, held = generate.setup, []

    def loading_until_the_first_batch_is_decoded():
        until = time.monotonic() + 60
        while time.monotonic() < until and len(runner.decoded.results) < 4:
            time.sleep(0.05)
        time.sleep(1.0)  # a decoder that went on would have another clip in by now
        held.append(len(runner.decoded.results))
        load()

    generate.setup = loading_until_the_first_batch_is_decoded
    todo = [(f"clip_{i:05d}.mp4", synth_dir / f"clip_{i:05d}.mp4") for i in range(6)]
    try:
        runner.start(todo, _NothingWritten(), JobTally())
        assert held == [4] and len(runner.decoded.results) == 4
        assert sum(w.path is not None for w in decode.pool._workers) == 2  # each given one more, as always
        records = list(runner.records())
    finally:
        runner.close()
    assert sorted(r["video"] for r in records) == [key for key, _ in todo]
    assert all(r["status"] == "ok" for r in records)


class _NothingWritten:
    segments: dict = {}

    def done(self, key) -> bool:
        return False
