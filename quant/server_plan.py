"""The plan of a job whose model runs in a server (engine=server): what the job can plan, and what not.

The server holds the weights, the KV cache and the batch. Their memory, the dtype, the quantization
and the batch size were fixed when it started (vLLM: --dtype, --quantization, --gpu-memory-utilization,
--max-num-seqs, --max-model-len), and no request changes them: the plan names them as the server's and
checks none of them. What the job still knows is one request's size: the clip's video tokens and the
tokens a request needs, counted from the model preset by quant/request_size.py as for any plan. The server's
context (its max_model_len, as it reports it) must hold them.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from quant.plan import Plan
from quant.request_size import PROMPT_TEXT_TOKENS, check_model_keys, request_size

SERVERS = "server's"


def make_server_plan(model: dict, video: dict | None, *, max_new_tokens: int, served: dict) -> Plan:
    """The plan for a job sending its requests to the server `served` describes (its base_url,
    served_model, root and max_model_len: caption/engines/server_api.py Served.as_dict)."""
    check_model_keys(model)  # and its `arch:` block
    family = str(model.get("family"))
    request = request_size(model, video, family, model["arch"], "server", max_new_tokens, PROMPT_TEXT_TOKENS)
    limit = served.get("max_model_len")
    notes = [*request.notes,
             f"the server {served['base_url']} serves {served['served_model']}"
             + (f" from {served['root']}" if served.get("root") else "")
             + (f" with max_model_len {limit}" if limit else "")]
    return Plan(
        model=str(model.get("name")), family=family, tier="server", engine="server", dtype=f"{SERVERS} dtype",
        model_path=None,
        quantization={"method": SERVERS, "bits": None, "group_size": None, "double_quant": False, "priority": None,
                      "auto": False, "checkpoint": None, "why": "the server loads the weights it serves"},
        vllm=None, hf=None, memory_gib={}, kv_bytes_per_token=0, sequences_fit=None,
        vision_tokens_per_clip=request.video_tokens, tokens_per_request=request.need, fits=True,
        reasons=["not planned here: the server's memory, dtype, quantization and batch size were fixed when it "
                 "started; the job checks only that a request fits the context the server reports"],
        notes=notes, warnings=_warnings(model, request.need, request.video_tokens, max_new_tokens, served),
        engine_reason="set by engine=server", server=dict(served))


def _warnings(model: dict, need: int, video_tokens: int, max_new_tokens: int, served: dict) -> list[str]:
    warnings = []
    limit = served.get("max_model_len")
    if limit and need > limit:
        warnings.append(f"a request may need {need} tokens ({video_tokens} of video, up to {max_new_tokens} of "
                        f"caption) and the server's max_model_len is {limit}: it refuses a longer prompt (an error "
                        "record) and ends a caption where prompt and caption reach it; use fewer or smaller frames "
                        "(video.num_frames, video.max_pixels), or start the server with a larger --max-model-len")
    names = {PurePosixPath(str(n)).name.lower() for n in (served.get("root"), served.get("served_model")) if n}
    preset = PurePosixPath(str(model.get("path") or "")).name.lower()
    if preset and preset not in names:
        warnings.append(f"the server serves {served['served_model']} and model preset {model.get('name')} is for "
                        f"{model.get('path')}: frame sizes, the admission limits and the family's processor "
                        "arguments come from the preset; pick the preset of the served model (model=...)")
    return warnings
