"""Talking to an OpenAI-compatible server (engine=server): the models it serves, one chat-completions
request tried again where that can help, and what its answers and failures mean for a record.

How the frames travel. vLLM's chat API takes a `video_url` whose data URL of media type `video/jpeg`
holds the frames themselves, base64 images joined by commas, and opens each with PIL, which reads the
format from the bytes (vllm/multimodal/media/video.py VideoMediaIO.load_base64, media/image.py): PNG
frames arrive pixel for pixel. The request's `media_io_kwargs` give the frames' metadata as the job's
decoder measured it (fps, frame indices, total frames, duration, no resampling) and its
`mm_processor_kwargs` the model family's processor arguments, so the server's processor sees what the
in-process vLLM engine sees. vLLM takes those two fields only when started with
--trust-request-mm-kwargs (vllm/entrypoints/generate/base/protocol.py validate_request_mm_kwargs); the
alternative, a re-encoded MP4, would be decoded and sampled again by the server's own video loader.
"""

from __future__ import annotations

import base64
import io
import threading
import time
from dataclasses import dataclass

import httpx
import numpy as np

from caption.prompts import SYSTEM_PROMPT_KO, instruction_text
from caption.settings.engine_schema import EngineSchema

MAX_WAIT_S = 30.0  # the longest wait between two tries
CONNECT_TIMEOUT_S = 10.0
TRUST_FLAG = "--trust-request-mm-kwargs"


class ServerError(Exception):
    """A request the server refused, or did not answer in time, after its tries: one line, the server's reason."""


class ServerGone(ServerError):
    """The server could not be reached at all (connection refused, reset, closed) after the tries."""


@dataclass(frozen=True)
class Served:
    """What the server said about the model the job uses (its /models entry)."""
    model: str                   # the name requests carry
    root: str | None             # what the server loaded (vLLM: the path or hub id it was started with)
    max_model_len: int | None
    models: tuple[str, ...]      # every name it serves (base models and LoRA adapters)

    def as_dict(self, options: EngineSchema) -> dict:
        """The plan's `server` block: where, what, and how the key is found (its variable's name only)."""
        return {"base_url": options.public_url, "served_model": self.model, "root": self.root,
                "max_model_len": self.max_model_len, "api_key_env": options.api_key_env}


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def connect(options: EngineSchema, connections: int) -> httpx.Client:
    """A client for the server's API holding up to `connections` connections, the key in its headers."""
    key = options.api_key()
    return httpx.Client(base_url=options.base_url + "/", headers={"Authorization": f"Bearer {key}"} if key else None,
                        timeout=httpx.Timeout(options.timeout_s, connect=min(CONNECT_TIMEOUT_S, options.timeout_s)),
                        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections))


