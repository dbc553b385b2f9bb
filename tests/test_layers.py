"""Imports run one way: shared layers <- task packages, inside saf_utils; and between the two
packages: saf_utils never imports notebook_reports, notebook_reports never imports a task package
(saf_utils.saf, saf_utils.argscichat: it finds tasks through their declared specs).

Every import, at module level or inside a function, is checked (ast), so a cycle cannot hide
behind a function-level import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import notebook_reports
import saf_utils

ROOT = Path(saf_utils.__file__).parent
TOOL = Path(notebook_reports.__file__).parent
TASKS = ("saf", "argscichat")
#: layer of a module: 0 shared (the rooms data/, encoders/, metrics/, statistics/, training/
#: and the top-level text, registry, determinism, figures, taskspec), 1 a task package,
#: 2 the tool (notebook_reports)


def module_name(path: Path, root: Path | None = None) -> str:
    parts = path.relative_to((root or ROOT).parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> tuple[int, str]:
    """(layer, task package or "") of a saf_utils or notebook_reports module."""
    if module.split(".")[0] == TOOL.name:
        return 2, ""
    first = module.split(".")[1] if module.count(".") else ""
    if first in TASKS:
        return 1, first
    return 0, ""


def imports(path: Path, root: Path | None = None) -> list[tuple[int, str]]:
    """(line, module) of every saf_utils or notebook_reports import in a file under ``root``
    (default :data:`ROOT`; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = module_name(path, root)
    package = name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
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
            # ``from saf_utils.training import jobs`` imports the module saf_utils.training.jobs
            out += [(node.lineno, n if (ROOT.parent / n.replace(".", "/")).with_suffix(".py")
                     .is_file() or (ROOT.parent / n.replace(".", "/")).is_dir() else base)
                    for n in names]
    ours = (ROOT.name, TOOL.name)
    return [(line, m) for line, m in out if m.split(".")[0] in ours]


def violations() -> list[str]:
    """Imports from a lower layer to a higher one, between two task packages, or from the tool
    to a task package."""
    bad = []
    for root in (ROOT, TOOL):
        for path in sorted(root.rglob("*.py")):
            here = module_name(path, root)
            mine, my_task = layer(here)
            for line, target in imports(path, root):
                theirs, their_task = layer(target)
                if theirs > mine or (mine == 1 and theirs == 1 and their_task != my_task) \
                        or (mine == 2 and theirs == 1):
                    bad.append(f"{path.relative_to(root.parent)}:{line}: {here} (layer "
                               f"{mine}) imports {target} (layer {theirs})")
    return bad


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    assert violations() == []


def test_the_walk_sees_function_level_and_relative_imports(tmp_path, monkeypatch) -> None:
    pkg, tool = tmp_path / "saf_utils", tmp_path / "notebook_reports"
    for d in ("saf", "argscichat"):
        (pkg / d).mkdir(parents=True)
    tool.mkdir()
    for f in ("__init__.py", "saf/__init__.py", "argscichat/__init__.py", "stats.py",
              "taskspec.py"):
        (pkg / f).write_text("")
    (tool / "__init__.py").write_text("")
    (pkg / "text.py").write_text("def f():\n    from saf_utils.saf import data\n")
    (pkg / "saf" / "data.py").write_text("from notebook_reports import x\nimport saf_utils.stats\n")
    (tool / "x.py").write_text("import saf_utils.stats\n\n\ndef f():\n"
                               "    from saf_utils.saf import data\n")
    (tool / "y.py").write_text("from saf_utils import argscichat\n")
    (tool / "z.py").write_text("from . import x\nfrom saf_utils.taskspec import TaskSpec\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    monkeypatch.setattr(__import__(__name__), "TOOL", tool)
    found = violations()
    assert len(found) == 4, found
    assert any("text.py:2" in v and "saf_utils.saf.data" in v for v in found)
    assert any("saf/data.py:1" in v and "notebook_reports.x" in v for v in found)
    assert any("notebook_reports/x.py:5" in v and "saf_utils.saf.data" in v for v in found)
    assert any("notebook_reports/y.py:1" in v and "saf_utils.argscichat" in v for v in found)


def module_cycles() -> list[list[str]]:
    """Cycles in the module import graph (any import, function-level included): a cycle makes
    two modules one unit that can only be read, tested and changed together."""
    graph: dict[str, set[str]] = {}
    for root in (ROOT, TOOL):
        for path in sorted(root.rglob("*.py")):
            here = module_name(path, root)
            graph[here] = {t for _, t in imports(path, root) if t != here}
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
    return [c for c in cycles if not any(m in (ROOT.name, TOOL.name) or graph.get(m) is None
                                         for m in c)]


def test_no_import_cycles_between_modules() -> None:
    assert module_cycles() == []


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

