"""engine=server against a real vLLM OpenAI-compatible server on 127.0.0.1 (one per test session, the
embedded model with its LoRA adapter, an API key): the real `caption` command's records against the
server's own answers to the same requests, the key nowhere in what the job writes, a server that goes
away mid-run and a re-run that resumes, and one-line errors. No traffic leaves the machine."""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from caption.bench.server import server_process
from caption.settings.config import REPO_ROOT
from tests.caption.in_process import run_caption, run_command
from vidcap_ko.exit_status import EXIT_ENGINE_DIED, EXIT_FAILED_RECORDS, EXIT_OK, EXIT_USAGE
from video_io.identity import file_identity

pytestmark = pytest.mark.slow
CAPTION = os.path.join(os.path.dirname(sys.executable), "caption")
KEY_ENV = "VIDCAP_TEST_SERVER_KEY"
KEY = f"vidcap-test-key-{secrets.token_hex(12)}"  # must appear in nothing the job writes
SERVED = "vidcap-ko-tiny"
ADAPTER = REPO_ROOT / "assets" / "adapters" / "vidcap-ko-detailed"
FORWARD = REPO_ROOT / "tests" / "support" / "tcp_forward.py"
NO_PROXY = {k: "" for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}
ENV = {**os.environ, **NO_PROXY, "HF_HUB_OFFLINE": "1", KEY_ENV: KEY}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, port: int, process: subprocess.Popen, log: Path):
        self.port, self.process, self.log = port, process, log
        self.url = f"http://127.0.0.1:{port}/v1"

    def ask(self, body: dict) -> dict:
        """The server's own answer to a request, from a plain client."""
        response = httpx.post(f"{self.url}/chat/completions", json=body, timeout=120,
                              headers={"Authorization": f"Bearer {KEY}"})
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory, model_dir):
    """vLLM's OpenAI-compatible server (python -m vllm.entrypoints.openai.api_server: the `vllm` console
    script fails here on a package-metadata lookup) with the embedded model, its adapter as `detailed`,
    an API key and the per-request media kwargs the job sends; stopped at the end, even on failure."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    port = _free_port()
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    # the model's worker inside the engine-core process: on the CPU vLLM otherwise picks its multiprocessing
    # executor (vllm/platforms/cpu.py), one more process that imports vLLM again. The engine core itself is a
    # process of its own either way (vllm/v1/engine/async_llm.py: make_async_mp_client). The same API,
    # answering after ~20 s and ~21 CPU-s instead of 28-35 s and 30-38 (one start each, idle machine)
    env = {**ENV, "VLLM_API_KEY": KEY, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": cpus,
           "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512",
               "--dtype", "float32", "--enforce-eager", "--trust-request-mm-kwargs",
               # one LoRA slot to spare: vLLM's CPU LoRA ops read a base-model request's index -1 as the
               # last slot (caption/engines/vllm_engine.py engine_args; docs/server.md)
               "--enable-lora", "--max-loras", "2", "--lora-modules", f"detailed={ADAPTER}"]
    url = f"http://127.0.0.1:{port}/v1"
    with server_process(command, env, log, url, start_s=300, headers={"Authorization": f"Bearer {KEY}"}) as process:
        yield Server(port, process, log)


def _clips(folder: Path, synth_dir: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        shutil.copy(synth_dir / f"clip_{i:05d}.mp4", folder)
    lines = (synth_dir / "references.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    (folder / "references.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _caption(tmp_path: Path, url: str, *overrides: str, run: str = "run", wait: bool = True, retries: str = "1"):
    command = [CAPTION, "engine=server", f"engine.base_url={url}", f"engine.api_key_env={KEY_ENV}",
               f"engine.retries={retries}", "engine.retry_wait_s=0.1", "progress=false", *overrides,
               f"hydra.run.dir={tmp_path / run}"]
    if wait:  # in this process (tests/caption/in_process.py)
        done = run_caption(command[1:], env=ENV, cwd=tmp_path)
        return done.returncode, done.stdout, done.stderr
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=tmp_path)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _direct_body(clip, instruction: str, model: str, sampling: dict) -> dict:
    """The same request as the job's, built here from the decoder's frames without the job's code."""
    frames = []
    for frame in clip.frames:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, format="PNG")
        frames.append(base64.b64encode(buffer.getvalue()).decode())
    m = clip.metadata()
    from caption.prompts import SYSTEM_PROMPT_KO

    return {"model": model, "messages": [
        {"role": "system", "content": SYSTEM_PROMPT_KO},
        {"role": "user", "content": [{"type": "video_url", "video_url": {"url": "data:video/jpeg;base64," + ",".join(frames)}},
                                     {"type": "text", "text": instruction}]}],
        "media_io_kwargs": {"video": {"num_frames": len(clip.frames), "fps": m["fps"], "frames_indices": m["frames_indices"],
                                      "total_num_frames": m["total_num_frames"], "duration": m["duration"],
                                      "do_sample_frames": False}},
        "mm_processor_kwargs": {"cap_pixels_per_frame": True}, **sampling}


