"""Both engines on the embedded model: Korean captions, and the same greedy output."""

from __future__ import annotations

import os

import pytest

from caption.engines.base import Request
from caption.prompts import build_prompt
from video_io.decode import DecodeSpec, decode_clip
from video_io.sampling import SamplingSpec
from video_io.synth.captions_ko import parse_attributes

EIGHT_FRAMES = SamplingSpec(num_frames=8)  # frames are the caller's (no default in video_io)

pytestmark = pytest.mark.slow


def clip_requests(synth_dir, tasks=("caption",)):
    spec = DecodeSpec(EIGHT_FRAMES, width=56, height=56)
    requests = []
    for i in range(6):
        clip = decode_clip(str(synth_dir / f"clip_{i:05d}.mp4"), spec)
        for task in tasks:
            requests.append(Request(key=f"clip_{i:05d}.mp4", task=task, adapter=None,
                                    prompt=build_prompt("qwen2_5_vl", task), frames=clip.frames,
                                    video_metadata=clip.metadata()))
    return requests


def texts_by_key(results):
    return {(r.request.key, r.request.task): r for r in results}


def test_vllm_and_transformers_agree_on_greedy_output(synth_dir, vllm_engine, hf_engine):
    requests = clip_requests(synth_dir, tasks=("caption", "keywords"))
    from_vllm = texts_by_key(vllm_engine.run(requests))
    from_hf = texts_by_key(hf_engine.run(requests))
    assert set(from_vllm) == set(from_hf) == {(r.key, r.task) for r in requests}
    for key in from_vllm:
        a, b = from_vllm[key], from_hf[key]
        assert a.error is None and b.error is None
        assert a.text == b.text, key
        assert a.prompt_tokens == b.prompt_tokens and a.output_tokens == b.output_tokens, key
        assert a.finish_reason == b.finish_reason == "stop", key


def test_captions_are_korean_sentences_naming_the_clip(synth_dir, vllm_engine):
    import json

    references = {json.loads(line)["video"]: json.loads(line)
                  for line in open(synth_dir / "references.jsonl", encoding="utf-8")}
    results = list(vllm_engine.run(clip_requests(synth_dir)))
    assert len(results) == 6
    named = 0
    for result in results:
        text = result.text
        hangul = sum("가" <= ch <= "힣" for ch in text)
        assert hangul >= 10 and text.endswith("."), text
        parsed = parse_attributes(text)
        truth = references[result.request.key]["attributes"]
        named += sum(parsed[k] == truth[k] for k in truth)
    assert named >= 0.8 * 6 * 6, "the trained model should name most attributes right"


def test_results_stream_in_completion_order_and_are_keyed(synth_dir, vllm_engine):
    """The first request submitted generates 40 tokens, the next ones 2: with continuous batching the short
    ones finish first and are handed back first, each keyed to its own request."""
    requests = clip_requests(synth_dir)[:3]
    requests[0].forced_output_tokens = 40
    for request in requests[1:]:
        request.forced_output_tokens = 2
    consumed = []

    def stream():
        for request in requests:
            consumed.append(request.key)
            yield request

    results = list(vllm_engine.run(stream()))
    assert consumed == [r.key for r in requests]
    assert [r.request.key for r in results][-1] == requests[0].key  # submitted first, finished last
    assert sorted(r.request.key for r in results[:2]) == sorted(r.key for r in requests[1:])
    assert [r.output_tokens for r in results] == [2, 2, 40]


def test_the_live_engine_runs_the_plans_settings(vllm_engine, job_config):
    """What the planner counted (KV block, concurrent requests, context) is what vLLM runs."""
    plan = job_config([]).plan.vllm
    config = vllm_engine.llm.llm_engine.vllm_config
    assert config.cache_config.block_size == plan["block_size"] == 32
    assert config.scheduler_config.max_num_seqs == plan["max_num_seqs"]
    assert config.model_config.max_model_len == plan["max_model_len"]
    assert config.scheduler_config.max_num_batched_tokens == plan["max_num_batched_tokens"]
    # the KV cache the plan sized (quant/plan.py CPU_KV_SPARE), not the tier's 2 GiB; it holds every request of
    # a full batch at max_model_len at once
    cache = config.cache_config
    assert cache.kv_cache_memory_bytes == plan["kv_cache_memory_bytes"] < 2**30
    assert cache.num_gpu_blocks * cache.block_size >= plan["max_num_seqs"] * plan["max_model_len"]


