"""Put this folder first on PYTHONPATH to run a process as on an x86 CPU without AVX-512: torch then
says no AVX-512, and vLLM's CPU platform imports its AVX2 kernel library (vllm/platforms/cpu.py,
`import_kernels`), which has no W4A16 kernel. Tests use it to check, on any machine, what a job does
on such a CPU (on a CPU without AVX-512 it changes nothing)."""
try:
    import torch.cpu as _cpu
except Exception:  # a process without torch: nothing to pretend
    pass
else:
    _cpu._is_avx512_supported = lambda: False
    _cpu._is_avx512_bf16_supported = lambda: False
