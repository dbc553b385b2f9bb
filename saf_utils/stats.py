"""Uncertainty and aggregation for both tasks: one resampling engine on sufficient statistics.

Every metric is written as per-item *sufficient statistics* (a row of counts per item) plus a
vectorised function of their sums. Corpus metrics (BLEU, chrF, macro F1) are then exact, not
averages of sentence scores, and one resample of thousands of items is a single matrix product:
``counts [B, clusters] @ cluster_sums [clusters, d]``.

- Resampling unit = cluster (SAF question id, ArgSciChat paper id): items of one cluster are
  correlated, so item-level resampling would understate the uncertainty.
- Strata (ArgSciChat folds) are resampled separately, keeping each stratum's cluster count,
  and the official aggregation (mean per fold, then mean over folds) is a statistic here.
- Seeds are averaged within a (item, fold) first, then over items and folds.
- Every std in this module is the *population* std (``ddof=0``), as in the official scripts.
- CIs are 95% percentile intervals; ``n_resamples >= 1000`` is recommended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

Statistic = Callable[[np.ndarray], np.ndarray]  # [B, d] summed stats -> [B] metric values


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    low: float
    high: float
    n_items: int
    n_clusters: int
    n_resamples: int


@dataclass(frozen=True)
class PairedResult:
    diff: float  # estimate_a - estimate_b
    low: float
    high: float
    p_value: float
    estimate_a: float
    estimate_b: float


# ---------------------------------------------------------------- resampling engine
def _as_matrix(stats: Any, name: str = "stats") -> np.ndarray:
    arr = np.asarray(stats, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name}: need a non-empty [n_items, d] array, got shape {arr.shape}")
    return arr


def _groups(
    n: int, clusters: Sequence | None, strata: Sequence | None
) -> tuple[np.ndarray, np.ndarray]:
    """Item -> cluster index, cluster -> stratum index; clusters must nest in strata."""
    for what, seq in (("clusters", clusters), ("strata", strata)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{what}: length {len(seq)} does not match {n} items")
    cl = np.arange(n) if clusters is None else pd.factorize(pd.Series(list(clusters)))[0]
    if (cl < 0).any():
        raise ValueError("clusters: missing (None/NaN) cluster ids")
    if strata is None:
        return cl, np.zeros(cl.max() + 1, dtype=int)
    st = pd.factorize(pd.Series(list(strata)))[0]
    if (st < 0).any():
        raise ValueError("strata: missing (None/NaN) stratum ids")
    pairs = pd.DataFrame({"c": cl, "s": st}).drop_duplicates()
    if pairs["c"].duplicated().any():
        raise ValueError("clusters must be nested in strata: a cluster spans several strata")
    return cl, pairs.sort_values("c")["s"].to_numpy()


def _resample_counts(
    cluster_stratum: np.ndarray, n_resamples: int, seed: int, chunk: int = 200
):
    """Yield [b, n_clusters] draw counts; each stratum keeps its number of clusters."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1 (>= 1000 recommended), got {n_resamples}")
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(cluster_stratum == s) for s in np.unique(cluster_stratum)]
    n_c = cluster_stratum.size
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        flat = np.concatenate(
            [idx[rng.integers(0, idx.size, size=(b, idx.size))] for idx in members], axis=1
        ) + (np.arange(b) * n_c)[:, None]
        yield np.bincount(flat.ravel(), minlength=b * n_c).reshape(b, n_c).astype(float)


