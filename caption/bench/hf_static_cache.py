"""transformers' static KV cache, with and without torch.compile, against its default dynamic cache.

    caption-bench compile --engine hf --model bench --n 16

The job's transformers engine (caption/engines/hf_engine.py) generates one batch of the engines'
clips (`--n` clips through the job's processor, every row forced to `--tokens` tokens) three ways, in one process, on the same inputs: the default dynamic cache;
`cache_implementation="static"` without compiling; and static with the decode step compiled by
torch.compile, as `engine.compile_static_cache=true` runs it (caption/engines/hf_generate.py static_cache). Each way runs --repeat times after one warm-up call (which
pays for compiling); time per output token is the median step after the first (TTFT apart). Every row
is forced to --tokens tokens, so each way does the same work whatever tokens it picks; how many rows
pick the dynamic cache's tokens is reported (on a CPU in float32 all of them; on an H100 in bf16 the
static cache's other kernels picked other tokens of a random-weight 7B, and an earlier version of this
benchmark stopped there).
"""

from __future__ import annotations

import statistics
import sys
import time

WAYS = ("dynamic", "static", "static+compile")


def _kwargs(spec, device: str, way: str) -> dict:
    """The cache keywords of a way; static+compile is what engine.compile_static_cache gives `generate`."""
    from caption.engines.hf_generate import static_cache

    if way == "dynamic":
        return {}
    if way == "static":
        return {"cache_implementation": "static", "disable_compile": True}
    return static_cache(spec, device)


def _once(engine, batch, inputs, cache: dict) -> tuple[list, float, float]:
    """One generate call: (new token ids per row, TTFT s, median s per output token after the first)."""
    kwargs = engine._generate_kwargs()
    width = inputs["input_ids"].shape[1]
    rows = engine._row_lengths(batch, width, kwargs)
    started = time.perf_counter()
    with engine.torch.inference_mode():
        out = engine.model.generate(**inputs, **kwargs, **cache)
    steps = rows.step_times
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    return out[:, width:].tolist(), steps[0] - started, statistics.median(gaps)


def measure(args) -> dict:
    from caption.bench.engine_only import decoded_requests
    from caption.bench.engines import engine_clips
    from caption.bench.harness import bench_model, job_config
    from caption.engines.hf_engine import HfEngine

    clips = engine_clips(args.n)
    lengths = f"{{median:{args.tokens},sigma:0,min:{args.tokens},max:{args.tokens},seed:0}}"  # every row the same
    job = job_config(clips, [*bench_model(args.model), "engine=hf", f"engine.batch_size={args.n}",
                             f"sampling.max_new_tokens={args.tokens}", f"benchmark.output_tokens={lengths}"])
    batch = decoded_requests(job, clips)[: args.n]
    engine = HfEngine(job.engine_spec)
    inputs = engine._inputs(batch)
    runs, reference = {}, None
    if args.ways[0] != "dynamic":
        raise SystemExit("--ways: dynamic first (the tokens every other way must equal)")
    for way in args.ways:
        print(f"running {way} (first call warms up) ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        cache = _kwargs(job.engine_spec, engine.device, way)
        tokens, _, _ = _once(engine, batch, inputs, cache)
        warm_up = time.perf_counter() - started
        reference = tokens if reference is None else reference
        if [len(row) for row in tokens] != [len(row) for row in reference]:
            raise SystemExit(f"{way}: other output lengths than the dynamic cache's: not the same work")
        timed = [_once(engine, batch, inputs, cache)[1:] for _ in range(args.repeat)]
        runs[way] = {"first_call_s": round(warm_up, 2), "ttft_s": round(statistics.median(t for t, _ in timed), 4),
                     "tpot_ms": round(1000 * statistics.median(s for _, s in timed), 2),
                     "rows_as_dynamic": sum(a == b for a, b in zip(tokens, reference))}
        print(f"{way}: {runs[way]}", file=sys.stderr, flush=True)
    engine.close()
    return {"batch": len(batch), "prompt_tokens": int(inputs["attention_mask"].sum()),
            "output_tokens_longest": max(r.forced_output_tokens for r in batch), "runs": runs}


def table(result: dict) -> list[str]:
    base = result["runs"]["dynamic"]["tpot_ms"]
    lines = ["| cache | TPOT p50 (ms) | vs dynamic | TTFT (s) | first call (s, warm-up) | rows with the dynamic "
             "cache's tokens |", "|---|---|---|---|---|---|"]
    for way, r in result["runs"].items():
        lines.append(f"| {way} | {r['tpot_ms']:.2f} | {base / r['tpot_ms']:.2f}x | {r['ttft_s']:.3f} | "
                     f"{r['first_call_s']:.1f} | {r['rows_as_dynamic']} of {result['batch']} |")
    return lines
