"""Evaluation of ArgSciChat fact selections: per-item Fact-F1, CIs, paired tests, val choice.

Official aggregation: Fact-F1 per query (queries without gold fact sentences skipped), mean
per fold, mean over folds; seeds (Random) are averaged per (query, fold) first. CIs are
95 % percentile intervals of a bootstrap that resamples papers (clusters) within each fold
(strata), 1000 resamples, from :mod:`saf_utils.stats`. Paired tests compare two systems on
the same queries and resamples.

The val-chosen system and the strongest baseline are chosen on the mean over folds of each
fold's val Fact-F1; test never decides anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import stats

TASK, DATASET, METRIC = "argscichat_fact_selection", "argscichat", "fact_f1"
ITEM_COLUMNS = ("task", "dataset", "split", "system", "metric", "item", "cluster", "value",
                "seed", "fold")


def fact_f1_items(preds: pd.DataFrame, splits: Sequence[str] = ("val", "test")) -> pd.DataFrame:
    """Per-item Fact-F1 rows (``Recorder.add_items`` schema, cluster = paper id, + ``role``).

    Only pairs with gold fact sentences (``fact_f1`` not null) are items.
    """
    need = {"fold", "split", "pair_id", "paper_id", "system", "seed", "fact_f1"}
    missing = sorted(need - set(preds.columns))
    if missing:
        raise ValueError(f"fact_f1_items: predictions lack column(s) {missing}")
    p = preds[preds.split.isin(splits) & preds.fact_f1.notna()]
    out = pd.DataFrame({
        "task": TASK, "dataset": DATASET, "split": p.split.to_numpy(),
        "system": p.system.to_numpy(), "metric": METRIC, "item": p.pair_id.to_numpy(),
        "cluster": p.paper_id.astype(str).to_numpy(), "value": p.fact_f1.astype(float).to_numpy(),
        "seed": pd.array([None if pd.isna(s) else int(s) for s in p.seed], dtype="Int64"),
        "fold": p.fold.astype(int).to_numpy(),
    })
    if "role" in p:
        out["role"] = p.role.to_numpy()
    return out.reset_index(drop=True)


def fold_means(items: pd.DataFrame) -> pd.DataFrame:
    """Mean Fact-F1 per (system, split, fold), seeds averaged per item first; + seed rows.

    Returns columns system, split, fold, seed (None for the seed-averaged row), value, n.
    """
    per_item = items.groupby(["system", "split", "fold", "item"], sort=True).value.mean()
    folds = per_item.groupby(level=["system", "split", "fold"]).agg(["mean", "size"])
    out = folds.reset_index().rename(columns={"mean": "value", "size": "n"})
    out["seed"] = None
    seeded = items[items.seed.notna()]
    if not seeded.empty:
        s = (seeded.groupby(["system", "split", "fold", "seed"]).value.agg(["mean", "size"])
             .reset_index().rename(columns={"mean": "value", "size": "n"}))
        out = pd.concat([out, s], ignore_index=True)
    return out[["system", "split", "fold", "seed", "value", "n"]]


def mean_over_folds(items: pd.DataFrame, split: str) -> pd.Series:
    """system -> mean over folds of the per-fold mean (the official aggregation)."""
    fm = fold_means(items)
    fm = fm[(fm.split == split) & fm.seed.isna()]
    return fm.groupby("system").value.mean()


def choose_on_val(items: pd.DataFrame, roles: Mapping[str, str],
                  allowed: Iterable[str] = ("baseline", "system"),
                  order: Sequence[str] | None = None) -> tuple[str, float]:
    """The system with the best mean-over-folds val Fact-F1 among ``allowed`` roles.

    Ties: the first in ``order`` (default: ``roles``' order). Raises when nothing qualifies.
    """
    allowed = set(allowed)
    val = mean_over_folds(items, "val")
    order = list(order or roles)
    cands = [s for s in order if roles.get(s) in allowed and s in val.index
             and np.isfinite(val[s])]
    if not cands:
        raise ValueError(f"choose_on_val: no system with role in {sorted(allowed)} has val items")
    best = max(cands, key=lambda s: (val[s], -cands.index(s)))
    return best, float(val[best])


def per_fold_choice(items: pd.DataFrame, roles: Mapping[str, str],
                    allowed: Iterable[str] = ("baseline", "system"),
                    name: str = "val_chosen_per_fold") -> tuple[pd.DataFrame, dict[int, str]]:
    """Items of a meta-system that, in each fold, uses the system best on THAT fold's val.

    Unlike :func:`choose_on_val` (one system for all folds, chosen on the mean over the
    folds' val splits, which hold other folds' test papers) no fold's choice reads any other
    fold's papers. Returns the meta-system's items (val and test) and fold -> system.
    """
    allowed = set(allowed)
    fm = fold_means(items)
    fm = fm[(fm.split == "val") & fm.seed.isna() & fm.system.map(roles).isin(allowed)]
    order = list(roles)
    chosen = {}
    for f, g in fm.groupby("fold"):
        g = g.assign(o=g.system.map(order.index)).sort_values(["value", "o"],
                                                             ascending=[False, True])
        chosen[int(f)] = g.system.iloc[0]
    parts = [items[(items.fold == f) & (items.system == s)] for f, s in chosen.items()]
    out = pd.concat(parts, ignore_index=True).assign(system=name)
    if "role" in out:
        out["role"] = "system"
    return out, chosen


def _fold_clusters(items: pd.DataFrame) -> pd.DataFrame:
    """Clusters qualified by fold: a paper can be a val paper of two folds (two separate
    evaluations), and the bootstrap resamples clusters within folds. Test papers belong to
    one fold each, so this changes nothing there."""
    return items.assign(cluster=items.fold.astype(str) + ":" + items.cluster.astype(str))


def headline_table(items: pd.DataFrame, split: str = "test", n_resamples: int = 1000,
                   seed: int = 0) -> pd.DataFrame:
    """Per system: mean over folds with its 95 % CI (papers resampled within folds)."""
    it = _fold_clusters(items[items.split == split])
    if it.empty:
        raise ValueError(f"headline_table: no items of split {split!r}")
    cols = ["task", "dataset", "split", "system", "metric", "item", "cluster", "value", "seed",
            "fold"]
    t = stats.ci_table(it[cols], n_resamples=n_resamples, seed=seed)
    if "role" in it:
        t["role"] = t.system.map(it.drop_duplicates("system").set_index("system").role)
    return t


def paired_vs(items: pd.DataFrame, reference: str, split: str = "test",
              systems: Sequence[str] | None = None, n_resamples: int = 1000,
              seed: int = 0) -> pd.DataFrame:
    """Each system minus ``reference`` on the same queries: diff, 95 % CI, two-sided p."""
    it = _fold_clusters(items[items.split == split])
    if systems is not None:
        it = it[it.system.isin([*systems, reference])]
    cols = ["task", "dataset", "split", "system", "metric", "item", "cluster", "value", "seed",
            "fold"]
    return stats.paired_table(it[cols], reference, n_resamples=n_resamples, seed=seed)


def ablation_table(items: pd.DataFrame, ablations: Mapping[str, str], split: str = "test",
                   n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Each ablation minus its full system (``{ablation: full}``), paired."""
    frames = []
    for abl, full in ablations.items():
        have = set(items[items.split == split].system)
        if abl in have and full in have:
            frames.append(paired_vs(items, full, split, [abl], n_resamples, seed))
    if not frames:
        return pd.DataFrame(columns=["system", "reference", "diff", "ci_low", "ci_high",
                                     "p_value"])
    return pd.concat(frames, ignore_index=True)


def summary_table(items: pd.DataFrame, roles: Mapping[str, str], reference: str,
                  n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The headline table: role, val mean, test mean [CI], per-fold test means, and the
    difference to ``reference`` (the val-strongest baseline) with CI and p."""
    head = headline_table(items, "test", n_resamples, seed).set_index("system")
    diff = paired_vs(items, reference, "test", n_resamples=n_resamples, seed=seed)
    diff = diff.set_index("system") if not diff.empty else pd.DataFrame()
    val = mean_over_folds(items, "val")
    fm = fold_means(items)
    fm = fm[(fm.split == "test") & fm.seed.isna()].pivot(index="system", columns="fold",
                                                          values="value")
    rows = []
    for system in [s for s in roles if s in head.index]:
        h = head.loc[system]
        row = {"system": system, "role": roles[system], "val": val.get(system, np.nan),
               "test": h["mean"], "ci_low": h.ci_low, "ci_high": h.ci_high,
               "std_folds": float(fm.loc[system].std(ddof=0)) if system in fm.index else np.nan}
        row.update({f"fold {f}": fm.loc[system, f] for f in fm.columns})
        if system in diff.index:
            d = diff.loc[system]
            row.update({f"diff vs {reference}": d["diff"], "diff_low": d.ci_low,
                        "diff_high": d.ci_high, "p": d.p_value})
        rows.append(row)
    return pd.DataFrame(rows).set_index("system")


def record(rec: Any, items: pd.DataFrame, roles: Mapping[str, str], chosen: tuple[str, float],
           reference: tuple[str, float], tuning: pd.DataFrame | None = None,
           ablations: pd.DataFrame | None = None, n_resamples: int = 1000,
           seed: int = 0) -> None:
    """Record everything 03 reports (``rec``: a :class:`saf_utils.reporting.records.Recorder`).

    - per fold (and per seed for seeded systems) val and test Fact-F1 (kind result);
    - headline per system and split: fold=None, seed=None, 95 % CI, role;
    - difference to ``reference`` with CI (kind analysis, subset "minus <ref>") and its p
      (subset "p vs <ref>"); ablations minus their full system likewise;
    - the val-chosen system and reference baseline (kind tuning, subset "chosen" /
      "reference baseline"); val grid points (kind tuning, subset "<param>=<value>");
    - per-item scores (items.jsonl).
    """
    def role(s: str) -> str | None:
        return roles.get(s, "system")

    for r in fold_means(items).itertuples():
        seeded = items[(items.system == r.system) & items.seed.notna()].shape[0] > 0
        if seeded and r.seed is None:
            continue  # seeded systems: per (fold, seed); their fold mean is in the headline
        rec.add(TASK, DATASET, r.split, r.system, METRIC, r.value, fold=int(r.fold),
                seed=None if r.seed is None or pd.isna(r.seed) else int(r.seed),
                role=role(r.system))
    for split in sorted(set(items.split)):
        for r in headline_table(items, split, n_resamples, seed).itertuples():
            rec.add(TASK, DATASET, split, r.system, METRIC, r.mean, role=role(r.system),
                    ci_low=r.ci_low, ci_high=r.ci_high)
    ref = reference[0]
    for r in paired_vs(items, ref, "test", n_resamples=n_resamples, seed=seed).itertuples():
        rec.add(TASK, DATASET, "test", r.system, METRIC, r.diff, kind="analysis",
                subset=f"minus {ref}", role=role(r.system), ci_low=r.ci_low, ci_high=r.ci_high)
        rec.add(TASK, DATASET, "test", r.system, METRIC, r.p_value, kind="analysis",
                subset=f"p vs {ref}", role=role(r.system))
    if ablations is not None:
        for r in ablations.itertuples():
            rec.add(TASK, DATASET, "test", r.system, METRIC, r.diff, kind="analysis",
                    subset=f"minus {r.reference}", role=role(r.system), ci_low=r.ci_low,
                    ci_high=r.ci_high)
            rec.add(TASK, DATASET, "test", r.system, METRIC, r.p_value, kind="analysis",
                    subset=f"p vs {r.reference}", role=role(r.system))
    rec.add(TASK, DATASET, "val", chosen[0], METRIC, chosen[1], kind="tuning", subset="chosen",
            role=role(chosen[0]))
    rec.add(TASK, DATASET, "val", ref, METRIC, reference[1], kind="tuning",
            subset="reference baseline", role="baseline")
    if tuning is not None:
        for r in tuning.itertuples():
            if np.isfinite(r.val_fact_f1):
                rec.add(TASK, DATASET, "val", r.system, METRIC, r.val_fact_f1, fold=int(r.fold),
                        kind="tuning", subset=f"{r.param}={r.value}", role=role(r.system))
    rec.add_items(items[list(ITEM_COLUMNS)])
