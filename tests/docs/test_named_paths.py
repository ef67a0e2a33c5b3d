"""Every file of the repository that its code, configuration or docs name exists: a path such as
`caption/runners/ray.py` or `conf/gpu/h100.yaml` in a docstring, a comment, a setting's note or a page
goes stale when the file moves, and nothing else notices. So each such path is looked up in the checkout,
and so is each relative link of a Markdown page.

A named path is a token that starts with one of the repository's top-level folders, then `/`, and ends
in a file extension; a path inside another project (`transformers/video_utils.py`, `vllm/...`) starts
with no folder of this repository and is not one."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import tokenize
from functools import cache

from caption.settings.config import REPO_ROOT

EXTENSIONS = ("py", "md", "yaml", "yml", "json", "jsonl", "toml", "sh", "txt", "html", "js", "css", "svg", "png",
              "jinja", "csv")
PATH_CHARS = r"[\w./\-*{}<>$~+]"  # placeholder marks included, so that a placeholder path is one token
# a name standing for many files or for one not known yet: conf/gpu/<tier>.yaml, conf/model/*.yaml,
# vidcap_ko/families/{family}.py, $OUT/..., caption/.../x.py
PLACEHOLDER = re.compile(r"[<>*{}$~]|\.\.\.")
LINK = re.compile(r"\]\(\s*<?([^)\s>]*)")


@cache
def checkout_files() -> frozenset[str]:
    """The files a clean clone has (tracked, or new and not ignored): build outputs, caches and data are
    not the repository's, so a path to one of them is not a path the repository can name."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return frozenset(name for name in listed if name and (REPO_ROOT / name).is_file())


@cache
def path_pattern() -> re.Pattern[str]:
    top_level = sorted({name.split("/")[0] for name in checkout_files() if "/" in name})
    # not preceded by a path character: `/work/main/caption/x.py` and `vllm/caption/x.py` are not ours;
    # not after `](`: a Markdown link's target is relative to its page (checked by LINK below)
    return re.compile(rf"(?<!{PATH_CHARS})(?<!\]\()(?:\./)?((?:{'|'.join(map(re.escape, top_level))})/"
                      rf"{PATH_CHARS}*?\.(?:{'|'.join(EXTENSIONS)}))(?![\w*{{}}<>$~+-])")


def named_paths(text: str) -> set[str]:
    return {m.group(1) for m in path_pattern().finditer(text) if not PLACEHOLDER.search(m.group(1))}


def prose_of_python(source: str) -> str:
    """A Python file's comments and docstrings."""
    parts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(ast.get_docstring(node, clean=False) or "")
    return "\n".join(parts)


def scanned_text(name: str) -> str | None:
    """What of a checkout file is searched for named paths; None: nothing.

    - docs/results/: dated records of past runs, naming the files as they were at the run's commit.
    - assets/: weights, tokenizers and the logs of the runs that made them, except the model cards.
    - tests/: only comments and docstrings. A test's strings are its data: a preset it expects refused
      as missing, a file it writes into a temporary copy; one that should exist fails the test itself.
    - files that are not UTF-8 text (weights, images, clips)."""
    if name.startswith("docs/results/") or (name.startswith("assets/") and not name.endswith(".md")):
        return None
    try:
        text = (REPO_ROOT / name).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    if name.startswith("tests/") and name.endswith(".py"):
        return prose_of_python(text)
    return text


def broken_links(name: str, text: str) -> set[str]:
    """The relative link targets of a Markdown page that are not files (or folders) of the checkout."""
    files = checkout_files()
    # pymdownx.snippets pastes docs/snippets/ into the pages of docs/: their links are read from there
    base = "docs" if name.startswith("docs/snippets/") else os.path.dirname(name)
    broken = set()
    for target in LINK.findall(text):
        target = target.split("#")[0]
        if not target or re.match(r"[a-z][a-z0-9+.-]*:", target) or PLACEHOLDER.search(target):
            continue  # an anchor on the same page, a URL, or a placeholder
        path = os.path.normpath(os.path.join(base, target))
        if path not in files and not any(f.startswith(path.rstrip("/") + "/") for f in files):
            broken.add(target)
    return broken


def test_the_pattern_finds_this_repositorys_paths_only():
    line = ("caption/runners/ray.py (`docs/robustness.md`), ./tests/caption/runners/test_runner_ray.py; conf/gpu/h100.yaml: "
            "transformers/video_utils.py vllm/multimodal/media/video.py /work/main/caption/job.py "
            "conf/gpu/<tier>.yaml conf/model/*.yaml vidcap_ko/families/{family}.py caption/engines/ [x](assets/clip-path.svg)")
    assert named_paths(line) == {"caption/runners/ray.py", "docs/robustness.md", "tests/caption/runners/test_runner_ray.py",
                                 "conf/gpu/h100.yaml"}
    assert named_paths("job's runner spreads clips over (caption/runner_ray.py).") == {"caption/runner_ray.py"}


def test_every_path_the_repository_names_exists():
    files = checkout_files()
    missing, seen = {}, set()
    for name in sorted(files):
        text = scanned_text(name)
        if text is None:
            continue
        for path in named_paths(text):
            seen.add(path)
            if path not in files:
                missing.setdefault(path, []).append(name)
        if name.endswith(".md"):
            for target in broken_links(name, text):
                missing.setdefault(f"link ({target})", []).append(name)
    assert len(seen) > 100, f"only {len(seen)} named paths found: is the pattern still matching?"
    assert not missing, "named but not in the checkout:\n" + "\n".join(
        f"  {path}  named in {', '.join(where)}" for path, where in sorted(missing.items()))


def test_a_stale_markdown_link_is_found():
    page = "docs/a-page.md"
    assert broken_links(page, "[stages](architecture.md#stages), [svg](assets/clip-path.svg)") == set()
    assert broken_links(page, "[code](../caption/runners/ray.py) [url](https://example.org/x.md)") == set()
    assert broken_links(page, "[old](../caption/runner_ray.py) [gone](no-such-page.md)") == {
        "../caption/runner_ray.py", "no-such-page.md"}
    assert broken_links("docs/snippets/bench/x.md", "[run](results/prune)") == set()

