"""engine=server against an OpenAI-compatible server: captions, throughput, requests in flight.

    caption-bench server                       # vLLM's server (the ~157M bench model) on core 0, the job on core 1
    caption-bench server --model embedded      # the 2.2M embedded model: the job's own side is the limit
    caption-bench server --url http://gpu-box:8000/v1 --served-model qwen2.5-vl-7b --model 7b   # a running server

The same requests three ways. A plain concurrent client sends the job's own request bodies (its
decoded frames, prompts, sampling and forced lengths, built and serialized before the clock starts)
at each concurrency: the best rate is the server's capacity for these requests. The real `caption`
job (engine=server) runs at each engine.max_inflight, right after the client at the same
concurrency (the two interleave, so a busy machine weighs on both alike): its rate over its
generation (decoding, frame encoding and records included) against that capacity says whether the
job keeps the server busy, and from how many requests in flight. Greedy captions are compared with
the plain client's answers and with the in-process vLLM engine's (engine=vllm, same clips).

Started here, the server runs with the settings the job's plan gives the in-process engine
(max_model_len, dtype, block size, max_num_seqs), on cores of its own (--server-cpus), apart from
the job and the client (--client-cpus). `--model bench` makes the server the bottleneck, as a GPU
server of a 7B model is for a client machine that decodes: its random weights never stop on their
own, so every request generates exactly --output-tokens tokens (benchmark.output_tokens). Writes
<out>/results.json, results.md and results.png.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from caption.bench.harness import (
    BENCH_DATA,
    MODELS,
    bench_model,
    decoded_clips,
    job_config,
    job_env,
    model_dir,
    run_caption,
    write_results,
)

if TYPE_CHECKING:
    from caption.settings.config import JobConfig

SEED = 35
TARGET = 0.9  # the job's rate at least this share of the server's capacity


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--n", type=int, default=48, help="clips (one request each)")
    ap.add_argument("--model", choices=MODELS, default="bench",
                    help="bench: random-weight Qwen2.5-VL ~157M (the server is the bottleneck); embedded: 2.2M")
    ap.add_argument("--output-tokens", type=int, default=16, help="tokens every request generates (random-weight "
                                                                  "models; the embedded one stops on its own)")
    ap.add_argument("--inflight", default="1,2,4,8,16", help="engine.max_inflight of the job, and the plain "
                                                             "client's concurrency, to measure")
    ap.add_argument("--url", default=None, help="a running server's API (default: start vLLM's here)")
    ap.add_argument("--served-model", default=None, help="the model name the server serves (default: the model "
                                                         "folder's name, as the server started here calls it)")
    ap.add_argument("--api-key-env", default=None, help="the variable holding the server's API key")
    ap.add_argument("--server-cpus", default="0", help="cores of the server started here")
    ap.add_argument("--client-cpus", default="1", help="cores of the job and the plain client")
    ap.add_argument("--no-in-process", action="store_true", help="skip the engine=vllm run that captions are "
                                                                 "compared with")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench/server")


def _cpus(text: str) -> set[int]:
    return {int(c) for c in text.split(",") if c.strip()}


@contextmanager
def vllm_server(job: JobConfig, served: str, cpus: set[int], log: Path):
    """vLLM's OpenAI-compatible server on `cpus` with the job's model and the engine settings its plan
    gives the in-process engine, taking the per-request media kwargs the job sends; its URL. Its KV cache
    is 1 GiB (conf/gpu/cpu.yaml gives the in-process engine 2): the embedded model's batches use far less
    than either, so the cache size does not set either engine's speed here."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env, _ = job_env(extra={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                            "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, sorted(cpus)))})
    plan = job.plan.vllm
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", job.model.path,
               "--served-model-name", served, "--host", "127.0.0.1", "--port", str(port),
               "--max-model-len", str(plan["max_model_len"]), "--dtype", plan["dtype"],
               "--block-size", str(plan["block_size"]), "--max-num-seqs", str(plan["max_num_seqs"]),
               *(["--enforce-eager"] if plan["enforce_eager"] else []), "--trust-request-mm-kwargs"]
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with server_process(command, env, log, url, start_s=600, preexec_fn=lambda: os.sched_setaffinity(0, cpus)):
            yield url
    except ServerDidNotStart as exc:
        raise SystemExit(f"the vLLM server did not start: {exc}") from None


class ServerDidNotStart(RuntimeError):
    """The server process exited, or did not answer in time; the message ends with its log's tail."""


