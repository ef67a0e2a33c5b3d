"""vLLM against the best transformers setting: the whole caption job, same clips, forced varied lengths.

    caption-bench engines --model bench       # random-weight Qwen2.5-VL, ~157M parameters
    caption-bench engines --model embedded    # the 2.2M-parameter model in assets/ (all overhead)
    caption-bench engines --model bench --n 96 --hf-batch 8 16 32 --max-num-seqs 16 32 64
    caption-bench engines --model bench --dtype bfloat16  # both engines in bf16 (AVX512-BF16 CPUs)
    caption-bench engines --model 7b --gpu h100 --hf-batch 32 --max-num-seqs 32 64 128  # a GPU machine

Every row is the real `caption` job in a fresh process (decoding in worker processes included) on
the same synthetic clips. Output lengths are forced per request (`benchmark.output_tokens`: a
log-normal, median 40 tokens, clipped to 8-200, drawn from each request's identity), so both
engines do exactly the same work, of the varied shape real captions have. Throughput counts from
engine ready to the last record; engine start-up is reported apart. transformers is swept over
batch sizes, vLLM over `gpu.max_num_seqs`; vLLM's best is compared with transformers' best.

Per row: videos/s, output tokens/s, TTFT and time per output token (p50/p99), per-video latency
(the clip's frames reaching the engine side -> its last record written) p50/p99, goodput (videos/s
within --latency-target-s), peak RSS of the job process, engine start-up, where the job's time
went (decode wait, processor, engine steps, write; engine idle fraction), and the memory-bandwidth
utilisation of engine steps: (language-model weights x steps + KV bytes the requests' contexts
read) / engine-step seconds, over the bandwidth of the memory they live in, measured by a copy (host
memory on gpu=cpu, the device's on a GPU tier), and the output positions computed per output token
(transformers' static batches compute finished rows until the longest is done; vLLM: 1). The ratio
is then split in two: that padding of transformers' best row times vLLM's speed per computed position.
After each vLLM row the same clips, decoded beforehand, go to vLLM alone in one `LLM.generate` call
(`caption-bench engine-only`, same plan and forced lengths; `--no-engine-only` skips it): "job /
alone" is the share of the engine-only throughput the whole job reaches.

Writes <out>/results.json, results.md and results.png (machine-stamped) and prints a markdown table; the last line is one
JSON object: vllm_videos_per_s, hf_best_videos_per_s, ratio, and the settings they came from.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections import defaultdict
from pathlib import Path

from caption.bench.harness import (
    BENCH_DATA,
    MODELS,
    bench_model,
    clip_set,
    job_env,
    measure_bandwidth_gbs,
    model_dir,
    percentile,
    run_caption,
    write_results,
)

SEED = 707  # the engines' clip set (data/bench/engines-seed707-n<N>), shared with compile and cpu-runtime
# forced output lengths of the engine benchmarks (benchmark.output_tokens), as their defaults
DEFAULT_LENGTHS = "{median:40,sigma:0.6,min:8,max:200,seed:0}"


def engine_clips(n: int) -> Path:
    return clip_set("engines", n, SEED)


def run_job(engine: str, setting: list[str], clips: Path, out: Path, common: list[str],
            threads: int | None = None, env_extra: dict | None = None) -> tuple[dict, list[dict]]:
    """One `caption` process; its summary and records. `threads`: compute threads for either engine
    (OMP_NUM_THREADS; vLLM's own binding off), else the tier's settings (conf/gpu/cpu.yaml)."""
    run = run_caption(clips, out, [*common, *setting], engine=engine, threads=threads, env=env_extra)
    return run.summary, run.records()


def run_engine_only(setting: list[str], clips: Path, common: list[str], threads: int | None = None) -> dict:
    """vLLM alone on the same clips, decoded beforehand, with the job's overrides (`caption-bench engine-only`),
    in a fresh process as the job's rows are."""
    import subprocess

    env, more = job_env(threads)
    command = [sys.executable, "-m", "caption.bench", "engine-only", "--clips", str(clips), *common, *setting, *more]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"engine-only {setting} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# bytes per element: safetensors' names and torch's
WIDTH = {"F32": 4, "BF16": 2, "F16": 2, "float32": 4, "bfloat16": 2, "float16": 2}


def decoder_bytes(model_path: str, compute_dtype: str | None = None) -> dict:
    """What one decode step must read, from the checkpoint itself: the language model's weights (every
    safetensors tensor but the vision tower's; the input embedding is a lookup, counted whole, an
    overestimate of a few percent) and the KV cache bytes per token of context. `compute_dtype`: the
    dtype the engine loads them in, where it differs from the checkpoint's."""
    weights = 0
    for file in Path(model_path).glob("*.safetensors"):
        with open(file, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        for name, info in header.items():
            if name != "__metadata__" and "visual" not in name:
                start, end = info["data_offsets"]
                stored = WIDTH.get(info["dtype"], 4)  # the engine holds them converted to compute_dtype
                weights += (end - start) // stored * WIDTH.get(compute_dtype or "", stored)
    config = json.loads((Path(model_path) / "config.json").read_text())
    text = config.get("text_config", config)
    dtype = compute_dtype or str(text.get("dtype") or config.get("dtype") or text.get("torch_dtype") or "float32")
    width = WIDTH.get(dtype, 4)
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    kv_per_token = 2 * text["num_hidden_layers"] * text["num_key_value_heads"] * head_dim * width
    return {"weight_bytes": weights, "kv_bytes_per_token": kv_per_token}


def row(engine: str, setting: str, summary: dict, records: list[dict], target_s: float, model: dict,
        bandwidth_gbs: float) -> dict:
    ok = [r for r in records if r["status"] == "ok"]
    per_video: dict[str, float] = defaultdict(float)
    for r in ok:
        per_video[r["video"]] = max(per_video[r["video"]], r.get("latency_s", 0.0))
    wall = summary["generation_wall_s"]
    stages = summary["stages_s"]
    steps = summary.get("engine_steps") or 0
    kv_tokens = sum(r["output_tokens"] * r["prompt_tokens"] + r["output_tokens"] * (r["output_tokens"] - 1) // 2
                    for r in ok)
    step_s = stages["engine_step"]
    read_gbs = (model["weight_bytes"] * steps + model["kv_bytes_per_token"] * kv_tokens) / step_s / 1e9 if step_s else 0
    latencies = list(per_video.values())
    return {
        "engine": engine, "setting": setting, "videos": summary["videos_run"], "requests_ok": len(ok),
        "videos_per_s": summary["videos_per_s"], "output_tokens": summary["output_tokens"],
        "output_tokens_per_s": summary["output_tokens_per_s"], "generation_wall_s": wall,
        "ttft_p50_s": percentile([r["ttft_s"] for r in ok if "ttft_s" in r], 50),
        "ttft_p99_s": percentile([r["ttft_s"] for r in ok if "ttft_s" in r], 99),
        "tpot_p50_ms": _ms(percentile([r["tpot_s"] for r in ok if "tpot_s" in r], 50)),
        "tpot_p99_ms": _ms(percentile([r["tpot_s"] for r in ok if "tpot_s" in r], 99)),
        "video_latency_p50_s": percentile(latencies, 50), "video_latency_p99_s": percentile(latencies, 99),
        "goodput_videos_per_s": sum(x <= target_s for x in latencies) / wall if wall else None,
        "peak_rss_gib": summary["peak_rss_gib"], "engine_load_s": summary.get("engine_load_s"),
        "process_wall_s": summary["wall_s"], "stages_s": stages,
        "decode_cpu_s": summary["decode_s_total"], "engine_idle_fraction": summary["engine_idle_fraction"],
        "engine_steps": steps, "steps_per_s": steps / step_s if step_s else None,
        "bytes_read_gbs": read_gbs, "bandwidth_utilisation": read_gbs / bandwidth_gbs,
        # output positions the forward passes computed per output token: a static batch (transformers)
        # computes every row until its longest is done; vLLM's batch holds only unfinished requests
        "positions_per_output_token": (summary.get("output_positions_computed") or summary["output_tokens"])
        / summary["output_tokens"] if summary["output_tokens"] else None,
        "forced_lengths_match": all(r["output_tokens"] == r.get("forced_output_tokens") for r in ok),
    }


def ratio_split(vllm_best: dict, hf_best: dict) -> dict:
    """The ratio as two factors: the positions transformers' static batches compute per output token
    (work vLLM does not do) times vLLM's speed per computed position against transformers'. Where
    both engines are compute-bound (a CPU) the second factor is what vLLM's kernels and scheduling win
    on the same arithmetic; where steps cost the same whatever the batch (a GPU at small batches),
    it also holds vLLM's larger batches."""
    ratio = vllm_best["videos_per_s"] / hf_best["videos_per_s"]
    padding = hf_best["positions_per_output_token"]
    return {"ratio": ratio, "hf_padding": padding, "vllm_per_position": ratio / padding}


def _round(value, digits):
    return None if value is None else round(value, digits)


def _ms(seconds):
    return None if seconds is None else 1000 * seconds


def _f(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict], best: dict, target_s: float) -> list[str]:
    """The rows; the last column compares each with `best` (transformers' best row, where it ran)."""
    lines = ["| engine | setting | videos/s | out tok/s | TTFT p50/p99 (s) | TPOT p50/p99 (ms) | video latency p50/p99 (s) "
             f"| goodput <= {target_s:g} s (videos/s) | peak RSS (GiB) | engine start (s) | engine idle | BW util "
             f"| positions computed / output token | vLLM alone (videos/s) | job / alone | vs best "
             f"{'transformers' if best['engine'] == 'hf' else 'vLLM'} |",
             "|" + "---|" * 16]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['setting']} | {_f(r['videos_per_s'])} | {_f(r['output_tokens_per_s'], 1)} | "
            f"{_f(r['ttft_p50_s'])} / {_f(r['ttft_p99_s'])} | {_f(r['tpot_p50_ms'], 1)} / {_f(r['tpot_p99_ms'], 1)} | "
            f"{_f(r['video_latency_p50_s'])} / {_f(r['video_latency_p99_s'])} | {_f(r['goodput_videos_per_s'])} | "
            f"{_f(r['peak_rss_gib'])} | {_f(r['engine_load_s'], 1)} | {r['engine_idle_fraction']:.0%} | "
            f"{r['bandwidth_utilisation']:.1%} | {_f(r['positions_per_output_token'])} | "
            f"{_f(r['engine_only']['videos_per_s']) if 'engine_only' in r else '-'} | "
            f"{format(r['job_vs_engine_only'], '.0%') if 'job_vs_engine_only' in r else '-'} | "
            f"{r['videos_per_s'] / best['videos_per_s']:.2f}x |")
    lines.append("\nwhere the job's time went (s): decode wait / processor / engine steps / write / other; decoder CPU apart")
    for r in rows:
        s = r["stages_s"]
        lines.append(f"- {r['engine']} {r['setting']}: {s['decode_wait']} / {s['processor']} / {s['engine_step']} / "
                     f"{s['write']} / {s['other']}"
                     + (f" (and {s['beside_engine_step']} s of the next batch's decode wait and processor beside "
                        "engine steps)" if s.get("beside_engine_step") else "")
                     + f"; decoders {r['decode_cpu_s']} CPU-s; {r['engine_steps']} engine steps, "
                     f"{_f(r['steps_per_s'], 1)} steps/s, {_f(r['bytes_read_gbs'])} GB/s read")
    return lines


