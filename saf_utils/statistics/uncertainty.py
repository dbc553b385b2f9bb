"""Uncertainty primitives on per-item sufficient statistics (corpus metrics exact, a resample
is a matrix product): :func:`cluster_bootstrap`, :func:`cluster_t_interval` and
:func:`paired_randomization`; every std is the population std (``ddof=0``).
Methods and calibration: docs/statistics.md."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.determinism import SUM_DECIMALS, round_features

Statistic = Callable[[np.ndarray], np.ndarray]  # [B, d] summed stats -> [B] metric values


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    low: float
    high: float
    n_items: int
    n_clusters: int
    n_resamples: int
    method: str = "bootstrap"


@dataclass(frozen=True)
class PairedResult:
    diff: float  # estimate_a - estimate_b
    low: float
    high: float
    p_value: float
    estimate_a: float
    estimate_b: float
    method: str = ""
    n_units: int = 0
    mde: float = float("nan")  # minimum detectable effect (80 % power)
    p_min: float = float("nan")  # the smallest p this test can give (its design's floor)


# ---------------------------------------------------------------- resampling engine
def _as_matrix(stats: Any, name: str = "stats") -> np.ndarray:
    arr = np.asarray(stats, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"{name}: need a non-empty [n_items, d] array, got shape {arr.shape}")
    return arr


def _codes(seq: Sequence, n: int, what: str, one: str) -> np.ndarray:
    """Integer codes of ``n`` group ids (first seen first); a wrong length or a missing id
    raises."""
    if len(seq) != n:
        raise ValueError(f"{what}: length {len(seq)} does not match {n} items")
    codes = pd.factorize(pd.Series(list(seq)))[0]
    if (codes < 0).any():
        raise ValueError(f"{what}: missing (None/NaN) {one} ids")
    return codes


def _groups(n: int, clusters: Sequence | None, strata: Sequence | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Item -> cluster index, cluster -> stratum index; clusters must nest in strata."""
    cl = np.arange(n) if clusters is None else _codes(clusters, n, "clusters", "cluster")
    if strata is None:
        return cl, np.zeros(cl.max() + 1, dtype=int)
    st = _codes(strata, n, "strata", "stratum")
    pairs = pd.DataFrame({"c": cl, "s": st}).drop_duplicates()
    if pairs["c"].duplicated().any():
        raise ValueError("clusters must be nested in strata: a cluster spans several strata")
    return cl, pairs.sort_values("c")["s"].to_numpy()


def _resample_counts(cluster_stratum: np.ndarray, n_resamples: int, seed: int, chunk: int = 200):
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


def _cluster_sums(stats: np.ndarray, cl: np.ndarray) -> np.ndarray:
    sums = np.zeros((cl.max() + 1, stats.shape[1]))
    np.add.at(sums, cl, stats)
    return sums


def cluster_bootstrap(stats: np.ndarray, statistic: Statistic | None = None,
                      clusters: Sequence | None = None, strata: Sequence | None = None,
                      n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05
                      ) -> BootstrapResult:
    """Cluster (and stratified) bootstrap of ``statistic`` (None: the mean of 1-D ``stats``)
    over per-item sufficient stats; the estimate is the statistic of the full sums."""
    if statistic is None:
        stats, statistic = mean_stat(stats)
    mat = _as_matrix(stats)
    cl, cs = _groups(mat.shape[0], clusters, strata)
    sums = _cluster_sums(mat, cl)
    # Resampled sums rounded: a BLAS kernel of another processor changes their last bits.
    boot = np.concatenate([statistic(round_features(c @ sums, SUM_DECIMALS))
                           for c in _resample_counts(cs, n_resamples, seed)])
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    est = float(statistic(sums.sum(0)[None, :])[0])
    return BootstrapResult(est, float(low), float(high), mat.shape[0], sums.shape[0],
                           n_resamples)


