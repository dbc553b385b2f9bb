"""The research protocol of both tasks: designs, headline tables, paired comparisons, choices
on validation, multiplicity (one primary comparison keeps its raw p, every other is
Holm-adjusted); tasks hand over a tidy *items* frame plus a :class:`Design`. The protocol
and its calibration: docs/statistics.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from saf_utils.metrics import bounds
from saf_utils.statistics import uncertainty
from saf_utils.statistics.validation_choice import Choice

BY = ("split", "system", "metric")
CLIPPED = "clipped to the metric's range"  # the mark in ``method`` of a clipped interval
CHOSEN = "chosen"  # subset of the tuning record of the system a notebook chose (all splits)


def chosen_for(split: str) -> str:
    """Subset of a tuning record naming the system chosen for one split only (SAF's unseen
    questions: chosen by CV on train)."""
    return f"{CHOSEN} for {split}"


@dataclass(frozen=True)
class Design:
    """How the test units were sampled, and so which inference fits: ``level="item"``, items
    resampled within their cluster and tests that swap single items (estimand: new items of
    *these* clusters); ``level="cluster"``, a t-interval and a sign-flip test over clusters,
    stratified by the column ``strata`` if given (estimand: new clusters; item means only)."""

    name: str
    level: Literal["item", "cluster"]
    estimand: str
    strata: str | None = None
    n_resamples: int = 1000
    seed: int = 0
    alpha: float = 0.05
    label: str | None = None  # tags records of a secondary estimand ("new questions")
    #: Random assignments in all where none of the first ``n_resamples`` is as extreme as the
    #: observed difference (a p floor of 1 / 20,001, which Holm over a notebook's few hundred
    #: comparisons can bring below alpha).
    max_resamples: int = 20_000

    def but(self, **changes: Any) -> Design:
        """A copy with some fields changed (e.g. ``estimand`` for a 2-question split)."""
        return replace(self, **changes)


# --------------------------------------------------------------------------- estimates

def _units(df: pd.DataFrame, design: Design) -> pd.Series:
    """Cluster id per row, qualified by stratum (a paper can be val in two folds)."""
    if _strata(df, design) is None:
        return df["cluster"].astype(str)
    return df[design.strata].astype(str) + ":" + df["cluster"].astype(str)


def _strata(df: pd.DataFrame, design: Design) -> list | None:
    if design.strata and design.strata in df and df[design.strata].notna().any():
        if df[design.strata].isna().any():
            raise ValueError(f"{design.strata!r}: some rows have a value and others do not")
        return df[design.strata].tolist()
    return None


def seed_average(g: pd.DataFrame, design: Design) -> pd.DataFrame:
    """One row per (item, stratum): seeds averaged first, cluster kept."""
    keys = ["item"] + ([design.strata] if _strata(g, design) is not None else [])
    return (g.groupby(keys, dropna=False, sort=True)
            .agg(value=("value", "mean"), cluster=("cluster", "first")).reset_index())


def mean_stats(df: pd.DataFrame, design: Design,
               value: str = "value") -> tuple[np.ndarray, uncertainty.Statistic]:
    """Sufficient statistics of the design's point estimate: the item mean, or with strata
    the mean over strata of the per-stratum mean (official ArgSciChat aggregation)."""
    strata = _strata(df, design)
    if strata is not None:
        return uncertainty.stratum_mean_stat(df[value].to_numpy(), strata)
    return uncertainty.mean_stat(df[value].to_numpy())


def estimate(df: pd.DataFrame, design: Design, corpus: tuple | None = None) -> dict[str, Any]:
    """Point estimate and 95 % interval of one (split, system, metric) of seed-averaged rows
    ``df``; ``corpus``: ``(stats, statistic)`` of a corpus metric in ``df``'s row order."""
    units = _units(df, design)
    if design.level == "item":
        mat, fn = corpus if corpus is not None else mean_stats(df, design)
        res = uncertainty.cluster_bootstrap(mat, fn, clusters=None, strata=units.tolist(),
                                      n_resamples=design.n_resamples, seed=design.seed,
                                      alpha=design.alpha)
        method = "bootstrap of items within clusters"
    else:
        if corpus is not None:
            raise ValueError(f"{design.name}: cluster-level intervals are for item means only")
        strata = _strata(df, design)
        per_stratum = units.groupby(strata if strata is not None else [0] * len(df)).nunique()
        if (per_stratum < 2).any():  # no variance between clusters to estimate
            mat, fn = mean_stats(df, design)
            return {"mean": float(fn(mat.sum(0)[None])[0]), "ci_low": np.nan,
                    "ci_high": np.nan, "method": "no interval: a stratum has < 2 clusters",
                    "estimand": design.estimand, "n_items": len(df),
                    "n_units": int(units.nunique())}
        res = uncertainty.cluster_t_interval(df["value"].to_numpy(), units.tolist(), strata,
                                       design.alpha)
        method = res.method
    return {"mean": res.estimate, "ci_low": res.low, "ci_high": res.high, "method": method,
            "estimand": design.estimand, "n_items": res.n_items,
            "n_units": res.n_items if design.level == "item" else res.n_clusters}


