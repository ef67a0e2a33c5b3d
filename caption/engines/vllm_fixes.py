"""vLLM 0.32's rough edges on this project's path, each worked around where vLLM's own source shows why
(paths are under site-packages/vllm). Each fix is applied in the process that runs the engine core
(in-process on the cpu tier: VLLM_ENABLE_V1_MULTIPROCESSING=0, conf/gpu/cpu.yaml) and changes
nothing else."""

from __future__ import annotations

import gc
import logging
import os
import sys

# VLLM_LOGGING_LEVEL as the process found it (the user's shell or script), before any engine set it
USER_LOG_LEVEL = os.environ.get("VLLM_LOGGING_LEVEL")


class DropThreadWarning(logging.Filter):
    """vLLM's CPU worker replaces torch.set_num_threads with a warning, and its multimodal
    processing calls it for every request: one harmless line per video would bury the progress bar."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "torch.set_num_threads" not in record.getMessage()


def set_log_level(level: str) -> str:
    """vLLM's own log level for the next engine: the user's VLLM_LOGGING_LEVEL where they set one, else
    `level` (engine.log_level). vLLM reads the variable once, as it is first imported (vllm/logger.py
    _configure_vllm_root_logger sets its logger and handler): a process that had imported vLLM before, as a
    notebook or a script using vLLM itself may have, kept that level and printed its start-up lines whatever
    the job said, and a second engine of a process kept the first one's. So the variable is set (vLLM is
    then imported with it, and processes it starts inherit it), and so are the levels vLLM gave its logger
    and handlers. Returns the level set."""
    level = USER_LOG_LEVEL or level
    os.environ["VLLM_LOGGING_LEVEL"] = level
    if "vllm.logger" in sys.modules:  # configured already: as vLLM would have configured it with this level
        logger = logging.getLogger("vllm")
        logger.setLevel(level)
        for handler in logger.handlers:
            handler.setLevel(level)
    return level


def guard_kernel_rebind_scan() -> None:
    """vLLM's worker start scans every module's objects with `vars(obj).get(...)`. Once numba has
    been imported (vLLM's n-gram proposer does that), llvmlite's `ffi.lib` answers `__dict__`
    through its `__getattr__` with a function wrapper, and the scan raises AttributeError, so a
    second engine in one process fails to start. Give that lookup a real (empty) dict."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lib = getattr(ffi, "lib", None)
    table = getattr(lib, "_fntab", None)
    if isinstance(table, dict) and not isinstance(table.get("__dict__"), dict):
        table["__dict__"] = {}


def register_cpu_kernels_once() -> None:
    """vLLM's worker registers the CPU build's C++ stand-ins for its Triton kernels at every engine start
    (v1/worker/worker_base.py init_worker -> platforms/cpu.py register_triton_kernel_overrides), and each
    registration scans every module of the process for references to rebind (triton_utils/dispatcher.py
    _rebind_kernels), ~0.13 s in a process holding many modules, warning "already registered. Overwriting"
    for each kernel from the second engine on. The first registration swaps the kernels in their own modules
    and rebinds every copy; modules imported later copy the stand-ins. So an engine restarted by the job, or
    the next engine of a process, registers nothing again."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.platforms.cpu import CpuPlatform

    register = CpuPlatform.register_triton_kernel_overrides
    if getattr(register, "once", False):
        return
    registered: list[bool] = []

    def once(cls) -> None:
        if not registered:
            register()
            registered.append(True)

    once.once = True  # type: ignore[attr-defined]
    CpuPlatform.register_triton_kernel_overrides = classmethod(once)  # type: ignore[method-assign,assignment]


def _leave_the_engines_heap_unfrozen() -> None:
    """What vLLM's freeze_gc_heap becomes while start_llm starts an engine: nothing (its docstring says why)."""


def start_llm(build):
    """Start a vLLM engine (`build()`, which returns vllm.LLM) with the heap as it is now frozen, and what the
    engine itself allocates left to the collector, so that shutdown_llm can free it without the rest.

    While an engine starts, vLLM collects the whole heap several times (twice in its model loader, once after
    its profiling run, once before it freezes its own heap: model_executor/model_loader/base_loader.py,
    v1/worker/gpu_model_runner.py _cleanup_profiling_kv_cache, utils/gc_utils.py freeze_gc_heap), ~0.35 s
    each over the ~670,000 objects a `caption` process holds after vLLM's imports, which live as long as the
    process. Frozen first (gc.freeze), they are skipped by those collections. vLLM then freezes its own
    start-up heap, the engine's objects among it (v1/engine/core.py, and v1/worker/gpu_worker.py on a GPU), and
    unfreezes everything at shutdown; that freeze is left out here, so the engine's objects stay in the
    collector's sight and the import-time heap can stay frozen while shutdown_llm collects them. A start that
    fails unfreezes the heap at once."""
    import vllm.v1.engine.core as core
    import vllm.v1.worker.gpu_worker as gpu_worker

    freezes = core.freeze_gc_heap, gpu_worker.freeze_gc_heap
    gc.freeze()
    core.freeze_gc_heap = gpu_worker.freeze_gc_heap = _leave_the_engines_heap_unfrozen
    try:
        llm = build()
    except BaseException:
        gc.unfreeze()  # no engine whose shutdown would
        raise
    finally:
        core.freeze_gc_heap, gpu_worker.freeze_gc_heap = freezes
    _remove_the_rendezvous_file_at_exit()
    return llm


_REMOVED_AT_EXIT: set[str] = set()


def _rendezvous_file() -> str | None:
    """The file of the process group's store, where the group meets in a file (torch's FileStore)."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    store = dist.distributed_c10d._get_default_store()
    while hasattr(store, "underlying_store"):  # a PrefixStore around it
        store = store.underlying_store
    return getattr(store, "path", None)


def _remove_the_rendezvous_file_at_exit() -> None:
    """vLLM's one-process engines meet in a file, /tmp/vllm_dist_<uuid> (get_file_store_init_method in
    utils/network_utils.py, v1/executor/uniproc_executor.py), which torch removes when the process group is
    destroyed. shutdown_llm leaves the group to the process's other engines, so every process that ran an
    engine left its file in /tmp (446 after a few days of this suite). It is removed as the process exits,
    by that process only: a child forked from it leaves its parent's file alone. A process killed outright
    (kill -9, a Ray actor killed) still leaves it."""
    import atexit

    path = _rendezvous_file()
    if path is None or path in _REMOVED_AT_EXIT:
        return
    _REMOVED_AT_EXIT.add(path)
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            try:
                os.remove(path)
            except OSError:  # gone already: the group was destroyed, or another clean-up took it
                pass

    atexit.register(remove)


class _CollectAfterShutdown:
    """The `gc` module as vLLM's engine core, worker and model runner see it while shutdown_llm stops an engine:
    everything passes through but collect() and unfreeze(), which shutdown_llm does itself, after the shutdown."""

    def __getattr__(self, name: str):
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 2) -> int:
        return 0

    @staticmethod
    def unfreeze() -> None:
        pass


def _a_parameter(llm):
    """A weak reference to one of an in-process engine's model parameters; None where the model is in
    another process (vLLM's multiprocessing) or not where this vLLM keeps it."""
    import weakref

    try:
        model = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner.model
        return weakref.ref(next(model.parameters()))
    except (AttributeError, StopIteration, TypeError):
        return None


def shutdown_llm(llm) -> None:
    """Stop an in-process vLLM engine without breaking the others in this process, and free what it held with
    one collection of the objects it allocated.

    vLLM's EngineCore.shutdown() ends with cleanup_dist_env_and_memory() (vllm/v1/engine/core.py),
    which destroys the process-wide parallel groups: every other in-process engine then fails its next
    step with "pipeline model parallel group is not initialized". An engine restarted by the job, or
    several engines in one test session, share those groups, so they are left in place (a new engine
    reuses them); the engine's own memory is freed by the garbage collector as vLLM would.

    That takes a collection after the shutdown: most of the model's parameters outlive it in reference
    cycles (40 of the embedded model's 49). vLLM's shutdown unfreezes the heap (v1/engine/core.py,
    v1/worker/gpu_worker.py), and its model runner then collects it whole while the model is still
    referenced (v1/worker/gpu_model_runner.py, _cleanup_profiling_kv_cache; `self.model = None` comes
    after), which frees none of them: both are left out. The heap frozen before the engine started
    (start_llm) stays frozen through the one collection here, which so reads only what the engine and the
    work since allocated, then is unfrozen: nothing frozen here outlives the engine. Where the engine's own
    objects were frozen too (another engine of this process started after it), or its model cannot be
    found, the heap is unfrozen first and collected whole."""
    import vllm.v1.engine.core as core
    import vllm.v1.worker.gpu_model_runner as model_runner
    import vllm.v1.worker.gpu_worker as gpu_worker

    parameter = _a_parameter(llm)
    cleanup = core.cleanup_dist_env_and_memory
    core.cleanup_dist_env_and_memory = lambda *args, **kwargs: None
    core.gc = gpu_worker.gc = model_runner.gc = _CollectAfterShutdown()  # type: ignore[assignment]
    try:
        llm.llm_engine.engine_core.shutdown()
    finally:
        core.cleanup_dist_env_and_memory = cleanup
        core.gc = gpu_worker.gc = model_runner.gc = gc
    if parameter is not None:
        gc.collect()  # the frozen heap left out
        freed = parameter() is None
        parameter = None
        gc.unfreeze()
        if freed:
            return
    gc.unfreeze()
    gc.collect()


def enable_video_pruning_on_cpu() -> None:
    """Video-token pruning (EVS) on vLLM's CPU build. The GPU model runner sets
    `is_multimodal_pruning_enabled` when it loads the model (v1/worker/gpu_model_runner.py load_model);
    the CPU runner's load_model (v1/worker/cpu_model_runner.py) never does, so the pruned video
    embeddings, which carry their M-RoPE positions in 4 extra columns, reach the merge unstripped and
    every request fails ("Error during index put operation", model_executor/models/utils.py). Set the
    flag the way the GPU runner does, after the CPU runner's own load."""
    from vllm.model_executor.models.interfaces import supports_multimodal_pruning
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    if getattr(CPUModelRunner.load_model, "sets_pruning_flag", False):
        return
    load = CPUModelRunner.load_model

    def load_model(self, *args, **kwargs):
        load(self, *args, **kwargs)
        mm_config = self.model_config.multimodal_config
        self.is_multimodal_pruning_enabled = (supports_multimodal_pruning(self.get_model())
                                              and mm_config is not None
                                              and mm_config.is_multimodal_pruning_enabled())

    load_model.sets_pruning_flag = True  # type: ignore[attr-defined]
    CPUModelRunner.load_model = load_model
