"""A metric is one object, :class:`Metric` (name, direction, scale, level, resampling,
definition, reference), registered once in :data:`METRICS`; every compute function takes
``(gold, pred, **options)``, references first (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from saf_utils.statistics.uncertainty import Statistic

LEVELS = ("item", "corpus", "output", "summary")
#: What a metric compares (the inputs a task passes to its scorer).
INPUTS = ("labels", "scores", "texts", "sentence_sets", "outputs", "")


@dataclass(frozen=True)
class Score:
    """One scorer call: the value, the per-item values (NaN: not scored) or sufficient
    statistics (corpus level), and the statistic of summed rows (None for output metrics)."""

    value: float
    per_item: np.ndarray | None
    statistic: Statistic | None = None


@dataclass(frozen=True)
class Metric:
    """A registered metric. ``scale``: "0-1", "0-100", ">=0", "count", "any" or a closed
    interval "[lo, hi]"; ``inputs``: one of :data:`INPUTS`; ``library``: empty for own code."""

    name: str
    _: KW_ONLY
    level: str = "item"
    higher_is_better: bool = True
    scale: str = "0-1"
    inputs: str = ""
    description: str = ""
    definition: str = ""
    reference: str = ""
    library: str = ""
    compute: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    where: str = ""  # who computes a summary metric (no compute function)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"metric {self.name!r}: level {self.level!r} not in {LEVELS}")
        if self.inputs not in INPUTS:
            raise ValueError(f"metric {self.name!r}: inputs {self.inputs!r} not in {INPUTS}")
        if (self.compute is None) != (self.level == "summary"):
            raise ValueError(f"metric {self.name!r}: a {self.level} metric "
                             f"{'needs' if self.compute is None else 'has no'} compute function")
        if self.scale != "any" and self.bounds is None:
            raise ValueError(f"metric {self.name!r}: scale {self.scale!r} is none of "
                             "['0-1', '0-100', '>=0', 'count', 'any'] nor an interval like "
                             "'[-1, 1]'")

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The range a value lies in, from the scale ("0-1" -> (0, 1); ">=0" and "count" ->
        (0, inf)); None where the scale fixes none."""
        if self.scale in (">=0", "count"):
            return (0.0, float("inf"))
        if self.scale in ("0-1", "0-100"):
            return (0.0, float(self.scale[2:]))
        return _interval(self.scale)

    @property
    def range(self) -> str:
        """The scale in words."""
        if self.bounds is None:
            return "no fixed range"
        lo, hi = self.bounds
        if hi == float("inf"):
            return "0 or more" + (" (a count)" if self.scale == "count" else "")
        return f"{lo:g} to {hi:g}"

    def options(self, available: Mapping[str, Any]) -> dict[str, Any]:
        """Of a task's ``available`` options (its label set, a model), those the compute
        function names as parameters (a ``**kwargs`` passed on to a library takes none)."""
        import inspect

        if self.compute is None:
            return {}
        takes = inspect.signature(self.compute).parameters
        return {k: v for k, v in available.items() if k in takes}

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def implementation(self) -> str:
        """Where it is computed: the compute function (and its library)."""
        fn = self.compute
        where = f"{fn.__module__}.{fn.__name__}" if fn is not None else self.where
        return f"{where} ({self.library})" if self.library and where else where

    @property
    def resampling(self) -> str:
        """How intervals and tests resample it, in words (the card's line)."""
        return {"item": "per-item values (mean of the scored items)",
                "corpus": "per-item sufficient statistics, summed (exact corpus value)",
                "output": "not resampled (a statistic of the outputs)",
                "summary": "not resampled (recorded as computed)"}[self.level]

    def _call(self, gold: Sequence[Any], pred: Sequence[Any], **options: Any) -> Any:
        if self.compute is None:
            raise ValueError(f"metric {self.name!r} is recorded by {self.where or 'its code'}; "
                             "it has no scorer here")
        return self.compute(gold, pred, **options)

    def items(self, gold: Sequence[Any], pred: Sequence[Any], **options: Any) -> list[float]:
        """Per-item values of an item metric (NaN: not scored)."""
        if self.level != "item":
            raise ValueError(f"metric {self.name!r} is {self.level}-level, not per item")
        return [float(x) for x in self._call(gold, pred, **options)]

    def score(self, gold: Sequence[Any], pred: Sequence[Any], **options: Any) -> Score:
        """The point value with the per-item values (or sufficient statistics) it came from."""
        if self.level == "item":
            v = np.asarray(self.items(gold, pred, **options), dtype=float)
            ok = ~np.isnan(v)
            return Score(float(v[ok].mean()) if ok.any() else float("nan"), v,
                         lambda s: s[:, 0] / s[:, 1])
        if self.level == "corpus":
            mat, fn = self._call(gold, pred, **options)
            return Score(float(fn(np.asarray(mat).sum(0)[None])[0]), np.asarray(mat), fn)
        return Score(float(self._call(gold, pred, **options)), None)

    def statistics(self, gold: Sequence[Any], pred: Sequence[Any],
                   **options: Any) -> tuple[np.ndarray, Statistic]:
        """Per-item sufficient statistics and their statistic, for
        :mod:`saf_utils.statistics.uncertainty` (an unscored item is ``(0, 0)``)."""
        if self.level not in ("item", "corpus"):
            raise ValueError(f"metric {self.name!r} is {self.level}-level: not resampled")
        s = self.score(gold, pred, **options)
        if self.level == "corpus":
            return s.per_item, s.statistic
        ok = ~np.isnan(s.per_item)
        return np.column_stack([np.where(ok, s.per_item, 0.0), ok.astype(float)]), s.statistic


