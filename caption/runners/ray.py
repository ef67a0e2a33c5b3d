"""runner=ray: the caption job on a Ray cluster, with Ray Data.

    clips (this process lists them, minus those with records)
      -> decoder actors on CPU workers run the pipeline's decoder stages (caption/pipeline/__init__.py
         STAGES: the local runner's decoder; as many actors as the cluster's CPUs allow, each holding
         the cores those stages declare: runner.decode_cpus)
      -> a pool of engine actors, one engine each (one per engine replica the cluster holds), runs the
         stages that declare the engine's worker on each batch: the same admission checks, prompts,
         engines, engine restarts and records as the local runner
      -> records stream back here, where the job writes them to `output` as they arrive.

Why `map_batches` with an actor class and not `ray.data.llm`: build_llm_processor brings its own
prompt building, engine settings and output rows; the job's own engines (caption/engines/*) then would
not run, nor their admission checks, LoRA and restarts, and records would come from a second code path.

An actor that dies (killed, out of memory, its engine dead past engine.max_restarts) costs only the
batches it held: Ray restarts that actor and runs them again on it (the task's max_task_retries), while
the other actors keep their engines and go on. A batch that raises is run again the same way
(DataContext.actor_task_retry_on_errors). A batch that failed 1 + runner.max_retries times is dropped
(DataContext.max_errored_blocks), the dataset goes on, and its clips get error records. (Until
2026-12-02 the clips that came back without records ran again in a new dataset, whose new actor pool
loaded every engine again, the healthy ones' too.) The driver being killed is the local runner's
resume case.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import socket
import uuid
from typing import TYPE_CHECKING, Iterator

import numpy as np

from caption.outcome import EngineDidNotLoad, EngineDied
from caption.pipeline import STAGES, build_stages
from caption.pipeline.record import RecordStage, record_keys
from caption.pipeline.stage import Batch, Needs, Place, Stage, Worker, on_worker, run_stages
from caption.runners.cores import CORE_LOCKS, bind_to_cores, claim_cores
from caption.settings.config import ConfigError, JobConfig
from video_io.store import WHERE_ENVIRONMENT

if TYPE_CHECKING:
    from caption.runners.base import Todo, Written
    from caption.summary.tally import JobTally
    from vidcap_ko.record import Record


class RayRunner:
    def __init__(self, job: JobConfig):
        self.job, self.settings = job, job.runner
        self.started_ray = False
        self.actors = 0
        self.seen: set[str] = set()  # the engine actors that sent records: host, pid, cores
        self.restarted: set[str] = set()  # those of them Ray had restarted (a dead actor's successors)
        self.lost = 0
        self.run_id = uuid.uuid4().hex[:12]  # names this run's core locks (caption/runners/cores.py)
        self.batch: Batch | None = None
        self.store: Written | None = None

    def start(self, todo: Todo, store: Written, tally: JobTally) -> None:
        """Ray and the engine actors; the clips are decoded by actors once `records` hands them out."""
        import ray

        self.batch, self.store = Batch(todo, store.done, tally), store

        if not ray.is_initialized():  # else: the caller's cluster (tests, notebooks) is used as it is
            # the actors' environment on every node: the hub's settings, and the object store's address (never
            # its credentials: Ray keeps a job's runtime_env in its session files; nodes use their own)
            shared = {k: v for k, v in os.environ.items() if k.startswith("HF_") or k in WHERE_ENVIRONMENT}
            _connect(self.settings.address, shared)
            self.started_ray = True
        self.actors = self.settings.actors or self._engines_the_cluster_holds()

    def _engines_the_cluster_holds(self) -> int:
        import ray

        plan = self.job.plan
        if self.job.gpu["device"] != "cuda":
            return plan.replicas
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < plan.tensor_parallel_size:
            raise RuntimeError(f"the Ray cluster has {gpus} GPU(s) but each engine of the plan needs "
                               f"{plan.tensor_parallel_size} (tensor_parallel_size): add GPU nodes, or plan for "
                               "fewer GPUs (gpu.tensor_parallel_size)")
        return gpus // plan.tensor_parallel_size

    def records(self) -> Iterator[Record]:
        from ray.data import DataContext

        if self.batch is None or self.store is None:
            raise RuntimeError("RayRunner.records: call start() first")
        todo, store, tally = self.batch.clips, self.store, self.batch.tally
        pending = [(key, path) for key, path in todo if _undone(self.job, key, store)]
        if not pending:
            return
        context = DataContext.get_current()  # read as the dataset's operators are made, in _dataset
        saved = context.max_errored_blocks, context.actor_task_retry_on_errors
        # a batch that raised runs again on its actor, within the tasks' max_task_retries (_dataset); one
        # that failed every time is dropped and its clips get error records below
        context.max_errored_blocks, context.actor_task_retry_on_errors = -1, True
        try:
            rows = iter(self._dataset(pending, store).iter_rows())
            try:
                for row in rows:
                    if row["did_not_load"]:  # the same model on every actor: the job cannot go on
                        raise EngineDidNotLoad(str(row["did_not_load"]))
                    tally.decode_s += float(row["decode_s"])
                    tally.scan_s += float(row["scan_s"])
                    tally.engine_failures += json.loads(row["engine_failures"])
                    self.seen.add(str(row["actor"]))
                    self.restarted.update([str(row["actor"])] if row["restarted"] else [])
                    yield from json.loads(row["records"])
            finally:
                # Ray Data stops the dataset's executor when its rows' iterator closes (ray/data/iterator.py,
                # _on_iteration_end). Left to the garbage collector when the job ends early (a model that
                # did not load, an interrupted or fail_fast job), that came after close() had shut Ray
                # down, and Ray's core worker then ended the driver at once: exit 1, no line saying why
                # (seen once in the suite, a model that did not load)
                rows.close()
        finally:
            context.max_errored_blocks, context.actor_task_retry_on_errors = saved
        left = [(key, path) for key, path in todo if _undone(self.job, key, store)]
        if not left:
            return
        records = RecordStage(self.job, Place())  # their records are made here, by the stage that makes them all
        records.setup()
        attempts = 1 + self.settings.max_retries
        for key, _ in left:  # a video whose segments came back only in part gets one error for the rest
            lost = records.lost(key, f"generate: lost: the actor holding this clip died or failed in each of "
                                     f"{attempts} attempt(s) (runner.max_retries={self.settings.max_retries}); "
                                     "caption.log has Ray's reason", self.batch)
            self.lost += bool(lost)
            yield from lost

    def _dataset(self, pending: list[tuple[str, object]], store: Written):
        import ray

        job, s = self.job, self.settings
        decoder, engine = _held(job, "decoder"), _held(job, "engine")
        rows = [{"key": key, "path": str(path),
                 "done": json.dumps([k for k in record_keys(job, key, store.segments.get(key)) if store.done(k)])}
                for key, path in pending]
        # one block per clip, so each clip travels (and a batch comes back) on its own
        decoders = max(1, int(ray.cluster_resources().get("CPU", 1) // decoder.cpus))
        # a dead actor restarts (max_restarts) and runs the batches it held again; a batch runs at most
        # 1 + runner.max_retries times, whether its actor died or it raised (records)
        retries = {"max_restarts": -1, "max_task_retries": s.max_retries}
        decoded = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            _Decoder, fn_constructor_kwargs={"job": job}, batch_size=1, concurrency=(1, decoders),
            num_cpus=decoder.cpus, **retries)
        batch = s.batch_clips or max(1, int((job.plan.vllm or {}).get("max_num_seqs") or 1))
        return decoded.map_batches(
            _CaptionActor, batch_size=batch, concurrency=self.actors,
            fn_constructor_kwargs={"job": job, "engines": self.actors, "core_scope": self.run_id},
            num_cpus=engine.cpus, num_gpus=engine.gpus or None, **retries)

    def stats(self) -> dict:
        return {"runner": "ray", "engine_actors": self.actors, "actors_seen": sorted(self.seen) or None,
                "engine_actors_restarted": len(self.restarted), "clips_lost": self.lost}

    def close(self) -> None:
        shutil.rmtree(CORE_LOCKS / self.run_id, ignore_errors=True)  # this machine's; other nodes keep empty files
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False


def _connect(address: str | None, env_vars: dict[str, str]) -> None:
    """ray.init: the running cluster at runner.address (or RAY_ADDRESS, as `ray job submit` sets it), else a
    Ray instance of this machine's own for the job. Ray's own rule for no address would join the cluster whose
    address the last `ray start` left in /tmp/ray/ray_current_cluster, however old: one stopped since (that
    file outlives it) was retried for ~13 minutes (ray/_private/node.py `_init_gcs_client`: 20 tries, each
    waiting on the GCS client's timeouts). A running cluster that does not answer, or refuses this driver, is
    the user's to mend: a ConfigError in one line, before anything runs."""
    import ray

    named, where = (address, "runner.address") if address else (os.environ.get("RAY_ADDRESS") or None, "RAY_ADDRESS")
    if named is None:
        ray.init(address="local", include_dashboard=False, runtime_env={"env_vars": env_vars})
        return
    _check_answers(named, where)
    try:
        ray.init(address=named, include_dashboard=False, runtime_env={"env_vars": env_vars})
    except Exception as exc:
        if not _refused_for_its_token(exc):
            raise
        # Ray enables token authentication on a cluster `ray start --head` starts where a token exists
        # (~/.ray/auth_token: any ray.init() that started a local cluster made one), but never for a driver
        # given an address (ray/_private/worker.py `init`; ray/_private/authentication/)
        raise ConfigError(_token_refused(named, where)) from None


def _token_refused(address: str, where: str) -> str:
    return (f"{where}={address}: the Ray cluster there asks for a token (Ray's token authentication): run the "
            "job with RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token (`ray "
            "get-auth-token` on its head prints it)")


def _check_answers(address: str, where: str) -> None:
    """A host:port where nothing answers, or whose cluster refuses this driver's token, is refused at once
    (ConfigError naming `where` the address came from). Ray's other forms (auto, ray://...) are Ray's to
    resolve."""
    from ray._raylet import GcsClient

    host, _, port = address.rpartition(":")
    if not host or "/" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ConfigError(f"{where}={address}: no Ray cluster answers there ({exc.strerror or exc}): "
                          f"start one with `ray start --head` (docs/scale-out.md), or leave {where} unset "
                          "to start one on this machine for the job") from None
    # one try of the client ray.init makes (ray/_private/node.py `_init_gcs_client`), which tries 20 times a
    # second apart, a refused token included (~24 s here); any other failure is left to ray.init to report
    try:
        GcsClient(address=f"{host}:{port}")
    except Exception as exc:
        if _refused_for_its_token(exc):
            raise ConfigError(_token_refused(address, where)) from None


def _refused_for_its_token(exc: BaseException) -> bool:
    """Ray's AuthenticationError, raised or (as ray.init words it) quoted in the error that ended the connection."""
    from ray.exceptions import AuthenticationError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AuthenticationError) or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _undone(job: JobConfig, key: str, store: Written) -> bool:
    return not all(store.done(k) for k in record_keys(job, key, store.segments.get(key)))