def clip_interval(est: Mapping[str, Any], limits: tuple[float, float] | None,
                  point: str = "mean") -> dict[str, Any]:
    """``est`` with its interval clipped to ``limits`` (the true value lies in the range), said
    in its ``method``; nothing is clipped when the point estimate lies outside them (then the
    declared range is wrong, and hiding that is worse)."""
    out = dict(est)
    lo, hi, x = out.get("ci_low"), out.get("ci_high"), out.get(point)
    if limits is None or lo is None or hi is None or x is None \
            or not np.isfinite([lo, hi, x]).all() or not limits[0] <= x <= limits[1]:
        return out
    new_lo, new_hi = max(float(lo), limits[0]), min(float(hi), limits[1])
    if (new_lo, new_hi) != (lo, hi):
        shown = ", ".join("inf" if np.isinf(x) else f"{x:g}" for x in limits)
        out.update(ci_low=new_lo, ci_high=new_hi,
                   method=f"{out.get('method') or ''}; {CLIPPED} [{shown}]")
    return out


def diff_bounds(metric: str) -> tuple[float, float] | None:
    """The range of a difference of two values of ``metric`` (``[lo - hi, hi - lo]``)."""
    b = bounds(metric)
    if b is None or not np.isfinite(b).all():
        return None
    return (b[0] - b[1], b[1] - b[0])


def headline_table(items: pd.DataFrame, design: Design, by: Sequence[str] = BY) -> pd.DataFrame:
    """Mean and 95 % interval per group (split × system × metric) for ``design``."""
    _require(items, [*by, "item", "cluster", "value"])
    rows = []
    for key, g in items.groupby(list(by), dropna=False, sort=True):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        est = estimate(seed_average(g, design), design)
        row.update(clip_interval(est, bounds(row["metric"])) if "metric" in row else est)
        if "role" in g:
            row["role"] = g["role"].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows)


def fold_means(items: pd.DataFrame, per_seed: bool = False, fold: str = "fold"
               ) -> pd.DataFrame:
    """Mean per (split, system, metric, fold): seeds averaged per item first (``seed`` None);
    ``per_seed`` adds one row per seed of seeded systems. Carries ``role`` and ``n``."""
    keys = ["split", "system", "metric", fold]
    per_item = items.groupby([*keys, "item"], dropna=False, sort=True).value.mean()
    out = (per_item.groupby(level=keys, dropna=False).agg(["mean", "size"]).reset_index()
           .rename(columns={"mean": "value", "size": "n"}))
    out["seed"] = None
    if per_seed and "seed" in items:
        seeded = items[items.seed.notna()]
        if not seeded.empty:
            s = (seeded.groupby([*keys, "seed"], dropna=False).value.agg(["mean", "size"])
                 .reset_index().rename(columns={"mean": "value", "size": "n"}))
            out = pd.concat([out, s], ignore_index=True)
    out["seed"] = pd.array([None if pd.isna(x) else int(x) for x in out.seed], dtype="Int64")
    if "role" in items:
        out["role"] = out.system.map(items.drop_duplicates("system").set_index("system").role)
    return out


# --------------------------------------------------------------------------- comparisons

def compare(a: pd.DataFrame, b: pd.DataFrame, design: Design,
            corpus: tuple | None = None) -> dict[str, Any]:
    """A minus B on paired, seed-averaged rows (same order): diff, CI, p, MDE; ``corpus``:
    ``(stats_a, stats_b, statistic)`` of a corpus metric."""
    if corpus is not None:
        sa, sb, fn = corpus
    else:
        (sa, fn), (sb, _) = mean_stats(a, design), mean_stats(b, design)
    units = None if design.level == "item" else _units(a, design).tolist()
    if units is not None and corpus is not None:
        raise ValueError(f"{design.name}: cluster-level tests are for item means only")
    r = uncertainty.paired_randomization(sa, sb, fn, units, design.n_resamples, design.seed,
                                   design.alpha, max_resamples=design.max_resamples)
    return {"diff": r.diff, "ci_low": r.low, "ci_high": r.high, "p_value": r.p_value,
            "estimate": r.estimate_a, "estimate_ref": r.estimate_b, "method": r.method,
            "estimand": design.estimand, "label": design.label, "mde": r.mde,
            "p_min": r.p_min, "n_items": len(a), "n_units": r.n_units}


