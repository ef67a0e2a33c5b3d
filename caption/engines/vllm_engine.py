"""vLLM engine: requests stream in as clips are decoded, results stream out as they finish.

Requests are handed to vLLM's offline engine ahead of time (up to `max_inflight`), so its
scheduler always has a full batch to work with (continuous batching) while decoder processes
prepare the next clips. Between steps it takes the clips decoded by then and never stops its steps
to wait for more while it has requests in flight (base.take_ready). Memory for frames stays bounded
by `max_inflight`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from caption.engines.base import Request, Result, StageClock, count_token, pull, reply_text, request_stream, take_ready
from caption.engines.vllm_fixes import (
    DropThreadWarning,
    enable_video_pruning_on_cpu,
    guard_kernel_rebind_scan,
    register_cpu_kernels_once,
    set_log_level,
    shutdown_llm,
    start_llm,
)
from caption.outcome import EngineFailure, stop_if_raised_by_an_interrupt
from caption.settings.engine_spec import EngineSpec
from vidcap_ko.families import get_family

# vLLM's prometheus counters this engine reports (process-wide: we report deltas).
COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
            "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens")


def apply_engine_env(spec: EngineSpec) -> None:
    """Export the tier's vLLM environment (read by vLLM at import and engine start)."""
    for key, value in spec.env.items():
        value = str(value)
        if key == "VLLM_CPU_OMP_THREADS_BIND" and value == "all":
            value = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        os.environ[key] = value
    if (spec.vllm or {}).get("kv_cache_memory_bytes"):
        # the plan sized the CPU KV cache (quant/plan.py CPU_KV_SPARE); vLLM would take the variable over it
        # (vllm/platforms/cpu.py), as an earlier engine of this process or the shell may have set it
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)


def engine_args(spec: EngineSpec) -> dict:
    """Keyword arguments for vllm.LLM: the plan's engine settings plus what the job needs."""
    plan, opts = spec.vllm, spec.options
    args = dict(
        model=spec.model_path,
        tokenizer=spec.model_path,
        limit_mm_per_prompt={"image": 0, "video": 1},
        enable_prefix_caching=opts.enable_prefix_caching,
        seed=opts.seed,
        disable_log_stats=False,  # keep the counters the summary reports
    )
    args.update({key: value for key, value in plan.items() if value is not None})  # the plan's are vLLM's names
    if spec.adapters:  # every adapter of the job can be in one batch, and one slot stays empty: a request
        # without an adapter has LoRA index -1, which vLLM's torch LoRA ops (the CPU path: vllm/lora/ops/
        # torch_ops/lora_ops.py, `lora_b_weights[lora_indices_tensor]`) read as the last slot: a full last
        # slot gave base-model requests batched with adapter ones the adapter's captions
        slots = len(spec.adapters) + 1
        args.update(enable_lora=True, max_loras=slots, max_cpu_loras=slots, max_lora_rank=spec.lora_max_rank)
    if spec.speculative is not None:
        args["speculative_config"] = dict(spec.speculative)
    if spec.processor_kwargs:
        args["mm_processor_kwargs"] = dict(spec.processor_kwargs)
    args["mm_processor_cache_gb"] = processor_cache_gib(spec)
    return args


def processor_cache_gib(spec: EngineSpec) -> float:
    """vLLM's multimodal processor cache, sized for one pass over distinct videos.

    The cache keeps processed videos (float32 pixel values, 4 bytes per uint8 frame value) so that
    a second request for the same video skips the processor. A job sees each video once: only its
    other requests (tasks x adapters), submitted within an engine step of the first, can hit. With
    one request per video nothing can hit, so the cache is off (vLLM's default, 4 GiB, would only
    fill up and cost a copy per video); otherwise it holds the videos that can be in flight
    (engine.max_inflight requests), with a quarter spare, each of the frames the plan feeds (the
    decoder's frame size or pixel budget). vLLM keeps one copy in the frontend and one in the engine
    core (vllm/config/multimodal.py, mm_processor_cache_gb)."""
    if spec.requests_per_clip <= 1:
        return 0.0
    clip_bytes = spec.frames_per_clip * spec.frame_pixels * 3 * 4
    clips = math.ceil(spec.options.max_inflight / spec.requests_per_clip)
    return round(max(0.01, 1.25 * clips * clip_bytes / 2**30), 3)


def sampling_params(spec: EngineSpec):
    """The job's sampling settings as vLLM SamplingParams (greedy or sampling, one sequence).
    no_repeat_ngram_size and length_penalty have no field there; the plan warns for a preset that
    sets them (caption/settings/generation.py sampling_warnings)."""
    from vllm import SamplingParams

    s, stop = spec.sampling, spec.stop
    return SamplingParams(
        temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k > 0 else -1,
        repetition_penalty=s.repetition_penalty, max_tokens=s.max_new_tokens,
        # blocks EOS and the generation config's eos ids (<|im_end|> here), as min_new_tokens does in transformers
        min_tokens=s.min_new_tokens, stop=list(stop) or None, seed=spec.options.seed,
    )


