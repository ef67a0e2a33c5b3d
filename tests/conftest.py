"""Shared fixtures: a small synthetic clip folder, the embedded model, Hydra composition."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model here is local; never reach a hub
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
# Two test workers share two cores with the processes they start, so OpenMP's threads (torch's, vLLM's CPU
# kernels) wait for work on cores another process needs: spinning, by default. Passive waiting measured: two
# 12-clip vLLM jobs at once spent 0.25-0.32 s generating instead of 0.54-3.9, and the whole suite 12:56
# instead of ~14-15 (user CPU 15:17 against 17-21 min; docs/development.md). Set before torch loads libgomp,
# which reads it then; the processes the tests start inherit it. A machine's own setting is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _end_the_worker_without_tearing_down_its_interpreter() -> None:
    """A test worker's last exit handler: the one registered before any test module's (atexit runs them last
    registered first), so Ray's shutdown, multiprocessing's joins, the warm servers' close and the rest have run.
    What it skips is Python's teardown of the modules, which in a process that imported vLLM spends ~2 CPU-s
    in the garbage collector's passes over every object (a script that imports vLLM and ends: 2.1 s from its
    last exit handler to its end, 0.2 with `gc.freeze()` there; docs/development.md), while pytest-xdist's
    controller waits for both workers before it reports: a run of two test files ended 3.6-4.0 s after its
    last worker, 1.0 s with this. `gc.freeze()` alone is not enough: Triton's bindings (nanobind) then print
    ~30 lines a worker about objects left alive. Skipped too: the handlers registered before this file (execnet's, and logging's,
    called here); the worker's exit status, which the controller does not read (execnet/gateway_io.py)."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed
            pass
    os._exit(0)


if os.environ.get("PYTEST_XDIST_WORKER"):
    import atexit

    atexit.register(_end_the_worker_without_tearing_down_its_interpreter)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from caption.settings.config import CONF_DIR, REPO_ROOT  # noqa: E402
from video_io.synth.dataset import SynthSpec, generate_dataset  # noqa: E402

MODEL_DIR = REPO_ROOT / "assets" / "models" / "vidcap-ko-tiny"


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    """Six synthetic clips (seed 11) with references.jsonl; read-only for tests."""
    folder = tmp_path_factory.mktemp("synth")
    generate_dataset(folder, n=6, seed=11, spec=SynthSpec())
    return folder


@pytest.fixture(scope="session")
def long_dir(tmp_path_factory) -> Path:
    """Two long videos (caption-synth-long, seed 11) of three 4-5 s scenes joined by cuts, dissolves or fades,
    drawn as caption-synth draws its clips (what the embedded model knows), with per-scene references.jsonl
    and scenes.jsonl; read-only for tests."""
    from video_io.synth.long import LongSpec, generate_long

    folder = tmp_path_factory.mktemp("long")
    generate_long(folder, 2, seed=11, spec=LongSpec(n_scenes=3, scene_s=(4.0, 5.0), transition_s=(0.5, 1.0),
                                                     style="clip"))
    return folder


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A real S3 API on loopback (moto's server mode: tests/support/s3_server.py), one per test process;
    each test makes buckets of its own."""
    from tests.support.s3_server import s3_server

    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="session")
def model_dir() -> Path:
    assert (MODEL_DIR / "config.json").exists(), f"embedded model missing at {MODEL_DIR}"
    return MODEL_DIR


@pytest.fixture
def compose_config():
    """compose_config(["engine=hf", ...]) -> the job's DictConfig, as `caption` would build it."""

    def _compose(overrides: list[str]):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)

    return _compose


# The files that take longest (seconds on 2 cores, docs/development.md), run first: `make test` hands whole
# files to its pytest-xdist workers in this order (--no-loadscope-reorder), so that none of them starts
# last and leaves one core idle while it runs alone. The first ten are long for their engine tests (marked
# `slow`); the rest are the longest of `make test-fast`, which leaves those out: as collected, the scene
# tests (38 s) came last there and ran alone for 12 s.
LONGEST_FIRST = [
    "tests/caption/runners/test_runner_ray.py",
    "tests/setup/test_wheel_install.py",
    "tests/caption/test_job_outcomes.py",
    "tests/caption/test_api.py",
    "tests/caption/engines/test_server_engine.py",
    "tests/caption/test_api_settings.py",
    "tests/caption/test_sweep.py",
    "tests/caption/engines/test_lora_spec_engines.py",
    "tests/caption/test_segments_job.py",
    "tests/caption/make_model/test_make_model.py",
    "tests/setup/test_setup_indexes.py",  # mostly waiting on PyPI: started early, its wait overlaps others' work
    "tests/video_io/test_scenes.py",
    "tests/caption/report/test_report.py",
    "tests/video_io/test_hostile_inputs.py",
    "tests/test_config_defaults.py",
    "tests/caption/settings/test_one_declaration.py",
    "tests/caption/settings/test_config.py",
    "tests/eval/test_meteor_parity.py",
    "tests/caption/settings/test_settings_take_effect.py",
    "tests/caption/settings/test_sampling_presets.py",
]


def _longest_first(items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest as collected


def pytest_collection_modifyitems(config, items):
    """The longest files first (LONGEST_FIRST). `@pytest.mark.w4a16` tests load 4-bit checkpoints on vLLM's
    CPU build: they run where its kernel library has the W4A16 kernel (AVX-512 CPUs) and are skipped,
    saying why, where it does not."""
    from quant.cpu_kernels import describe, has_w4a16

    _longest_first(items)

    if any(item.get_closest_marker("w4a16") for item in items) and not has_w4a16():
        skip = pytest.mark.skip(reason=f"needs vLLM's W4A16 CPU kernel, absent on this CPU ({describe()})")
        for item in items:
            if item.get_closest_marker("w4a16"):
                item.add_marker(skip)


def pytest_sessionfinish(session):
    """Under `make coverage`, a test worker saves what it measured as its session ends, not at its exit:
    pytest-xdist kills a worker that has not exited 10 s after it was told to (EXIT_TIMEOUT in
    xdist/workermanage.py, then execnet's Group.terminate), and a worker killed while it saved would leave
    its data file cut short, unreadable to `coverage combine` (docs/development.md)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        import coverage
    except ImportError:  # installed with the test extra; a bare environment measures nothing anyway
        return
    measuring = coverage.Coverage.current()
    if measuring is not None:
        measuring.stop()
        measuring.save()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that sets a trace function of its own (sys.settrace) puts back the one it found: under `make
    coverage` that is coverage.py's, and a test that ended with `sys.settrace(None)` left every later test in
    its worker unmeasured (78% read instead of 83%; docs/development.md). Put back here, and the test fails."""
    tracing = sys.gettrace()
    try:
        result = yield
    finally:
        left = sys.gettrace()
        sys.settrace(tracing)
    if left is not tracing:
        raise AssertionError(f"the test left another trace function in place ({left!r}, found {tracing!r}): "
                             "put back what sys.gettrace() gave before its sys.settrace")
    return result
