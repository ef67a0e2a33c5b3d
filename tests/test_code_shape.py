"""The shape of the code, checked from its source: imports run one way (no cycle among the project's
modules, lazy imports included), no module takes another module's private (`_name`) names, and no
function of the package code grows past ~60 lines (split it into steps a reader can name)."""

from __future__ import annotations

import ast
from pathlib import Path

from caption.settings.config import REPO_ROOT

PACKAGES = ("caption", "video_io", "quant", "eval", "vidcap_ko")  # what the wheel installs (pyproject.toml)
# Each installed package's floor: a package imports only packages on floors below its own (docs/architecture.md)
FLOORS = {"vidcap_ko": 0, "video_io": 1, "quant": 1, "eval": 1, "caption": 2}
# Imports that cross a floor, each with why (none today: the settings machinery every package reads presets
# and declares keys with is vidcap_ko/settings.py)
CROSSINGS: set[tuple[str, str]] = set()
# The commands beside the job, inside caption/: no module of the job imports them
COMMANDS = ("caption.report", "caption.export", "caption.make_model", "caption.bench")
MAX_FUNCTION_LINES = 60
MAX_MODULES_IN_CAPTION = 15  # caption/'s own folder: the entry points and the story; the rest by role below it


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package code."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, name: str, modules: dict) -> list[tuple[str, str | None, int]]:
    """(imported module, name taken from it or None, line) for every import in the file, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                # `from vidcap_ko.families import _qwen` takes a module, not a name of vidcap_ko/families/__init__.py
                found.append((submodule, None, node.lineno) if submodule in modules else (base, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in found if m.split(".")[0] in PACKAGES]


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The import cycles a depth-first walk of `graph` (node -> the nodes it imports) meets, each closed."""
    state: dict[str, str] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name)
    return cycles


def test_no_import_cycle_among_the_projects_modules():
    modules = _modules()
    graph = {name: sorted({m for m, _, _ in _imports(path, name, modules) if m in modules and m != name})
             for name, path in modules.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _room(module: str) -> str:
    """What a module is part of inside its package: its subpackage (caption.settings), or itself
    (caption.job); a package's __init__ is its own room."""
    return ".".join(module.split(".")[:2])


def test_no_two_rooms_of_a_package_import_each_other_even_by_way_of_others():
    """Inside each package, its subpackages and top modules import one way too (caption.settings never
    imports caption.output, which reads the settings), TYPE_CHECKING and function-level imports
    included: otherwise two folders can only be read together."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        room = _room(name)
        graph.setdefault(room, set())
        for imported, _, _ in _imports(path, name, modules):
            if imported.split(".")[0] == name.split(".")[0] and _room(imported) not in (room, imported.split(".")[0]):
                graph[room].add(_room(imported))
    graph = {room: sorted(found & graph.keys()) for room, found in graph.items()}
    cycles = _cycles(graph)
    assert not cycles, "rooms importing each other: " + "; ".join(" -> ".join(c) for c in cycles)


def test_each_package_imports_only_packages_on_the_floors_below_it():
    """vidcap_ko/ at the bottom imports no other package; video_io/, quant/ and eval/ import only vidcap_ko/
    (eval/ scores records without the job, quant/ plans memory without videos); caption/ imports them all."""
    modules = _modules()
    assert set(FLOORS) == set(PACKAGES)
    upward = sorted({(name.split(".")[0], m.split(".")[0], f"{path.relative_to(REPO_ROOT)}:{line}")
                     for name, path in modules.items() for m, _, line in _imports(path, name, modules)
                     if m.split(".")[0] != name.split(".")[0]
                     and FLOORS[m.split(".")[0]] >= FLOORS[name.split(".")[0]]
                     and (name.split(".")[0], m.split(".")[0]) not in CROSSINGS})
    assert not upward, "imports of a package on the same floor or above:\n" + "\n".join(
        f"{where}: {a} imports {b}" for a, b, where in upward)
    crossed = {(name.split(".")[0], m.split(".")[0]) for name, path in modules.items()
               for m, _, _ in _imports(path, name, modules)}
    assert CROSSINGS <= crossed, f"no longer crossed, take them off CROSSINGS: {sorted(CROSSINGS - crossed)}"


def test_no_module_of_the_job_imports_the_commands_beside_it():
    """caption-report, caption-export, caption-make-model and caption-bench read what the job writes, or run
    it: the job never imports them (nor does any package below it)."""
    modules = _modules()
    inside = [name for name in modules if not any(name == c or name.startswith(c + ".") for c in COMMANDS)]
    offenders = sorted(f"{modules[name].relative_to(REPO_ROOT)}:{line} imports {m}" for name in inside
                       for m, _, line in _imports(modules[name], name, modules)
                       if any(m == c or m.startswith(c + ".") for c in COMMANDS))
    assert not offenders, "\n".join(offenders)


def test_no_module_takes_another_modules_private_names():
    modules = _modules()
    tests = {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts): p for p in (REPO_ROOT / "tests").rglob("*.py")}
    offenders = []
    for name, path in {**modules, **tests}.items():
        for module, taken, line in _imports(path, name, {**modules, **tests}):
            private_module = any(part.startswith("_") and part != "__init__" for part in module.split(".")[1:])
            same_package = module.rpartition(".")[0] == name.rpartition(".")[0]
            if (taken or "").startswith("_") or (private_module and not same_package):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{line} takes {module}{'.' + taken if taken else ''}")
    assert not offenders, "private names taken across modules:\n" + "\n".join(offenders)


def test_no_function_of_the_package_code_is_longer_than_60_lines():
    long = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these into named steps:\n" + "\n".join(long)


def test_nothing_below_the_entry_points_imports_the_job():
    """caption/job.py is the story: the command (caption/cli.py) and the Python API (caption/api.py) run it;
    nothing it runs imports it back."""
    modules = _modules()
    importers = sorted(name for name, path in modules.items()
                       if any(m == "caption.job" for m, _, _ in _imports(path, name, modules)))
    assert importers == ["caption.api", "caption.cli"]


def test_caption_keeps_its_own_folder_to_the_story_and_the_rest_by_role():
    own = sorted(p.name for p in (REPO_ROOT / "caption").glob("*.py"))
    assert len(own) <= MAX_MODULES_IN_CAPTION, f"{len(own)} modules in caption/: move some into a subpackage " \
        f"that says what they hold: {own}"


def test_no_two_modules_have_names_that_differ_by_a_plural():
    """`record.py` beside `records.py` makes a reader open both to learn which is which."""
    stems: dict[str, list[str]] = {}
    for path in _modules().values():
        if path.name != "__init__.py":
            stems.setdefault(path.stem, []).append(str(path.relative_to(REPO_ROOT)))
    twins = [f"{stems[s]} and {stems[s + 's']}" for s in stems if s + "s" in stems]
    assert not twins, "rename one of each pair to say what it holds: " + "; ".join(twins)


# tests/'s own folders: the checks of the docs, of the install, shared test helpers, and data files
TESTS_OWN = {"docs", "setup", "support"}


def test_the_tests_mirror_the_packages():
    """Each folder of tests/ holding tests is a package's folder (tests/caption/settings/ for caption/settings/),
    or one of tests/'s own; so a module's tests are found where the module is."""
    tests = REPO_ROOT / "tests"
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and any(p.glob("test_*.py"))):
        relative = folder.relative_to(tests)
        if relative.parts[0] in TESTS_OWN:
            continue
        assert (REPO_ROOT / relative / "__init__.py").is_file(), f"tests/{relative}/ mirrors no package folder"
