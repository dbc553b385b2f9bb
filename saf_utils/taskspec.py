"""What a task declares so that the runner and the pages can serve it: one :class:`TaskSpec`
per record task in its package's ``spec.py``, an entry point of the group
``notebook_reports.tasks`` (so they find it without naming a task)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class DataSource:
    """A dataset a notebook reads (parameter ``param``), checked before anything runs: a local
    folder (``param``, else ``env``) must exist, else the hub copy be cached or ``host``
    reachable; ``is_hub_id``: whether a value may name a hub copy."""

    name: str
    param: str
    env: str
    hub: str
    host: str
    cached: Callable[[str], bool]
    is_hub_id: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class Published:
    """What a paper or model card reports for one system, dataset and split, cited beside the
    run's numbers (never a record); ``values``: (metric, value as printed, or None: not
    quoted, ``unquoted`` says why); ``scale``: "percent" or "0-1"."""

    system: str
    source: str
    url: str
    dataset: str
    split: str
    scale: str
    values: tuple[tuple[str, float | None], ...]
    #: metrics computed the same way here (others, e.g. BERTScore on another model, are
    #: quoted for context only)
    comparable: tuple[str, ...] = ()
    #: the registered system that is the published one, run here ("" none): its measured
    #: value is set beside the published one as a reproduction check
    measured: str = ""
    #: where a value is None: why it could not be quoted (and where it is published)
    unquoted: str = ""

    def __post_init__(self) -> None:
        if self.scale not in ("percent", "0-1"):
            raise ValueError(f"published {self.system!r} ({self.source}): scale "
                             f"{self.scale!r} is neither 'percent' nor '0-1'")


@dataclass(frozen=True)
class TaskSpec:
    """One record task (the ``task`` field of its records): title, headline metrics (the few
    the index leads with, the first leads the sentence), splits in page order, notebooks,
    data, published numbers and notes shown under a split's numbers."""

    name: str
    title: str
    headline: tuple[str, ...]
    splits: tuple[str, ...]
    notebooks: tuple[str, ...]
    source: DataSource
    published: tuple[Published, ...] = ()
    headline_note: str = ""
    split_notes: tuple[tuple[str, str], ...] = ()
    #: the registries of the task's systems, as "module:ATTRIBUTE" (a
    #: :class:`saf_utils.registry.Registry`): the words for each system's name on the pages
    systems: tuple[str, ...] = ()