def _held(job: JobConfig, worker: Worker) -> Needs:
    """What an actor running the stages of `worker` holds: the cores they declare together, and the GPUs."""
    needs = [stage.needs(job) for stage in on_worker(STAGES, worker)]
    return Needs(cpus=sum(n.cpus for n in needs), gpus=max((n.gpus for n in needs), default=0))


class _Decoder:
    """Runs the decoder stages in a Ray worker: the local runner's decoder, a process of its own with the
    per-clip deadline (video.timeout_s), replaced when a clip hangs or crashes it. Decoded clips travel
    to the engine actors pickled."""

    def __init__(self, job: JobConfig):
        from caption.summary.tally import JobTally

        self.stages = build_stages(job, "decoder", Place(decoders=1))
        for stage in self.stages:
            stage.setup()
        self.tally = JobTally()  # the decoder stages count nothing: the engine side counts what they did

    def __call__(self, batch: dict) -> dict:
        """A row per result: one for a clip, one per segment of a long video (each travels on its own)."""
        row_of = {str(p): i for i, p in enumerate(batch["path"])}
        clips = [(str(key), str(path)) for key, path in zip(batch["key"], batch["path"])]
        results = list(run_stages(self.stages, list(row_of), Batch(clips, lambda key: False, self.tally)))
        rows = [row_of[r.path] for r in results]
        return {"key": np.array([batch["key"][i] for i in rows], dtype=object),
                "done": np.array([batch["done"][i] for i in rows], dtype=object),
                "decoded": np.array([pickle.dumps(r) for r in results], dtype=object)}

    def __del__(self):
        for stage in self.stages:
            stage.close()