def beam_search_params(spec: EngineSpec):
    """The job's beam search as vLLM BeamSearchParams: the only knobs LLM.beam_search takes
    (vllm/sampling_params.py BeamSearchParams); the plan warns for the rest."""
    from vllm.sampling_params import BeamSearchParams

    s = spec.sampling
    return BeamSearchParams(beam_width=s.num_beams, max_tokens=s.max_new_tokens, temperature=s.temperature,
                            length_penalty=s.length_penalty)


# vLLM's counters live in prometheus_client's process-wide registry, and building an engine unregisters
# every earlier engine's (vllm/v1/metrics/loggers.py, PrometheusStatLogger -> unregister_vllm_metrics in
# vllm/v1/metrics/prometheus.py): only the newest engine of a process can report counters. Engines are
# numbered as they are built, so an older one reports none rather than another engine's.
_engines_built = 0


def _counters(llm) -> dict[str, float]:
    values = {name: 0.0 for name in COUNTERS}
    for metric in llm.get_metrics():
        if metric.name in values and hasattr(metric, "value"):
            values[metric.name] += float(metric.value)
    return values


@dataclass
class _Flight:
    """The requests of one engine run: in vLLM (id -> request, submit time), the step each clip's first
    request went in at, followers held back a step, the ids that have had a step, the steps so far."""
    inflight: dict = field(default_factory=dict)
    leaders: dict = field(default_factory=dict)
    waiting: list = field(default_factory=list)
    progressed: set = field(default_factory=set)
    steps: int = 0


def _result(request: Request, output, submitted: float, video_token_id: int | None) -> Result:
    """A finished vLLM RequestOutput as the job's Result, with the timings vLLM measured and the video
    tokens its processor put in the prompt (after pruning: the count vLLM's EVS sized them to)."""
    completion = output.outputs[0]
    metrics = getattr(output, "metrics", None)
    ttft = getattr(metrics, "first_token_latency", None) if metrics is not None else None
    n = len(completion.token_ids)
    first, last = getattr(metrics, "first_token_ts", 0.0), getattr(metrics, "last_token_ts", 0.0)
    return Result(request, text=completion.text.strip(), prompt_tokens=len(output.prompt_token_ids or ()),
                  output_tokens=n, finish_reason=completion.finish_reason,
                  generate_s=time.perf_counter() - submitted, ttft_s=ttft or None,
                  tpot_s=(last - first) / (n - 1) if n > 1 and first and last > first else None,
                  video_tokens=count_token(output.prompt_token_ids, video_token_id))


