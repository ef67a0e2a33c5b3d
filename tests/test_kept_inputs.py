"""The suite's costliest inputs are kept between runs only while what made them is unchanged
(tests/support/made_once.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.support import made_once as module
from tests.support.made_once import made_once


@pytest.fixture
def kept(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "KEPT", tmp_path / "kept")
    monkeypatch.delenv("VIDCAP_TEST_FRESH_INPUTS", raising=False)
    return tmp_path / "kept"


def _maker(calls: list[str], tag: str):
    def make(folder):
        calls.append(tag)
        (folder / "clip.bin").write_text(tag)
        return {"tag": tag}

    return make


def test_an_input_is_made_once_then_found_until_its_maker_changes(kept, tmp_path, tmp_path_factory):
    maker = tmp_path / "maker.py"
    maker.write_text("ENCODER = 'x264'\n")
    other = tmp_path / "other_maker.py"
    other.write_text("")
    calls: list[str] = []
    name = f"clips-{uuid.uuid4().hex[:8]}"
    unrelated, _ = made_once(tmp_path_factory, f"{name}-2", _maker(calls, "unrelated"), made_by=[other])

    first, result = made_once(tmp_path_factory, name, _maker(calls, "first"), made_by=[maker])
    again, result_again = made_once(tmp_path_factory, name, _maker(calls, "again"), made_by=[maker])
    assert calls == ["unrelated", "first"] and again == first and result_again == result == {"tag": "first"}
    assert first.parent == kept and (first / "clip.bin").read_text() == "first"

    maker.write_text("ENCODER = 'x265'\n")  # the code that makes it changed: made afresh, the old one gone
    changed, result = made_once(tmp_path_factory, name, _maker(calls, "changed"), made_by=[maker])
    assert calls[-1] == "changed" and result == {"tag": "changed"} and changed != first
    assert not first.exists() and not first.with_name(first.name + ".json").exists()
    assert unrelated.is_dir(), "another input's folder, whose name begins with this one's, was removed"


def test_the_key_holds_the_versions_of_the_packages_that_encode(tmp_path, monkeypatch):
    maker = tmp_path / "maker.py"
    maker.write_text("")
    before = module.input_key([maker])
    assert module.input_key([maker]) == before
    real_version = module.metadata.version
    monkeypatch.setattr(module.metadata, "version",
                        lambda package: "99.0" if package == "av" else real_version(package))
    assert module.input_key([maker]) != before  # a PyAV of other FFmpeg, x264 and x265 builds


def test_a_failed_make_is_made_again_and_fresh_inputs_are_the_runs_own(kept, tmp_path, tmp_path_factory,
                                                                      monkeypatch):
    maker = tmp_path / "maker.py"
    maker.write_text("")
    name = f"clips-{uuid.uuid4().hex[:8]}"

    def broken(folder):
        (folder / "half.bin").write_text("half")
        raise RuntimeError("encoder died")

    with pytest.raises(RuntimeError, match="encoder died"):
        made_once(tmp_path_factory, name, broken, made_by=[maker])
    calls: list[str] = []
    folder, result = made_once(tmp_path_factory, name, _maker(calls, "whole"), made_by=[maker])
    assert calls == ["whole"] and not (folder / "half.bin").exists() and result == {"tag": "whole"}

    monkeypatch.setenv("VIDCAP_TEST_FRESH_INPUTS", "1")
    fresh, result = made_once(tmp_path_factory, name, _maker(calls, "fresh"), made_by=[maker])
    assert calls == ["whole", "fresh"] and fresh.parent != kept and result == {"tag": "fresh"}
    assert (folder / "clip.bin").read_text() == "whole"  # the kept one is left for later runs
