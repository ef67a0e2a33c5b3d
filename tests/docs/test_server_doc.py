"""The vLLM server commands of docs/server.md start a server as written: vLLM's own parser takes their
arguments, and the command for vLLM's CPU build sets VLLM_CPU_KVCACHE_SPACE, as the tests' server
(tests/caption/engines/test_server_engine.py) and `caption-bench server` (caption/bench/server.py) do. Without it the CPU
build reserves a share of all the machine's memory and refuses to start when less is free."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from caption.settings.config import REPO_ROOT
from tests.caption.warm_process import WARM_ENV, run_warm_python

SERVER_DOC = REPO_ROOT / "docs" / "server.md"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# vLLM's own parser for that module (vllm/entrypoints/launchers/api_server/entry.py main), in a process
# of its own: importing vLLM's server here would fix its environment for every later test of the session.
# That process is forked with vLLM imported (tests/caption/warm_process.py), from the server the other
# modules' scripts fork from (the same environment, so the same server): a fresh interpreter spent ~15 CPU-s
# importing torch and vLLM on a 2-core AMD machine before it parsed a line
ENV = WARM_ENV  # one environment, so one warm server per test process (tests/caption/warm_process.py)
PARSE = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
for args in json.loads(sys.argv[1]):
    parser.parse_args(args)
"""


def server_commands() -> list[tuple[dict[str, str], list[str]]]:
    """(environment set on the line, arguments after the module) of each command in the page's bash
    blocks that starts vLLM's server; comments dropped, continuations joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", SERVER_DOC.read_text(encoding="utf-8"), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("#") or SERVER_MODULE not in line:
                continue
            words = shlex.split(line, comments=True)
            env = {}
            while "=" in words[0] and not words[0].startswith("-"):
                key, value = words.pop(0).split("=", 1)
                env[key] = value
            assert words[:3] == ["python", "-m", SERVER_MODULE], line
            commands.append((env, words[3:]))
    return commands


def test_the_cpu_builds_server_command_sizes_its_kv_cache():
    sized = [env["VLLM_CPU_KVCACHE_SPACE"] for env, _ in server_commands() if "VLLM_CPU_KVCACHE_SPACE" in env]
    assert sized, "docs/server.md starts no vLLM server with VLLM_CPU_KVCACHE_SPACE set (the CPU build needs it)"
    # vLLM reads it with int() (vllm/envs.py): whole GiB
    assert all(value.isdigit() and int(value) >= 1 for value in sized), sized


def commented_flags() -> list[str]:
    """The flags the page's bash blocks add in comments (`#   --enable-lora ...`: with LoRA adapters)."""
    text = SERVER_DOC.read_text(encoding="utf-8")
    return [word for line in re.findall(r"^#\s+(--.*)$", text, re.M) for word in shlex.split(line)]


# slow: its process imports vLLM (~13 CPU-s on the AVX-512 AMD machines), 16.5 s of `make test-fast`'s
# single-process 4:54 where no other test had started the warm server it forks from; under `make test` it
# shares that server with the other modules' scripts (~4 s)
@pytest.mark.slow
def test_vllms_parser_takes_the_documented_server_arguments():
    commands = [args for _, args in server_commands()]
    assert len(commands) >= 2  # the plain command and the CPU build's
    assert "--enable-lora" in commented_flags()
    commands.append(commands[0] + commented_flags())
    done = run_warm_python(["-c", PARSE, json.dumps(commands)], cwd=REPO_ROOT, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
