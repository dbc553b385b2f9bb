"""The registered tasks: the one place that names the task packages.

``reporting/`` asks this module for specs (:class:`saf_utils.taskspec.TaskSpec`) and never
names a task itself. A new task adds its ``spec`` module here.
"""

from __future__ import annotations

import importlib

from saf_utils.registry import params_text
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


def declared_data_sources() -> list[DataSource]:
    """The distinct data sources of the registered tasks, in first-use order."""
    seen: dict[str, DataSource] = {}
    for s in specs():
        seen.setdefault(s.source.name, s.source)
    return list(seen.values())


def system_params_lines(notebook: str, params: dict) -> list[str]:
    """Dry-run lines: the parameters every system of ``notebook`` runs with (defaults of its
    dataclass updated by the notebook's ``system_params``), from the task module's
    ``SYSTEM_PARAMS`` hook (notebook -> "module:function"); [] where no task declares one."""
    for name in TASK_MODULES:
        hook = getattr(importlib.import_module(name), "SYSTEM_PARAMS", {}).get(notebook)
        if hook:
            module, fn = hook.split(":")
            try:
                values = getattr(importlib.import_module(module), fn)(
                    params.get("system_params"))
            except ValueError as err:  # an unknown system or parameter: say so, plainly
                return [f"      system_params: error: {err}"]
            run = params.get("systems")  # None: every registered one
            return [f"      system {system}: {params_text(v) or '(no parameters)'}"
                    for system, v in values.items() if run is None or system in run]
    return []
