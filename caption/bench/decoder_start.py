"""Start-up of a decoder process: forked from the fork server (the default) against spawned.

    caption-bench decoder-start [--decoders 20]

For each start method, starts --decoders decoder processes one after another, as a job replaces a
decoder killed on a hung or crashing file, and gives each one synthetic clip (caption-synth's, at the
embedded model's frame budget): the seconds until it says it is ready, its CPU seconds by then, and the
seconds and CPU seconds until its clip is back (spawned decoders import PyAV with their first clip, the
fork server has it already); median seconds, mean CPU seconds. CPU seconds are each decoder's own (its
/proc/<pid>/stat, read before it is stopped); the fork server's start, paid once by the job, is a line of
its own. Both methods run in this one process, spawn first (no fork server exists yet to affect it).
Writes <out>/results.json, results.md and results.png; the last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from caption.bench.harness import BENCH_DATA, bars, clip_set, write_results
from video_io.decode import DecodeSpec
from video_io.sampling import SamplingSpec
from video_io.workers import DecodePool

METHODS = ("spawn", "forkserver")
SPEC = DecodeSpec(SamplingSpec(num_frames=8), max_pixels=3136)  # the embedded model's frames and budget


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--decoders", type=int, default=20, help="decoder processes started per method")
    parser.add_argument("--out", type=Path, default=BENCH_DATA / "decoder-start")


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (proc(5): the parent is [1], user and system time [11:13])."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_decoder(method: str, clip: str) -> dict:
    """A pool of one decoder started with `method`, given `clip`: its times and CPU seconds."""
    started = time.perf_counter()
    with DecodePool(SPEC, workers=1, timeout_s=120, start_method=method) as pool:
        (decoder,) = pool._workers
        decoder.has_started(timeout=120)
        ready_s, ready_cpu_s = time.perf_counter() - started, _cpu_s(decoder.process.pid)
        parent = int(_stat(decoder.process.pid)[1])  # this process, or the fork server
        (result,) = list(pool.imap([clip]))
        clip_s, clip_cpu_s = time.perf_counter() - started, _cpu_s(decoder.process.pid)
    if not result.ok:
        raise SystemExit(f"caption-bench decoder-start: the clip did not decode: {result.error}")
    return {"ready_s": ready_s, "ready_cpu_s": ready_cpu_s, "clip_s": clip_s, "clip_cpu_s": clip_cpu_s,
            "parent": parent}


def run(args) -> int:
    if args.decoders < 1:
        raise SystemExit("caption-bench decoder-start: --decoders must be at least 1")
    clip = str(sorted(clip_set("clip", 1, seed=7, root=args.out).glob("*.mp4"))[0])  # made once, in --out
    rows: dict[str, list[dict]] = {}
    server = None
    for method in METHODS:
        rows[method] = [one_decoder(method, clip) for _ in range(args.decoders)]
        if method == "forkserver":  # started by the first of them, running until this process ends
            server = {"first_ready_s": rows[method][0]["ready_s"], "cpu_s": _cpu_s(rows[method][0]["parent"])}
    # per decoder: the median of the times, the mean of the CPU seconds (a process's are counted in 10-ms ticks);
    # the fork server's first decoder, which waited for the server to start, is left out (the server's own row)
    typical = {}
    for method, runs in rows.items():
        kept = runs[1:] or runs
        typical[method] = {**{key: statistics.median(r[key] for r in kept) for key in ("ready_s", "clip_s")},
                           **{key: statistics.fmean(r[key] for r in kept) for key in ("ready_cpu_s", "clip_cpu_s")}}
    lines = [f"{args.decoders} decoders per start method, one after another, each given one clip: median seconds, "
             "mean CPU seconds (the fork server's first decoder left out)", "",
             "| start method | ready s | CPU s when ready | clip back s | CPU s with the clip |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {method} | {m['ready_s']:.3f} | {m['ready_cpu_s']:.3f} | {m['clip_s']:.3f} | {m['clip_cpu_s']:.3f} |"
              for method, m in typical.items()]
    assert server is not None
    ratio = typical["spawn"]["clip_cpu_s"] / max(typical["forkserver"]["clip_cpu_s"], 1e-3)
    lines += ["", f"The fork server itself: started with the first decoder ({server['first_ready_s']:.3f} s until it "
              f"was ready), {server['cpu_s']:.3f} CPU s for this process's life.",
              f"CPU per decoder through its first clip, spawn / fork server: {ratio:.1f}x."]
    print("\n".join(lines))
    labels = list(typical)
    write_results(args.out, "decoder-start", {"decoders": args.decoders, "clip": Path(clip).name, "runs": rows,
                                              "per_decoder": typical, "fork_server": server, "cpu_ratio": ratio}, lines,
                  bars(labels, {"ready s": [typical[m]["ready_s"] for m in labels],
                                "CPU s with the clip": [typical[m]["clip_cpu_s"] for m in labels]}, "seconds"),
                  "decoder process start-up: spawned vs forked from the fork server")
    print(json.dumps({"per_decoder": typical, "fork_server": server, "cpu_ratio": round(ratio, 2)}))
    return 0
