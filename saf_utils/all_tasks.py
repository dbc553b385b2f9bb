"""The registered tasks: the one place that names the task packages.

``reporting/`` asks this module for specs (:class:`saf_utils.taskspec.TaskSpec`) and never
names a task itself. A new task adds its ``spec`` module here.
"""

from __future__ import annotations

import importlib

from saf_utils.registry import Registry, params_text
from saf_utils.taskspec import DataSource, TaskSpec

TASK_MODULES = ("saf_utils.saf.spec", "saf_utils.argscichat.spec")


def specs() -> list[TaskSpec]:
    """Every registered task spec, in page order."""
    out: list[TaskSpec] = []
    for name in TASK_MODULES:
        out += list(importlib.import_module(name).SPECS)
    return out


def spec(task: str) -> TaskSpec | None:
    return next((s for s in specs() if s.name == task), None)


def registries(task: str | None = None) -> list[Registry]:
    """The system registries of ``task`` (None: of every task, each once), from the specs'
    ``systems`` ("module:ATTRIBUTE")."""
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
    """One line of words for the system ``name`` of ``task``: its role and its
    registration's description ("" where neither the task's registries nor
    :data:`COMPOSITES` know it)."""
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


def planned_systems(notebook: str, params: dict) -> dict[str, dict] | None:
    """The systems ``notebook`` runs with its parameters ``params``, each with the
    parameters it runs with, from the task module's ``PLANNED_SYSTEMS`` hook (notebook ->
    "module:function"); None where no task declares one. A bad selection or parameter is a
    ValueError."""
    for name in TASK_MODULES:
        hook = getattr(importlib.import_module(name), "PLANNED_SYSTEMS", {}).get(notebook)
        if hook:
            module, fn = hook.split(":")
            return getattr(importlib.import_module(module), fn)(params)
    return None


def system_params_lines(notebook: str, params: dict) -> list[str]:
    """Dry-run lines: every system ``notebook`` will run, with the parameters it runs with
    (:func:`planned_systems`); [] where no task declares the notebook's systems."""
    try:
        planned = planned_systems(notebook, params)
    except ValueError as err:  # an unknown system or parameter: say so, plainly
        return [f"      systems: error: {err}"]
    if planned is None:
        return []
    return [f"      runs {len(planned)} systems: {', '.join(planned)}"] + [
        f"      system {system}: {params_text(v) or '(no parameters)'}"
        for system, v in planned.items()]
