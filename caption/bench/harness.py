"""What every benchmark shares: the real `caption` job in a fresh process, a composed job config, a
synthetic clip set, the model to bench, the machine a result came from, and one writer of results.

A benchmark runs the job with `run_caption` (never a copy of its own), makes clips with `clip_set`,
the model with `bench_model`, and ends with `write_results`, which stamps what it writes with
`machine_stamp()`: CPU model, cores, measured memory bandwidth, load average, git commit and date.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import caption
from caption.settings.config import CONF_DIR, REPO_ROOT, SHIPPED_ROOT
from video_io.store import is_url

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

# the held-out synthetic set: never used in training (seed 101) or in training-time evaluation (202);
# the model card's table (scripts/training/eval_toy.py) and the quantization and sampling benchmarks score on it
HELD_OUT_SEED = 303
BENCH_DATA = REPO_ROOT / "data" / "bench"
EMBEDDED_MODEL_DIR = SHIPPED_ROOT / "assets" / "models" / "vidcap-ko-tiny"
# `--model`: the embedded checkpoint, or a random-weight Qwen2.5-VL of one of caption-make-model's shapes
# (`bench` is its `cpu` shape, ~157M parameters; `3b` / `7b` take the presets' architecture, for GPU machines)
MADE_SHAPES = {"bench": "cpu", "tiny": "tiny", "3b": "3b", "7b": "7b"}
MODELS = ("embedded", *MADE_SHAPES)
# exit statuses of a job that ran to its end (caption/outcome.py): 0 every record ok, 3 some are errors
JOB_FINISHED = (0, 3)


# --- the job ---------------------------------------------------------------------------------------

@dataclass
class JobRun:
    """One `caption` process: how it ended, its summary (None if it wrote none) and where its files are."""
    exit_code: int | None
    hung: bool
    wall_s: float
    output: Path
    log: Path
    summary: dict | None
    # records written per second between the first and the last record (`watch=True`), else None
    steady_records_per_s: float | None = None
    record_count: int = 0
    command: list[str] = field(default_factory=list)
    process_peak_rss_gib: float | None = None  # the process's own peak (its rusage), from start-up on; unwatched runs

    @property
    def peak_rss_gib(self) -> float | None:
        return (self.summary or {}).get("peak_rss_gib")

    def records(self) -> list[dict]:
        """The records the job wrote; a line a crash cut short is left out."""
        found = []
        if self.output.exists():
            for line in self.output.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return found

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def job_env(threads: int | None = None, extra: dict | None = None) -> tuple[dict, list[str]]:
    """The environment a benchmark's child process runs in, and the job overrides that go with it:
    offline, this checkout's packages first; `threads`: OMP_NUM_THREADS and vLLM's own binding off,
    else the tier's settings (conf/gpu/cpu.yaml binds every CPU)."""
    source = str(Path(caption.__file__).resolve().parents[1])
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)}
    env.update(extra or {})
    if threads is None:
        return env, []
    env["OMP_NUM_THREADS"] = str(threads)
    return env, ["gpu.env.VLLM_CPU_OMP_THREADS_BIND=nobind"]