def paired_randomization(stat_a: np.ndarray, stat_b: np.ndarray,
                         statistic: Statistic | None = None, units: Sequence | None = None,
                         n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05,
                         max_exact: int = 4096, max_resamples: int | None = None
                         ) -> PairedResult:
    """A - B with a paired randomization test (Dror et al., 2018) whose CI inverts the test:
    each unit (``units=None``: every item, else a cluster id per item) may have its two
    systems swapped; all ``2**units`` assignments when at most ``max_exact`` (exact p), else
    ``n_resamples`` random ones (+1 smoothing). ``diff +- q`` (``q`` the critical value)
    excludes 0 exactly when ``p <= alpha``. Where none of the first ``n_resamples`` is as
    extreme as the observed difference, more are drawn, up to ``max_resamples`` in all (a
    floor of 0.001 under Holm over ~190 comparisons could never be significant); the other
    p-values are unchanged."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if statistic is None:
        (stat_a, statistic), (stat_b, _) = mean_stat(stat_a), mean_stat(stat_b)
    a, b = _as_matrix(stat_a, "stat_a"), _as_matrix(stat_b, "stat_b")
    if a.shape != b.shape:
        raise ValueError(f"stat_a {a.shape} and stat_b {b.shape} must be paired (same shape)")
    cl, _ = _groups(a.shape[0], units, None)
    sa, sb = _cluster_sums(a, cl), _cluster_sums(b, cl)
    ta, tb = sa.sum(0), sb.sum(0)
    est_a = float(statistic(ta[None, :])[0])
    est_b = float(statistic(tb[None, :])[0])
    diff = est_a - est_b
    n_units = sa.shape[0]
    exact = 2 ** n_units <= max_exact
    if exact:  # every 0/1 swap assignment of the units
        swap = ((np.arange(2 ** n_units)[:, None] >> np.arange(n_units)[None, :]) & 1
                ).astype(float)
    elif n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1 (>= 1000 recommended), got {n_resamples}")
    else:
        rng = np.random.default_rng(seed)
        swap = rng.integers(0, 2, size=(n_resamples, n_units)).astype(float)

    def null_of(swaps: np.ndarray) -> np.ndarray:
        out = np.empty(swaps.shape[0])
        for start in range(0, swaps.shape[0], 1000):
            delta = swaps[start:start + 1000] @ (sb - sa)  # swapped units' stats change sides
            # rounded as the bootstrap's sums: BLAS kernels differ in the last bits (measured:
            # OpenBLAS Haswell vs SkylakeX moved a MoverScore interval by 2e-16)
            out[start:start + 1000] = (statistic(round_features(ta + delta, SUM_DECIMALS))
                                       - statistic(round_features(tb - delta, SUM_DECIMALS)))
        return out

    null = null_of(swap)
    # the observed assignment (no swap) on the null's own rounded path, so that it equals
    # the null's identity row exactly
    obs = abs(float(null_of(np.zeros((1, n_units)))[0]))
    tol = 1e-12 * max(1.0, obs)
    if not exact and max_resamples and max_resamples > swap.shape[0] \
            and not (np.abs(null) >= obs - tol).any():
        more = [null]
        for start in range(swap.shape[0], max_resamples, 1000):
            size = (min(1000, max_resamples - start), n_units)
            more.append(null_of(rng.integers(0, 2, size=size).astype(float)))
        null = np.concatenate(more)
    u = np.sort(np.abs(null))[::-1]
    extra = 0 if exact else 1  # Monte Carlo: the observed assignment counts once more
    n = u.size + extra
    p = float(min(1.0, ((u >= obs - tol).sum() + extra) / n))
    k = int(np.floor(alpha * n + 1e-9)) - extra  # p <= alpha  <=>  #{u >= |d|} <= k
    q = float(u[k]) if 0 <= k < u.size else float(u[0])
    if p <= alpha:  # ties at the boundary: make the two answers agree exactly
        q = min(q, abs(diff) * (1 - 1e-12))
    else:
        q = max(q, abs(diff))
    floor = p_min(n_units, exact, max(u.size, max_resamples or 0))
    return PairedResult(diff, diff - q, diff + q, p, est_a, est_b,
                        method="exact randomization" if exact else "randomization",
                        n_units=int(n_units), mde=_mde(null, alpha, n_units, p_min(
                            n_units, exact, u.size)), p_min=floor)


def p_min(n_units: int, exact: bool = True, n_resamples: int | None = None) -> float:
    """The smallest two-sided p a swap test over ``n_units`` can give (2 / 2**n exact)."""
    if exact:
        return min(1.0, 2.0 / 2 ** n_units)
    return 1.0 / ((n_resamples or 0) + 1)


def _mde(null: np.ndarray, alpha: float, n_units: int, pmin: float,
         power: float = 0.8) -> float:
    """Smallest effect detected with ``power`` at two-sided ``alpha``: (t_a + t_b) * SE, SE the
    spread of the randomization distribution, t with n_units - 1 df; infinite when no p can
    reach ``alpha``."""
    from scipy.stats import t

    if pmin > alpha:
        return float("inf")
    se = float(np.sqrt(np.mean(null ** 2)))
    df = max(n_units - 1, 1)
    return float((t.ppf(1 - alpha / 2, df) + t.ppf(power, df)) * se)


def cluster_t_interval(values: Sequence[float], clusters: Sequence,
                       strata: Sequence | None = None, alpha: float = 0.05) -> BootstrapResult:
    """Mean over strata of the per-stratum item mean with a t-interval over clusters (estimand:
    new clusters): the linearised variance of each stratum's mean, ``k/(k-1) * sum(r_c**2)``
    with ``r_c = (sum_c - mean * n_c) / N``, summed over strata / n_strata**2, and Student's t
    with Welch-Satterthwaite df (docs/statistics.md). Needs >= 2 clusters per stratum."""
    from scipy.stats import t

    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0 or np.isnan(v).any():
        raise ValueError("cluster_t_interval: need non-empty values without NaN")
    cl, cs = _groups(v.size, clusters, strata)
    sums = np.bincount(cl, weights=v)
    counts = np.bincount(cl).astype(float)
    means, parts, dfs = [], [], []
    for s in np.unique(cs):
        mine = cs == s
        k = int(mine.sum())
        if k < 2:
            raise ValueError(f"cluster_t_interval: stratum {s} has {k} cluster(s); need >= 2")
        n_s = counts[mine].sum()
        m = sums[mine].sum() / n_s
        r = (sums[mine] - m * counts[mine]) / n_s
        means.append(m)
        parts.append(k / (k - 1) * float((r ** 2).sum()))
        dfs.append(k - 1)
    n_strata = len(means)
    est = float(np.mean(means))
    var = float(np.sum(parts))
    # Welch-Satterthwaite: strata with unequal spread carry fewer effective df than sum(k-1)
    df = var ** 2 / sum(p ** 2 / d for p, d in zip(parts, dfs, strict=True)) if var > 0 \
        else float(sum(dfs))
    half = float(t.ppf(1 - alpha / 2, df) * np.sqrt(var) / n_strata)
    return BootstrapResult(est, est - half, est + half, int(v.size), int(cs.size),
                           0, method=f"cluster t ({df:.3g} df)")


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error), order kept; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    m = order.size
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out


# ---------------------------------------------------------------- ready-made statistics

def mean_stat(values: Sequence[float]) -> tuple[np.ndarray, Statistic]:
    """Mean as (sum, count): resampled clusters of different sizes weigh by their items."""
    v = np.asarray(values, dtype=float).ravel()
    if np.isnan(v).any():
        raise ValueError("mean_stat: values contain NaN; drop or score them explicitly")
    return np.column_stack([v, np.ones_like(v)]), lambda s: s[:, 0] / s[:, 1]


def stratum_mean_stat(values: Sequence[float], strata: Sequence) -> tuple[np.ndarray, Statistic]:
    """Mean over strata of the per-stratum mean (official ArgSciChat: per fold, then folds);
    bootstrap it with the same ``strata`` so that no fold drops out of a resample."""
    v, _ = mean_stat(values)
    st = _codes(strata, len(v), "strata", "stratum")
    k = st.max() + 1
    out = np.zeros((len(v), 2 * k))
    out[np.arange(len(v)), st] = v[:, 0]
    out[np.arange(len(v)), k + st] = 1.0
    return out, lambda s: (s[:, :k] / s[:, k:]).mean(1)
