"""Every command in README.md runs as written: each shell line of its ```bash blocks is checked the
way it can be without a model or a GPU. `caption` overrides are composed by the real Hydra config and
validated as the job validates them (a `plan_only=true` line runs for real); the other commands' arguments
are parsed by their own parsers; `make` targets are dry-run. A README line no check knows fails too."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from caption.settings.config import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_LINES = 200


def readme_commands() -> list[str]:
    """The shell commands of the README's bash blocks: comments dropped, continuations joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        pending = ""
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if not line or line.startswith("#"):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            commands.append(pending + line)
            pending = ""
    return commands


COMMANDS = readme_commands()


def test_the_readme_is_short_and_has_commands():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it to {MAX_LINES} and move reference to docs/"
    assert len(COMMANDS) >= 10


def _caption_overrides(args: list[str], tmp_path) -> list[str]:
    """The line's overrides, with its example folders replaced by real ones (the README's are placeholders)."""
    clips = tmp_path / "clips"
    clips.mkdir(exist_ok=True)
    swapped = {"input_dir": str(clips), "output": str(tmp_path / "out.jsonl")}
    return [f"{a.split('=')[0]}={swapped[a.split('=')[0]]}" if a.split("=")[0] in swapped else a for a in args]


def check_caption(args: list[str], tmp_path) -> None:
    from hydra import compose, initialize_config_dir

    from caption.settings.config import CONF_DIR, load_job_config

    if "plan_only=true" in args:  # a plan needs no weights and no clips: run the real command
        done = subprocess.run([sys.executable, "-m", "caption", *args, f"hydra.run.dir={tmp_path}/run"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        return
    overrides = _caption_overrides(args, tmp_path)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)  # unknown keys and wrong types fail here
    if any(a.startswith("model.path=/models/") for a in args):
        return  # a real checkpoint's folder, not on this machine: its keys composed; the job checks it there
    load_job_config(cfg)  # the job's own validation, before any plan or model


def check_parser(build_parser, args: list[str]) -> None:
    try:
        build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"its parser refused {args}: exit {exc.code}")


def check_make(args: list[str]) -> None:
    done = subprocess.run(["make", "-n", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert done.returncode == 0, done.stderr


def check_pip(args: list[str]) -> None:
    """`pip install .` or `.[extras]` from the checkout: every extra it names is declared (installing for
    real is tests/setup/test_wheel_install.py's job)."""
    import tomllib

    assert args[:1] == ["install"] and len(args) == 2, f"pip {args}: the README installs one target"
    match = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", args[1])
    assert match, f"pip install {args[1]}: the README installs the checkout (. or .[extras])"
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    unknown = [e for e in (match.group(1) or "").split(",") if e and e not in declared]
    assert not unknown, f"pip install {args[1]}: no extra {unknown} in pyproject.toml"


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs_as_written(command, tmp_path):
    words = shlex.split(command)
    program, args = words[0].removeprefix(".venv/bin/"), words[1:]
    if program == "caption":
        check_caption(args, tmp_path)
    elif program == "caption-meteor":
        from eval.cli import build_parser

        check_parser(build_parser, args)
    elif program == "caption-report":
        from caption.report.cli import build_parser

        check_parser(build_parser, args)
    elif program == "caption-bench":
        from caption.bench.cli import parser

        check_parser(parser, args)
    elif program == "make":
        check_make(args)
    elif program == "pip":
        check_pip(args)
    else:
        pytest.fail(f"README command `{command}`: no check knows `{program}`; add one here")


def test_readme_links_into_the_docs_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#]+)", text)
    assert targets, "the README links into docs/"
    missing = sorted({t for t in targets if not (REPO_ROOT / t).is_file()})
    assert not missing, f"README.md links to missing files: {missing}"
