"""caption-bench: every benchmark a user reruns on new hardware, one subcommand each.

    caption-bench --help                 # the benchmarks, one line each
    caption-bench engines --help         # one benchmark's options
    caption-bench runners --n 24         # results in data/bench/runners/results.{json,md,png}

Each writes results.json, results.md (the tables it prints) and results.png, stamped with the CPU
model, cores, measured memory bandwidth, load average, git commit and date (caption/bench/harness.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from caption.bench import (
    chaos,
    cpu_runtime,
    decode,
    decode_memory,
    decoder_start,
    engine_only,
    engines,
    gpu,
    installers,
    lora,
    memory,
    meteor,
    prefix,
    prune,
    quant,
    resume,
    runners,
    sampling,
    scaleout,
    scenes,
    scenes_real,
    segments,
    server,
    spec,
    store,
    torch_compile,
)
from vidcap_ko.exit_status import EXIT_WRITE_FAILED
from vidcap_ko.writing import WriteFailed, check_can_write

# subcommand -> module (each has a docstring whose first line is its one-line description,
# add_arguments(parser) and run(args) -> exit status)
BENCHMARKS = {
    "engines": engines, "engine-only": engine_only, "compile": torch_compile, "cpu-runtime": cpu_runtime,
    "memory": memory, "runners": runners, "prefix": prefix, "spec": spec, "prune": prune, "lora": lora, "quant": quant,
    "sampling": sampling, "decode": decode, "decode-memory": decode_memory,
    "decoder-start": decoder_start, "meteor": meteor,
    "chaos": chaos, "scaleout": scaleout, "scenes": scenes, "scenes-real": scenes_real, "segments": segments,
    "installers": installers, "gpu": gpu, "resume": resume, "server": server, "store": store,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="caption-bench", description=__doc__.split("\n\n")[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = top.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK", title="benchmarks")
    for name, module in BENCHMARKS.items():
        one_line = module.__doc__.strip().splitlines()[0]
        command = sub.add_parser(name, help=one_line, description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "out", None) is not None:  # its results: writable before minutes of benchmarking
        try:
            check_can_write(Path(args.out) / "results.json", "benchmark results", "--out")
        except WriteFailed as exc:
            print(f"caption-bench: {exc}", file=sys.stderr)
            return EXIT_WRITE_FAILED
    return args.run(args) or 0