def server_reason(response: httpx.Response) -> str:
    """The server's own words for a refusal: vLLM and SGLang answer {"error": {"message": ...}} or
    {"message": ...}, TGI {"error": "..."}; anything else, the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return one_line(response.text or response.reason_phrase, 300)
    error = body.get("error") if isinstance(body, dict) else None
    message = (error.get("message") if isinstance(error, dict) else error) or (
        body.get("message") if isinstance(body, dict) else None)
    return one_line(message or response.text, 300)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def call(client: httpx.Client, method: str, path: str, options: EngineSchema, body: dict | None = None,
         stop: threading.Event | None = None, counts: dict | None = None) -> dict:
    """The server's JSON answer to one call, tried again (options.retries times, waits doubling from
    retry_wait_s, a 429's Retry-After kept) after a connection error, a timeout, 429 or 5xx. Raises
    ServerGone where the server could not be reached, ServerError with its reason where it refused or
    never answered in time. `stop` set: give up at once (another request found the server gone)."""
    tries = 0
    while True:
        tries += 1
        wait = None
        try:
            response = client.request(method, path, json=body)
            if response.status_code < 400:
                try:
                    return response.json()
                except ValueError:
                    raise ServerError(f"the server answered {response.status_code} with no JSON: "
                                      f"{one_line(response.text, 200)}") from None
            failure: ServerError = ServerError(f"the server answered {response.status_code}: {server_reason(response)}")
            again = response.status_code == 429 or response.status_code >= 500
            wait = _retry_after(response)
        except httpx.ConnectTimeout:
            failure, again = ServerGone(f"no connection within {CONNECT_TIMEOUT_S:g} s"), True
        except httpx.TimeoutException:
            failure, again = ServerError(f"no answer within engine.timeout_s={options.timeout_s:g} s"), True
        except httpx.TransportError as exc:  # refused, reset, closed: nobody is there (any more)
            failure, again = ServerGone(one_line(f"{type(exc).__name__}: {exc}", 200)), True
        if not again or tries > options.retries or (stop is not None and stop.is_set()):
            if tries > 1:
                failure.args = (f"{failure.args[0]} ({tries} tries)",)
            raise failure
        if counts is not None:
            counts["retries"] = counts.get("retries", 0) + 1
        wait = min(MAX_WAIT_S, options.retry_wait_s * 2 ** (tries - 1) if wait is None else wait)
        if stop is not None:
            if stop.wait(wait):
                raise failure
        else:
            time.sleep(wait)


def served_model(client: httpx.Client, options: EngineSchema, adapters: tuple[str, ...] = ()) -> Served:
    """The model the job's requests name, as the server lists it (GET /models); ServerError in one line
    where it serves another, none, several to choose from, or not the job's LoRA adapters."""
    where = options.public_url
    try:
        listed = call(client, "GET", "models", options)
    except ServerGone as exc:
        raise ServerGone(f"cannot reach the server at engine.base_url={where} ({exc})") from None
    except ServerError as exc:
        raise ServerError(f"{where}/models: {exc}; is engine.base_url the API's root (e.g. http://host:8000/v1), "
                          "and engine.api_key_env the variable holding its key?") from None
    entries = [m for m in (listed.get("data") or []) if isinstance(m, dict) and m.get("id")]
    names = tuple(str(m["id"]) for m in entries)
    if not names:
        raise ServerError(f"the server at {where} lists no models at {where}/models")
    if options.served_model is not None:
        chosen = next((m for m in entries if m["id"] == options.served_model), None)
        if chosen is None:
            raise ServerError(f"`engine.served_model={options.served_model}` is not served at {where}; it serves: "
                              f"{', '.join(names)}")
    else:
        bases = [m for m in entries if not m.get("parent")]  # vLLM lists LoRA adapters with their base as parent
        if len(bases) != 1:
            raise ServerError(f"the server at {where} serves {', '.join(names)}: name the one to use in "
                              "engine.served_model")
        chosen = bases[0]
    missing = [a for a in adapters if a not in names]
    if missing:
        raise ServerError(f"LoRA adapter {missing[0]} is not served at {where} (it serves: {', '.join(names)}); "
                          f"start vLLM with --enable-lora --lora-modules {missing[0]}=<adapter folder>")
    length = chosen.get("max_model_len")
    return Served(model=str(chosen["id"]), root=chosen.get("root"),
                  max_model_len=int(length) if isinstance(length, int) else None, models=names)


def frames_url(frames: np.ndarray) -> str:
    """The frames as vLLM's `video/jpeg` data URL, each frame a PNG (module docstring: why PNG)."""
    from PIL import Image

    parts = []
    for frame in frames:
        buffer = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(frame)).save(buffer, format="PNG", compress_level=1)
        parts.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    return "data:video/jpeg;base64," + ",".join(parts)


def media_kwargs(frames: np.ndarray, metadata: dict) -> dict:
    """The frames' metadata as vLLM's video loader takes it per request: every frame sent is used
    (num_frames), nothing is sampled again, and fps, indices and duration are the decoder's."""
    return {"video": {"num_frames": int(len(frames)), "fps": float(metadata["fps"]),
                      "frames_indices": [int(i) for i in metadata["frames_indices"]],
                      "total_num_frames": int(metadata["total_num_frames"]),
                      "duration": float(metadata["duration"]), "do_sample_frames": False}}


