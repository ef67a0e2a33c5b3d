"""Which engine the settings need: engine=auto leaves the choice to the planner, except where sampling,
speculative decoding or video-token pruning decide it, and engine=server refuses what only the server
decides when it starts. Part of reading the config (caption/settings/config.py), before anything loads."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from caption.settings.generation import SamplingSchema
from caption.settings.option import ConfigError


def requested_engine(cfg: DictConfig, sampling: SamplingSchema, spec: dict[str, Any] | None) -> str:
    """engine=auto leaves the choice to the planner, except where sampling, speculative decoding or
    video-token pruning decide it: beam sampling only runs on transformers, the other two only on vLLM."""
    requested = str(cfg.engine.name)
    pruned = cfg.video.prune_rate > 0  # checked: VideoSchema.check()
    if requested == "server":
        _check_server_job(cfg, sampling, spec, pruned)
        return requested
    if pruned and (requested == "hf" or sampling.beam_search and sampling.do_sample):
        raise ConfigError(f"`video.prune_rate={cfg.video.prune_rate:g}` runs on engine=vllm: transformers' generate "
                          "has no video-token pruning for these families; use engine=vllm (or auto), or "
                          "video.prune_rate=0")
    if sampling.beam_search and spec is not None:
        raise ConfigError("beam search (sampling.num_beams > 1) and speculative decoding do not go together: "
                          "set spec=none or another sampling preset")
    if sampling.beam_search and sampling.do_sample:
        # vLLM's LLM.beam_search ranks beams by the log-probabilities it asks the engine for, which vLLM
        # computes from the raw logits (vllm/entrypoints/generate/beam_search/offline.py, logprobs of
        # max_tokens=1 requests): temperature changes nothing there, so beam *sampling* is transformers'
        if requested == "vllm":
            raise ConfigError(f"`sampling={sampling.name}` samples within beam search (num_beams={sampling.num_beams}, "
                              f"temperature={sampling.temperature:g}); vLLM 0.32's LLM.beam_search "
                              "(vllm/entrypoints/generate/beam_search/offline.py) ranks beams by raw log-probabilities "
                              "and cannot sample: use engine=hf (or engine=auto), or sampling.temperature=0")
        return "hf"
    if spec is not None or pruned:
        if spec is not None and requested == "hf":
            raise ConfigError(f"`spec={spec['method']}`: speculative decoding runs on engine=vllm; use engine=vllm "
                              "(or engine=auto), or spec=none")
        return "vllm"
    return requested


def _check_server_job(cfg: DictConfig, sampling: SamplingSchema, spec: dict[str, Any] | None, pruned: bool) -> None:
    """engine=server: what the server decides when it starts cannot be asked of it per request."""
    if spec is not None:
        raise ConfigError(f"`spec={spec['method']}` with engine=server: speculative decoding is the server's (vLLM: "
                          "--speculative-config when it starts); set spec=none")
    if pruned:
        raise ConfigError(f"`video.prune_rate={cfg.video.prune_rate:g}` with engine=server: video-token pruning is the "
                          "server's (vLLM: --video-pruning-rate when it starts); set video.prune_rate=0")
    if cfg.quant.method not in ("auto", "none"):
        raise ConfigError(f"`quant={cfg.quant.method}` with engine=server: the server loads the weights it serves; "
                          "serve a quantized checkpoint there and drop the quant setting here")
    if sampling.beam_search and sampling.do_sample:
        raise ConfigError(f"`sampling={sampling.name}` samples within beam search, which vLLM's beam search cannot "
                          "(it ranks beams by raw log-probabilities): use engine=hf, or sampling.temperature=0")
    if cfg.runner.name != "local":
        raise ConfigError("`runner=ray` with engine=server: the server is where the work scales out; use "
                          "runner=local and raise engine.max_inflight (or put several servers behind one address)")
