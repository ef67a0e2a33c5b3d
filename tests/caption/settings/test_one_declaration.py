"""Each setting's default in one place: a new setting touches its declaration (plus the regenerated
reference), nothing else.

The project's source is copied into a temporary folder and ONE line is added there: a new `video.*` key,
declared in VideoSchema (caption/settings/schema.py) with its type, default, help text and `recorded=True`
(it changes what a caption says, so the records must say it; vidcap_ko/settings.py setting()). Then, run
from that copy only (PYTHONPATH), and compared with the same copy before the line was added:

- `caption --help` names the key with its default and help text;
- the docs generator (`python -m scripts.docsgen`) rewrites the configuration reference, and no other
  file, and the reference's video section has the key's row; after it, the copy differs from before in
  exactly the declaring file and that reference;
- the job, planned as `caption` plans it (the Python API's Captioner: compose, load_job_config, plan_job,
  the check that every given key is read), accepts `video.<key>=<value>`; the records it would write
  (caption/pipeline/record.py base_record) carry `video.<key>: <value>` in their `settings`, a segment's
  record too, under another settings_id. Left at its default the key changes neither: records made before
  the setting existed keep their settings_id (a resumed job still counts them as its own).

The negative controls run the same probes on the copy before the line is added: the key is in no help,
reference or record, and the job refuses it as an unknown setting.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from caption.settings.config import REPO_ROOT

GROUP, KEY, DEFAULT, GIVEN = "video", "sample_from_s", 0.0, 1.5
HELP = "one-declaration probe: frames are sampled from this many seconds into each clip on"
DECLARING_FILE = "caption/settings/schema.py"
ANCHOR = "    fps: float = option(SamplingSpec.fps,"  # the new field goes just above VideoSchema's `fps`
DECLARATION = f'    {KEY}: float = option({DEFAULT!r}, "{HELP}", recorded=True)\n'
REFERENCE = "docs/snippets/configuration.md"

COPIED = ["caption", "video_io", "quant", "eval", "vidcap_ko", "scripts", "conf", "docs", "README.md", "pyproject.toml"]
LINKED = ["assets"]  # the embedded model (tens of MB): read, never written

# Run inside the copy: the generator as its command runs it, then the job's settings as the API plans them
PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    import caption
    from caption import Captioner, ConfigError
    from caption.pipeline.record import base_record
    from scripts.docsgen.__main__ import main as docsgen
    from video_io.segmenting import SegmentInfo

    def record(job, segment=None):
        made = base_record(job, "clip.mp4", "caption", None, segment, status="ok", caption=".")
        return {"settings": made["settings"], "settings_id": made["settings_id"]}

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = docsgen([])
    result = {"caption_module": caption.__file__, "docsgen_rc": rc, "docsgen": out.getvalue(), "jobs": {}}
    for name, settings in json.loads(sys.argv[1]).items():
        try:
            with Captioner(**settings) as captioner:
                result["jobs"][name] = {"clip": record(captioner.job),
                                        "segment": record(captioner.job, SegmentInfo(0, 2, 0.0, 5.0))}
        except ConfigError as exc:
            result["jobs"][name] = {"refused": str(exc)}
    print(json.dumps(result))
""")


def _copy_project(dest: Path) -> Path:
    for name in COPIED:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    for name in LINKED:
        (dest / name).symlink_to(REPO_ROOT / name)
    return dest


def _env(copy: Path) -> dict[str, str]:
    """The copy's packages first; its bytecode cached in the copy, so each run after the first starts faster."""
    dropped = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "COVERAGE_PROCESS_START")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "PYTHONPATH": str(copy), "HF_HUB_OFFLINE": "1"}


def _run(copy: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=_env(copy), capture_output=True, text=True,
                          timeout=300)


def _help(copy: Path, cwd: Path) -> str:
    done = _run(copy, cwd, "-m", "caption", "--help")
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())  # the help wraps long texts: compare words


