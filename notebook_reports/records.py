"""The one metric-record helper every notebook uses: a :class:`Recorder` for its output
folder appends every number it reports as a tidy row to ``records.jsonl`` at once (a notebook
that fails half-way keeps what it measured); the runner merges them into ``metrics.json``."""

from __future__ import annotations

import json
import math
import os
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from notebook_reports.manifest import PROJECT_ROOT
from saf_utils.data.artifacts import ITEMS_FILE, RECORDS_FILE, append_jsonl
from saf_utils.data.provenance import data_sources
from saf_utils.registry import ROLES

SOURCES_FILE = "data_sources.json"
KINDS = ("result", "analysis", "tuning")
ITEM_COLUMNS = ("task", "dataset", "split", "system", "metric", "item", "cluster", "value",
                "seed", "fold")


@dataclass(frozen=True)
class MetricRecord:
    notebook: str
    task: str
    dataset: str
    split: str
    system: str
    metric: str
    value: float
    seed: int | None = None
    fold: int | None = None
    kind: str = "result"
    subset: str | None = None
    role: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    method: str | None = None  # how the interval / p was computed (saf_utils.statistics.protocol)
    estimand: str | None = None  # what the number is about ("new questions", ...)
    note: str | None = None  # a caveat shown beside the system (e.g. unequal inputs)


#: The optional fields of a record (:meth:`Recorder.add`'s keyword arguments).
DETAILS = tuple(f.name for f in fields(MetricRecord) if f.default is not MISSING)
INTERACTIVE = PROJECT_ROOT / "reports" / "interactive"  # artifacts of a notebook run by hand


class Recorder:
    """Collects a notebook's metric records and the data files it read."""

    def __init__(self, notebook: str, output_dir: str | os.PathLike | None = None):
        self.notebook = notebook
        self.dir = Path(output_dir) if output_dir else INTERACTIVE / notebook
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RECORDS_FILE
        self.records: list[MetricRecord] = []
        self.path.write_text("")  # a re-run of the notebook starts its records afresh
        (self.dir / ITEMS_FILE).write_text("")

    def add(self, task: str, dataset: str, split: str, system: str, metric: str, value: float,
            **details: Any) -> MetricRecord:
        """Append one number; NaN/inf are refused, so a broken metric cannot hide in a table.

        ``details``: the optional fields of :class:`MetricRecord`. ``kind``: result, analysis
        (a breakdown, e.g. per question) or tuning (a validation grid point; ``subset="chosen"``
        marks the val-chosen system). ``subset`` names the group a number belongs to."""
        if unknown := sorted(set(details) - set(DETAILS)):
            raise TypeError(f"Recorder.add: unknown field(s) {unknown}; known: {DETAILS}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{metric} of {system} on {dataset}/{split} is {value}, not finite")
        if details.get("kind", "result") not in KINDS:
            raise ValueError(f"kind {details['kind']!r} not one of {KINDS}")
        if details.get("role") is not None and details["role"] not in ROLES:
            raise ValueError(f"role {details['role']!r} not one of {ROLES}")
        for key, convert in (("seed", int), ("fold", int), ("subset", str),
                             ("ci_low", float), ("ci_high", float)):
            if details.get(key) is not None:
                details[key] = convert(details[key])
                if convert is float and not math.isfinite(details[key]):
                    details[key] = None
        rec = MetricRecord(self.notebook, task, dataset, split, system, metric, value, **details)
        self.records.append(rec)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(rec)) + "\n")
        self._write_sources()
        return rec

    def add_frame(self, frame: pd.DataFrame, task: str, dataset: str, **fixed: Any) -> int:
        """Record every row of a tidy frame: columns named like :meth:`add`'s arguments are
        read per row (NaN as None), ``fixed`` gives every row a value (``split="test"``) and
        wins over a column; other columns are ignored. Returns the number of records."""
        known = ("split", "system", "metric", "value", *DETAILS)
        if unknown := set(fixed) - set(known):
            raise ValueError(f"add_frame: unknown field(s) {sorted(unknown)}")
        if missing := [c for c in known[:4] if c not in frame.columns and c not in fixed]:
            raise ValueError(f"add_frame: missing column(s) {missing}")
        cols = [c for c in known if c in frame.columns and c not in fixed]
        for row in frame[cols].itertuples(index=False):
            keys = {c: (None if not isinstance(v, str) and pd.isna(v) else v)
                    for c, v in zip(cols, row, strict=True)}
            keys.update(fixed)
            if keys.get("kind") is None:
                keys.pop("kind", None)
            self.add(task, dataset, **keys)
        return len(frame)

    def add_items(self, items: pd.DataFrame) -> int:
        """Append per-item scores (:data:`ITEM_COLUMNS`) to ``items.jsonl.gz``, what paired
        tests and run comparisons resample; ``cluster`` is the unit that was sampled (SAF
        question, ArgSciChat paper). Returns the number of rows."""
        if missing := [c for c in ITEM_COLUMNS if c not in items.columns]:
            raise ValueError(f"add_items: missing column(s) {missing}")
        rows = items[list(ITEM_COLUMNS)]
        if rows["value"].isna().any():
            raise ValueError("add_items: NaN values; score unparseable outputs explicitly")
        append_jsonl(rows, self.dir / ITEMS_FILE)
        return len(rows)

    def _write_sources(self) -> None:
        (self.dir / SOURCES_FILE).write_text(json.dumps(data_sources(), indent=1))

    def close(self) -> None:
        """Write the data-source list one last time (records are already on disk)."""
        self._write_sources()


def summarize(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Mean ± std over seeds (and folds) per notebook/task/dataset/split/system/metric; the
    population std (ddof=0), as the official ArgSciChat script."""
    if not records:
        return pd.DataFrame(columns=["notebook", "task", "dataset", "split", "system", "metric",
                                     "mean", "std", "n"])
    df = pd.DataFrame(records)
    keys = ["notebook", "task", "dataset", "split", "system", "metric"]
    grouped = df.groupby(keys, sort=False)["value"]
    out = grouped.agg(["mean", "count"]).reset_index()
    out.insert(len(keys) + 1, "std", grouped.std(ddof=0).to_numpy())
    return out.rename(columns={"count": "n"})


def sibling_dir(output_dir: str | os.PathLike | None, notebook: str) -> Path:
    """Artifact folder of another notebook of the same run (e.g. 03's predictions for 04)."""
    return (Path(output_dir).parent if output_dir else INTERACTIVE) / notebook
