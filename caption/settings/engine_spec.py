"""What an engine is given: one typed specification, built by the planner (caption/planning.py
`engine_spec`) from the plan and the job's validated settings. Engines read nothing else: not the job's
config, not a file path of a clip."""

from __future__ import annotations

import math
from dataclasses import dataclass

from caption.adapters import Adapter
from caption.settings.engine_schema import EngineSchema
from caption.settings.generation import SamplingSchema


@dataclass(frozen=True)
class EngineSpec:
    engine: str                       # vllm | hf | server, as the plan resolved it
    model_path: str                   # what to load: the plan's checkpoint (a quantized copy, where it chose one)
    family: str                       # vidcap_ko/families/<family>.py: processor arguments, the transformers fix
    stop: tuple[str, ...]             # generation stops at these strings (the family's)
    processor_kwargs: dict            # the family's, passed to its processor by both engines
    vllm: dict | None                 # the plan's keyword arguments for vllm.LLM (engine=vllm)
    hf: dict | None                   # the plan's transformers settings (engine=hf)
    env: dict                         # the tier's vLLM environment, exported before vLLM loads
    options: EngineSchema             # seed, prefix caching, requests in flight, log level, batch size, attention
    sampling: SamplingSchema
    adapters: tuple[Adapter, ...]     # LoRA adapters every request may name
    lora_max_rank: int
    speculative: dict | None          # vLLM's speculative_config; None: off
    requests_per_clip: int            # tasks x variants: the requests that share one clip's processed video
    frames_per_clip: int              # the most frames a clip is given (video.num_frames, or max_frames)
    frame_pixels: int                 # the most pixels one frame has (the decoder's size or pixel budget)
    server: EngineSchema | None = None  # engine=server: where it is, how long and how often to try
    served_model: str | None = None   # engine=server: the name the server serves the model under

    @property
    def beam_search(self) -> bool:
        return self.sampling.beam_search

    @property
    def hf_batch_size(self) -> int:
        """transformers: requests per `generate` call, engine.batch_size capped by the plan (its memory)."""
        return min(self.options.batch_size, (self.hf or {}).get("max_batch_size") or self.options.batch_size)

    @property
    def first_clips(self) -> int:
        """The clips the engine takes at its start, before it has generated anything: a transformers batch;
        vLLM's first scheduler batch (max_num_seqs, at most engine.max_inflight); a server's requests in
        flight. runner=local decodes this many while the engine loads (caption/runners/local.py)."""
        if self.engine == "hf":
            requests = self.hf_batch_size
        elif self.engine == "vllm" and self.vllm:
            requests = min(self.options.max_inflight, int(self.vllm["max_num_seqs"]))
        else:
            requests = self.options.max_inflight
        return math.ceil(requests / max(1, self.requests_per_clip))