def _decoded(compose_config, folder: Path):
    """The job's clips as its decoder gives them (the settings of the jobs here)."""
    from caption.settings.config import load_job_config
    from video_io.decode import decode_clip

    spec = load_job_config(compose_config([f"input_dir={folder}", f"output={folder}/unused.jsonl"])).decode
    return {path.name: decode_clip(str(path), spec) for path in sorted(folder.glob("*.mp4"))}


def test_records_are_the_servers_own_answers_and_the_key_is_written_nowhere(vllm_server, synth_dir, tmp_path,
                                                                           compose_config):
    from caption.prompts import instruction_text

    clips = _clips(tmp_path / "clips", synth_dir, 3)
    out = tmp_path / "out" / "captions.jsonl"
    out.parent.mkdir()
    status, stdout, stderr = _caption(tmp_path, vllm_server.url, f"input_dir={clips}", f"output={out}",
                                      "tasks=[caption,motion]", "lora=detailed", "lora.include_base=true")
    assert status == EXIT_OK, stderr[-3000:]
    records = _records(out)
    assert len(records) == 3 * 2 * 2 and all(r["status"] == "ok" and r["engine"] == "server" for r in records)
    settings = records[0]["settings"]
    assert settings["server"] == vllm_server.url and settings["served_model"] == SERVED
    assert "model_path" not in settings and "dtype" not in settings  # the server's, not this machine's
    assert all(r["source"] == file_identity(clips / r["video"], clips) for r in records)  # as the decoders read them
    decoded = _decoded(compose_config, clips)
    for record in records:
        clip = decoded[record["video"]]
        assert record["frame_indices"] == list(clip.indices)  # the job's frames, sampled by the job
        body = _direct_body(clip, instruction_text(record["task"]), record["adapter"] or SERVED,
                            {"temperature": 0.0, "max_tokens": 48, "seed": 0})
        answer = vllm_server.ask(body)
        assert record["caption"] == answer["choices"][0]["message"]["content"].strip(), record
        assert record["prompt_tokens"] == answer["usage"]["prompt_tokens"]
    summary = json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))
    assert summary["meteor"] is not None and summary["server_requests"] == 12

    report = tmp_path / "out" / "report.html"
    done = run_command("caption-report", [out, "--out", report], env=ENV)
    assert done.returncode == 0, done.stderr
    again = _caption(tmp_path, vllm_server.url, f"input_dir={clips}", f"output={out}", "tasks=[caption,motion]",
                     "lora=detailed", "lora.include_base=true", run="rerun")
    assert again[0] == EXIT_OK and "(0 to caption, 3 already done)" in again[1], again[2][-2000:]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "clips" not in p.parts]
    assert any(p.name == "config.yaml" and p.parent.name == ".hydra" for p in written)  # Hydra's dump was looked at
    assert any(p.name == "caption.log" for p in written) and report in written
    leaks = [str(p) for p in written if KEY.encode() in p.read_bytes()]
    assert not leaks and KEY not in stdout + stderr + again[1] + again[2], leaks


