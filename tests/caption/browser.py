"""Load a page in Debian's headless Chromium (offline) and read back the DOM its scripts rendered."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

SETUP_HINT = "run `make setup` (it installs the Debian packages chromium and fonts-nanum)"
# Flags verified offline here (measured on these machines, 2026-11): no network, no first-run work.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=8000"]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(f"chromium is not installed: {SETUP_HINT}")
    fonts = subprocess.run(["fc-list", ":lang=ko", "family"], capture_output=True, text=True).stdout
    if not fonts.strip():
        pytest.fail(f"no Korean font installed (Hangul would render as boxes): {SETUP_HINT}")
    return path


def _run(page: Path, fragment: str, extra: list[str], profile: Path, limit_s: float = 180) -> str:
    """Chromium's stdout. It runs in a session of its own: on timeout the whole process group is killed,
    since its helper processes keep the output pipes open after the main one dies (subprocess.run's
    timeout then waits on them forever; seen here: a zygote spinning for 15 minutes)."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {limit_s:g} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # helpers left behind after a normal exit, if any
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {err[-2000:]}"
    return out


def dump_dom(page: Path, profile: Path, fragment: str = "") -> "RenderedPage":
    return RenderedPage.parse(_run(page, fragment, ["--dump-dom"], profile))


def screenshot(page: Path, png: Path, profile: Path, fragment: str = "", size: str = "1280,2000") -> Path:
    _run(page, fragment, [f"--screenshot={png}", f"--window-size={size}"], profile)
    assert png.is_file(), f"chromium wrote no screenshot at {png}"
    return png


class RenderedPage(HTMLParser):
    """The rendered clips (<article class="clip">): video, status, images, captions, scores, texts."""

    def __init__(self):
        super().__init__()
        self.clips: list[dict] = []
        self.ids: dict[str, dict] = {}  # element id -> {"attrs", "text"}
        self._stack: list[tuple[str, dict]] = []

    @classmethod
    def parse(cls, html: str) -> "RenderedPage":
        page = cls()
        page.feed(html)
        return page

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "article" and "clip" in classes:
            self.clips.append({"video": attrs.get("data-video"), "status": attrs.get("data-status"),
                               "imgs": [], "captions": [], "meteors": [], "errors": [], "placeholder": None,
                               "text": ""})
        if self.clips and tag == "img" and self._inside("article"):
            self.clips[-1]["imgs"].append(attrs.get("src") or "")
        if "id" in attrs:
            self.ids[attrs["id"]] = {"attrs": attrs, "text": ""}
        if tag not in ("img", "meta", "input", "br", "link"):
            self._stack.append((tag, {"classes": classes, "id": attrs.get("id"), "text": ""}))

    def handle_endtag(self, tag):
        while self._stack:
            name, info = self._stack.pop()
            self._close(name, info)
            if name == tag:
                break

    def _inside(self, tag):
        return any(name == tag for name, _ in self._stack)

    def _close(self, name, info):
        text = info["text"].strip()
        if self._stack:
            self._stack[-1][1]["text"] += info["text"]
        if info["id"] in self.ids:
            self.ids[info["id"]]["text"] = text
        if not self.clips or not self._inside("article") and name != "article":
            return
        clip = self.clips[-1]
        if name == "td" and "caption" in info["classes"]:
            clip["captions"].append(info.get("own", text))
        elif name == "td" and "meteor" in info["classes"]:
            clip["meteors"].append(text)
        elif name == "td" and "err" in info["classes"]:
            clip["errors"].append(text)
        elif name == "div" and "placeholder" in info["classes"]:
            clip["placeholder"] = text
        elif name == "article":
            clip["text"] = text

    def handle_data(self, data):
        if self._stack:
            name, info = self._stack[-1]
            info["text"] += data
            if name == "td" and "caption" in info["classes"]:
                info["own"] = info.get("own", "") + data  # the caption itself, not its reference line