def plot(rows: list[dict]):
    def draw(fig) -> None:
        ax = fig.add_subplot()
        for engine, label, marker in (("hf", "transformers (batch size)", "o"), ("vllm", "vLLM (max_num_seqs)", "s")):
            points = sorted((r["size"], r["videos_per_s"]) for r in rows if r["engine"] == engine)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker, label=label)
        alone = sorted((r["size"], r["engine_only"]["videos_per_s"]) for r in rows if "engine_only" in r)
        if alone:
            ax.plot([p[0] for p in alone], [p[1] for p in alone], linestyle="--", marker="s", color="grey",
                    label="vLLM alone (clips decoded beforehand)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size / max_num_seqs")
        ax.set_ylabel("videos/s (whole job)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    return draw


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", choices=MODELS, default="bench",
                    help="bench: random-weight Qwen2.5-VL for this CPU; 3b/7b: the presets' shapes (GPU machines)")
    ap.add_argument("--gpu", default="cpu", choices=("cpu", "t4", "l4", "a100", "h100"),
                    help="the job's tier (gpu=...); on a GPU tier the bandwidth is the device's")
    ap.add_argument("--n", type=int, default=96, help="clips")
    ap.add_argument("--hf-batch", type=int, nargs="+", default=[8, 16, 32], help="transformers batch sizes")
    ap.add_argument("--max-num-seqs", type=int, nargs="+", default=[16, 32, 64], help="vLLM gpu.max_num_seqs")
    ap.add_argument("--median", type=float, default=40)
    ap.add_argument("--sigma", type=float, default=0.6)
    ap.add_argument("--min-tokens", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--latency-target-s", type=float, default=30.0, help="goodput counts videos within this")
    ap.add_argument("--engines", nargs="+", choices=("hf", "vllm"), default=["hf", "vllm"],
                    help="which engines' rows to run (hf alone: a machine without vLLM, or the transformers rows only)")
    ap.add_argument("--prepare-ahead", choices=("auto", "always", "never"), default=None,
                    help="transformers rows: engine.prepare_ahead (the next batch prepared while one generates; "
                         "auto: on a GPU)")
    ap.add_argument("--engine-only", action=argparse.BooleanOptionalAction, default=True,
                    help="after each vLLM row, run vLLM alone on the same clips decoded beforehand (all requests "
                         "in one LLM.generate) and report the job's share of that throughput")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/engines-<model>")
    ap.add_argument("--threads", type=int, default=None,
                    help="compute threads for both engines (OMP_NUM_THREADS, vLLM binding off); default: the tier's "
                         "(vLLM binds every CPU). On a machine shared with other work, 1 avoids OpenMP barrier waits")
    ap.add_argument("--dtype", default=None, choices=("float32", "bfloat16"),
                    help="compute dtype for both engines (gpu.dtype); default: the tier's (float32 on gpu=cpu). "
                         "bfloat16 pays only on CPUs with AVX512-BF16 or AMX (grep avx512_bf16 /proc/cpuinfo)")


def measure_rows(args, clips: Path, out: Path, common: list[str], model: dict, bandwidth: float) -> list[dict]:
    """transformers over its batch sizes, then vLLM over max_num_seqs (each followed by vLLM alone)."""
    rows = []
    for engine, sizes, key in (("hf", args.hf_batch, "engine.batch_size"), ("vllm", args.max_num_seqs, "gpu.max_num_seqs")):
        for size in sizes if engine in args.engines else ():
            setting = f"{key.split('.')[-1]}={size}"
            print(f"running {engine} {setting} ...", file=sys.stderr, flush=True)
            ahead = [f"engine.prepare_ahead={args.prepare_ahead}"] if engine == "hf" and args.prepare_ahead else []
            summary, records = run_job(engine, [f"{key}={size}", *ahead], clips, out / f"{engine}-{size}", common,
                                       args.threads)
            rows.append(row(engine, setting, summary, records, args.latency_target_s, model, bandwidth) | {"size": size})
            if engine == "vllm" and args.engine_only:
                print(f"running vllm {setting} engine-only ...", file=sys.stderr, flush=True)
                alone = run_engine_only([f"{key}={size}"], clips, common, args.threads)
                if alone["output_tokens"] != rows[-1]["output_tokens"]:
                    raise SystemExit(f"engine-only {setting} produced {alone['output_tokens']} tokens, the job "
                                     f"{rows[-1]['output_tokens']}: not the same work")
                rows[-1].update(engine_only=alone, job_vs_engine_only=rows[-1]["videos_per_s"] / alone["videos_per_s"])
    if not all(r["forced_lengths_match"] for r in rows):
        raise SystemExit("some request did not get its forced length: the engines did different work")
    return rows


def run(args) -> int:
    out = args.out or BENCH_DATA / f"engines-{args.model}{'' if args.gpu == 'cpu' else '-' + args.gpu}"
    clips = engine_clips(args.n)
    lengths = (f"{{median:{args.median},sigma:{args.sigma},min:{args.min_tokens},max:{args.max_tokens},seed:0}}")
    common = [*bench_model(args.model), f"gpu={args.gpu}", f"sampling.max_new_tokens={args.max_tokens}",
              f"benchmark.output_tokens={lengths}", *([f"gpu.dtype={args.dtype}"] if args.dtype else [])]
    bandwidth = measure_bandwidth_gbs(device="cpu" if args.gpu == "cpu" else "cuda")
    model = decoder_bytes(str(model_dir(args.model)), args.dtype)
    rows = measure_rows(args, clips, out, common, model, bandwidth)
    hf_best = max((r for r in rows if r["engine"] == "hf"), key=lambda r: r["videos_per_s"], default=None)
    vllm_best = max((r for r in rows if r["engine"] == "vllm"), key=lambda r: r["videos_per_s"], default=None)
    tokens = {r["engine"] + r["setting"]: r["output_tokens"] for r in rows}

    title = (f"{args.n} clips, {args.model} model, forced lengths log-normal median {args.median:g} "
             f"sigma {args.sigma:g} [{args.min_tokens}, {args.max_tokens}], gpu={args.gpu}"
             + (f", {args.threads} thread(s)" if args.threads else "") + (f", {args.dtype}" if args.dtype else "")
             + ("" if len(args.engines) == 2 else f", {args.engines[0]} rows only")
             + (f", engine.prepare_ahead={args.prepare_ahead}" if args.prepare_ahead else ""))
    lines = [f"{title}; one `caption` process per row; memory bandwidth {bandwidth:.1f} GB/s (a copy); "
             f"LM weights {model['weight_bytes'] / 1e6:.0f} MB, KV {model['kv_bytes_per_token']} B/token\n",
             *table(rows, hf_best or vllm_best, args.latency_target_s),
             f"\nsame output tokens on every row: {len(set(tokens.values())) == 1} ({sorted(set(tokens.values()))})"]
    split = ratio_split(vllm_best, hf_best) if hf_best and vllm_best else None
    if split:
        lines.append(f"vLLM best / transformers best = {split['ratio']:.2f}x = {split['hf_padding']:.2f} (output "
                     f"positions transformers computed per output token, {hf_best['setting']}) x "
                     f"{split['vllm_per_position']:.2f} (vLLM's output tokens/s over transformers' computed positions/s)")
    print("\n" + "\n".join(lines))
    result = {"model": args.model, "gpu": args.gpu, "clips": args.n, "threads": args.threads, "dtype": args.dtype,
              "engines": args.engines, "bandwidth_gbs": round(bandwidth, 2), **model,
              "forced_lengths": {"median": args.median, "sigma": args.sigma, "min": args.min_tokens,
                                 "max": args.max_tokens}, "latency_target_s": args.latency_target_s, "rows": rows}
    write_results(out, "engines", result, lines, plot(rows), title)
    print(json.dumps(headline(args, vllm_best, hf_best, split) if split else
                     {"model": args.model, "gpu": args.gpu, "clips": args.n, "engines": args.engines,
                      "best": {r["engine"]: r["setting"] for r in (hf_best, vllm_best) if r}}))
    return 0


def headline(args, vllm_best: dict, hf_best: dict, split: dict) -> dict:
    """The last line printed: the two best rows, their ratio and where it comes from."""
    return {"model": args.model, "gpu": args.gpu, "clips": args.n, "dtype": args.dtype,
            "vllm_videos_per_s": vllm_best["videos_per_s"], "vllm_setting": vllm_best["setting"],
            "hf_best_videos_per_s": hf_best["videos_per_s"], "hf_best_setting": hf_best["setting"],
            "ratio": round(split["ratio"], 3),
            "hf_padding": round(split["hf_padding"], 3), "vllm_per_position": round(split["vllm_per_position"], 3),
            "vllm_engine_idle_fraction": vllm_best["engine_idle_fraction"],
            "vllm_job_vs_engine_only": _round(vllm_best.get("job_vs_engine_only"), 3),
            "vllm_engine_load_s": vllm_best["engine_load_s"], "hf_engine_load_s": hf_best["engine_load_s"]}