def test_beam_search_is_the_servers_beam_search(vllm_server, synth_dir, tmp_path, compose_config):
    """sampling=quality (4 beams) through vLLM's use_beam_search, as the in-process engine runs LLM.beam_search."""
    from caption.prompts import instruction_text

    clips = _clips(tmp_path / "clips", synth_dir, 1)
    out = tmp_path / "beams.jsonl"
    status, _, stderr = _caption(tmp_path, vllm_server.url, f"input_dir={clips}", f"output={out}", "sampling=quality",
                                 "sampling.max_new_tokens=64", "references=null")
    assert status == EXIT_OK, stderr[-3000:]
    [record] = _records(out)
    clip = _decoded(compose_config, clips)[record["video"]]
    answer = vllm_server.ask(_direct_body(clip, instruction_text("caption"), SERVED,
                                          {"use_beam_search": True, "n": 4, "temperature": 0.0, "length_penalty": 1.2,
                                           "max_tokens": 64}))
    assert record["caption"] == answer["choices"][0]["message"]["content"].strip()


def _forward(port: int, target: int, answered: int | None = None) -> subprocess.Popen:
    """tests/support/tcp_forward.py from `port` to the server; `answered`: only that many POSTs get answers,
    the later ones wait until the job gives up."""
    process = subprocess.Popen([sys.executable, str(FORWARD), str(port), str(target),
                                *([str(answered)] if answered is not None else [])],
                               stdout=subprocess.PIPE, text=True, env=ENV)
    assert process.stdout.readline().strip() == "ready"
    return process


def test_a_server_that_goes_away_mid_run_stops_the_job_and_a_rerun_resumes(vllm_server, tmp_path):
    """The job talks to the server through a forwarding process that is SIGKILLed mid-run (to the job,
    a server process killed: connections reset, then refused); the re-run goes through a new one."""
    from video_io.synth.dataset import generate_dataset

    clips = tmp_path / "many"
    generate_dataset(clips, n=16, seed=35)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "captions.jsonl"

    forwarder = _forward(port, vllm_server.port, answered=4)  # the plan's probe and 3 requests; the rest wait
    try:
        job = _caption(tmp_path, url, f"input_dir={clips}", f"output={out}", "engine.max_restarts=1",
                       "engine.max_inflight=2", wait=False)
        deadline = time.monotonic() + 300
        while not (out.exists() and out.read_bytes().count(b"\n") >= 3):
            assert job.poll() is None and time.monotonic() < deadline, job.communicate()[1][-3000:]
            time.sleep(0.02)
        forwarder.kill()
        forwarder.wait()
        stdout, stderr = job.communicate(timeout=300)
    finally:
        forwarder.kill()
    assert job.returncode == EXIT_ENGINE_DIED, stderr[-3000:]
    assert "cannot be reached" in stderr and "run the same command again" in stderr
    first = out.read_bytes()
    assert first.endswith(b"\n") and len(_records(out)) == 3  # whole lines: the answered requests
    summary = json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))
    assert summary["stopped"] == "engine died" and summary["records_left_undone"] == 16 - len(_records(out))
    # scored over what it wrote, the rest counted as not captioned
    assert (summary["meteor_n"], summary["meteor_missing"]) == (3, 13) and summary["meteor"] is not None
    assert "METEOR" in stdout and "over 3 captioned clips of 16 (13 not captioned" in stdout

    forwarder = _forward(port, vllm_server.port)
    try:
        status, stdout, stderr = _caption(tmp_path, url, f"input_dir={clips}", f"output={out}", "references=null",
                                          run="resume")
    finally:
        forwarder.kill()
    assert status == EXIT_OK, stderr[-3000:]
    assert out.read_bytes().startswith(first)  # what the first run wrote is kept as it was
    records = _records(out)
    assert sorted(r["video"] for r in records) == sorted(p.name for p in clips.glob("*.mp4"))
    assert all(r["status"] == "ok" for r in records)


