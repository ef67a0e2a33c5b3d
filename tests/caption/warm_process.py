"""A `caption` process, or a Python script using the API, started warm: forked from a server process that has
already imported what a `caption` process imports before it has work, instead of started afresh from an
interpreter.

Why: a `caption` process spends ~10 CPU-s importing torch, transformers and vLLM before its first clip
(`python -c "from vllm import LLM"`: 10.2 s here, 6.0 s without vLLM), and a test whose subject is the job's
own process (a signal or a kill that lands mid-run, a second job beside a running one) or a script's (the
documented examples, one without a `__main__` guard) needs the process, not those imports. The child is a process of its own: its own pid and children, the signal handlers a
fresh interpreter has, file descriptors 0-2 on /dev/null and the test's pipes, the environment and folder
the test gives, and `caption`'s real `main()` run as its console script runs it (`sys.exit(main())`), or the
script run as `python script.py` and `python -c` run theirs (as `__main__`, its folder first on sys.path),
ending through the interpreter's own exit (atexit handlers, streams flushed). Its exit status is what
`subprocess.Popen.returncode` says (negative: the signal that ended it).

What differs from a process started afresh is what it had imported before `main()`: tests about the start
itself (a Ctrl-C during the imports, the installed entry point, a script's `__main__`) start one afresh. A
library that reads a variable only as it is imported read the server's, so a server is started (once per
test process, on first use) for each environment a test gives, and imports under it.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent  # the console scripts' folder: a console script's sys.path[0]
# What a `caption` process imports before its first clip (python -X importtime on a 2-clip job): the job, the
# engines' libraries (vLLM's LLM class, transformers' auto classes: what the engines import as they load), the
# decoders' and the scorer's
PRELOADED = ["caption.cli", "caption.job", "caption.engines.vllm_engine", "caption.engines.hf_engine",
             "vllm.entrypoints.llm", "transformers.models.auto.modeling_auto", "transformers.models.auto.processing_auto",
             "video_io.decode", "eval.meteor"]

# The environment the tests give the processes they start warm (and those they start beside them): this test
# process's as it was when this module was first imported, taken once. Each test file took its own copy as it
# was collected, and what collecting imports sets in os.environ (Ray's RAY_CLIENT_MODE, TorchInductor's
# TORCHINDUCTOR_CACHE_DIR) made the copies differ, so a worker started a server for each: three in one
# worker, each ~10 CPU-s of imports (docs/development.md)
WARM_ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}

SERVER = r"""
import json, os, select, socket, sys

control = socket.socket(fileno=int(sys.argv[1]))
sys.path[0] = sys.argv[2]  # a console script's own folder, not -c's working folder
for module in json.loads(sys.argv[3]):
    __import__(module)
del sys.argv[1:]
control.send(b"ready")


def serve():
    # forks a child per request; returns only in a child, with its request
    children = {}
    while True:
        if select.select([control], [], [], 0.02)[0]:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
            if not message:  # the test process closed its end, or ended: no teardown (WarmServer.close says why)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            out, err, status = fds
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                control.close()
                os.close(status)
                for reply in children.values():  # the other children's
                    reply.close()
                null = os.open(os.devnull, os.O_RDONLY)
                for fd, target in ((null, 0), (out, 1), (err, 2)):
                    os.dup2(fd, target)
                    os.close(fd)
                return json.loads(message)
            os.close(out)
            os.close(err)
            reply = socket.socket(fileno=status)
            reply.send(json.dumps({"pid": pid}).encode())
            children[pid] = reply
        while children:
            pid, status_word = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply = children.pop(pid, None)
            if reply is not None:
                reply.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status_word)}).encode())
                reply.close()


request = serve()
os.environ.clear()
os.environ.update(request["env"])
os.chdir(request["cwd"])
sys.argv = request["argv"]
if "entry" in request:  # a console script: `sys.exit(main())`, with its folder first on the path
    module, function = request["entry"].split(":")
    main = getattr(__import__(module, fromlist=[function]), function)
    sys.exit(main())
elif "script" in request:  # `python script.py`: the script as __main__, its folder first on the path
    import runpy
    sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
    runpy.run_path(request["script"], run_name="__main__")
else:  # `python -c code`: the code in __main__, the working folder first on the path
    sys.path[0] = ""
    exec(compile(request["code"], "<string>", "exec"), sys.modules["__main__"].__dict__)