def sampling_fields(sampling, stop: tuple[str, ...], seed: int, forced_tokens: int | None) -> dict:
    """The job's sampling as chat-completions fields (vLLM's extensions: top_k, min_tokens,
    repetition_penalty, use_beam_search, ignore_eos), every one given so that the server's defaults
    (its model's generation_config.json) change nothing: the fields the in-process vLLM engine sets
    (caption/engines/vllm_engine.py sampling_params, beam_search_params, _forced)."""
    s = sampling
    if s.beam_search:
        return {"use_beam_search": True, "n": s.num_beams, "temperature": s.temperature,
                "length_penalty": s.length_penalty, "max_tokens": s.max_new_tokens}
    fields = {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k if s.top_k > 0 else -1,
              "repetition_penalty": s.repetition_penalty, "max_tokens": s.max_new_tokens,
              "min_tokens": s.min_new_tokens, "seed": seed, "stop": list(stop) or None}
    if forced_tokens is not None:  # benchmarks: exactly n tokens, end-of-sequence and stops ignored
        fields.update(max_tokens=forced_tokens, min_tokens=forced_tokens, ignore_eos=True, stop=None)
    return fields


def chat_body(model: str, task: str, frames: np.ndarray, metadata: dict, processor_kwargs: dict,
              sampling: dict) -> dict:
    """One request: the system prompt, then the video, then the task's instruction (the order of
    caption/prompts.py; the server's chat template lays them out), with the frames' metadata."""
    body = {"model": model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT_KO},
                         {"role": "user", "content": [{"type": "video_url", "video_url": {"url": frames_url(frames)}},
                                                      {"type": "text", "text": instruction_text(task)}]}],
            "media_io_kwargs": media_kwargs(frames, metadata), **sampling}
    if processor_kwargs:
        body["mm_processor_kwargs"] = dict(processor_kwargs)
    return body


@dataclass(frozen=True)
class Answer:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    output_tokens: int


def read_answer(body: dict) -> Answer:
    """The first choice of a chat-completions answer (beam search: the best beam) and its token counts."""
    try:
        choice = body["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ServerError(f"the server's answer has no choices[0].message: {one_line(str(body), 200)}") from None
    usage = body.get("usage") or {}
    return Answer(text=text.strip(), finish_reason=choice.get("finish_reason"),
                  prompt_tokens=int(usage.get("prompt_tokens") or 0),
                  output_tokens=int(usage.get("completion_tokens") or 0))


def check_request(client: httpx.Client, options: EngineSchema, body: dict) -> None:
    """One small request shaped as the job's (two tiny frames, one output token): the server takes the
    frames and their metadata, or ServerError says what to change on it."""
    try:
        call(client, "POST", "chat/completions", options, body)
    except ServerGone:
        raise
    except ServerError as exc:
        reason = str(exc)
        if "media_io_kwargs" in reason or "mm_processor_kwargs" in reason:
            raise ServerError(f"the server at {options.public_url} refuses the frames' metadata ({reason}): start "
                              f"vLLM with {TRUST_FLAG}, so it takes the job's own frames as they are") from None
        raise ServerError(f"the server at {options.public_url} refused a test request shaped as the job's: "
                          f"{reason}") from None


def probe_body(model: str, size: int, processor_kwargs: dict) -> dict:
    """A request shaped as the job's, as small as the model takes: two grey frames of size x size."""
    frames = np.full((2, size, size, 3), 128, dtype=np.uint8)
    metadata = {"fps": 2.0, "frames_indices": [0, 1], "total_num_frames": 2, "duration": 1.0}
    return chat_body(model, "caption", frames, metadata, processor_kwargs,
                     {"temperature": 0.0, "max_tokens": 1})


def probe(options: EngineSchema, adapters: tuple[str, ...], processor_kwargs: dict, frame_side: int) -> dict:
    """Before anything loads: the server answers, serves the model (and the job's adapters), and takes a
    request shaped as the job's. Its `server` block for the plan (Served.as_dict), or ServerError."""
    with connect(options, 1) as client:
        served = served_model(client, options, adapters)
        check_request(client, options, probe_body(served.model, frame_side, processor_kwargs))
    return served.as_dict(options)
