"""vLLM on CPU, eager against torch.compile (`gpu.enforce_eager`): steady-state speed and start-up.

    python scripts/bench_compile.py --model bench --dtype float32 bfloat16 --n 96 --repeat 2

The cpu tier runs eager (conf/gpu/cpu.yaml) because compiling costs most of a minute at engine
start-up on two cores. This measures what the compiled graphs give back once running, so the
trade-off is a number: each row is the whole `caption` job (vLLM, forced lengths as
scripts/bench_engines.py, the same clips) with `gpu.enforce_eager` true or false; eager and compiled
runs alternate, `--repeat` times each. Throughput counts from engine ready to the last record, so
start-up is apart; `break-even clips` is how many clips a job needs before the faster steps have
paid for the longer start: extra start-up s / (s per clip eager - s per clip compiled).

Writes <out>/results.json and <out>/compile.png; the last line is one JSON object with every row
and each dtype's compiled/eager ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench_common import MODELS, model_overrides

from bench_engines import SEED, run_job
from caption.config import REPO_ROOT
from video_io.synth.dataset import generate_dataset


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=MODELS, default="bench")
    ap.add_argument("--n", type=int, default=96, help="clips")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], choices=("float32", "bfloat16"))
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each setting (eager and compiled alternate)")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/compile-<model>")
    args = ap.parse_args()

    out = args.out or REPO_ROOT / "data" / "bench" / f"compile-{args.model}"
    clips = REPO_ROOT / "data" / "bench" / f"engines-seed{SEED}-n{args.n}"
    if not (clips / "references.jsonl").exists():
        generate_dataset(clips, args.n, SEED)
    common = [*model_overrides(args.model), "sampling.max_new_tokens=200",
              "benchmark.output_tokens={median:40,sigma:0.6,min:8,max:200,seed:0}",
              f"gpu.max_num_seqs={args.max_num_seqs}"]
    runs = []
    for dtype in args.dtype:
        for attempt in range(args.repeat):
            for eager in (True, False) if attempt % 2 == 0 else (False, True):
                name = f"{dtype}-{'eager' if eager else 'compiled'}-{attempt}"
                print(f"running {name} ...", file=sys.stderr, flush=True)
                summary, _ = run_job("vllm", [f"gpu.dtype={dtype}", f"gpu.enforce_eager={str(eager).lower()}"],
                                     clips, out / name, common)
                runs.append({"dtype": dtype, "eager": eager, "videos_per_s": summary["videos_per_s"],
                             "output_tokens": summary["output_tokens"],
                             "engine_step_s": summary["stages_s"]["engine_step"],
                             "engine_load_s": summary["engine_load_s"]})

    rows = []
    for dtype in args.dtype:
        mine = {eager: [r for r in runs if r["dtype"] == dtype and r["eager"] == eager] for eager in (True, False)}
        if len({r["output_tokens"] for r in mine[True] + mine[False]}) != 1:
            raise SystemExit(f"{dtype}: the runs produced different numbers of tokens: not the same work")
        eager_vps = statistics.median(r["videos_per_s"] for r in mine[True])
        compiled_vps = statistics.median(r["videos_per_s"] for r in mine[False])
        extra_start = (statistics.median(r["engine_load_s"] for r in mine[False])
                       - statistics.median(r["engine_load_s"] for r in mine[True]))
        saved_per_clip = 1 / eager_vps - 1 / compiled_vps
        rows.append({"dtype": dtype, "eager_videos_per_s": eager_vps, "compiled_videos_per_s": compiled_vps,
                     "ratio": round(compiled_vps / eager_vps, 3), "extra_start_s": round(extra_start, 1),
                     "all_videos_per_s": {"eager": [r["videos_per_s"] for r in mine[True]],
                                          "compiled": [r["videos_per_s"] for r in mine[False]]},
                     "break_even_clips": round(extra_start / saved_per_clip) if saved_per_clip > 0 else None})

    print(f"\n{args.n} clips, vLLM max_num_seqs {args.max_num_seqs}, {args.model} model, forced lengths; "
          f"median of {args.repeat} run(s) each\n")
    print("| dtype | eager videos/s | compiled videos/s | compiled / eager | extra start-up (s) | break-even clips |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['eager_videos_per_s']:.2f} | {r['compiled_videos_per_s']:.2f} | {r['ratio']:.2f}x | "
              f"{r['extra_start_s']:.0f} | {r['break_even_clips'] if r['break_even_clips'] is not None else 'never'} |")
    result = {"model": args.model, "clips": args.n, "max_num_seqs": args.max_num_seqs, "rows": rows, "runs": runs}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, out / "compile.png", f"{args.n} clips, {args.model} model, vLLM on CPU")
    print(f"\nwrote {out / 'results.json'} and {out / 'compile.png'}")
    print(json.dumps({"model": args.model, "clips": args.n,
                      "rows": [{k: r[k] for k in ("dtype", "eager_videos_per_s", "compiled_videos_per_s", "ratio",
                                                  "extra_start_s", "break_even_clips")} for r in rows]}))
    return 0


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["eager_videos_per_s"] for r in rows], width=0.4, label="eager")
    ax.bar([i + 0.2 for i in x], [r["compiled_videos_per_s"] for r in rows], width=0.4, label="torch.compile")
    ax.set_xticks(list(x), [r["dtype"] for r in rows])
    ax.set_ylabel("videos/s (engine ready -> last record)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
