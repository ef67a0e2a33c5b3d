"""transformers engine: batched `generate`, the fallback engine and the baseline for vLLM.

It takes the same requests (prompt text + frames + metadata) and runs them through the model's
own processor, so for greedy decoding its captions equal vLLM's on the same inputs.

On a GPU the processor's pixel work (rescale, normalize, cut into patches) runs on the GPU
(`engine.processor_device`: auto): the frames go there as uint8 and the pixel values come out equal to
the CPU's, bit for bit. And (`engine.prepare_ahead`: auto) while one batch generates, a helper thread
takes the next batch from the request stream and runs the processor on it, so the device does not wait
for the CPU between batches. On one H100, 7B shape, 64 clips: with the processor on the CPU and no
overlap the engine idled 9.9-12.8% of the job; with both (and the first batch decoded while the engine
loads: caption/runners/local.py), 0.7-0.8%, 16% more videos/s than without them in the same lease
(docs/benchmarks.md). The processor on the CPU beside `generate` had doubled the time per output token
(20 -> 41 ms: its threads and the GIL against the launch loop), so the overlap paid only once that work
moved to the GPU. On a CPU the helper prepares the next batch after `generate` returns: there the
engine's threads use every core, and work beside them slowed the steps more than it saved.

Batches are formed exactly as before (the same requests, in the same order), so the captions do not
change. Which clips share a batch follows the order the decoders finish in, with or without this: on the
H100 no batch of one run held the same clips as the other run's, and 24-26 of 64 random-weight bf16
captions differed between runs. Only one thread touches the request stream at a time: the helper while
`generate` runs, and it is done before results go back to the job.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Iterator

from caption.engines.base import Request, Result, StageClock, count_token, pull, reply_text
from caption.engines.hf_generate import RowLengths, static_cache
from caption.outcome import stop_if_raised_by_an_interrupt
from caption.settings.engine_spec import EngineSpec
from vidcap_ko.families import get_family


def _with_adapters(model, adapters):
    """The model with every LoRA adapter of the job loaded under its name (peft)."""
    if not adapters:
        return model
    from peft import PeftModel

    first, *rest = adapters
    model = PeftModel.from_pretrained(model, first.path, adapter_name=first.name)
    for adapter in rest:
        model.load_adapter(adapter.path, adapter_name=adapter.name)
    return model


def _bitsandbytes_config(settings: dict | None, torch):
    """The plan's bitsandbytes settings (nf4 / int8, quantized while loading) as transformers wants them."""
    if not settings:
        return None
    from transformers import BitsAndBytesConfig

    settings = dict(settings)
    if isinstance(settings.get("bnb_4bit_compute_dtype"), str):
        settings["bnb_4bit_compute_dtype"] = getattr(torch, settings["bnb_4bit_compute_dtype"])
    return BitsAndBytesConfig(**settings)


@dataclass
class _Prepared:
    """A batch ready for `generate`: its inputs on the device (or why the processor refused them), and
    the seconds the helper spent taking it from the stream (waiting on decoders) and processing it."""
    batch: list[Request]
    inputs: object = None
    error: Exception | None = None
    pull_s: float = 0.0
    prepare_s: float = 0.0
    stream_ended: bool = False  # no batch: the stream had no more (its last pull can wait on decoders too)


