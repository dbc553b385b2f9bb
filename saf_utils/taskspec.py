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
class Published:
    """What a paper or model card reports for one system on one dataset and split: cited on
    the pages beside the run's numbers, never measured here and never a record.

    ``values``: (metric name in this collection, value as the source prints it); a value
    ``None`` says the source reports that metric and the pages do not quote it. ``scale``:
    the scale the source prints, ``"percent"`` (0-100) or ``"0-1"``; a page converts a value
    to the metric's own scale only where the metric is the same (:attr:`comparable`).
    """

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

    def __post_init__(self) -> None:
        if self.scale not in ("percent", "0-1"):
            raise ValueError(f"published {self.system!r} ({self.source}): scale "
                             f"{self.scale!r} is neither 'percent' nor '0-1'")


@dataclass(frozen=True)
class TaskSpec:
    """One record task (the ``task`` field of its records): its title in the index, the
    headline metrics in order (the first one leads the sentence; ``headline_note`` says why
    it leads), its splits in page order, the notebooks that write it, the data it reads, the
    published numbers it is compared with (:class:`Published`) and notes the index shows
    under a split's numbers (``split_notes``: (split, sentence)).

    ``headline`` is the one meaning of "headline metrics" in the collection: the few the
    index and its sentences lead with. Every other metric a task scores is named in its
    evaluation module (SAF: ``saf.evaluate.SCORED_METRICS``)."""

    name: str
    title: str
    headline: tuple[str, ...]
    splits: tuple[str, ...]
    notebooks: tuple[str, ...]
    source: DataSource
    published: tuple[Published, ...] = ()
    headline_note: str = ""
    split_notes: tuple[tuple[str, str], ...] = ()
