"""The `engine` config group (conf/engine/*.yaml): EngineSchema declares each key once (type, default,
help) and is the typed object every engine reads (caption/settings/config.py makes it with OmegaConf.to_object),
engine=server included: where the server is and how to talk to it (check_server, public_url, api_key).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit, urlunsplit

from caption.settings.option import ConfigError, at_least, one_of, option, preset_key

# engine.prepare_ahead: auto prepares the next batch while one generates where the engine computes on a GPU;
# on a CPU the engine's threads already use every core, and preparing beside them measured slower
# (docs/benchmarks.md, "The transformers engine prepares the next batch")
PREPARE_AHEAD = ("auto", "always", "never")
# engine.processor_device: auto runs the processor's pixel work (rescale, normalize, patches) on the engine's
# device, the frames copied there as uint8: on one H100 the same pixel values 5x sooner, and beside
# `generate` it no longer doubles the time per token as on the CPU (docs/benchmarks.md)
PROCESSOR_DEVICE = ("auto", "cpu")
BY_SERVER = {"engine.name": ("server",)}  # engine=server's own settings (caption/engines/server_engine.py)


@dataclass
class EngineSchema:
    name: str = preset_key("auto | vllm | hf | server, as the user chose it (JobConfig.engine: as the plan "
                           "resolved it)")
    seed: int = preset_key("the engines' random seed: sampled captions repeat on the same engine and settings")
    max_restarts: int = preset_key("restarts of an engine that breaks mid-run before the job stops (exit 4)")
    enable_prefix_caching: bool = preset_key("vLLM: requests for one video share the KV cache of the system "
                                             "prompt and video tokens", {"engine.name": ("vllm",)})
    max_inflight: int = preset_key("vLLM: requests handed to the engine ahead of decoding (bounds the memory "
                                   "frames take); server: requests in flight", {"engine.name": ("vllm", "server")})
    log_level: str = preset_key("vLLM's own log level (VLLM_LOGGING_LEVEL)", {"engine.name": ("vllm",)})
    batch_size: int = preset_key("transformers: requests per `generate` call (capped by the plan)",
                                 {"engine.name": ("hf",)})
    attn_implementation: str = preset_key("transformers: the attention kernel (sdpa, eager, flash_attention_2)",
                                          {"engine.name": ("hf",)})
    prepare_ahead: str = preset_key("transformers: the next batch prepared while one generates: auto (on a "
                                    "GPU), always, never", {"engine.name": ("hf",)})
    processor_device: str = option("auto", "transformers: where the processor turns frames into the model's "
                                           "pixel values: auto (the engine's device: a GPU where it runs on one; "
                                           "the frames go there as uint8), cpu", {"engine.name": ("hf",)})
    compile_static_cache: bool = option(False, "transformers: a static KV cache and the decode step compiled by "
                                               "torch.compile: 1.7x fewer ms per output token in a 7B job on one "
                                               "H200 (batch 16), after ~36 s compiling at the first batch and again "
                                               "for each new batch size: pays after ~50 batches of 64-token "
                                               "captions, ~14 of 200 (docs/benchmarks.md)",
                                        {"engine.name": ("hf",)})
    # engine=server (conf/engine/server.yaml): an OpenAI-compatible server runs the model; the job sends it requests
    base_url: Optional[str] = option(None, "engine=server: the server's OpenAI-compatible API, e.g. "
                                           "http://gpu-box:8000/v1 (no credentials in it: engine.api_key_env)",
                                     BY_SERVER)
    served_model: Optional[str] = option(None, "engine=server: the model name the server serves (its /v1/models "
                                               "lists them); null: the one base model it serves", BY_SERVER)
    api_key_env: Optional[str] = option(None, "engine=server: the environment variable holding the server's API "
                                              "key (sent as a bearer token, written nowhere); null: no key", BY_SERVER)
    timeout_s: float = option(300.0, "engine=server: seconds one request may take, its wait in the server's queue "
                                     "included; then it is tried again, and after the retries it is an error record",
                              BY_SERVER)
    retries: int = option(4, "engine=server: tries after the first for a request that met a connection error, a "
                             "timeout, 429 or 5xx", BY_SERVER)
    retry_wait_s: float = option(1.0, "engine=server: the wait before the first retry, doubled for each next one "
                                      "(at most 30 s); a 429's Retry-After is kept", BY_SERVER)

    def check(self) -> None:
        """The ranges Hydra's types do not say; ConfigError names the `engine.<key>` to fix."""
        for key in ("max_inflight", "batch_size"):
            at_least(getattr(self, key), f"engine.{key}", 1, inclusive=True)
        at_least(self.max_restarts, "engine.max_restarts", inclusive=True)
        one_of(self.prepare_ahead, PREPARE_AHEAD, "engine.prepare_ahead")
        one_of(self.processor_device, PROCESSOR_DEVICE, "engine.processor_device")

    def check_server(self) -> None:
        """engine=server's keys: ConfigError names the `engine.<key>` to fix. The URL loses a trailing slash,
        an empty served_model or api_key_env is none."""
        url = self.base_url
        if not url:
            raise ConfigError("engine=server needs `engine.base_url`: the server's OpenAI-compatible API, e.g. "
                              "engine.base_url=http://gpu-box:8000/v1")
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"`engine.base_url={url}` is not an http(s) URL with a host, e.g. http://gpu-box:8000/v1")
        if parts.username is not None or parts.password is not None:
            # Hydra writes every setting into the run folder (.hydra/): a secret must not be one
            raise ConfigError("`engine.base_url` holds credentials (user:password@): they would be written into the "
                              "run folder's config; put the key in an environment variable and name it in "
                              "engine.api_key_env")
        env = self.api_key_env
        if env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(env)):  # a key given in its place: not echoed
            raise ConfigError("`engine.api_key_env` must name an environment variable (letters, digits, _), "
                              "not hold the key itself")
        if env and os.environ.get(str(env)) is None:
            raise ConfigError(f"`engine.api_key_env={env}` names an environment variable that is not set: export "
                              f"{env}=<the server's API key>, or set engine.api_key_env=null for a server without one")
        if self.timeout_s <= 0:
            raise ConfigError(f"`engine.timeout_s` must be > 0, got {self.timeout_s:g}")
        if self.retries < 0 or self.retry_wait_s < 0:
            raise ConfigError("`engine.retries` and `engine.retry_wait_s` must be >= 0")
        self.base_url, self.served_model = str(url).rstrip("/"), self.served_model or None
        self.api_key_env = str(env) if env else None

    @property
    def public_url(self) -> str:
        """The API's address as records and summaries name it: no query or fragment (the config refuses
        credentials in it)."""
        parts = urlsplit(self.base_url or "")
        return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/"), "", ""))

    def api_key(self) -> str | None:
        """Read when a connection is made, never stored with the settings."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