class HfEngine:
    name = "hf"

    def __init__(self, spec: EngineSpec, model=None, processor=None):
        self.spec = spec  # what it was loaded for: a job given it checks it makes that job's captions (caption/pipeline/supervisor.py)
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        family = get_family(spec.family)
        if family.transformers_fix:  # e.g. Qwen2.5-VL's positions as vLLM and Qwen compute them
            family.transformers_fix()
        started = time.perf_counter()
        self.torch = torch
        torch.manual_seed(spec.options.seed)
        plan, stop = spec.hf, spec.stop
        self.device = "cuda" if plan["device"] == "cuda" and torch.cuda.is_available() else "cpu"
        if self.device == "cuda" and plan.get("memory_fraction"):  # rehearsing a smaller tier
            torch.cuda.set_per_process_memory_fraction(plan["memory_fraction"])
        self.processor = processor or AutoProcessor.from_pretrained(spec.model_path)
        self.video_token_id = self.processor.tokenizer.convert_tokens_to_ids(family.video_placeholder)
        self.processor.tokenizer.padding_side = "left"  # generation appends on the right
        if model is None:
            model = AutoModelForImageTextToText.from_pretrained(
                spec.model_path, dtype=getattr(torch, plan["dtype"]),
                attn_implementation=spec.options.attn_implementation,
                quantization_config=_bitsandbytes_config(plan.get("quantization_config"), torch))
        model = model if plan.get("quantization_config") else model.to(self.device)
        self.model = _with_adapters(model, spec.adapters).eval()
        self.has_adapters = bool(spec.adapters)
        self.batch_size = spec.hf_batch_size
        ahead = spec.options.prepare_ahead  # auto: on a GPU (caption/settings/engine_schema.py PREPARE_AHEAD)
        self.prepare_ahead = ahead == "always" or (ahead == "auto" and self.device == "cuda")
        # auto: the processor's pixel work on the engine's device (caption/settings/engine_schema.py PROCESSOR_DEVICE)
        self.processor_device = self.device if spec.options.processor_device == "auto" else "cpu"
        self.sampling = spec.sampling
        self.static_cache = static_cache(spec, self.device) if spec.options.compile_static_cache else {}
        self.processor_kwargs = spec.processor_kwargs
        tok = self.processor.tokenizer
        self.stop_ids = [tok.convert_tokens_to_ids(s) for s in stop if s in tok.get_vocab()]
        self.load_s = time.perf_counter() - started
        self.batches = 0
        self.steps = 0  # forward passes of generate (one per new token of a batch) since reset_stats
        # output positions those passes computed: every row of a batch runs until its longest row is done,
        # so this minus the output tokens is the static batch's padding (vLLM computes no such rows)
        self.output_positions = 0
        self.clock = StageClock()
        # the first batch waits whole (nothing generates before it to hide its requests and processor):
        # on one H100 it was most of what the 7B job's engine idled (docs/benchmarks.md)
        self.first_batch_s: dict[str, float] | None = None

    def _generate_kwargs(self) -> dict:
        s = self.sampling
        kwargs = dict(max_new_tokens=s.max_new_tokens, min_new_tokens=s.min_new_tokens or None,
                      repetition_penalty=s.repetition_penalty, num_beams=s.num_beams,
                      do_sample=s.do_sample, pad_token_id=self.processor.tokenizer.pad_token_id)
        if s.do_sample:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or None)
        if s.no_repeat_ngram_size:  # over the whole sequence, prompt included (NoRepeatNGramLogitsProcessor)
            kwargs["no_repeat_ngram_size"] = s.no_repeat_ngram_size
        if s.beam_search:  # transformers warns when these are set without beams
            kwargs.update(length_penalty=s.length_penalty, early_stopping=s.early_stopping)
        kwargs.update(self.static_cache)
        if self.stop_ids:
            eos = self.model.generation_config.eos_token_id
            eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
            kwargs["eos_token_id"] = sorted(set(eos) | set(self.stop_ids))
        return kwargs

    def _adapter_context(self, adapter: str | None):
        """Run a batch with one adapter active, or with none (the base model)."""
        import contextlib

        if not self.has_adapters:
            return contextlib.nullcontext()
        if adapter is None:
            return self.model.disable_adapter()
        self.model.set_adapter(adapter)
        return contextlib.nullcontext()

    def _row_lengths(self, batch: list[Request], width: int, kwargs: dict) -> RowLengths:
        """Per-row lengths: forced rows get exactly their n (generation stops with the last row)."""
        forced = [r.forced_output_tokens for r in batch]
        stops = set(kwargs.get("eos_token_id") or []) | set(self.stop_ids)
        eos = self.model.generation_config.eos_token_id
        stops |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        rows = RowLengths(self.torch, width, forced, self.sampling.max_new_tokens, sorted(stops))
        if any(n is not None for n in forced):
            from transformers import LogitsProcessorList

            kwargs.update(max_new_tokens=int(rows.limit.max()), min_new_tokens=None,
                          logits_processor=LogitsProcessorList([rows.logits_processor()]))
        from transformers import StoppingCriteriaList

        kwargs["stopping_criteria"] = StoppingCriteriaList([rows.stopping()])
        return rows

    def _inputs(self, batch: list[Request]):
        """The processor's tensors for a batch, on the engine's device. On a GPU, copies go through pinned
        memory, non-blocking, on the default stream: the helper thread does not wait for them, and the
        next `generate`, queued on the same stream after them, does. With the processor on the GPU
        (engine.processor_device), the frames go there as uint8 (a quarter of the float32 pixel values'
        bytes) and the processor's pixel work runs there: it takes the device from its input videos
        (transformers' video_processing_utils.py `_prepare_input_videos`); only the token ids come after."""
        from transformers.video_utils import VideoMetadata

        metadata = [VideoMetadata(**{k: v for k, v in r.video_metadata.items() if k != "do_sample_frames"})
                    for r in batch]
        videos = [r.frames for r in batch]
        if self.processor_device != "cpu":
            videos = [self.torch.as_tensor(frames).pin_memory().to(self.processor_device, non_blocking=True)
                      for frames in videos]
        inputs = self.processor(text=[r.prompt for r in batch], videos=videos,
                                video_metadata=metadata, do_sample_frames=False, **self.processor_kwargs,
                                padding=True, return_tensors="pt")
        if self.device == "cpu":
            return inputs
        for key, value in inputs.items():
            if isinstance(value, self.torch.Tensor) and value.device.type == "cpu":
                inputs[key] = value.pin_memory().to(self.device, non_blocking=True)
        return inputs

    def _run_batch(self, batch: list[Request]) -> list[Result]:
        """Process and generate one batch here and now (a request alone, after its batch failed)."""
        with self.clock("processor"):
            inputs = self._inputs(batch)
        return self._generate(batch, inputs)

    def _generate(self, batch: list[Request], inputs) -> list[Result]:
        """`generate` on a batch's inputs; generate_s and TTFT count from the call (its inputs are ready)."""
        started = time.perf_counter()
        width = inputs["input_ids"].shape[1]
        kwargs = self._generate_kwargs()
        rows = self._row_lengths(batch, width, kwargs)
        with self.torch.inference_mode(), self._adapter_context(batch[0].adapter), self.clock("engine_step"):
            out = self.model.generate(**inputs, **kwargs)
        new_tokens = out[:, width:]
        elapsed = time.perf_counter() - started
        results = []
        pad = self.processor.tokenizer.pad_token_id
        eos = set(self._generate_kwargs().get("eos_token_id") or [])
        steps = rows.step_times
        for row, request in enumerate(batch):
            ids = new_tokens[row].tolist()
            if request.forced_output_tokens is not None:
                kept, stopped = ids[:request.forced_output_tokens], None
            else:
                stopped = next((i for i, t in enumerate(ids) if t in eos), None)
                kept = ids[:stopped] if stopped is not None else [t for t in ids if t != pad]
            text = reply_text(self.processor.tokenizer, kept)
            n = len(kept) + (stopped is not None)
            results.append(Result(request, text=text,
                                  prompt_tokens=int(inputs["attention_mask"][row].sum()),
                                  video_tokens=count_token(inputs["input_ids"][row].tolist(), self.video_token_id),
                                  output_tokens=n,
                                  finish_reason="stop" if stopped is not None else "length",
                                  generate_s=elapsed, ttft_s=steps[0] - started if steps else None,
                                  tpot_s=(steps[min(n, len(steps)) - 1] - steps[0]) / (n - 1)
                                  if n > 1 and len(steps) > 1 else None))
        self.batches += 1
        self.steps += len(steps)
        self.output_positions += len(batch) * len(steps)
        return results

    def _batches(self, requests: Iterable[Request]) -> Iterator[list[Request]]:
        """Batches of one adapter each (peft applies one adapter to a whole batch)."""
        if not self.has_adapters:
            stream = iter(requests)
            while batch := pull(stream, self.batch_size):
                yield batch
            return
        buckets: dict[str | None, list[Request]] = {}
        for request in requests:
            bucket = buckets.setdefault(request.adapter, [])
            bucket.append(request)
            if len(bucket) == self.batch_size:
                yield buckets.pop(request.adapter)
        yield from (bucket for bucket in buckets.values() if bucket)

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        batches = self._batches(requests)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-next-batch") as helper:
            ahead: Future | None = helper.submit(self._prepare_next, batches)
            try:
                ready = self._collect(ahead, beside=False)
                while ready is not None:
                    if self.prepare_ahead:
                        ahead = helper.submit(self._prepare_next, batches)  # beside this batch's generate
                    results = self._results(ready)
                    if not self.prepare_ahead:
                        ahead = helper.submit(self._prepare_next, batches)  # after it: nothing beside it
                    ready = self._collect(ahead, beside=self.prepare_ahead)  # the stream is the helper's till here
                    ahead = None
                    yield from results
            finally:
                if ahead is not None:  # stopped mid-batch: let the helper finish with the stream first
                    ahead.exception()

    def _prepare_next(self, batches: Iterator[list[Request]]) -> _Prepared:
        """The helper thread's work: the next batch from the stream, through the processor."""
        started = time.perf_counter()
        batch = next(batches, None)
        pulled = time.perf_counter()
        if batch is None:
            return _Prepared([], pull_s=pulled - started, stream_ended=True)
        prepared = _Prepared(batch, pull_s=pulled - started)
        try:
            prepared.inputs = self._inputs(batch)
        except Exception as exc:  # one request the processor cannot take: run them one by one
            prepared.error = exc
        prepared.prepare_s = time.perf_counter() - pulled
        return prepared

    def _collect(self, ahead: Future, beside: bool) -> _Prepared | None:
        """Wait for the helper's batch. Where it ran `beside` a generate, the wait is the part of its work
        the generate did not hide: its last seconds count as the processor stage, any before them as
        waiting on decoders, and the rest is counted apart (caption/summary/tally.py stage_breakdown takes it out of the
        job's stages). Otherwise all of it kept the engine waiting: the processor stage, and the job's
        decode wait (the request stream times that itself)."""
        started = time.perf_counter()
        prepared = ahead.result()
        waited = time.perf_counter() - started
        if prepared.stream_ended:  # the last pull, beside the last generate: its decoder wait was hidden too
            if beside:
                self.clock.seconds["decode_wait_beside_step"] += max(0.0, prepared.pull_s - waited)
            return None
        if self.first_batch_s is None:
            self.first_batch_s = {"requests": prepared.pull_s, "processor": prepared.prepare_s}
        if not beside:
            self.clock.seconds["processor"] += prepared.prepare_s
            return prepared
        shown_prepare = min(waited, prepared.prepare_s)
        self.clock.seconds["processor"] += shown_prepare
        self.clock.seconds["processor_beside_step"] += prepared.prepare_s - shown_prepare
        self.clock.seconds["decode_wait_beside_step"] += max(0.0, prepared.pull_s - (waited - shown_prepare))
        return prepared

    def _results(self, ready: _Prepared) -> list[Result]:
        """A prepared batch generated; a batch that fails runs again one request at a time, so the
        request that breaks it fails alone."""
        batch = ready.batch
        try:
            if ready.error is not None:
                raise ready.error
            return self._generate(batch, ready.inputs)
        except Exception as batch_error:
            stop_if_raised_by_an_interrupt(batch_error)  # a signal inside transformers: the job stops (caption/outcome.py)
            if len(batch) == 1:
                return [Result(batch[0], error=f"transformers generate failed: "
                                               f"{type(batch_error).__name__}: {batch_error}")]
        results = []
        for request in batch:
            try:
                results.extend(self._run_batch([request]))
            except Exception as exc:
                stop_if_raised_by_an_interrupt(exc)
                results.append(Result(request, error=f"transformers generate failed: {type(exc).__name__}: {exc}"))
        return results

    def reset_stats(self) -> None:
        self.batches = 0
        self.steps = 0
        self.output_positions = 0
        self.first_batch_s = None
        self.clock.reset()

    def stats(self) -> dict:
        return {"engine_load_s": round(self.load_s, 2), "batches": self.batches,
                "compiled_static_cache": bool(self.static_cache),
                "engine_stages_s": self.clock.as_dict(), "engine_steps": self.steps,
                # of the seconds the engine idled: waiting for the first batch's requests (decoders, building
                # them), then on its processor
                "first_batch_wait_s": ({k: round(v, 3) for k, v in self.first_batch_s.items()}
                                       if self.first_batch_s is not None else None),
                "output_positions_computed": self.output_positions,
                "weight_bytes": int(self.model.get_memory_footprint()) if self.model is not None else None}

    def close(self) -> None:
        self.model = None
