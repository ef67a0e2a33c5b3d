"""caption-bench decoder-start: both start methods measured in one run, each decoder where the method puts it."""

from __future__ import annotations

import json
import os

from caption.bench.cli import main


def test_both_start_methods_run_and_the_forked_decoders_share_a_server_that_is_not_this_process(tmp_path, capsys):
    assert main(["decoder-start", "--decoders", "3", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    spawned, forked = result["runs"]["spawn"], result["runs"]["forkserver"]
    assert len(spawned) == len(forked) == 3
    assert {run["parent"] for run in spawned} == {os.getpid()}  # spawned: this process's children
    servers = {run["parent"] for run in forked}
    assert len(servers) == 1 and os.getpid() not in servers  # forked: all from one fork server
    assert all(run["ready_s"] > 0 and run["clip_s"] >= run["ready_s"] for run in spawned + forked)
    assert result["fork_server"]["cpu_s"] > 0 and set(result["per_decoder"]) == {"spawn", "forkserver"}
    assert "| spawn |" in (tmp_path / "results.md").read_text(encoding="utf-8")
    assert (tmp_path / "results.png").stat().st_size > 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cpu_ratio"] > 0