METRICS: dict[str, Metric] = {}


def add_metric(m: Metric) -> Metric:
    """Register ``m`` (the name must be new, or registered identically)."""
    if m.name in METRICS and METRICS[m.name] != m:
        raise ValueError(f"metric {m.name!r} is already registered differently")
    METRICS[m.name] = m
    return m


def register_metric(name: str, **declared: Any) -> Callable[[Callable], Callable]:
    """Decorator: register the decorated function as the compute function of metric ``name``
    (the other :class:`Metric` fields as keywords); the function is returned unchanged."""
    def deco(fn: Callable) -> Callable:
        add_metric(Metric(name, compute=fn, **declared))
        return fn

    return deco


def metric(name: str) -> Metric:
    """The registered metric; an unregistered name is higher-is-better on any scale."""
    return METRICS.get(name) or Metric(name, level="summary", scale="any",
                                       description="not registered")


def lower_is_better(name: str) -> bool:
    return not metric(name).higher_is_better


def of_level(names: Sequence[str], level: str) -> tuple[str, ...]:
    """The names among ``names`` whose metric is of ``level`` (order kept)."""
    return tuple(n for n in names if metric(n).level == level)


def bounds(name: str) -> tuple[float, float] | None:
    """:attr:`Metric.bounds` of the metric ``name``; intervals are clipped to it."""
    return metric(name).bounds


def _interval(scale: str) -> tuple[float, float] | None:
    """(lo, hi) of a scale written "[lo, hi]" (lo < hi, finite); None for any other text."""
    import math

    text = scale.strip()
    if not (text.startswith("[") and text.endswith("]")) or text.count(",") != 1:
        return None
    try:
        lo, hi = (float(x) for x in text[1:-1].split(","))
    except ValueError:
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and lo < hi else None


def scale_label(name: str) -> str:
    """Direction and range for a reader: "↑ 0–1", "↓ ≥ 0", "↑" (no fixed range)."""
    arrow = "↓" if lower_is_better(name) else "↑"
    b = bounds(name)
    if b is None:
        return arrow
    if b[1] == float("inf"):
        return f"{arrow} ≥ {b[0]:g}"
    return f"{arrow} {b[0]:g}–{b[1]:g}"


add_metric(Metric("train_loss", level="summary", higher_is_better=False, scale="any",
                  description="training loss at the end",
                  definition="Mean training loss reported by the trainer at the end of "
                  "fine-tuning.", reference="transformers documentation",
                  library="transformers Trainer", where="saf_utils.training.seq2seq"))