def run_caption(clips: Path | str, out: Path, overrides: list[str] = (), *, engine: str | None = None,
                references: bool = False, threads: int | None = None, env: dict | None = None,
                time_limit_s: float | None = None, watch: bool = False, check: bool = True,
                output: Path | None = None) -> JobRun:
    """Run the real `caption` command on `clips` in a fresh process (its own process group, so a hang
    is killed whole) and read back its summary. Records go to <out>/records.jsonl (stale ones removed
    first), Hydra's files to <out>, stdout and stderr to <out>/job.log. `references`: score METEOR
    against the folder's references.jsonl; `watch`: poll the records file to time the steady rate;
    `check`: a job that does not end with status 0 stops the benchmark, saying why; `output`: resume into
    this records file (kept as it is) instead of starting <out>/records.jsonl afresh."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    resume, log = output is not None, out / "job.log"
    output = Path(output).resolve() if resume else out / "records.jsonl"
    for stale in ([] if resume else [output, Path(f"{output}.summary.json")]):
        stale.unlink(missing_ok=True)
    child_env, more = job_env(threads, env)
    source = clips if is_url(clips) else Path(clips).resolve()  # a folder, or an object-store URL as it is
    command = [sys.executable, "-m", "caption", f"input_dir={source}", f"output={output}",
               *([f"engine={engine}"] if engine else []), f"resume={str(resume).lower()}", "progress=false",
               *([] if references else ["references=null"]), f"hydra.run.dir={out}", *overrides, *more]
    started = time.perf_counter()
    with open(log, "w") as log_file:
        proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=child_env,
                                start_new_session=True)
        code, hung, (count, steady), peak = _wait(proc, output, time_limit_s, watch)
    summary_path = Path(f"{output}.summary.json")
    run = JobRun(code, hung, time.perf_counter() - started, output, log,
                 json.loads(summary_path.read_text()) if summary_path.exists() else None, steady, count, command, peak)
    if check and (hung or code != 0):
        raise SystemExit(f"caption {' '.join(overrides)} {'hung' if hung else f'failed ({code})'}:\n{run.log_tail()}")
    return run


def _wait(proc: subprocess.Popen, output: Path, time_limit_s: float | None, watch: bool):
    """Wait for the job (killing its process group past the time limit); (exit code, hung, (records,
    steady records/s), peak RSS in GiB), the records counted only when watched, the peak RSS (the process's
    own rusage, which a watched run's polling does not collect) only when not."""
    if not watch:
        if time_limit_s is not None:
            try:
                proc.wait(timeout=time_limit_s)  # reaps it: no rusage of its own after this
                return proc.returncode, False, (0, None), None
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait(), True, (0, None), None
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, False, (0, None), usage.ru_maxrss / 2**20
    deadline = None if time_limit_s is None else time.perf_counter() + time_limit_s
    seen, first, last = 0, None, None
    while True:
        running = proc.poll() is None
        count = output.read_bytes().count(b"\n") if output.exists() else 0
        now = time.perf_counter()
        if count > seen:
            first, last, seen = first or now, now, count
        if not running:
            break
        if deadline is not None and now > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.returncode, True, (seen, None), None
        time.sleep(0.05)
    steady = (seen - 1) / (last - first) if first and last and last > first else None
    return proc.returncode, False, (seen, steady), None


# --- config, clips, model --------------------------------------------------------------------------

def compose_config(overrides: list[str]):
    """The job's composed (unvalidated) config, as the `caption` command composes it."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def job_config(clips: Path, overrides: list[str]):
    """The planned job for `clips` (vLLM unless an override says otherwise), as `caption` plans it."""
    from caption.planning import load_planned_job

    return load_planned_job(compose_config([f"input_dir={clips}", f"output={clips}/unused.jsonl", "engine=vllm",
                                            *overrides]))


def clip_set(name: str, n: int, seed: int, root: Path = BENCH_DATA, size: tuple[int, int] | None = None) -> Path:
    """<root>/<name>-seed<seed>-n<n>[-WxH]: n synthetic clips (caption-synth's, with references.jsonl,
    at caption-synth's size unless `size` gives one), made once."""
    from video_io.synth.dataset import SynthSpec, generate_dataset

    clips = Path(root) / (f"{name}-seed{seed}-n{n}" + (f"-{size[0]}x{size[1]}" if size else ""))
    if not (clips / "references.jsonl").exists():  # every core: a lease's minutes go to the benchmark
        generate_dataset(clips, n, seed, **({"spec": SynthSpec(width=size[0], height=size[1])} if size else {}),
                         workers=len(os.sched_getaffinity(0)) if n >= 16 else 1)
    return clips


def footage_set(name: str, n: int, seed: int, footage_args: list[str], root: Path = BENCH_DATA) -> Path:
    """<root>/<name>-seed<seed>-n<n>: n clips of the footage generator (video_io/synth/footage.py, real sizes and
    codecs) made with `footage_args`, once, a clip per core at a time."""
    clips = Path(root) / f"{name}-seed{seed}-n{n}"
    if not (clips / "references.jsonl").exists():  # the generator writes it after the last clip
        subprocess.run([sys.executable, "-m", "video_io.synth.footage", "--out", str(clips), "--n", str(n),
                        "--seed", str(seed), *footage_args, "--workers", str(len(os.sched_getaffinity(0)))],
                       check=True, cwd=REPO_ROOT)
    return clips


def decoded_clips(name: str, n: int, seed: int, overrides: list[str] = ()) -> tuple[Path, list]:
    """A clip set (`clip_set`) and its clips decoded as the job would, sorted by path (frame count and
    size are the model preset's: pass the same overrides as the job's)."""
    from video_io.crawl import crawl_videos
    from video_io.workers import DecodePool

    clips = clip_set(name, n, seed)
    job = job_config(clips, list(overrides))
    with DecodePool(job.decode, workers=2) as pool:
        decoded = sorted(((r.path, r.clip) for r in pool.imap(str(p) for _, p in crawl_videos(clips))),
                         key=lambda item: item[0])
    return clips, decoded


def requests_for(job: JobConfig, decoded, tasks) -> list:
    """One engine request per decoded clip and task, with the job's prompt."""
    from caption.engines.base import Request
    from caption.prompts import build_prompt

    return [Request(key=key, task=task, adapter=None, prompt=build_prompt(job.model.family, task),
                    frames=clip.frames, video_metadata=clip.metadata())
            for key, clip in decoded for task in tasks]


def model_dir(model: str) -> Path:
    if model == "embedded":
        return EMBEDDED_MODEL_DIR
    return REPO_ROOT / "data" / "models" / f"qwen2_5_vl-{MADE_SHAPES[model]}"


def bench_model(model: str) -> list[str]:
    """Job overrides for `--model`: `embedded` is the 2.2M-parameter checkpoint in assets/ (all
    overhead: it says little about engines); the others are caption-make-model's random-weight
    Qwen2.5-VL of that shape, made once under data/models (`bench`: ~15-30 s; `7b`: ~16.5 GB in bf16)."""
    if model not in MODELS:
        raise SystemExit(f"--model {model}: choose one of {', '.join(MODELS)}")
    if model == "embedded":
        return []
    folder, shape = model_dir(model), MADE_SHAPES[model]
    if not (folder / "config.json").is_file():
        print(f"making the {model} model in {folder} (caption-make-model --family qwen2_5_vl --shape {shape})",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "caption.make_model", "--family", "qwen2_5_vl", "--shape", shape,
                        "--out", str(folder), "--force"], check=True)
    return [f"hydra.searchpath=[file://{folder}/vidcap_preset]", f"model=random_qwen2_5_vl_{shape}"]


# --- the machine -----------------------------------------------------------------------------------

def measure_bandwidth_gbs(mib: int = 512, repeats: int = 5, device: str = "cpu") -> float:
    """The memory bandwidth decode steps read from: the best of `repeats` copies of a `mib` MiB array
    (numpy on the CPU; a torch tensor on `device` "cuda", where the engine's weights and KV live),
    counting the bytes read and the bytes written (GB/s, 1e9 bytes)."""
    if device == "cuda":
        import torch

        src = torch.ones(mib * 2**20 // 8, dtype=torch.float64, device="cuda")
        dst = torch.empty_like(src)
        copy, sync, nbytes = dst.copy_, torch.cuda.synchronize, src.numel() * 8
        copy(src)  # the first copy pays the kernel's launch set-up
    else:
        src = np.ones(mib * 2**20 // 8, dtype=np.float64)
        dst = np.empty_like(src)
        copy, sync, nbytes = (lambda a: np.copyto(dst, a)), (lambda: None), src.nbytes
    best = float("inf")
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        copy(src)
        sync()
        best = min(best, time.perf_counter() - started)
    return 2 * nbytes / best / 1e9


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The checkout's commit, with `-dirty` when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def machine_stamp(bandwidth_mib: int = 512) -> dict:
    """What a result depends on besides the code: CPU model, cores (all, and this process's), memory
    bandwidth measured now (a numpy copy), load average, the GPUs nvidia-smi lists, git commit, UTC date."""
    from quant.devices import detect_devices

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"cpu_model": cpu_model(), "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)),
            "memory_bandwidth_gbs": round(measure_bandwidth_gbs(bandwidth_mib), 1), "load_average": load,
            "gpus": [f"{d.name} ({d.memory_gib:g} GiB)" for d in detect_devices()],
            "git_commit": git_commit(), "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def stamp_line(stamp: dict) -> str:
    load = "/".join(f"{x:g}" for x in stamp["load_average"]) if stamp["load_average"] else "?"
    gpus = f", {', '.join(stamp['gpus'])}" if stamp["gpus"] else ""
    commit = stamp["git_commit"] or "?"
    commit = commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")
    return (f"{stamp['cpu_model']}, {stamp['cores_usable']}/{stamp['cores']} cores{gpus}, memory "
            f"{stamp['memory_bandwidth_gbs']} GB/s (copy), load {load}, commit {commit}, {stamp['date_utc']}")


# --- results ---------------------------------------------------------------------------------------

def write_results(out: Path, benchmark: str, result: dict, markdown: list[str], plot=None,
                  title: str = "", figsize: tuple[float, float] = (6.4, 4.2)) -> dict:
    """Write <out>/results.json (`result` with the machine stamp), <out>/results.md (`markdown`, the
    tables the benchmark printed) and, given `plot` (a function drawing into a matplotlib Figure),
    <out>/results.png; each says which machine, commit and date it came from. Returns the stamp."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = machine_stamp()
    (out / "results.json").write_text(json.dumps({"benchmark": benchmark, "title": title, "machine": stamp, **result},
                                                 indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    head = [f"# caption-bench {benchmark}", "", *([title, ""] if title else []), f"Machine: {stamp_line(stamp)}", ""]
    (out / "results.md").write_text("\n".join([*head, *markdown]) + "\n", encoding="utf-8")
    written = [out / "results.json", out / "results.md"]
    if plot is not None and save_plot(out / "results.png", plot, title, stamp_line(stamp), figsize):
        written.append(out / "results.png")
    print(f"\nwrote {', '.join(str(p) for p in written)}")
    return stamp


def save_plot(path: Path, draw, title: str, footer: str, figsize: tuple[float, float]) -> bool:
    """The one matplotlib set-up (Agg, no display): `draw(fig)` fills the figure; the title goes on
    top and the machine's stamp at the foot. False, saying so, where matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib missing (pip install '.[bench]'): no PNG")
        return False
    import textwrap

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize)
    draw(fig)
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, 90)), fontsize=8)
    fig.text(0.005, 0.005, "\n".join(textwrap.wrap(footer, 150)), fontsize=5, color="grey", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def bars(labels: list[str], series: dict[str, list], ylabel: str, log: bool = False):
    """A `plot` for write_results: grouped bars, one group per label, one bar per series."""
    def draw(fig) -> None:
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(series))
        for i, (name, values) in enumerate(series.items()):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
            ax.bar(xs, [v or 0 for v in values], width, label=name)
        rotate = len(labels) > 3
        ax.set_xticks(range(len(labels)), labels, rotation=30 if rotate else 0, ha="right" if rotate else "center",
                      fontsize=7)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        if len(series) > 1:
            ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    return draw


def best_of(repeat: int, run) -> float:
    """The fastest of `repeat` runs of `run()`, in seconds (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def percentile(values, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None