class VllmEngine:
    name = "vllm"

    def __init__(self, spec: EngineSpec):
        self.spec = spec  # what it was loaded for: a job given it checks it makes that job's captions (caption/pipeline/supervisor.py)
        apply_engine_env(spec)
        set_log_level(spec.options.log_level)
        logging.getLogger("vllm.v1.worker.cpu_worker").addFilter(DropThreadWarning())
        guard_kernel_rebind_scan()
        register_cpu_kernels_once()
        if spec.vllm.get("video_pruning_rate"):
            enable_video_pruning_on_cpu()
        from vllm import LLM

        started = time.perf_counter()
        self.llm = start_llm(lambda: LLM(**engine_args(spec)))  # the heap frozen meanwhile (vllm_fixes.py)
        self.load_s = time.perf_counter() - started
        global _engines_built
        _engines_built += 1
        self.number = _engines_built  # the newest engine of this process reports vLLM's counters
        # what the weights take: the checkpoint's tensors as stored (vLLM loads them as they are)
        self.weight_bytes = sum(f.stat().st_size for f in Path(spec.model_path).glob("*.safetensors")) or None
        self._forced_params: dict[int, object] = {}  # forced output length -> its SamplingParams
        self.clock = StageClock()
        self.steps = 0  # engine steps since reset_stats (each reads the weights once)
        self.max_inflight = spec.options.max_inflight
        self.beam_params = beam_search_params(spec) if spec.beam_search else None
        self.params = None if self.beam_params else sampling_params(spec)
        from vllm.lora.request import LoRARequest

        self.lora = {a.name: LoRARequest(a.name, a.int_id, a.path) for a in spec.adapters}
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_token_id = self.tokenizer.eos_token_id  # the one token LLM.beam_search ends a beam on
        self.video_token_id = self.tokenizer.convert_tokens_to_ids(get_family(spec.family).video_placeholder)
        self.refill = max(1, int(spec.vllm["max_num_seqs"]))
        self.speculative = spec.speculative is not None
        self._baseline = _counters(self.llm)

    @staticmethod
    def prompt_for(request: Request) -> dict:
        return {"prompt": request.prompt, "multi_modal_data": {"video": (request.frames, request.video_metadata)}}

    def _lora(self, request: Request):
        return self.lora[request.adapter] if request.adapter is not None else None

    def params_for(self, request: Request):
        """The SamplingParams `request` is generated with: the job's, or its forced length's."""
        return self.params if request.forced_output_tokens is None else self._forced(request.forced_output_tokens)

    def _submit(self, request: Request) -> str:
        """Hand one request to vLLM; returns the id its outputs will carry."""
        # enqueue runs vLLM's multimodal processor (resize, normalize, patchify) in this thread
        with self.clock("processor"):
            [internal_id] = self.llm.enqueue([self.prompt_for(request)], self.params_for(request), use_tqdm=False,
                                             lora_request=self._lora(request))
        # vLLM appends "-<8 random chars>" to the id it was given and reports outputs under
        # the id it was given, so strip the suffix (absent when randomisation is disabled)
        return internal_id.rsplit("-", 1)[0] if "-" in internal_id else internal_id

    def _forced(self, n: int):
        """The job's sampling parameters, generating exactly n tokens: end-of-sequence ignored, no
        stop strings or stop tokens (min_tokens=n masks them too), max_tokens=n."""
        if n not in self._forced_params:
            from vllm import SamplingParams

            base = self.params
            fields = {name: getattr(base, name) for name in base.__struct_fields__ if not name.startswith("_")}
            fields.update(max_tokens=n, min_tokens=n, ignore_eos=True, stop=None, stop_token_ids=None,
                          include_stop_str_in_output=False)
            self._forced_params[n] = SamplingParams(**fields)
        return self._forced_params[n]

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        if self.beam_params is not None:
            yield from self._run_beams(requests)
        else:
            yield from self._run_sampling(requests)

    def _run_beams(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Beam search through LLM.beam_search, a chunk of requests at a time: it takes video prompts
        and one LoRA request per prompt, and runs every beam of the chunk in each engine step
        (each step re-submits each beam as a one-token request; the prefix cache holds the prompt)."""
        stream = iter(requests)
        chunk_size = max(1, self.max_inflight // self.beam_params.beam_width)
        while chunk := pull(stream, chunk_size):
            try:
                yield from self._beam_chunk(chunk)
            except Exception as chunk_error:
                stop_if_raised_by_an_interrupt(chunk_error)
                if len(chunk) == 1:
                    yield Result(chunk[0], error=f"vLLM beam search failed: {type(chunk_error).__name__}: {chunk_error}")
                    continue
                for request in chunk:  # isolate the request that breaks the chunk (e.g. a too-long prompt)
                    try:
                        yield from self._beam_chunk([request])
                    except Exception as exc:
                        stop_if_raised_by_an_interrupt(exc)
                        yield Result(request, error=f"vLLM beam search failed: {type(exc).__name__}: {exc}")

    def _beam_chunk(self, chunk: list[Request]) -> list[Result]:
        started = time.perf_counter()
        outputs = self.llm.beam_search([self.prompt_for(r) for r in chunk], self.beam_params,
                                       lora_request=[self._lora(r) for r in chunk], use_tqdm=False)
        elapsed = time.perf_counter() - started
        results = []
        for request, output in zip(chunk, outputs):
            best = output.sequences[0]  # sorted best first by the length-penalised score
            prompt_len = len(best.orig_prompt["prompt_token_ids"])
            generated = best.tokens[prompt_len:]  # .tokens and .text also hold the prompt
            ended = bool(generated) and generated[-1] == self.eos_token_id
            text = reply_text(self.tokenizer, generated[:-1] if ended else generated)
            results.append(Result(request, text=text, prompt_tokens=prompt_len,
                                  output_tokens=len(generated),
                                  finish_reason=best.finish_reason or ("stop" if ended else "length"),
                                  generate_s=elapsed,
                                  video_tokens=count_token(best.orig_prompt["prompt_token_ids"], self.video_token_id)))
        return results

    def _run_sampling(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Stream requests in, results out. Requests for a clip after its first (other tasks)
        wait one engine step: by then the first has prefilled the shared system prompt and video,
        and the prefix cache serves them (scheduled in the same step, nothing is cached yet)."""
        stream, flight, exhausted = request_stream(requests), _Flight(), False
        try:
            while True:
                ready, flight.waiting = flight.waiting, []
                room = min(self.refill, self.max_inflight - len(flight.inflight)) - len(ready)
                if not exhausted and room > 0:  # top up, at most a scheduler batch at a time, with the
                    # clips decoded by now: waiting for more would stop the steps of those in flight
                    batch, exhausted = take_ready(stream, room, wait_for_one=not flight.inflight and not ready)
                    ready += batch
                yield from self._admit(ready, flight)
                if not flight.inflight:
                    if exhausted and not flight.waiting:
                        return
                    continue
                yield from self._step(flight)
        finally:  # stopped early (interrupted, fail_fast): leave nothing running in a reused engine
            if flight.inflight and self.llm is not None:
                try:
                    self.llm.llm_engine.abort_request(list(flight.inflight))
                except Exception:
                    pass

    def _admit(self, ready: list[Request], flight: "_Flight") -> Iterator[Result]:
        """Submit the ready requests, holding back a clip's followers until its leader has had a step;
        a request vLLM refuses (e.g. a prompt longer than max_model_len) comes back as an error."""
        for request in ready:
            # one clip's (or segment's) requests share its video; adapters change the KV: no sharing across them
            group = (request.key, None if request.segment is None else request.segment.index, request.adapter)
            if flight.leaders.get(group) == flight.steps and flight.inflight:
                flight.waiting.append(request)  # its leader has not been through a step yet
                continue
            flight.leaders.setdefault(group, flight.steps)
            try:
                flight.inflight[self._submit(request)] = (request, time.perf_counter())
            except Exception as exc:  # unless a signal landed in vLLM's code (caption/outcome.py)
                stop_if_raised_by_an_interrupt(exc)
                yield Result(request, error=f"vLLM rejected the request: {type(exc).__name__}: {exc}")

    def _step(self, flight: "_Flight") -> Iterator[Result]:
        """One engine step; the requests it finished, as results. A step that fails breaks the engine:
        requests that already had a step go again on the next engine (they got past prefill, where a
        request's own positions and lengths break a step); the others, the culprit among them, get
        error results, and EngineFailure hands the rest to the supervisor."""
        try:
            with self.clock("engine_step"):
                outputs = self.llm.llm_engine.step()
        except Exception as exc:  # the engine is broken now: its requests in flight are lost
            stop_if_raised_by_an_interrupt(exc)  # or a signal landed in the step: the job stops, the engine is sound
            reason = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            again = [request for rid, (request, _) in flight.inflight.items() if rid in flight.progressed]
            for rid, (request, _) in flight.inflight.items():
                if rid not in flight.progressed:
                    yield Result(request, error=f"the engine failed while this request was in flight ({reason})")
            flight.inflight.clear()
            raise EngineFailure(reason, unsubmitted=again + flight.waiting) from exc
        flight.steps += 1
        self.steps += 1
        flight.progressed.update(output.request_id for output in outputs)
        if len(flight.leaders) > 4 * self.max_inflight:  # forget clips long done
            flight.leaders = {g: s for g, s in flight.leaders.items() if s >= flight.steps - 2}
        for output in outputs:
            if output.finished and output.request_id in flight.inflight:
                request, submitted = flight.inflight.pop(output.request_id)
                flight.progressed.discard(output.request_id)
                yield _result(request, output, submitted, self.video_token_id)

    def reset_stats(self) -> None:
        self._baseline = _counters(self.llm)
        self.clock.reset()
        self.steps = 0

    @property
    def holds_counters(self) -> bool:
        """False once a later engine was built in this process (see _engines_built)."""
        return self.number == _engines_built

    def stats(self) -> dict:
        stats = {"engine_load_s": round(self.load_s, 2), "weight_bytes": self.weight_bytes,
                 "engine_stages_s": self.clock.as_dict(), "engine_steps": self.steps}
        if not self.holds_counters:
            stats.update(prefix_cache_queries=None, prefix_cache_hits=None, prefix_cache_hit_rate=None)
            if self.speculative:
                stats.update(spec_draft_tokens=None, spec_accepted_tokens=None, spec_acceptance_rate=None,
                             spec_mean_accepted_length=None)
            return stats
        now = _counters(self.llm)
        delta = {k: now[k] - self._baseline[k] for k in COUNTERS}
        queries, hits = delta["vllm:prefix_cache_queries"], delta["vllm:prefix_cache_hits"]
        stats.update(prefix_cache_queries=int(queries), prefix_cache_hits=int(hits),
                     prefix_cache_hit_rate=round(hits / queries, 4) if queries else None)
        if self.speculative:
            drafts, accepted = delta["vllm:spec_decode_num_draft_tokens"], delta["vllm:spec_decode_num_accepted_tokens"]
            steps = delta["vllm:spec_decode_num_drafts"]
            # mean accepted length: tokens a verification step yields (accepted drafts + the target's own)
            stats.update(spec_draft_tokens=int(drafts), spec_accepted_tokens=int(accepted),
                         spec_acceptance_rate=round(accepted / drafts, 4) if drafts else None,
                         spec_mean_accepted_length=round(1 + accepted / steps, 3) if steps else None)
        return stats

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                shutdown_llm(llm)
            except Exception:
                pass
