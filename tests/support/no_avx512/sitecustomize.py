"""Put this folder first on PYTHONPATH to run a process as on an x86 CPU without AVX-512: torch then
says no AVX-512, and vLLM's CPU platform imports its AVX2 kernel library (vllm/platforms/cpu.py,
`import_kernels`), which has no W4A16 kernel. Tests use it to check, on any machine, what a job does
on such a CPU (on a CPU without AVX-512 it changes nothing).

The pretence is made when a process imports torch.cpu, not before: a process that never imports torch
(a decoder, a Ray worker waiting for a task, a small command) starts as fast as it would on that CPU.
Making it by importing torch at start-up, as ../shared/tools/force-avx2 does, adds about 2 s to every
Python process (`python -c pass`: 0.1 s -> 2.3 s on this project's 2-core machines), which a suite that
starts hundreds of processes pays many times over, and a real AVX2 machine never does.
TorchInductor's compiled code goes to a cache of its own, as force-avx2's does: its caches do not key the
bf16 capability this pretence changes."""

import importlib.abc
import importlib.machinery
import os
import sys

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"torchinductor-no-avx512-{os.getuid()}"))


def _pretend(cpu):
    cpu._is_avx512_supported = lambda: False
    cpu._is_avx512_bf16_supported = lambda: False


class _WhenTorchCpuLoads(importlib.abc.MetaPathFinder):
    """Finds torch.cpu as the import system would, and pretends once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != "torch.cpu":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def run_then_pretend(module):
            run(module)
            _pretend(module)

        spec.loader.exec_module = run_then_pretend  # this spec's own loader object
        return spec


if "torch.cpu" in sys.modules:
    _pretend(sys.modules["torch.cpu"])
else:
    sys.meta_path.insert(0, _WhenTorchCpuLoads())
