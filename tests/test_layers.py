"""Imports run one way: shared layers <- task packages <- reporting (and the runner's CLI).

Every import in the package, at module level or inside a function, is checked (ast), so a
cycle cannot hide behind a function-level import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import saf_utils

ROOT = Path(saf_utils.__file__).parent
TASKS = ("saf", "argscichat")
#: layer of a module: 0 shared (the rooms data/, encoders/, metrics/, statistics/, training/
#: and the top-level text, registry, determinism, figures, taskspec),
#: 1 a task package, 2 the task-spec registry (saf_utils.all_tasks), reporting and the CLI.
TOP = {"reporting": 2, "run": 2, "all_tasks": 2}  # all_tasks: the registry of task specs


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> tuple[int, str]:
    """(layer, task package or "") of a saf_utils module."""
    first = module.split(".")[1] if module.count(".") else ""
    if first in TOP:
        return TOP[first], ""
    if first in TASKS:
        return 1, first
    return 0, ""


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every saf_utils import in a file (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" \
        else module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{a.name}" for a in node.names]
            # ``from saf_utils import jobs`` imports the module saf_utils.training.jobs
            out += [(node.lineno, n if (ROOT.parent / n.replace(".", "/")).with_suffix(".py")
                     .is_file() or (ROOT.parent / n.replace(".", "/")).is_dir() else base)
                    for n in names]
    return [(line, m) for line, m in out if m == "saf_utils" or m.startswith("saf_utils.")]


def violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        here = module_name(path)
        mine, my_task = layer(here)
        for line, target in imports(path):
            theirs, their_task = layer(target)
            if theirs > mine or (mine == theirs == 1 and their_task != my_task):
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {here} (layer {mine}) "
                           f"imports {target} (layer {theirs})")
    return bad


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    assert violations() == []


#: The foundation of the shared layer: modules and the data/ room that every room builds on
#: and that import no other room (encoders/, metrics/, statistics/, training/).
FOUNDATION = ("text", "registry", "determinism", "figures", "taskspec", "data")


def test_the_foundation_imports_no_other_room() -> None:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        here = module_name(path)
        if here.split(".")[1:2] and here.split(".")[1] in FOUNDATION:
            bad += [f"{here}:{line} imports {target}" for line, target in imports(path)
                    if target.count(".") and target.split(".")[1] not in FOUNDATION]
    assert bad == []


def test_the_walk_sees_function_level_and_relative_imports(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "saf_utils"
    (pkg / "saf").mkdir(parents=True)
    (pkg / "reporting").mkdir()
    for f in ("__init__.py", "saf/__init__.py", "reporting/__init__.py", "reporting/x.py"):
        (pkg / f).write_text("")
    (pkg / "stats.py").write_text("def f():\n    from saf_utils.saf import data\n")
    (pkg / "saf" / "data.py").write_text("from ..reporting import x\nimport saf_utils.stats\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    found = violations()
    assert len(found) == 2, found
    assert any("stats.py:2" in v and "saf_utils.saf.data" in v for v in found)
    assert any("saf/data.py:1" in v and "saf_utils.reporting.x" in v for v in found)


def module_cycles() -> list[list[str]]:
    """Cycles in the module import graph (any import, function-level included): a cycle makes
    two modules one unit that can only be read, tested and changed together."""
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        here = module_name(path)
        graph[here] = {t for _, t in imports(path) if t != here}
    cycles, seen = [], set()

    def walk(node: str, stack: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cyc = stack[stack.index(nxt):]
                key = frozenset(cyc)
                if key not in seen and not any(m.endswith(".__init__") for m in cyc):
                    seen.add(key)
                    cycles.append([*cyc, nxt])
            elif len(stack) < 12:
                walk(nxt, [*stack, nxt])

    for start in sorted(graph):
        walk(start, [start])
    # a package imports its own submodules in __init__; that is no cycle between modules
    return [c for c in cycles if not any(m == "saf_utils" or graph.get(m) is None for m in c)]


def test_no_import_cycles_between_modules() -> None:
    assert module_cycles() == []
