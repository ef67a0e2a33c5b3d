"""The `engine` config group (conf/engine/auto.yaml) as a typed value.

The YAML is the one home of these defaults: every key is required here, so a value written in code can
never disagree with the one a user reads in conf/engine/.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class EngineOptions:
    name: str                    # auto | vllm | hf, as the user chose it (JobConfig.engine: as the plan resolved it)
    seed: int
    max_restarts: int            # restarts of an engine that breaks mid-run before the job stops
    enable_prefix_caching: bool  # vLLM
    max_inflight: int            # vLLM: requests handed to the engine ahead of decoding
    log_level: str               # vLLM's VLLM_LOGGING_LEVEL
    batch_size: int              # transformers: requests per `generate` call (capped by the plan)
    attn_implementation: str     # transformers

    @classmethod
    def from_config(cls, cfg: dict) -> "EngineOptions":
        """Validate the `engine` group; ValueError names the `engine.<key>` to fix."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"`engine.{unknown[0]}` is not an engine option; known: {', '.join(sorted(known))}")
        missing = [f.name for f in fields(cls) if cfg.get(f.name) is None]
        if missing:
            raise ValueError(f"`engine.{missing[0]}` is missing: conf/engine/auto.yaml sets it")
        cast = {"int": int, "bool": bool, "str": str}
        options = cls(**{f.name: cast[f.type](cfg[f.name]) for f in fields(cls)})
        for key in ("max_inflight", "batch_size"):
            if getattr(options, key) <= 0:
                raise ValueError(f"`engine.{key}` must be >= 1, got {getattr(options, key)}")
        if options.max_restarts < 0:
            raise ValueError(f"`engine.max_restarts` must be >= 0, got {options.max_restarts}")
        return options
