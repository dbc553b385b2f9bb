"""Known-answer tests for saf_utils.statistics.uncertainty (the shared bootstrap / aggregation
layer)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from saf_utils.statistics import uncertainty as S


def _width(res: S.BootstrapResult) -> float:
    return res.high - res.low


def test_constant_gives_degenerate_ci():
    res = S.cluster_bootstrap(np.full(50, 0.7), clusters=np.arange(50) // 5)
    assert res.estimate == pytest.approx(0.7)
    assert res.low == pytest.approx(0.7) and res.high == pytest.approx(0.7)
    assert (res.n_items, res.n_clusters, res.n_resamples) == (50, 10, 1000)


def test_normal_mean_ci_width_matches_theory():
    n = 2000
    x = np.random.default_rng(1).standard_normal(n)
    res = S.cluster_bootstrap(x, n_resamples=2000, seed=3)
    assert res.estimate == pytest.approx(x.mean())
    assert _width(res) == pytest.approx(2 * 1.96 * x.std() / np.sqrt(n), rel=0.15)


def test_correlated_clusters_widen_ci():
    rng = np.random.default_rng(2)
    clusters = np.repeat(np.arange(40), 25)
    x = rng.standard_normal(40)[clusters] * 2 + rng.standard_normal(clusters.size) * 0.1
    item = S.cluster_bootstrap(x, seed=0)
    clustered = S.cluster_bootstrap(x, clusters=clusters, seed=0)
    assert clustered.estimate == pytest.approx(item.estimate)
    assert _width(clustered) > 3 * _width(item)


def test_strata_keep_cluster_counts_per_stratum():
    # 3 clusters in stratum "a", 7 in "b"; mean of the "is in a" flag reveals the composition.
    strata = ["a"] * 3 + ["b"] * 7
    flag = np.array([s == "a" for s in strata], dtype=float)
    res = S.cluster_bootstrap(flag, strata=strata, clusters=range(10))
    assert res.low == pytest.approx(0.3) and res.high == pytest.approx(0.3)
    free = S.cluster_bootstrap(flag, clusters=range(10))
    assert _width(free) > 0.2


def test_stratum_mean_is_official_fold_aggregation():
    folds = [0] * 2 + [1] * 6
    v = np.array([1.0, 0.0, 1, 1, 1, 1, 1, 0])
    st, fn = S.stratum_mean_stat(v, folds)
    res = S.cluster_bootstrap(st, fn, strata=folds)
    official = (v[:2].mean() + v[2:].mean()) / 2  # per fold, then over folds
    assert res.estimate == pytest.approx(official) == pytest.approx((0.5 + 5 / 6) / 2)
    assert res.estimate != pytest.approx(v.mean())


def test_identical_systems_diff_zero_p_one():
    x = np.random.default_rng(0).random(100)
    clusters = np.arange(100) // 4
    res = S.paired_randomization(x, x, units=clusters)
    assert (res.diff, res.p_value) == (0.0, 1.0) and res.low <= 0 <= res.high


def test_consistently_better_system_is_significant():
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(30), 5)
    b = rng.random(clusters.size)
    a = b + 0.05 + 0.01 * rng.random(clusters.size)
    res = S.paired_randomization(a, b, units=clusters)
    assert res.p_value < 0.01 and res.low > 0 and res.diff == pytest.approx(np.mean(a - b))
    assert res.estimate_a == pytest.approx(a.mean()) and res.estimate_b == pytest.approx(b.mean())
    assert res.method == "randomization"  # 2**30 assignments: Monte Carlo
    worse = S.paired_randomization(b, a, units=clusters)
    assert worse.high < 0 and worse.p_value < 0.01


def test_p_at_its_floor_draws_more_assignments_so_holm_can_reach_alpha():
    """A difference no random assignment reaches: with 1,000 assignments p sits at
    1/1,001, which Holm over ~190 comparisons turns into ~0.19; ``max_resamples`` draws
    more (same stream) until the floor is 1/20,001. A p off the floor is unchanged."""
    rng = np.random.default_rng(0)
    b = rng.random(300)
    a = b + 0.2
    first = S.paired_randomization(a, b, n_resamples=1000, seed=4)
    more = S.paired_randomization(a, b, n_resamples=1000, seed=4, max_resamples=20_000)
    assert first.p_value == pytest.approx(1 / 1001) and more.p_value == pytest.approx(1 / 20_001)
    assert S.holm([first.p_value] * 190)[0] > 0.05 > S.holm([more.p_value] * 190)[0]
    assert more.low > 0 and more.diff == first.diff
    close = b + rng.normal(0, 0.3, 300) * 0.1  # an ordinary p: no further draws
    plain = S.paired_randomization(close, b, n_resamples=1000, seed=4)
    assert plain.p_value > 1 / 1001
    again = S.paired_randomization(close, b, n_resamples=1000, seed=4, max_resamples=20_000)
    # the same result; only the floor the design could reach differs (1/20,001: more draws)
    assert replace(again, p_min=plain.p_min) == plain
    assert again.p_min == pytest.approx(1 / 20_001) and plain.p_min == pytest.approx(1 / 1001)


def test_design_refines_p_at_its_floor():
    """protocol.compare passes the design's ``max_resamples`` on."""
    from saf_utils.statistics import protocol as P

    rng = np.random.default_rng(1)
    v = rng.random(200)
    frame = pd.DataFrame({"item": range(200), "cluster": np.arange(200) // 10})
    design = P.Design("items", "item", estimand="these items", n_resamples=500)
    r = P.compare(frame.assign(value=v + 0.3), frame.assign(value=v), design)
    assert r["p_value"] == pytest.approx(1 / (design.max_resamples + 1))
    off = P.compare(frame.assign(value=v + 0.3), frame.assign(value=v),
                    design.but(max_resamples=0))
    assert off["p_value"] == pytest.approx(1 / 501)


def test_sign_flip_is_exact_and_matches_enumeration():
    """6 clusters: all 64 sign assignments; p by hand, and CI consistent with p."""
    d = np.array([0.3, 0.1, 0.2, -0.05, 0.15, 0.25])
    res = S.paired_randomization(d, np.zeros(6), units=np.arange(6))
    assert res.method == "exact randomization" and res.n_units == 6
    signs = np.array([[1 - 2 * ((k >> j) & 1) for j in range(6)] for k in range(64)])
    null = np.abs(signs @ d) / 6
    assert res.p_value == pytest.approx(np.mean(null >= abs(d.mean()) - 1e-12))
    assert (res.p_value <= 0.05) == (res.low > 0)
    assert S.paired_randomization(d, np.zeros(6), units=np.arange(6), n_resamples=7,
                                  seed=9) == res  # exact: no randomness


def test_two_clusters_can_never_be_significant():
    """The smallest p of a swap test over 2 clusters is 0.5: the CI must agree."""
    a, b = np.zeros(4), np.ones(4)
    res = S.paired_randomization(a, b, units=["q1", "q1", "q2", "q2"])
    assert res.p_value == pytest.approx(1.0) or res.p_value >= 0.5
    assert res.low <= 0 <= res.high and np.isinf(res.mde)
    assert S.p_min(2) == 0.5 and S.p_min(10) == pytest.approx(2 / 1024)


@pytest.mark.parametrize("seed", range(20))
def test_ci_and_p_never_contradict(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    units = rng.integers(0, max(2, n // 3), n)
    a, b = rng.random(n), rng.random(n) + rng.normal(0, 0.2)
    for u in (None, units):
        r = S.paired_randomization(a, b, units=u, n_resamples=300, seed=seed)
        assert (r.p_value <= 0.05) == (r.low > 0 or r.high < 0)
        assert r.low <= r.diff <= r.high


def test_cluster_t_interval_is_the_textbook_t_for_equal_clusters():
    from scipy import stats as st

    rng = np.random.default_rng(3)
    v = rng.random(60)
    cl = np.arange(60) // 10
    res = S.cluster_t_interval(v, cl)
    means = v.reshape(6, 10).mean(1)
    lo, hi = st.t.interval(0.95, 5, loc=means.mean(), scale=st.sem(means))
    assert (res.low, res.high) == (pytest.approx(lo), pytest.approx(hi))
    assert res.method == "cluster t (5 df)" and res.n_clusters == 6
    strat = S.cluster_t_interval(v, cl, strata=cl // 2)  # 3 strata of 2: at most 3 df
    df = float(strat.method.split("(")[1].split()[0])
    assert 1 <= df <= 3
    assert strat.estimate == pytest.approx(np.mean([means[2 * k:2 * k + 2].mean()
                                                    for k in range(3)]))
    with pytest.raises(ValueError, match="need >= 2"):
        S.cluster_t_interval(v, cl, strata=cl)


def test_holm_matches_hand_computation():
    adj = S.holm([0.01, 0.04, 0.03, np.nan, 0.5])
    assert adj[:3] == pytest.approx([0.04, 0.09, 0.09]) and np.isnan(adj[3])
    assert adj[4] == pytest.approx(0.5)
    assert S.holm([0.9, 0.8]).tolist() == [1.0, 1.0]  # 2 * 0.8 capped at 1


def test_seeded_results_are_reproducible():
    x = np.random.default_rng(0).random(300)
    c = np.arange(300) // 7
    assert S.cluster_bootstrap(x, clusters=c, seed=5) == S.cluster_bootstrap(x, clusters=c, seed=5)
    assert S.cluster_bootstrap(x, clusters=c, seed=5) != S.cluster_bootstrap(x, clusters=c, seed=6)
    y = x + 0.01
    assert S.paired_randomization(y, x, seed=1) == S.paired_randomization(y, x, seed=1)


@pytest.mark.parametrize("call, message", [
    (lambda: S.cluster_bootstrap(np.ones(3), clusters=[1, 2]), "length 2 does not match 3"),
    (lambda: S.cluster_bootstrap(np.array([])), "non-empty"),
    (lambda: S.cluster_bootstrap(np.ones(3), n_resamples=0), "n_resamples"),
    (lambda: S.cluster_bootstrap(np.ones(3), clusters=[1, 1, 2], strata=["a", "b", "b"]),
     "nested in strata"),
    (lambda: S.cluster_bootstrap(np.ones(2), clusters=[1, None]), "missing"),
    (lambda: S.mean_stat([1.0, np.nan]), "NaN"),
    (lambda: S.paired_randomization(np.ones(3), np.ones(4)), "paired"),
    (lambda: S.paired_randomization(np.ones(3), np.ones(3), alpha=5), "alpha"),
])
def test_bad_input_raises_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
