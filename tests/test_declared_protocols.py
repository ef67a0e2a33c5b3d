"""What one part of the code asks of another's objects is declared (a typing.Protocol), never probed:
no `getattr(obj, "name", ...)` or `hasattr(obj, "name")` for a method some Protocol of the package code
declares (the request stream's ready()/prepend() once travelled that way, undeclared)."""

from __future__ import annotations

import ast

from caption.settings.config import REPO_ROOT
from tests.test_code_shape import PACKAGES


def _package_files():
    for package in PACKAGES:
        yield from sorted((REPO_ROOT / package).rglob("*.py"))


def _protocol_members() -> dict[str, str]:
    """Method name -> the Protocol declaring it, for every Protocol class of the package code."""
    members = {}
    for path in _package_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    (b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")) == "Protocol" for b in node.bases):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        members[item.name] = f"{path.relative_to(REPO_ROOT)} {node.name}"
    return members


def test_the_request_streams_methods_are_declared():
    members = _protocol_members()
    assert {"ready", "prepend"} <= set(members), members


def test_no_protocol_method_is_probed_by_name():
    members = _protocol_members()
    probes = []
    for path in _package_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in members):
                probes.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.func.id}(..., "
                              f"{node.args[1].value!r}) (declared by {members[node.args[1].value]})")
    assert not probes, "undeclared protocols, probed by name: " + "; ".join(probes)