def test_the_kv_cache_variable_left_by_an_earlier_engine_or_the_shell_does_not_replace_the_plans(job_config,
                                                                                                monkeypatch):
    """vLLM reads VLLM_CPU_KVCACHE_SPACE over the engine's kv_cache_memory_bytes (vllm/platforms/cpu.py)."""
    from caption.engines.vllm_engine import apply_engine_env

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    apply_engine_env(job_config([]).engine_spec)
    assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ


def test_engine_log_level_holds_in_a_process_that_imported_vllm_before(vllm_engine, monkeypatch):
    """caption/engines/vllm_fixes.py set_log_level: vLLM sets its logger's level once, from VLLM_LOGGING_LEVEL as
    it is imported; in a process that had imported it (this one: the shared engine), engine.log_level is set
    on vLLM's logger and handler all the same, each engine; a VLLM_LOGGING_LEVEL the user set wins."""
    import logging

    from caption.engines import vllm_fixes

    vllm_logger, engine_logger = logging.getLogger("vllm"), logging.getLogger("vllm.v1.engine.llm_engine")
    saved = vllm_logger.level, [h.level for h in vllm_logger.handlers]
    monkeypatch.setattr(vllm_fixes, "USER_LOG_LEVEL", None)
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "WARNING")  # what the shared engine's start left
    try:
        assert vllm_fixes.set_log_level("ERROR") == "ERROR" == os.environ["VLLM_LOGGING_LEVEL"]
        assert not engine_logger.isEnabledFor(logging.WARNING) and engine_logger.isEnabledFor(logging.ERROR)
        assert vllm_logger.handlers and all(h.level == logging.ERROR for h in vllm_logger.handlers)
        vllm_fixes.set_log_level("INFO")  # the next engine of the process, another level
        assert engine_logger.isEnabledFor(logging.INFO) and all(h.level == logging.INFO for h in vllm_logger.handlers)
        monkeypatch.setattr(vllm_fixes, "USER_LOG_LEVEL", "DEBUG")  # set in the user's shell
        assert vllm_fixes.set_log_level("WARNING") == "DEBUG" and engine_logger.isEnabledFor(logging.DEBUG)
    finally:
        vllm_logger.setLevel(saved[0])
        for handler, level in zip(vllm_logger.handlers, saved[1]):
            handler.setLevel(level)


def test_the_next_engine_of_a_process_registers_no_cpu_kernel_again(vllm_engine, monkeypatch):
    """caption/engines/vllm_fixes.py register_cpu_kernels_once: once an engine of this process has put vLLM's
    CPU stand-ins for its Triton kernels in place, a later engine's start scans no module to rebind them."""
    from vllm.platforms import current_platform
    from vllm.triton_utils import dispatcher
    from vllm.v1.worker.block_table import ComputeSlotMappingKernel

    scans = []
    monkeypatch.setattr(dispatcher, "_rebind_kernels", scans.append)
    current_platform.register_triton_kernel_overrides()  # what vLLM's worker calls as an engine starts
    assert scans == [] and isinstance(ComputeSlotMappingKernel.kernel, dispatcher.KernelOverride)


def test_a_request_vllm_rejects_becomes_an_error_result(synth_dir, vllm_engine):
    [good] = clip_requests(synth_dir)[:1]
    too_long = Request(key="long.mp4", task="caption", adapter=None,
                       prompt=good.prompt.replace("이 영상을", "이 영상을 " + "아주 " * 600),
                       frames=good.frames, video_metadata=good.video_metadata)
    results = texts_by_key(vllm_engine.run([too_long, good]))
    assert results[("long.mp4", "caption")].error and "vLLM rejected" in results[("long.mp4", "caption")].error
    assert results[(good.key, "caption")].error is None and results[(good.key, "caption")].text


