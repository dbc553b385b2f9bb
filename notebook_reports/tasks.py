"""The tasks the runner and the pages serve, found through the entry-point group
:data:`GROUP` (pyproject.toml): each entry names a task's spec module (``SPECS``, a list of
:class:`saf_utils.taskspec.TaskSpec`, and optionally ``PLANNED_SYSTEMS``). This package imports
no task module by name; a new task declares its entry point."""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from types import ModuleType

from notebook_reports.profiles import RunnerError
from saf_utils.registry import Registry, params_text
from saf_utils.taskspec import DataSource, TaskSpec

GROUP = "notebook_reports.tasks"


@cache
def task_modules() -> tuple[ModuleType, ...]:
    """The declared spec modules, in the order of the entry points' names (page order)."""
    found = sorted(entry_points(group=GROUP), key=lambda ep: ep.name)
    if not found:
        raise RunnerError(f"no task declares the entry point group {GROUP!r}: is the project "
                          "installed (make install, or pip install -e .)?")
    return tuple(ep.load() for ep in found)


def specs() -> list[TaskSpec]:
    """Every declared task spec, in page order."""
    return [s for module in task_modules() for s in module.SPECS]


def spec(task: str) -> TaskSpec | None:
    return next((s for s in specs() if s.name == task), None)


def registries(task: str | None = None) -> list[Registry]:
    """The system registries of ``task`` (None: of every task, each once)."""
    out: dict[str, Registry] = {}
    for sp in specs():
        if task is None or sp.name == task:
            for ref in sp.systems:
                module, attr = ref.split(":")
                out.setdefault(ref, getattr(importlib.import_module(module), attr))
    return list(out.values())


#: Names the notebooks give composites (not registered): what each is.
COMPOSITES = {
    "val_chosen": "on each fold, the system chosen on that fold's validation split",
    "val_best_baseline": "on each fold, the baseline with the best validation score",
}


def system_line(task: str, name: str) -> str:
    """One line of words for the system ``name`` of ``task`` ("" if unknown)."""
    from saf_utils.registry import ROLE_WORDS

    for reg in registries(task):
        if name in reg:
            e = reg[name]
            return (f"{e.description.rstrip('.')} (role {e.role}: "
                    f"{ROLE_WORDS.get(e.role, e.role)})")
    return COMPOSITES.get(name, "")


def declared_data_sources() -> list[DataSource]:
    """The distinct data sources of the registered tasks, in first-use order."""
    seen: dict[str, DataSource] = {}
    for s in specs():
        seen.setdefault(s.source.name, s.source)
    return list(seen.values())


def system_params_lines(notebook: str, params: dict) -> list[str]:
    """Dry-run lines: every system ``notebook`` will run with ``params``, with its parameters,
    from the task module's ``PLANNED_SYSTEMS`` hook."""
    hooks = [getattr(module, "PLANNED_SYSTEMS", {}).get(notebook) for module in task_modules()]
    if not (hook := next(filter(None, hooks), None)):
        return []
    module, fn = hook.split(":")
    try:
        planned = getattr(importlib.import_module(module), fn)(params)
    except ValueError as err:  # an unknown system or parameter: say so, plainly
        return [f"      systems: error: {err}"]
    return [f"      runs {len(planned)} systems: {', '.join(planned)}"] + [
        f"      system {system}: {params_text(v) or '(no parameters)'}"
        for system, v in planned.items()]
