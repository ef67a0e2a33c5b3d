"""The `engine` config group (conf/engine/auto.yaml) as typed values: the options every engine reads
(EngineOptions), and where an OpenAI-compatible server is and how to talk to it (ServerOptions,
engine=server only).

The YAML presets and caption/schema.py EngineSchema are the one home of these defaults: every key is
required here, so a value written in code can never disagree with the one a user reads in conf/engine/.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from urllib.parse import urlsplit, urlunsplit

# engine.prepare_ahead: auto prepares the next batch while one generates where the engine computes on a GPU;
# on a CPU the engine's threads already use every core, and preparing beside them measured slower
# (docs/benchmarks.md, "The transformers engine prepares the next batch")
PREPARE_AHEAD = ("auto", "always", "never")


@dataclass(frozen=True)
class EngineOptions:
    name: str                    # auto | vllm | hf | server, as the user chose it (JobConfig.engine: as the plan resolved it)
    seed: int
    max_restarts: int            # restarts of an engine that breaks mid-run before the job stops
    enable_prefix_caching: bool  # vLLM
    max_inflight: int            # vLLM: requests handed to the engine ahead of decoding; server: requests in flight
    log_level: str               # vLLM's VLLM_LOGGING_LEVEL
    batch_size: int              # transformers: requests per `generate` call (capped by the plan)
    attn_implementation: str     # transformers
    prepare_ahead: str           # transformers: the next batch prepared while one generates (PREPARE_AHEAD)

    @classmethod
    def from_config(cls, cfg: dict) -> "EngineOptions":
        """Validate the `engine` group; ValueError names the `engine.<key>` to fix."""
        known = {f.name for f in fields(cls)} | set(SERVER_KEYS)
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
        if options.prepare_ahead not in PREPARE_AHEAD:
            raise ValueError(f"`engine.prepare_ahead` must be one of {', '.join(PREPARE_AHEAD)}, "
                             f"got {options.prepare_ahead!r}")
        return options


@dataclass(frozen=True)
class ServerOptions:
    """engine=server: the server's API, the model it serves, the variable holding its key, and how
    long and how often a request is tried (caption/schema.py EngineSchema says each)."""
    base_url: str                # as given: scheme://host:port/path, no credentials (public_url strips nothing else)
    served_model: str | None     # None: the one base model the server serves
    api_key_env: str | None      # the environment variable holding the API key; None: no key
    timeout_s: float
    retries: int
    retry_wait_s: float

    @classmethod
    def from_config(cls, cfg: dict) -> "ServerOptions":
        """Validate the server keys of the `engine` group; ValueError names the `engine.<key>` to fix."""
        url = cfg.get("base_url")
        if not url:
            raise ValueError("engine=server needs `engine.base_url`: the server's OpenAI-compatible API, e.g. "
                             "engine.base_url=http://gpu-box:8000/v1")
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"`engine.base_url={url}` is not an http(s) URL with a host, e.g. http://gpu-box:8000/v1")
        if parts.username is not None or parts.password is not None:
            # Hydra writes every setting into the run folder (.hydra/): a secret must not be one
            raise ValueError("`engine.base_url` holds credentials (user:password@): they would be written into the "
                             "run folder's config; put the key in an environment variable and name it in "
                             "engine.api_key_env")
        env = cfg.get("api_key_env")
        if env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(env)):  # a key given in its place: not echoed
            raise ValueError("`engine.api_key_env` must name an environment variable (letters, digits, _), "
                             "not hold the key itself")
        if env and os.environ.get(str(env)) is None:
            raise ValueError(f"`engine.api_key_env={env}` names an environment variable that is not set: export "
                             f"{env}=<the server's API key>, or set engine.api_key_env=null for a server without one")
        options = cls(base_url=str(url).rstrip("/"), served_model=cfg.get("served_model") or None,
                      api_key_env=str(env) if env else None, timeout_s=float(cfg["timeout_s"]),
                      retries=int(cfg["retries"]), retry_wait_s=float(cfg["retry_wait_s"]))
        if options.timeout_s <= 0:
            raise ValueError(f"`engine.timeout_s` must be > 0, got {options.timeout_s:g}")
        if options.retries < 0 or options.retry_wait_s < 0:
            raise ValueError("`engine.retries` and `engine.retry_wait_s` must be >= 0")
        return options

    @property
    def public_url(self) -> str:
        """The API's address as records and summaries name it: no query or fragment (the config refuses
        credentials in it)."""
        parts = urlsplit(self.base_url)
        return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/"), "", ""))

    def api_key(self) -> str | None:
        """Read when a connection is made, never stored with the settings."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


SERVER_KEYS = tuple(f.name for f in fields(ServerOptions))