def _probe(copy: Path, cwd: Path, jobs: dict[str, dict]) -> dict:
    done = _run(copy, cwd, "-c", PROBE, json.dumps(jobs))
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["caption_module"]).resolve().is_relative_to(copy.resolve()), result["caption_module"]
    assert result["docsgen_rc"] == 0, result["docsgen"]
    return result


def _files(root: Path) -> dict[str, str]:
    """Repository-relative path -> sha256 of every copied file (the linked assets aside)."""
    found = {}
    for name in COPIED:
        paths = [root / name] if (root / name).is_file() else sorted((root / name).rglob("*"))
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts:
                found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _reference_row(reference: str) -> str | None:
    """The key's row in the reference's section of its group, or None."""
    section = re.search(rf"^## `{GROUP}`:.*?(?=^## |\Z)", reference, re.M | re.S)
    assert section, f"the reference has no section for the {GROUP} group"
    rows = [line for line in section.group(0).splitlines() if line.startswith(f"| `{KEY}` |")]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def _declare(copy: Path) -> None:
    """The one edit: the new field, in its group's schema."""
    path = copy / DECLARING_FILE
    text = path.read_text(encoding="utf-8")
    assert text.count(ANCHOR) == 1, f"{DECLARING_FILE} no longer has `{ANCHOR.strip()}` once"
    path.write_text(text.replace(ANCHOR, DECLARATION + ANCHOR), encoding="utf-8")


def test_a_setting_declared_in_one_line_shows_in_help_reference_and_records(tmp_path):
    copy, cwd = _copy_project(tmp_path / "project"), tmp_path / "run"
    cwd.mkdir()
    dotted, given = f"{GROUP}.{KEY}", {f"{GROUP}__{KEY}": GIVEN}

    # before: the copy as the checkout is (its generated docs brought up to date, whatever else is in flight)
    help_before = _help(copy, cwd)
    before = _probe(copy, cwd, {"default": {}, "given": given})
    reference_before = (copy / REFERENCE).read_text(encoding="utf-8")
    files_before = _files(copy)
    assert f"{GROUP}.fps = " in help_before and _reference_row(reference_before) is None  # probes that can see
    assert dotted not in help_before and HELP not in help_before
    assert "is not a setting" in before["jobs"]["given"]["refused"], before["jobs"]["given"]
    assert dotted not in before["jobs"]["default"]["clip"]["settings"]

    _declare(copy)

    # --help: the key, its default and its help text
    help_after = _help(copy, cwd)
    assert f"{dotted} = {DEFAULT} ({HELP})" in help_after, "caption --help does not show the new setting"

    after = _probe(copy, cwd, {"default": {}, "given": given})
    # the reference, regenerated: the one file the generator rewrites, with the key's row
    assert after["docsgen"].split() == ["wrote", REFERENCE], after["docsgen"]
    row = _reference_row((copy / REFERENCE).read_text(encoding="utf-8"))
    assert row is not None, f"the regenerated reference has no row for {dotted}"
    assert f"| `{KEY}` | `float` | `{DEFAULT}` | {HELP}; records' `settings` carry it" in row, row
    files_after = _files(copy)
    changed = sorted(p for p in set(files_before) | set(files_after) if files_before.get(p) != files_after.get(p))
    assert changed == sorted([DECLARING_FILE, REFERENCE]), changed

    # the records: given, the value in their settings and another settings_id; at its default, no change
    default, set_ = after["jobs"]["default"], after["jobs"]["given"]
    assert "refused" not in set_, set_["refused"]
    for kind in ("clip", "segment"):  # a whole clip's record, and a segment's (its settings add how it was cut)
        assert set_[kind]["settings"] == {**default[kind]["settings"], dotted: GIVEN}, kind
        assert set_[kind]["settings_id"] != default[kind]["settings_id"], kind
    assert default["segment"]["settings"]["segments"] and "segments" not in default["clip"]["settings"]
    assert default == before["jobs"]["default"], "declaring a setting changed the records made at its default"
