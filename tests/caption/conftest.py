"""Engines shared by the slow tests: one vLLM engine and one transformers engine per session."""

from __future__ import annotations

import pytest

from caption.planning import load_planned_job
from tests.caption.clips import clips_with_references


@pytest.fixture(scope="session")
def job_config(synth_dir, tmp_path_factory):
    """job_config(["engine=hf", ...]) -> validated JobConfig over the synthetic clips."""
    from hydra import compose, initialize_config_dir

    from caption.settings.config import CONF_DIR

    out = tmp_path_factory.mktemp("engine-out") / "unused.jsonl"

    def _make(overrides=()):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config",
                          overrides=[f"input_dir={synth_dir}", f"output={out}", *overrides])
        return load_planned_job(cfg)

    return _make


@pytest.fixture(scope="session")
def _vllm_engines():
    held = {}
    yield held
    if held.get("engine") is not None:
        held["engine"].close()  # else vLLM logs into pytest's closed capture stream at exit


def _shared_vllm_engine(held, job_config, with_counters):
    from caption.engines.vllm_engine import VllmEngine

    engine = held.get("engine")
    if engine is not None and with_counters and not engine.holds_counters:
        engine.close()
        engine = None
    if engine is None:
        engine = held["engine"] = VllmEngine(job_config([]).engine_spec)
    return engine


@pytest.fixture
def vllm_engine(_vllm_engines, job_config, model_dir):
    """One vLLM engine shared by the tests, kept while tests build and close engines of their own."""
    return _shared_vllm_engine(_vllm_engines, job_config, with_counters=False)


@pytest.fixture
def vllm_engine_with_counters(_vllm_engines, job_config, model_dir):
    """The shared vLLM engine, built again if a test built another one since: vLLM keeps the counters
    (prefix cache, speculation) of the newest engine of a process only (_engines_built in
    caption/engines/vllm_engine.py). Only the tests that read those counters take this one: building the
    engine again for every test cost ~20 builds a run."""
    return _shared_vllm_engine(_vllm_engines, job_config, with_counters=True)


@pytest.fixture(scope="session")
def hf_engine(job_config, model_dir):
    from caption.engines.hf_engine import HfEngine

    job = job_config(["engine=hf"])
    engine = HfEngine(job.engine_spec)
    yield engine
    engine.close()


@pytest.fixture
def two_clips_with_references(tmp_path, synth_dir):
    return clips_with_references(tmp_path, synth_dir, 2)