"""


class WarmServer:
    """The server process (SERVER above), started with `env`; forks a child per `start`."""

    def __init__(self, env: dict[str, str]):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # what the imports print (warnings), kept for a server that does not start
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, str(theirs.fileno()), str(BIN),
                                         json.dumps(PRELOADED)], pass_fds=[theirs.fileno()], env=env,
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, cwd="/")
        theirs.close()
        if self.control.recv(16) != b"ready":
            self.log.seek(0)
            raise RuntimeError(f"the warm server did not start (exit {self.process.wait()}):\n"
                               f"{self.log.read().decode(errors='replace')[-3000:]}")
        self.lock = threading.Lock()

    def start(self, request: dict) -> "WarmProcess":
        return WarmProcess(self, request)

    def close(self) -> None:
        """Ends the server: it sees its control socket close and leaves by `os._exit`, since its own exit is
        not what any test checks (its children's are) and Python's teardown of a process that imported vLLM
        spent ~2 s in the garbage collector, which a test worker waited for at its end, server by server
        (a two-file run: 2.07 s of a worker's 2.1 s of exit handlers; docs/development.md)."""
        self.control.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class WarmProcess:
    """What the tests use of `subprocess.Popen(..., stdout=PIPE, stderr=PIPE, text=True)`, for a child of the
    warm server: pid, stdout, stderr, returncode, poll, wait, communicate, send_signal, terminate, kill."""

    def __init__(self, server: WarmServer, request: dict):
        self.args = request["argv"]
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        self._status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with server.lock:
            socket.send_fds(server.control, [json.dumps(request).encode()], [out_write, err_write, theirs.fileno()])
        for fd in (out_write, err_write):
            os.close(fd)
        theirs.close()
        encoding = locale.getpreferredencoding(False)  # what Popen's text mode decodes with
        self.stdout = open(out_read, encoding=encoding)
        self.stderr = open(err_read, encoding=encoding)
        self.returncode: int | None = None
        self.pid = self._message(timeout=60)["pid"]

    def _message(self, timeout: float | None) -> dict:
        if not select.select([self._status], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.args, timeout)
        message = self._status.recv(4096)
        if not message:
            raise RuntimeError(f"the warm server ended before telling how pid {getattr(self, 'pid', '?')} exited")
        return json.loads(message)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self._message(timeout=0)["returncode"]
                self._status.close()
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._message(timeout)["returncode"]
            self._status.close()
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Everything the process (and what it started that holds its pipes) wrote to fds 1 and 2, then its
        exit status, as Popen.communicate: TimeoutExpired after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[str, str] = {}
        readers = [threading.Thread(target=lambda name=name, f=f: read.__setitem__(name, f.read()), daemon=True)
                   for name, f in (("out", self.stdout), ("err", self.stderr))]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self.stdout.close()
        self.stderr.close()
        return read["out"], read["err"]

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not a pid that may have been given to another process since
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_servers: dict[tuple, WarmServer] = {}


def _server(env: dict[str, str]) -> WarmServer:
    key = tuple(sorted(env.items()))
    if key not in _servers:
        _servers[key] = WarmServer(dict(env))
    return _servers[key]


def start_warm(command: str, args, *, cwd, env: dict[str, str]) -> WarmProcess:
    """The console script `command` (tests/caption/in_process.py COMMANDS) with `args`, as a process of its
    own forked warm, from `cwd` with `env`; argv[0] is the console script's path, as it would be."""
    from tests.caption.in_process import COMMANDS

    return _server(env).start({"entry": COMMANDS[command], "argv": [str(BIN / command), *map(str, args)],
                               "cwd": str(cwd), "env": dict(env)})


def run_warm_python(argv: list[str], *, cwd, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    """`python script.py args...` or `python -c code args...` (`argv` without the interpreter), forked warm and
    waited for: what `subprocess.run(..., capture_output=True, text=True)` returns."""
    if argv[0] == "-c":
        request = {"code": argv[1], "argv": ["-c", *argv[2:]]}
    else:
        request = {"script": str(argv[0]), "argv": [str(a) for a in argv]}
    process = _server(env).start({**request, "cwd": str(cwd), "env": dict(env)})
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        process.kill()
    return subprocess.CompletedProcess([sys.executable, *argv], process.returncode, out, err)


@atexit.register
def _close_servers() -> None:
    for server in _servers.values():
        server.close()
    _servers.clear()