class _CaptionActor:
    """One engine, captioning batches of decoded clips with the stages that run beside it.

    On the cpu tier each actor binds itself to cores of its own (caption/runners/cores.py). vLLM binds OpenMP
    threads only in the worker processes it spawns, through OpenMP's environment at spawn
    (vllm/utils/ompmultiprocessing.py, used by vllm/v1/executor/multiproc_executor.py); the job's
    engine runs in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0, conf/gpu/cpu.yaml), where
    VLLM_CPU_OMP_THREADS_BIND changes nothing. Unbound, every actor ran one OpenMP thread per machine
    core, and two actors on two cores spun in OpenMP barriers: minutes without a record, the load
    average near 200 (seen under the suite, with vLLM's AVX2 kernels, and in CI as a retry pass that
    never ended). The stages are set up (the engine built) on the first batch, in the thread Ray Data
    runs batches in (ray/data/_internal/execution/util.py, make_callable_class_single_threaded)."""

    def __init__(self, job: JobConfig, engines: int, core_scope: str):
        self.cores, self._lock = claim_cores(job, engines, core_scope)
        if self.cores is not None:
            bind_to_cores(self.cores)
            # what a spawned vLLM worker would be told (vllm/utils/ompmultiprocessing.py reads it)
            env = dict(job.plan.engine_env, VLLM_CPU_OMP_THREADS_BIND=",".join(map(str, self.cores)))
            job = dataclasses.replace(job, plan=dataclasses.replace(job.plan, engine_env=env),
                                      engine_spec=dataclasses.replace(job.engine_spec, env=env))
        self.job = job
        self.stages: list[Stage] | None = None
        self.name = f"{socket.gethostname()} pid {os.getpid()}"
        import ray

        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed  # a dead actor's successor

    def __call__(self, batch: dict) -> dict:
        from caption.pipeline.decode import AllDecoded
        from caption.summary.tally import JobTally

        if self.stages is None:  # in the thread that runs every batch (class docstring)
            if self.cores is not None:  # the cores this thread, and so the engine, really runs on
                self.name += f" cores {','.join(map(str, sorted(os.sched_getaffinity(0))))}"
            stages = build_stages(self.job, "engine",
                                  Place(trace_at=f"the job's log, from the engine actor {self.name}"))
            try:
                for stage in stages:
                    stage.setup()
            except EngineDidNotLoad as exc:  # the driver stops the job with this line (RayRunner.records)
                return self._row([], JobTally(), did_not_load=str(exc))
            self.stages = stages

        decoded = [pickle.loads(b) for b in batch["decoded"]]
        clips = [(str(key), d.path) for d, key in zip(decoded, batch["key"])]
        done = {tuple(k) for dump in batch["done"] for k in json.loads(dump)}  # (video, task, adapter, segment)
        tally = JobTally()
        try:
            records = list(run_stages(self.stages, AllDecoded(decoded), Batch(clips, done.__contains__, tally)))
        except EngineDied:
            # this actor's engine is gone for good: end the process; Ray starts a fresh actor and runs
            # this batch again on it (RayRunner._dataset)
            os._exit(1)
        return self._row(records, tally)

    def _row(self, records: list[Record], tally: JobTally, did_not_load: str = "") -> dict:
        """The one row a batch gives back: its records, the tally's figures, this actor's name, and why
        its engine did not load (empty when it did)."""
        return {"records": np.array([json.dumps(records, ensure_ascii=False)], dtype=object),
                "decode_s": np.array([tally.decode_s]), "scan_s": np.array([tally.scan_s]),
                "actor": np.array([self.name], dtype=object), "restarted": np.array([self.restarted]),
                "engine_failures": np.array([json.dumps(tally.engine_failures)], dtype=object),
                "did_not_load": np.array([did_not_load], dtype=object)}
