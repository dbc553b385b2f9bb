"""The one cross-run table: ``{run: records}`` -> one tidy frame (:func:`frame`) -> the tables
a page shows. ``saf-run compare``, each run's index and its results page read
records this way; :func:`headline_cells` pivots a run's rows into the headline tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

KEY = ("task", "dataset", "split", "system", "metric", "subset")
COLUMNS = ("run", *KEY, "value", "lo", "hi", "n", "headline", "role", "failed", "status",
           "note", "estimand", "method")

#: The analysis records of a paired test: subset prefix -> (field, what it is, for a reader).
TESTS = {"minus ": ("diff", "difference vs {}"), "p vs ": ("p", "p vs {} (unadjusted)"),
         "p_adj vs ": ("p_adj", "Holm-adjusted p vs {}"),
         "primary p vs ": ("p_adj", "p vs {} (primary comparison)")}

def paired_test(subset: Any) -> tuple[str, str] | None:
    """(prefix, reference) of a paired test's record subset, e.g. ("p vs ", "B"); else None."""
    sub = str(subset or "")
    return next(((k, sub[len(k):]) for k in TESTS if sub.startswith(k)), None)

def clip_record(r: dict) -> dict:
    """A record whose interval stays inside its metric's range (a difference's inside that of
    a difference), so records of older runs, or written outside the protocol, read right."""
    from saf_utils.metrics import bounds
    from saf_utils.statistics.protocol import clip_interval, diff_bounds

    test, metric = paired_test(r.get("subset")), str(r.get("metric"))
    if r.get("ci_low") is None or r.get("ci_high") is None or (test and test[0] != "minus "):
        return r
    return clip_interval(r, diff_bounds(metric) if test else bounds(metric), point="value")

def frame(records_by_run: Mapping[str, Sequence[dict]]) -> pd.DataFrame:
    """One row per run and key of its ``result`` records: the (last) headline record, fold and
    seed None, with its clipped interval, else the mean of the per-seed/per-fold records (``n``,
    no interval); ``failed``: a record came from a notebook that did not finish."""
    import pandas as pd

    rows = []
    for run, records in records_by_run.items():
        groups: dict[tuple, list[dict]] = {}
        for r in records:
            if (r.get("kind") or "result") == "result":
                groups.setdefault(tuple(r.get(k) for k in KEY), []).append(r)
        for key, rs in groups.items():
            head = [r for r in rs if r.get("fold") is None and r.get("seed") is None]
            if head:
                h = clip_record(head[-1])
                row = {"value": h["value"], "lo": h.get("ci_low"), "hi": h.get("ci_high"),
                       "n": 1, "headline": True, "status": h.get("notebook_status"),
                       "estimand": h.get("estimand"), "method": h.get("method")}
            else:
                row = {"value": sum(r["value"] for r in rs) / len(rs), "lo": None, "hi": None,
                       "n": len(rs), "headline": False, "status": rs[0].get("notebook_status")}
            rows.append({"run": run, **dict(zip(KEY, key, strict=True)), **row,
                         "role": next((r["role"] for r in rs if r.get("role")), None),
                         "note": next((r["note"] for r in rs if r.get("note")), None),
                         "failed": any(r.get("notebook_status") not in (None, "ok")
                                       for r in rs)})
    return pd.DataFrame(rows, columns=list(COLUMNS), dtype=object)  # values as recorded

def rows_of(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as dicts, a missing value as None (never NaN)."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in df.to_dict(orient="records")]

def headline_cells(df: pd.DataFrame, task: str, metrics: Sequence[str]) -> dict:
    """``{(dataset, split): {system: {metric: cell, "role", "failed", "note"}}}`` of one run's
    rows of ``task`` (no subset; its test splits when it has any)."""
    sub = rows_of(df[(df["task"] == task) & df["metric"].isin(list(metrics))
                     & df["subset"].isna()])
    tests = {(r["dataset"], r["split"]) for r in sub if str(r["split"]).startswith("test")}
    out: dict[tuple, dict[str, dict]] = {}
    for r in sub:
        if tests and (r["dataset"], r["split"]) not in tests:
            continue
        cell = {"mean": r["value"], "low": r["lo"], "high": r["hi"], "n": r["n"],
                "headline": r["headline"]}
        if r["headline"]:
            cell.update(estimand=r["estimand"], method=r["method"])
        entry = out.setdefault((r["dataset"], r["split"]), {}).setdefault(
            r["system"], {"role": None, "failed": False, "note": None})
        entry[r["metric"]] = cell
        entry.update(role=entry["role"] or r["role"], note=entry["note"] or r["note"],
                     failed=entry["failed"] or r["failed"])
    return out

def task_metrics(df: pd.DataFrame) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """(task, title, headline metrics, splits in page order) of every task with result rows:
    registered specs first, then the others by name (not the ``data`` system's), each with
    its first four metrics."""
    from notebook_reports.tasks import specs

    known = {s.name: s for s in specs()}
    res = df[df["system"] != "data"]
    def first(task: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(df.loc[df["task"] == task, "metric"]))[:4]

    out = [(s.name, s.title, tuple(s.headline) or first(s.name), tuple(s.splits))
           for s in known.values() if (df["task"] == s.name).any()]
    return out + [(t, t, first(t), ()) for t in sorted({str(t) for t in res["task"]}
                                                       - set(known))]

def interactive(table_id: str, df: pd.DataFrame, caption: str | None, **options: Any) -> Any:
    """:func:`tables.html` of ``df`` whose cells are HTML the caller escaped (links)."""
    from notebook_reports.tables import html

    return html(df, caption, html_columns=list(df.columns), table_id=table_id, **options)
