"""What a task declares so that the generic layers (runner, pages) can serve it: one
:class:`TaskSpec` per record task in the task package's ``spec.py``, collected by
:mod:`saf_utils.all_tasks` (adding a task: docs/recipes.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class DataSource:
    """A dataset a notebook reads (the parameter ``param``), checked before anything runs: a
    local folder (``param``, else ``env``) must exist; with neither, the hub copy must be
    cached or ``host`` reachable. ``is_hub_id``: whether a value may name a hub copy."""

    name: str
    param: str
    env: str
    hub: str
    host: str
    cached: Callable[[str], bool]
    is_hub_id: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class Published:
    """What a paper or model card reports for one system on one dataset and split: cited on
    the pages beside the run's numbers, never a record. ``values``: (metric, value as the
    source prints it, None: reported but not quoted, ``unquoted`` says why); ``scale``:
    "percent" or "0-1"."""

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
    """One record task (the ``task`` field of its records): its title, the headline metrics
    in order (the one meaning of "headline metrics": the few the index leads with; the first
    leads the sentence), its splits in page order, the notebooks that write it, the data it
    reads, published numbers and notes shown under a split's numbers."""

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