def test_a_signal_inside_vllms_request_path_stops_the_run_instead_of_failing_the_clip(synth_dir, vllm_engine,
                                                                                     monkeypatch):
    """The first SIGINT raises JobInterrupted wherever the main thread is (caption/cli.py). Landing in vLLM's
    tokenizer pool as it takes a tokenizer (`_borrow_from_pool` in vllm/tokenizers/hf.py), vLLM's `finally`
    puts back a tokenizer it never took and raises UnboundLocalError in the interrupt's place: the job wrote
    that as the clip's error record ("vLLM rejected the request"), and every rerun kept it and exited 3 (seen
    in a clean clone's `make test`, the SIGINT test of tests/caption/test_job_outcomes.py). Here the signal
    lands at that instant: the pool's queue raises what the handler would, vLLM's own clean-up does the rest."""
    import queue
    import sys

    from caption.outcome import JobInterrupted

    requests = clip_requests(synth_dir)[:2]
    taken = queue.Queue.get_nowait
    landed = []

    def signal_lands_here(pool):
        if not landed and sys._getframe(1).f_code.co_filename.endswith("vllm/tokenizers/hf.py"):
            landed.append(True)
            raise JobInterrupted()
        return taken(pool)

    monkeypatch.setattr(queue.Queue, "get_nowait", signal_lands_here)
    results = []
    with pytest.raises(JobInterrupted):
        for result in vllm_engine.run(requests):
            results.append(result)
    assert landed, "vLLM took no tokenizer from its pool: the request path has changed, this test no longer aims"
    assert not any(r.error for r in results), [r.error for r in results]  # no clip blamed for the stop
    monkeypatch.undo()
    again = list(vllm_engine.run(requests))  # the engine is sound: nothing left running in it
    assert [r.error for r in again] == [None, None] and all(r.text for r in again)


def test_prefix_cache_counters_are_reported(synth_dir, vllm_engine_with_counters):
    engine = vllm_engine_with_counters
    engine.reset_stats()
    list(engine.run(clip_requests(synth_dir, tasks=("caption", "keywords", "motion"))))
    stats = engine.stats()
    assert stats["prefix_cache_queries"] > 0
    assert stats["prefix_cache_hits"] > 0  # three prompts per video share system prompt + video


def test_closing_a_vllm_engine_frees_its_weights_with_one_collection_of_the_heap(job_config):
    """caption/engines/vllm_fixes.py shutdown_llm: once close() returns, the model's parameters are gone (they
    outlive vLLM's shutdown in reference cycles), collected by one collection after the shutdown and none
    inside it, where vLLM's model runner would collect the whole heap while the model is still held. That
    collection runs with the heap the engine found still frozen (start_llm): it reads what the engine
    allocated, not the ~2.5 million objects of a test process (0.77 -> 0.02 CPU-s a close, here)."""
    import gc
    import traceback
    import weakref

    from caption.engines.vllm_engine import VllmEngine

    engine = VllmEngine(job_config([]).engine_spec)
    runner = engine.llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner
    parameters = [weakref.ref(p) for p in runner.model.parameters()]
    del runner
    full = []  # the file that asked for each full collection during close()

    def seen(phase, info):
        if phase == "start" and info["generation"] == 2:
            # the frame under this callback, and how much of the heap stayed out of the collection
            full.append((traceback.extract_stack(limit=2)[0].filename, gc.get_freeze_count()))

    gc.callbacks.append(seen)
    try:
        engine.close()
    finally:
        gc.callbacks.remove(seen)
    assert parameters and not any(p() is not None for p in parameters)
    assert [frozen > 0 for f, frozen in full if f.endswith("vllm_fixes.py")] == [True], full  # one, heap left out
    assert not any(f.endswith(("gpu_model_runner.py", "core.py", "gpu_worker.py")) for f, _ in full), full
    assert gc.get_freeze_count() == 0  # unfrozen once the engine is gone


def test_the_heap_frozen_while_a_vllm_engine_starts_is_unfrozen_when_it_stops_or_fails(job_config, tmp_path, model_dir):
    """caption/engines/vllm_engine.py freezes the heap before vLLM starts (its start-up collections then skip
    it); vLLM's shutdown unfreezes it, and a start that fails unfreezes it at once, so no object stays out of
    the collector's sight once no engine runs."""
    import gc
    import shutil

    from caption.engines.vllm_engine import VllmEngine

    gc.unfreeze()  # from nothing frozen (an engine shared by other tests in this process stays as it is)
    engine = VllmEngine(job_config([]).engine_spec)
    assert gc.get_freeze_count() > 0  # the heap it found, kept frozen while it runs (vllm_fixes.py start_llm)
    engine.close()
    assert gc.get_freeze_count() == 0

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:4096])  # a copy that stopped early
    with pytest.raises(ValueError):  # vLLM's config check reads the cut weights' header
        VllmEngine(job_config([f"model.path={model}"]).engine_spec)
    assert gc.get_freeze_count() == 0
