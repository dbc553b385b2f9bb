"""What a task declares so that the generic layers (runner, pages) can serve it.

A task package (``saf/``, ``argscichat/``) writes one :class:`TaskSpec` per record task in its
``spec.py``; :mod:`saf_utils.tasks` collects them, and ``reporting/`` iterates over those
specs without naming a task. Adding a task is a package with a ``spec.py`` and one line in
:data:`saf_utils.tasks.TASK_MODULES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class DataSource:
    """A dataset a notebook reads, and how the runner checks it before anything runs.

    A notebook that declares the parameter ``param`` needs it: a local folder (the parameter,
    else the environment variable ``env``) must exist; with neither, the hub copy (``hub``)
    must be cached (``cached(hub)``) or ``host`` reachable. ``is_hub_id(value)`` says whether
    a value that is no existing folder may name a hub copy instead (``None``: only folders).
    """

    name: str
    param: str
    env: str
    hub: str
    host: str
    cached: Callable[[str], bool]
    is_hub_id: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """One record task (the ``task`` field of its records): its title in the index, the
    headline metrics in order (the first one leads the sentence), its splits in page order,
    the notebooks that write it and the data it reads.

    ``headline`` is the one meaning of "headline metrics" in the collection: the few the
    index and its sentences lead with. Every other metric a task scores is named in its
    evaluation module (SAF: ``saf.evaluate.SCORED_METRICS``)."""

    name: str
    title: str
    headline: tuple[str, ...]
    splits: tuple[str, ...]
    notebooks: tuple[str, ...]
    source: DataSource