@contextmanager
def server_process(command: list[str], env: dict, log: Path, url: str, *, start_s: float,
                   headers: dict | None = None, preexec_fn=None):
    """An OpenAI-compatible server started by `command` in its own process group, its output in `log`;
    the process once `url`/models answers. Stopped on leaving, even on failure: SIGTERM to the group,
    SIGKILL after 30 s (vLLM's engine core is a child process)."""
    import httpx

    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=preexec_fn)
    try:
        deadline = time.monotonic() + start_s
        while True:
            if proc.poll() is not None:
                raise ServerDidNotStart(f"it exited {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise ServerDidNotStart(f"no answer in {start_s:g} s: "
                                   f"{log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2, headers=headers).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        yield proc
    finally:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    """Signal what is left of a process group; a group whose every process has exited is done with."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def request_bodies(job: JobConfig, decoded, model: str) -> list[tuple[str, bytes]]:
    """(clip, serialized body) of the job's request for each clip: its own body builder, frames, sampling
    and forced length."""
    from caption.engines.server_api import chat_body, sampling_fields
    from vidcap_ko.families import get_family

    family, bodies = get_family(job.model.family), []
    for path, clip in decoded:
        name = Path(path).name
        forced = job.forced_lengths.draw(name, "caption", None) if job.forced_lengths is not None else None
        fields = sampling_fields(job.sampling, family.stop, job.engine_options.seed, forced)
        bodies.append((name, json.dumps(chat_body(model, "caption", clip.frames, clip.metadata(),
                                                  dict(family.processor_kwargs), fields)).encode()))
    return bodies


def plain_client(url: str, bodies: list[tuple[str, bytes]], concurrency: int, key: str | None) -> dict:
    """The bodies sent by `concurrency` threads at once; requests/s from the first send to the last answer."""
    import httpx

    from caption.pipeline.record import clean_caption

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    with httpx.Client(timeout=600, headers=headers,
                      limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)) as client:
        def send(item):
            name, body = item
            response = client.post(f"{url}/chat/completions", content=body)
            response.raise_for_status()
            # as a record holds it: undecodable bytes (random weights sample them) removed (pipeline/record.py)
            return name, clean_caption(response.json()["choices"][0]["message"]["content"].strip())[0]

        with ThreadPoolExecutor(concurrency) as pool:
            started = time.perf_counter()
            answers = dict(pool.map(send, bodies))
            wall = time.perf_counter() - started
    return {"concurrency": concurrency, "requests": len(bodies), "wall_s": round(wall, 3),
            "requests_per_s": round(len(bodies) / wall, 3), "answers": answers}


def job_run(args, clips: Path, out: Path, url: str, inflight: int, overrides: list[str]) -> dict:
    overrides = [*overrides, f"engine.base_url={url}", f"engine.served_model={args.served_model}",
                 f"engine.max_inflight={inflight}", *([f"engine.api_key_env={args.api_key_env}"] if args.api_key_env
                                                      else [])]
    run = run_caption(clips, out / f"job-inflight{inflight}", overrides, engine="server")
    s = run.summary
    return {"max_inflight": inflight, "videos": s["videos_run"], "generation_wall_s": s["generation_wall_s"],
            "requests_per_s": s["videos_per_s"], "server_mean_in_flight": s.get("server_mean_in_flight"),
            "decode_workers": s["decode_workers"],
            "captions": {Path(r["video"]).name: r["caption"] for r in run.records()}}


def _equal(a: dict, b: dict) -> int:
    return sum(1 for key, text in a.items() if b.get(key) == text)


def measure(args, clips: Path, decoded, job: JobConfig, url: str, out: Path, overrides: list[str]) -> dict:
    levels = [int(x) for x in args.inflight.split(",")]
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    bodies = request_bodies(job, decoded, args.served_model)
    plain_client(url, bodies[: max(levels)], max(levels), key)  # warm-up, outside the measurement
    client, jobs = [], []
    for level in levels:  # interleaved: what else runs on the machine weighs on both alike
        client.append(plain_client(url, bodies, level, key))
        jobs.append(job_run(args, clips, out, url, level, overrides))
        print(f"in flight {level}: plain client {client[-1]['requests_per_s']:.2f}, job "
              f"{jobs[-1]['requests_per_s']:.2f} requests/s", flush=True)
    reference = max(client, key=lambda r: r["requests_per_s"])["answers"]
    in_process = None
    if not args.no_in_process:
        run = run_caption(clips, out / "in-process", overrides, engine="vllm")
        in_process = {Path(r["video"]).name: r["caption"] for r in run.records()}
    return {"client": client, "jobs": jobs, "reference": reference, "in_process": in_process}


def table(m: dict, n: int) -> tuple[list[str], dict]:
    capacity = max(r["requests_per_s"] for r in m["client"])
    lines = [f"Server capacity for these requests (the plain client's best rate): {capacity:.2f} requests/s\n",
             "| requests in flight | plain client (requests/s) | job (requests/s) | job / capacity | "
             "job's mean in flight | captions = server's answers | = in-process vLLM |",
             "|---|---|---|---|---|---|---|"]
    for c, j in zip(m["client"], m["jobs"]):
        same = _equal(j["captions"], m["reference"])
        local = f"{_equal(j['captions'], m['in_process'])}/{n}" if m["in_process"] is not None else "-"
        lines.append(f"| {j['max_inflight']} | {c['requests_per_s']:.2f} | {j['requests_per_s']:.2f} | "
                     f"{j['requests_per_s'] / capacity:.0%} | {j['server_mean_in_flight']} | {same}/{n} | {local} |")
    enough = next((j["max_inflight"] for j in m["jobs"] if j["requests_per_s"] >= TARGET * capacity), None)
    best = max(j["requests_per_s"] for j in m["jobs"])
    verdict = {"capacity_requests_per_s": capacity, "job_best_requests_per_s": best,
               "job_best_share": round(best / capacity, 3), "inflight_for_target": enough, "target": TARGET}
    lines.append(f"\nThe job's best: {best:.2f} requests/s, {best / capacity:.0%} of capacity; "
                 f"{TARGET:.0%} of capacity from engine.max_inflight={enough}" if enough else
                 f"\nThe job's best: {best:.2f} requests/s, {best / capacity:.0%} of capacity (target {TARGET:.0%} "
                 "not reached)")
    return lines, verdict


def plot(m: dict):
    def draw(fig) -> None:
        ax = fig.add_subplot()
        ax.plot([c["concurrency"] for c in m["client"]], [c["requests_per_s"] for c in m["client"]], marker="o",
                label="plain client (the server's capacity)")
        ax.plot([j["max_inflight"] for j in m["jobs"]], [j["requests_per_s"] for j in m["jobs"]], marker="s",
                label="caption job (engine=server)")
        ax.set_xscale("log", base=2)
        levels = [j["max_inflight"] for j in m["jobs"]]
        ax.set_xticks(levels, [str(k) for k in levels])
        ax.set_xlabel("requests in flight (client concurrency / engine.max_inflight)")
        ax.set_ylabel("requests/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    return draw


def run(args) -> int:
    out = (args.out or BENCH_DATA / f"server-{args.model}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    overrides = bench_model(args.model)
    if args.model != "embedded":  # random weights never stop on their own
        n = args.output_tokens
        overrides.append(f"benchmark.output_tokens={{median: {n}, sigma: 0, min: {n}, max: {n}, seed: 0}}")
    args.served_model = args.served_model or model_dir(args.model).name
    clips, decoded = decoded_clips("server", args.n, SEED, overrides)
    job = job_config(clips, overrides)
    server_cpus, client_cpus = _cpus(args.server_cpus), _cpus(args.client_cpus)
    server = nullcontext(args.url) if args.url else vllm_server(job, args.served_model, server_cpus, out / "server.log")
    with server as url:
        if not args.url:
            os.sched_setaffinity(0, client_cpus)  # the job and the plain client, on their own cores
        m = measure(args, clips, decoded, job, url, out, overrides)
    lines, verdict = table(m, args.n)
    where = (f"vLLM's server started here on cores {args.server_cpus}, job and client on {args.client_cpus}"
             if not args.url else f"the server at {args.url}")
    tokens = "" if args.model == "embedded" else f", {args.output_tokens} output tokens each"
    title = f"{args.n} clips, one request each, greedy{tokens}, {args.model} model ({job.model.name}); {where}"
    print("\n" + "\n".join(lines))
    result = {"clips": args.n, "model": args.model, "server": args.url or "vllm (started here)",
              "server_cpus": args.server_cpus, "client_cpus": args.client_cpus, **verdict,
              "client": [{k: v for k, v in c.items() if k != "answers"} for c in m["client"]],
              "jobs": [{**{k: v for k, v in j.items() if k != "captions"},
                        "captions_equal_server": _equal(j["captions"], m["reference"]),
                        "captions_equal_in_process": (_equal(j["captions"], m["in_process"])
                                                      if m["in_process"] is not None else None)} for j in m["jobs"]]}
    write_results(out, "server", result, lines, plot(m), title)
    return 0
