"""Where the bottleneck sits as GPUs are added: decoding (CPU) against generation (GPU).

A back-of-the-envelope model, no measurement: each GPU's engine captions R clips/s (the design's tier
targets, docs/tiers.md "Tiers"); each clip costs D core-seconds to decode (issue 12's measurements through
the real job: ~1.0 for a 1080p H.264 clip with decord, 3.4 for a 10-s 4K HEVC clip and 7-10 for a 20-s
one with PyAV, 8 frames each). Keeping one GPU busy then needs R x D cores of decoding plus one core for
the engine process; a machine with G GPUs and C cores captions min(G x R, (C - G) / D) clips/s, and N
GPUs spread over machines of that shape scale linearly in machines (Ray Data spreads decoding tasks and
engine actors over all of them; the driver only writes JSON lines). Writes <out>/results.json,
results.md and results.png.

    caption-bench scaleout                          # 8-GPU machines with 96 / 192 cores
    caption-bench scaleout --gpus-per-machine 4 --cores-per-machine 48 --decode-s 0.3
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from caption.bench.harness import BENCH_DATA, write_results

ENGINE_CLIPS_PER_S = {"t4": 5, "l4": 12, "a100": 25, "h100": 50}   # the design's tier targets, per GPU
DECODE_CORE_S = {"1080p H.264": 1.0, "4K HEVC 10 s": 3.4, "4K HEVC 20 s": 10.0}  # issue 12, today
ENGINE_CORES_PER_GPU = 1   # the engine actor's own process (scheduling, multimodal processing)


def cores_per_gpu(tier: str, decode_s: float) -> float:
    return ENGINE_CLIPS_PER_S[tier] * decode_s + ENGINE_CORES_PER_GPU


def machine_rate(tier: str, decode_s: float, gpus: int, cores: int) -> tuple[float, str]:
    gpu_rate = gpus * ENGINE_CLIPS_PER_S[tier]
    decode_rate = max(0, cores - gpus * ENGINE_CORES_PER_GPU) / decode_s
    return (gpu_rate, "GPU") if gpu_rate <= decode_rate else (decode_rate, "decode")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus-per-machine", type=int, default=8)
    parser.add_argument("--cores-per-machine", type=int, nargs="+", default=[96, 192])
    parser.add_argument("--decode-s", type=float, nargs="*", help="core-seconds per clip (default: issue 12's)")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "scaleout")


def cluster_rate(tier: str, d: float, n: int, g: int, cores: int) -> tuple[float, str, int]:
    """clips/s of n GPUs on machines of g GPUs and `cores` cores, the bottleneck, and the machines."""
    machines, last = divmod(n, g)
    full, limit = machine_rate(tier, d, g, cores) if machines else (0.0, "GPU")
    part, part_limit = machine_rate(tier, d, last, cores) if last else (0.0, limit)
    return machines * full + part, limit if machines else part_limit, math.ceil(n / g)


def run(args) -> int:
    decode = {f"{d:g} core-s": d for d in args.decode_s} if args.decode_s else DECODE_CORE_S
    lines = ["CPU cores one GPU needs to stay busy (decode x engine rate + 1 for the engine):\n",
             "| tier | engine clips/s per GPU | " + " | ".join(decode) + " |", "|---|---|" + "---|" * len(decode)]
    for tier, rate in ENGINE_CLIPS_PER_S.items():
        lines.append(f"| {tier} | {rate} | " + " | ".join(f"{cores_per_gpu(tier, d):.0f}" for d in decode.values()) + " |")
    g, rows = args.gpus_per_machine, []
    for cores in args.cores_per_machine:
        lines += [f"\nclips/s (and the bottleneck) for N GPUs on machines of {g} GPUs and {cores} cores:\n",
                  "| tier | clip | " + " | ".join(f"N={n}" for n in args.gpus) + " |", "|---|---|" + "---|" * len(args.gpus)]
        for tier in ENGINE_CLIPS_PER_S:
            for name, d in decode.items():
                cells = []
                for n in args.gpus:
                    total, bound, machines = cluster_rate(tier, d, n, g, cores)
                    rows.append({"cores_per_machine": cores, "tier": tier, "clip": name, "gpus": n,
                                 "clips_per_s": total, "bottleneck": bound, "machines": machines})
                    cells.append(f"{total:.0f} ({bound}, {machines} m)")
                lines.append(f"| {tier} | {name} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    write_results(args.out, "scaleout", {"gpus_per_machine": g, "decode_core_s": decode, "rows": rows}, lines,
                  plot(rows, args.cores_per_machine[0]), f"a model, not a measurement: machines of {g} GPUs, "
                  f"{args.cores_per_machine[0]} cores")
    return 0


def plot(rows: list[dict], cores: int):
    def draw(fig) -> None:
        ax = fig.add_subplot()
        for tier in ENGINE_CLIPS_PER_S:
            for clip in dict.fromkeys(r["clip"] for r in rows):
                mine = [r for r in rows if r["tier"] == tier and r["clip"] == clip and r["cores_per_machine"] == cores]
                ax.plot([r["gpus"] for r in mine], [r["clips_per_s"] for r in mine], marker=".", label=f"{tier}, {clip}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs")
        ax.set_ylabel("clips/s")
        ax.legend(fontsize=5, ncol=2)
        ax.grid(True, alpha=0.3)
    return draw
