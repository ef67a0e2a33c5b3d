"""caption/bench/server.py server_process, with plain processes in place of vLLM: it waits for the server's
/models, says why a server never answered (its log's tail), and leaves no process of the group behind."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from caption.bench.server import ServerDidNotStart, server_process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_is_handed_over_once_it_answers_and_its_group_is_stopped_after(tmp_path):
    (tmp_path / "www" / "v1").mkdir(parents=True)
    (tmp_path / "www" / "v1" / "models").write_text('{"data": []}')
    port = _free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
               "--directory", str(tmp_path / "www")]
    with server_process(command, {}, tmp_path / "server.log", f"http://127.0.0.1:{port}/v1", start_s=60) as proc:
        assert proc.poll() is None
    assert proc.poll() is not None  # stopped on leaving


def test_a_server_that_exits_or_never_answers_is_named_with_its_log(tmp_path):
    log = tmp_path / "server.log"
    with pytest.raises(ServerDidNotStart, match="exited 3: no GPU here"):
        with server_process([sys.executable, "-c", "print('no GPU here'); raise SystemExit(3)"], {}, log,
                            f"http://127.0.0.1:{_free_port()}/v1", start_s=60):
            pass
    hanging = "import os, time; print('loading', os.getpid(), flush=True); time.sleep(600)"
    with pytest.raises(ServerDidNotStart, match="no answer in 2 s: loading"):
        with server_process([sys.executable, "-c", hanging], {}, log, f"http://127.0.0.1:{_free_port()}/v1",
                            start_s=2):
            pass
    pid = int(log.read_text().split()[1])
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(pid, 0)
