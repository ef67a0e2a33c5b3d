"""engine=server before anything runs: settings the server decides refused in one line, credentials kept
out of the run folder, the plan saying what it cannot plan, and how a call is tried again over real
HTTP (a small local HTTP server answers 503, 429 and 400 on cue: vLLM's server cannot be made to)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from caption.engines.server_api import ServerError, ServerGone, call
from caption.settings.config import ConfigError, load_job_config
from caption.settings.engine_schema import EngineSchema

CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")
URL = "engine.base_url=http://127.0.0.1:9/v1"


def _job(compose_config, synth_dir, tmp_path, *overrides):
    return load_job_config(compose_config([f"input_dir={synth_dir}", f"output={tmp_path / 'x.jsonl'}",
                                           "engine=server", *overrides]))


@pytest.mark.parametrize("override,says", [
    ("spec=ngram", "speculative decoding is the server's"),
    ("video.prune_rate=0.5", "video-token pruning is the server's"),
    ("quant=awq", "the server loads the weights it serves"),
    ("runner=ray", "the server is where the work scales out"),
    ("sampling.temperature=0.7 sampling.num_beams=2", "samples within beam search"),
    ("engine.base_url=null", "engine=server needs `engine.base_url`"),
    ("engine.base_url=ftp://host/v1", "is not an http(s) URL"),
    ("engine.api_key_env=VIDCAP_NOT_SET_ANYWHERE", "names an environment variable that is not set"),
    ("engine.timeout_s=0", "`engine.timeout_s` must be > 0"),
])
def test_what_the_server_decides_is_refused_in_one_line(compose_config, synth_dir, tmp_path, override, says):
    with pytest.raises(ConfigError, match=r"^[^\n]*$") as refused:
        _job(compose_config, synth_dir, tmp_path, URL, *override.split())
    assert says in str(refused.value)


def test_a_key_given_in_place_of_its_variable_is_not_echoed(compose_config, synth_dir, tmp_path):
    with pytest.raises(ConfigError) as refused:
        _job(compose_config, synth_dir, tmp_path, URL, "engine.api_key_env=sk-live-123")
    assert "must name an environment variable" in str(refused.value) and "sk-live-123" not in str(refused.value)


def test_the_server_settings_are_read_and_its_address_named_without_its_query(compose_config, synth_dir, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("VIDCAP_TEST_KEY", "k")
    job = _job(compose_config, synth_dir, tmp_path, "engine.base_url='https://gpu-box:8000/v1/?api-version=2'",
               "engine.api_key_env=VIDCAP_TEST_KEY", "engine.served_model=m", "engine.retries=0")
    assert job.server.public_url == "https://gpu-box:8000/v1" and job.server.api_key() == "k"
    assert (job.server.served_model, job.server.retries, job.requested_engine) == ("m", 0, "server")
    assert job.engine_options.max_inflight == 64  # conf/engine/server.yaml


def test_a_url_with_credentials_never_reaches_the_run_folder(tmp_path, synth_dir):
    run = tmp_path / "run"
    done = subprocess.run([CAPTION, f"input_dir={synth_dir}", f"output={tmp_path / 'x.jsonl'}", "engine=server",
                           "engine.base_url=http://user:hunter2@127.0.0.1:9/v1", f"hydra.run.dir={run}"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "credentials" in done.stderr, done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert not run.exists() or not any(b"hunter2" in p.read_bytes() for p in run.rglob("*") if p.is_file())


def test_the_plan_says_what_a_server_leaves_unplanned(compose_config):
    from caption.settings.config import load_job_config as load
    from quant.server_plan import make_server_plan

    model = load(compose_config(["plan_only=true"])).model.preset
    served = {"base_url": "http://h:1/v1", "served_model": "vidcap-ko-tiny", "root": "/m/vidcap-ko-tiny",
              "max_model_len": 512}
    plan = make_server_plan(model, {"num_frames": 8, "max_pixels": 3136, "size_multiple": 28}, max_new_tokens=48,
                            served=served)
    assert plan.fits and plan.engine == "server" and plan.memory_gib == {} and plan.vllm is None
    assert "not planned here" in plan.reasons[0] and plan.server == served and not plan.warnings
    small = make_server_plan(model, {"num_frames": 8, "max_pixels": 3136, "size_multiple": 28}, max_new_tokens=48,
                             served={**served, "max_model_len": 100, "served_model": "qwen", "root": "/m/qwen"})
    assert any("max_model_len is 100" in w for w in small.warnings)
    assert any("pick the preset of the served model" in w for w in small.warnings)


class _Cues(BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body, delay) of the server's `cues`."""

    def do_GET(self):
        status, headers, body, delay = self.server.cues.pop(0)
        time.sleep(delay)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())
        self.server.seen.append(time.monotonic())

    def log_message(self, *args):
        pass


@pytest.fixture
def cued():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Cues)
    server.cues, server.seen = [], []
    server.handle_error = lambda request, address: None  # a client that gave up (the timeout case) is no news
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _options(port: int, **kw) -> EngineSchema:
    values = dict(base_url=f"http://127.0.0.1:{port}/v1", served_model=None, api_key_env=None, timeout_s=5.0,
                  retries=2, retry_wait_s=0.05)
    return EngineSchema(name="server", **{**values, **kw})


def test_a_call_is_tried_again_on_5xx_and_429_and_not_on_a_refusal(cued):
    from caption.engines.server_api import connect

    options = _options(cued.server_port)
    with connect(options, 2) as client:
        cued.cues[:] = [(503, {}, {"error": {"message": "busy"}}, 0), (429, {"Retry-After": "0.3"}, {}, 0),
                        (200, {}, {"ok": 1}, 0)]
        counts: dict = {}
        assert call(client, "GET", "models", options, counts=counts) == {"ok": 1} and counts["retries"] == 2
        assert cued.seen[2] - cued.seen[1] >= 0.3  # the 429's Retry-After, not the doubling wait
        cued.cues[:] = [(400, {}, {"error": {"message": "bad\nrequest"}}, 0)]
        with pytest.raises(ServerError, match=r"^the server answered 400: bad request$"):
            call(client, "GET", "models", options)
        cued.cues[:] = [(500, {}, {"message": "down"}, 0)] * 3
        with pytest.raises(ServerError, match=r"answered 500: down \(3 tries\)"):
            call(client, "GET", "models", options)
    slow = _options(cued.server_port, timeout_s=0.2, retries=0)
    with connect(slow, 1) as client:
        cued.cues[:] = [(200, {}, {}, 1.0)]
        with pytest.raises(ServerError, match="no answer within engine.timeout_s=0.2 s") as late:
            call(client, "GET", "models", slow)
        assert not isinstance(late.value, ServerGone)


def test_nobody_at_the_address_is_a_server_gone():
    import socket

    from caption.engines.server_api import connect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    options = _options(port, retries=1)
    with connect(options, 1) as client, pytest.raises(ServerGone, match=r"ConnectError.*\(2 tries\)"):
        call(client, "GET", "models", options)