def pair_rows(ref: pd.DataFrame, other: pd.DataFrame, design: Design
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seed-averaged rows of two systems joined on (item, stratum), in one order."""
    keys = ["item"] + ([design.strata] if _strata(ref, design) is not None else [])
    df = seed_average(other, design).merge(seed_average(ref, design), on=keys,
                                           suffixes=("", "_ref"))
    if (df["cluster"].astype(str) != df["cluster_ref"].astype(str)).any():
        raise ValueError("paired rows disagree on clusters")
    a = df[[*keys, "cluster", "value"]]
    b = df[[*keys, "cluster", "value_ref"]].rename(columns={"value_ref": "value"})
    return a, b


def paired_table(items: pd.DataFrame, reference: str | Mapping[Any, str], design: Design,
                 by: Sequence[str] = ("split", "metric"),
                 systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Each system minus ``reference`` (or a map group key -> reference) on the items both
    scored, per group of ``by``; groups without the reference are skipped."""
    _require(items, [*by, "system", "item", "cluster", "value"])
    rows = []
    for key, g in items.groupby(list(by), dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        ref_name = reference if isinstance(reference, str) else reference.get(key)
        ref = g[g.system == ref_name]
        if ref.empty:
            continue
        others = g[g.system != ref_name]
        if systems is not None:
            others = others[others.system.isin(systems)]
        for name, other in others.groupby("system", sort=True):
            a, b = pair_rows(ref, other, design)
            if a.empty:
                continue
            row = {**dict(zip(by, key, strict=True)), "system": name, "reference": ref_name}
            cmp = compare(a, b, design)
            row.update(clip_interval(cmp, diff_bounds(row["metric"]), point="diff")
                       if "metric" in row else cmp)
            rows.append(row)
    return pd.DataFrame(rows)


def adjust(comparisons: pd.DataFrame, primary: Mapping[str, Any] | None = None,
           p: str = "p_value") -> pd.DataFrame:
    """Add ``primary`` and ``p_adj`` (the row matching ``primary`` keeps its raw p, every
    other is Holm-adjusted) and ``p_adj_min``, the smallest p each row could reach (its
    test's floor ``p_min``, times the number of Holm-adjusted comparisons for the rest)."""
    out = comparisons.copy()
    if out.empty:
        return out.assign(primary=pd.Series(dtype=bool), p_adj=pd.Series(dtype=float))
    is_primary = pd.Series(False, index=out.index)
    if primary:
        is_primary = np.logical_and.reduce([out[k] == v for k, v in primary.items()])
        is_primary = pd.Series(is_primary, index=out.index)
        if is_primary.sum() > 1:
            raise ValueError(f"adjust: {int(is_primary.sum())} rows match the primary {primary}")
    out["primary"] = is_primary.to_numpy()
    out["p_adj"] = out[p].astype(float)
    rest = ~out["primary"]
    out.loc[rest, "p_adj"] = uncertainty.holm(out.loc[rest, p].astype(float).to_numpy())
    if "p_min" in out:
        floor = out["p_min"].astype(float)
        out["p_adj_min"] = floor.where(out["primary"], (floor * int(rest.sum())).clip(upper=1.0))
    return out


# --------------------------------------------------------------------------- records

def record(rec: Any, task: str, dataset: str, headline: pd.DataFrame | None = None,
           comparisons: pd.DataFrame | None = None, choice: Choice | None = None,
           roles: Mapping[str, str] | None = None, kind: str = "result",
           composite_name: str | None = None) -> int:
    """Write headline rows, comparisons (``minus <ref>``, ``p vs <ref>``, ``p_adj vs <ref>``
    or ``primary p vs <ref>``) and a choice (``composite_name``: one fold-less ``chosen``
    record more) through a ``Recorder``; the number of records."""
    roles = roles or {}
    n = 0

    def role(r: Any) -> str | None:
        given = getattr(r, "role", None)
        return given if isinstance(given, str) else roles.get(r.system)

    for r in (headline.itertuples() if headline is not None else ()):
        rec.add(task, dataset, r.split, r.system, r.metric, r.mean, role=role(r), kind=kind,
                ci_low=r.ci_low, ci_high=r.ci_high, method=r.method, estimand=r.estimand)
        n += 1
    for r in (comparisons.itertuples() if comparisons is not None else ()):
        common = dict(kind="analysis", role=role(r), method=r.method, estimand=r.estimand)
        label = getattr(r, "label", None)
        ref = f"{r.reference} ({label})" if isinstance(label, str) and label else r.reference
        rec.add(task, dataset, r.split, r.system, r.metric, r.diff, subset=f"minus {ref}",
                ci_low=r.ci_low, ci_high=r.ci_high, **common)
        rec.add(task, dataset, r.split, r.system, r.metric, r.p_value, subset=f"p vs {ref}",
                **common)
        n += 2
        if hasattr(r, "p_adj"):
            what = "primary p" if r.primary else "p_adj"
            rec.add(task, dataset, r.split, r.system, r.metric, r.p_adj,
                    subset=f"{what} vs {ref}", **common)
            n += 1
    if choice is not None:
        for r in choice.table.itertuples():
            fold = None if r.fold is None or pd.isna(r.fold) else int(r.fold)
            rec.add(task, dataset, choice.split, r.system, choice.metric, r.value, fold=fold,
                    kind="tuning",
                    subset="chosen" if r.chosen else "candidate", role=r.role)
            n += 1
        if composite_name:
            val = float(choice.table[choice.table.chosen].value.mean())
            rec.add(task, dataset, choice.split, composite_name, choice.metric, val,
                    kind="tuning", subset="chosen", role="system")
            n += 1
    return n


def _require(items: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in items]
    if missing:
        raise ValueError(f"items frame lacks columns {missing}; has {list(items.columns)}")
    if items.empty:
        raise ValueError("empty items frame")