def _one_line_error(result) -> str:
    status, _, stderr = result
    lines = [line for line in stderr.splitlines() if line.startswith("caption:")]
    assert status == EXIT_USAGE and len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_a_wrong_address_model_or_key_is_one_line_before_anything_loads(vllm_server, synth_dir, tmp_path):
    args = [f"input_dir={synth_dir}", f"output={tmp_path / 'x.jsonl'}"]
    closed = _free_port()
    line = _one_line_error(_caption(tmp_path, f"http://127.0.0.1:{closed}/v1", *args, retries="0"))
    assert f"cannot reach the server at engine.base_url=http://127.0.0.1:{closed}/v1" in line
    line = _one_line_error(_caption(tmp_path, vllm_server.url, *args, "engine.served_model=vidcap-ko-7b"))
    assert "`engine.served_model=vidcap-ko-7b` is not served" in line and f"it serves: {SERVED}, detailed" in line
    line = _one_line_error(_caption(tmp_path, vllm_server.url, *args, "engine.api_key_env=null"))
    assert "answered 401" in line and "engine.api_key_env" in line
    port = _free_port()
    forwarder = _forward(port, vllm_server.port, answered=0)  # it lists the models, then answers no request
    try:
        line = _one_line_error(_caption(tmp_path, f"http://127.0.0.1:{port}/v1", *args, "engine.timeout_s=1",
                                        retries="0"))
    finally:
        forwarder.kill()
        forwarder.wait()
    assert f"the server at http://127.0.0.1:{port}/v1 refused a test request shaped as the job's: no answer " \
           "within engine.timeout_s=1 s" in line, line
    assert not (tmp_path / "x.jsonl").exists()


def test_a_refused_or_unanswered_request_is_an_error_record_with_the_servers_reason(vllm_server, synth_dir,
                                                                                    tmp_path):
    clips = _clips(tmp_path / "clips", synth_dir, 2)
    out = tmp_path / "refused.jsonl"
    # a preset that allows more than the server (512): vLLM refuses max_tokens above its max_model_len;
    # the plan warned, the server says why
    status, stdout, stderr = _caption(tmp_path, vllm_server.url, f"input_dir={clips}", f"output={out}",
                                      "model.max_model_len=1024", "sampling.max_new_tokens=600", "references=null")
    assert status == EXIT_FAILED_RECORDS, stderr[-3000:]
    assert "max_model_len is 512" in stderr  # the plan's warning, before anything ran
    records = _records(out)
    assert len(records) == 2 and all(r["status"] == "error" for r in records)
    assert all("answered 400" in r["error"] and "max_tokens=600 cannot be greater than max_model_len=512"
               in r["error"] and "\n" not in r["error"] for r in records), [r["error"] for r in records]
    # a server that answers the plan's probe and nothing after it: every request times out, on any machine.
    # The probe is a real generation: 4 s leaves it room on a machine busy with other tests (1.5 s did not).
    # The forwarder keeps a held request's connection open after the server closes its side, so the
    # request times out rather than seeing a server gone (tests/support/tcp_forward.py)
    out, port = tmp_path / "slow.jsonl", _free_port()
    forwarder = _forward(port, vllm_server.port, answered=1)
    try:
        status, _, stderr = _caption(tmp_path, f"http://127.0.0.1:{port}/v1", f"input_dir={clips}", f"output={out}",
                                     "engine.timeout_s=4", "references=null")
    finally:
        forwarder.kill()
        forwarder.wait()
    assert status == EXIT_FAILED_RECORDS, stderr[-3000:]
    records = _records(out)
    assert all(r["status"] == "error" and "no answer within engine.timeout_s=4 s (2 tries)" in r["error"]
               for r in records), [r["error"] for r in records]