def _percentile_ci(values: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _cluster_sums(stats: np.ndarray, cl: np.ndarray) -> np.ndarray:
    sums = np.zeros((cl.max() + 1, stats.shape[1]))
    np.add.at(sums, cl, stats)
    return sums


def cluster_bootstrap(
    stats: np.ndarray,
    statistic: Statistic | None = None,
    clusters: Sequence | None = None,
    strata: Sequence | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> BootstrapResult:
    """Cluster (and stratified) bootstrap of ``statistic`` over per-item sufficient stats.

    ``statistic=None`` means the mean of 1-D ``stats``. ``clusters=None``: every item is its
    own cluster. The estimate is the statistic on the full sums (not the bootstrap mean).
    """
    if statistic is None:
        stats, statistic = mean_stat(stats)
    mat = _as_matrix(stats)
    cl, cs = _groups(mat.shape[0], clusters, strata)
    sums = _cluster_sums(mat, cl)
    boot = np.concatenate(
        [statistic(c @ sums) for c in _resample_counts(cs, n_resamples, seed)]
    )
    low, high = _percentile_ci(boot, alpha)
    est = float(statistic(sums.sum(0)[None, :])[0])
    return BootstrapResult(est, low, high, mat.shape[0], sums.shape[0], n_resamples)


def _paired_sums(stat_a: Any, stat_b: Any, statistic: Statistic | None,
                 clusters: Sequence | None, strata: Sequence | None):
    if statistic is None:
        (stat_a, statistic), (stat_b, _) = mean_stat(stat_a), mean_stat(stat_b)
    a, b = _as_matrix(stat_a, "stat_a"), _as_matrix(stat_b, "stat_b")
    if a.shape != b.shape:
        raise ValueError(f"stat_a {a.shape} and stat_b {b.shape} must be paired (same shape)")
    cl, cs = _groups(a.shape[0], clusters, strata)
    return _cluster_sums(a, cl), _cluster_sums(b, cl), cs, statistic


def paired_bootstrap(
    stat_a: np.ndarray,
    stat_b: np.ndarray,
    statistic: Statistic | None = None,
    clusters: Sequence | None = None,
    strata: Sequence | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> PairedResult:
    """A - B on the *same* resamples; two-sided p from the bootstrap distribution of A - B.

    p = min(1, 2 * min(P(d* <= 0), P(d* >= 0))) with +1 smoothing, so p < alpha roughly
    iff the percentile CI excludes 0 (the two answers never contradict each other).
    """
    sa, sb, cs, statistic = _paired_sums(stat_a, stat_b, statistic, clusters, strata)
    diffs = np.concatenate(
        [statistic(c @ sa) - statistic(c @ sb) for c in _resample_counts(cs, n_resamples, seed)]
    )
    est_a = float(statistic(sa.sum(0)[None, :])[0])
    est_b = float(statistic(sb.sum(0)[None, :])[0])
    low, high = _percentile_ci(diffs, alpha)
    tail = min((diffs <= 0).sum(), (diffs >= 0).sum())
    p = min(1.0, max(2 * (tail + 1) / (n_resamples + 1), sign_flip_floor(sa.shape[0])))
    return PairedResult(est_a - est_b, low, high, float(p), est_a, est_b)


def sign_flip_floor(n_clusters: int) -> float:
    """The smallest two-sided p any test at the cluster level can give: 2 / 2**n_clusters.

    With few clusters the bootstrap distribution has few distinct values (2 clusters: 3
    resamples), so a system worse on both of 2 questions would get p = 0.002. No test that
    treats clusters as the sampled unit can be that sure; the p-value is floored here.
    """
    return min(1.0, 2.0 ** (1 - n_clusters))


def approximate_randomization(
    stat_a: np.ndarray,
    stat_b: np.ndarray,
    statistic: Statistic | None = None,
    clusters: Sequence | None = None,
    n_permutations: int = 1000,
    seed: int = 0,
) -> float:
    """Two-sided p of A vs B by swapping the systems' outputs per cluster at random.

    p = (#{|d*| >= |d|} + 1) / (n_permutations + 1). Tests "A and B are exchangeable",
    with no distributional assumption; complements the bootstrap CI.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1 (>= 1000 recommended), got {n_permutations}")
    sa, sb, _, statistic = _paired_sums(stat_a, stat_b, statistic, clusters, None)
    ta, tb = sa.sum(0), sb.sum(0)
    observed = abs(float(statistic(ta[None, :])[0] - statistic(tb[None, :])[0]))
    swap = np.random.default_rng(seed).integers(0, 2, size=(n_permutations, sa.shape[0]))
    delta = swap @ (sb - sa)  # moving a swapped cluster's stats from A to B and back
    d = np.abs(statistic(ta + delta) - statistic(tb - delta))
    return float(((d >= observed - 1e-12).sum() + 1) / (n_permutations + 1))


# ---------------------------------------------------------------- ready-made statistics
def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den != 0)


def mean_stat(values: Sequence[float]) -> tuple[np.ndarray, Statistic]:
    """Mean as (sum, count): resampled clusters of different sizes weigh by their items."""
    v = np.asarray(values, dtype=float).ravel()
    if np.isnan(v).any():
        raise ValueError("mean_stat: values contain NaN; drop or score them explicitly")
    return np.column_stack([v, np.ones_like(v)]), lambda s: s[:, 0] / s[:, 1]


def stratum_mean_stat(
    values: Sequence[float], strata: Sequence
) -> tuple[np.ndarray, Statistic]:
    """Mean over strata of the per-stratum mean (official ArgSciChat: per fold, then folds).

    Bootstrap it with the same ``strata`` so that no fold can drop out of a resample.
    """
    v, _ = mean_stat(values)
    if len(strata) != len(v):
        raise ValueError(f"strata: length {len(strata)} does not match {len(v)} values")
    st = pd.factorize(pd.Series(list(strata)))[0]
    if (st < 0).any():
        raise ValueError("strata: missing (None/NaN) stratum ids")
    k = st.max() + 1
    out = np.zeros((len(v), 2 * k))
    out[np.arange(len(v)), st] = v[:, 0]
    out[np.arange(len(v)), k + st] = 1.0
    return out, lambda s: (s[:, :k] / s[:, k:]).mean(1)


def accuracy_stat(gold: Sequence, pred: Sequence) -> tuple[np.ndarray, Statistic]:
    """Accuracy; a ``None`` (unparseable) prediction is wrong."""
    if len(gold) != len(pred):
        raise ValueError(f"gold/pred: lengths differ ({len(gold)} vs {len(pred)})")
    return mean_stat([p is not None and g == p for g, p in zip(gold, pred, strict=True)])


def macro_f1_stat(
    gold: Sequence, pred: Sequence, labels: Sequence
) -> tuple[np.ndarray, Statistic]:
    """Macro F1 over ``labels`` from per-item tp/fp/fn indicators (= sklearn, zero_division=0).

    A ``None`` prediction is a false negative of the gold class and not a class of its own.
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold/pred: lengths differ ({len(gold)} vs {len(pred)})")
    index = {lab: i for i, lab in enumerate(labels)}
    bad = {g for g in gold if g not in index}
    bad |= {p for p in pred if p is not None and p not in index}
    if bad:
        raise ValueError(f"labels outside {list(labels)}: {sorted(map(str, bad))}")
    k = len(labels)
    out = np.zeros((len(gold), 3 * k))  # [tp_1..k, fp_1..k, fn_1..k]
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        if g == p:
            out[i, index[g]] = 1
        else:
            out[i, 2 * k + index[g]] = 1
            if p is not None:
                out[i, k + index[p]] = 1

    def macro_f1(s: np.ndarray) -> np.ndarray:
        tp, fp, fn = s[:, :k], s[:, k : 2 * k], s[:, 2 * k :]
        return _ratio(2 * tp, 2 * tp + fp + fn).mean(1)

    return out, macro_f1


def _sacrebleu_stat(metric: Any, hyps: Sequence[str], refs: Sequence[str]):
    if len(hyps) != len(refs) or not hyps:
        raise ValueError(f"hyps/refs: need parallel non-empty lists ({len(hyps)}/{len(refs)})")
    stats = np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=float)

    def score(s: np.ndarray) -> np.ndarray:  # integer sums -> same floats as corpus_score
        rows = np.rint(s).astype(np.int64).tolist()
        return np.array([metric._compute_score_from_stats(r).score for r in rows])

    return stats, score


def bleu_stat(hyps: Sequence[str], refs: Sequence[str], **kwargs: Any):
    """Corpus BLEU (sacreBLEU, one reference each); estimate == ``corpus_bleu(...).score``."""
    from sacrebleu.metrics import BLEU

    return _sacrebleu_stat(BLEU(**kwargs), hyps, refs)


def chrf_stat(hyps: Sequence[str], refs: Sequence[str], **kwargs: Any):
    """Corpus chrF (sacreBLEU defaults); estimate == ``corpus_chrf(...).score``."""
    from sacrebleu.metrics import CHRF

    return _sacrebleu_stat(CHRF(**kwargs), hyps, refs)


# ---------------------------------------------------------------- aggregation over seeds/folds
def fold_summary(scores_by_fold: Mapping[int, Sequence[float]]) -> dict[str, Any]:
    """Official ArgSciChat aggregation: mean per fold, then mean and population std over folds.

    Returns ``{"per_fold": {fold: mean}, "mean": float, "std": float, "n": {fold: count}}``.
    """
    if not scores_by_fold:
        raise ValueError("fold_summary: no folds given")
    per_fold: dict[int, float] = {}
    n: dict[int, int] = {}
    for fold in sorted(scores_by_fold):
        vals = np.asarray(list(scores_by_fold[fold]), dtype=float)
        if vals.size == 0:
            raise ValueError(f"fold_summary: fold {fold} has no scored queries")
        per_fold[fold] = float(vals.mean())
        n[fold] = int(vals.size)
    means = np.array(list(per_fold.values()))
    return {"per_fold": per_fold, "mean": float(means.mean()),
            "std": float(means.std(ddof=0)), "n": n}


def seed_fold_summary(
    values: pd.DataFrame, value: str = "value", fold: str = "fold", seed: str = "seed"
) -> dict[str, Any]:
    """Mean and population std over folds of the per-fold seed means.

    Rows may be per-(fold, seed) scores or per-item scores (meaned per (fold, seed) first).
    Missing fold/seed columns or values count as one fold / one seed. ``seed_std`` is the
    population std over seeds of each seed's mean over folds (seed variance, for SAF).
    """
    if values.empty:
        raise ValueError("seed_fold_summary: empty frame")
    df = pd.DataFrame({
        "v": values[value].astype(float),
        "f": values[fold] if fold in values else None,
        "s": values[seed] if seed in values else None,
    }).fillna({"f": -1, "s": -1})
    cell = df.groupby(["f", "s"])["v"].mean()
    per_fold = cell.groupby(level="f").mean()
    per_seed = cell.groupby(level="s").mean()
    return {"mean": float(per_fold.mean()), "std": float(per_fold.std(ddof=0)),
            "per_fold": per_fold.to_dict(), "n_folds": int(per_fold.size),
            "seed_std": float(per_seed.std(ddof=0)), "n_seeds": int(per_seed.size)}


# ---------------------------------------------------------------- tidy-frame convenience
BY = ("task", "dataset", "split", "system", "metric")


def _seed_average(g: pd.DataFrame, item: str, value: str, cluster: str | None,
                  strata: str | None) -> pd.DataFrame:
    """One row per (item, fold): seeds averaged within a fold first."""
    keys = [item] + ([strata] if strata else [])
    agg = {value: (value, "mean")}
    if cluster:
        agg["_cluster"] = (cluster, "first")
    return g.groupby(keys, dropna=False, sort=True).agg(**agg).reset_index()


def _require(items: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in items]
    if missing:
        raise ValueError(f"items frame lacks columns {missing}; has {list(items.columns)}")


def _resolve(items: pd.DataFrame, cluster: str | None, strata: str | None):
    cluster = cluster if cluster and cluster in items else None
    strata = strata if strata and strata in items and items[strata].notna().any() else None
    if strata and items[strata].isna().any():
        raise ValueError(f"{strata!r}: some rows have a fold and others do not")
    return cluster, strata


def _stats(df: pd.DataFrame, value: str, strata: str | None):
    if strata:
        return stratum_mean_stat(df[value].to_numpy(), df[strata].tolist())
    return mean_stat(df[value].to_numpy())


def ci_table(items: pd.DataFrame, by: Sequence[str] = BY, value: str = "value",
             item: str = "item", cluster: str | None = "cluster", strata: str | None = "fold",
             n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Headline mean + cluster-bootstrap CI per group of an items.jsonl-style frame.

    Seeds are averaged per (item, fold) first; with folds present (``strata``), the mean is
    the mean over folds of the per-fold mean and folds are resampled separately.
    """
    if items.empty:
        raise ValueError("ci_table: empty items frame")
    cluster, strata = _resolve(items, cluster, strata)
    _require(items, [*by, item, value])
    rows = []
    for key, g in items.groupby(list(by), dropna=False, sort=True):
        df = _seed_average(g, item, value, cluster, strata)
        st, fn = _stats(df, value, strata)
        res = cluster_bootstrap(st, fn, df["_cluster"].tolist() if cluster else None,
                                df[strata].tolist() if strata else None,
                                n_resamples, seed, alpha)
        rows.append({**dict(zip(by, key, strict=True)), "mean": res.estimate,
                     "ci_low": res.low, "ci_high": res.high,
                     "n_items": res.n_items, "n_clusters": res.n_clusters})
    return pd.DataFrame(rows)


def paired_table(items: pd.DataFrame, reference_system: str,
                 by: Sequence[str] = ("task", "dataset", "split", "metric"),
                 system: str = "system", value: str = "value", item: str = "item",
                 cluster: str | None = "cluster", strata: str | None = "fold",
                 n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Each system minus ``reference_system`` on the items both scored (paired bootstrap).

    Groups without the reference system are skipped. Items are inner-joined on (item, fold).
    """
    if items.empty:
        raise ValueError("paired_table: empty items frame")
    cluster, strata = _resolve(items, cluster, strata)
    _require(items, [*by, system, item, value])
    keys = [item] + ([strata] if strata else [])
    rows = []
    for key, g in items.groupby(list(by), dropna=False, sort=True):
        ref = g[g[system] == reference_system]
        if ref.empty:
            continue
        ref = _seed_average(ref, item, value, cluster, strata)
        for name, other in g[g[system] != reference_system].groupby(system, sort=True):
            df = ref.merge(_seed_average(other, item, value, cluster, strata), on=keys,
                           suffixes=("_ref", ""))
            if df.empty:
                continue
            if cluster and (df["_cluster"] != df["_cluster_ref"]).any():
                raise ValueError(f"paired_table: {name!r} and the reference disagree on clusters")
            a, fn = _stats(df, value, strata)
            b, _ = _stats(df, value + "_ref", strata)
            res = paired_bootstrap(a, b, fn, df["_cluster"].tolist() if cluster else None,
                                   df[strata].tolist() if strata else None,
                                   n_resamples, seed, alpha)
            rows.append({**dict(zip(by, key, strict=True)), system: name,
                         "reference": reference_system, "diff": res.diff, "ci_low": res.low,
                         "ci_high": res.high, "p_value": res.p_value,
                         "estimate": res.estimate_a, "estimate_ref": res.estimate_b,
                         "n_items": len(df),
                         "n_clusters": df["_cluster"].nunique() if cluster else len(df)})
    return pd.DataFrame(rows)
