"""saf_utils.statistics.protocol: designs, choices per fold, multiplicity and the sentences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from saf_utils.statistics import conclusions as V
from saf_utils.statistics import protocol as P
from saf_utils.statistics import validation_choice as VC

ITEM = P.Design("answers", "item", estimand="new answers to these questions", n_resamples=300)
CLUSTER = P.Design("questions", "cluster", estimand="new questions")
FOLDED = P.Design("papers", "cluster", estimand="new papers", strata="fold")


def items(effect: float = 0.0, n_clusters: int = 6, per: int = 8, folds: bool = False,
          seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_clusters):
        base = rng.random()
        for i in range(per):
            for system, shift in (("ref", 0.0), ("sys", effect)):
                rows.append({"split": "test", "system": system, "metric": "m",
                             "item": f"{c}-{i}", "cluster": f"c{c}", "seed": None,
                             "fold": c // 2 if folds else None,
                             "value": base + shift + 0.1 * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_headline_method_follows_the_design():
    it = items()
    item = P.headline_table(it, ITEM).set_index("system")
    clus = P.headline_table(it, CLUSTER).set_index("system")
    assert item.loc["sys", "mean"] == pytest.approx(clus.loc["sys", "mean"])
    assert item.loc["sys", "method"].startswith("bootstrap") and item.loc["sys", "n_units"] == 48
    assert clus.loc["sys", "method"] == "cluster t (5 df)" and clus.loc["sys", "n_units"] == 6
    # new questions is the wider claim: between-question spread enters its interval
    assert (clus.ci_high - clus.ci_low).min() > (item.ci_high - item.ci_low).max()
    folded = P.headline_table(items(folds=True), FOLDED)
    assert folded.method.str.startswith("cluster t (").all()  # Satterthwaite df <= 3


def test_one_cluster_per_stratum_gives_no_interval():
    it = items(n_clusters=2, folds=True)  # fold 0 only, with 2 clusters; then split by cluster
    it["fold"] = it.cluster.map({"c0": 0, "c1": 1})
    h = P.headline_table(it, FOLDED)
    assert h.ci_low.isna().all() and h.method.str.startswith("no interval").all()


def test_paired_table_design_and_consistency():
    it = items(effect=0.2)
    for design in (ITEM, CLUSTER):
        row = P.paired_table(it, "ref", design).iloc[0]
        assert row["diff"] == pytest.approx(0.2, abs=0.05)
        assert row.p_value < 0.05 and row.ci_low > 0 and row.estimand == design.estimand
    assert P.paired_table(it, "ref", CLUSTER).iloc[0].p_value == pytest.approx(2 / 64)


def test_choose_reads_only_its_own_fold():
    rows = []
    for fold in (0, 1):
        for system, v in (("a", 0.5 if fold == 0 else 0.2), ("b", 0.4), ("o", 0.9)):
            rows += [{"split": "val", "system": system, "metric": "m", "item": f"{fold}{i}",
                      "fold": fold, "value": v, "cluster": "p"} for i in range(3)]
    it = pd.DataFrame(rows)
    roles = {"a": "system", "b": "baseline", "o": "oracle"}
    ch = VC.choose(it, "m", roles)
    assert ch.per_fold == {0: "a", 1: "b"}  # the oracle is never a candidate
    it2 = it.copy()
    it2.loc[(it2.fold == 1) & (it2.system == "b"), "value"] = 0.0
    assert VC.choose(it2, "m", roles).per_fold[0] == "a"
    comp = VC.composite(it.assign(split="val"), ch)
    assert set(comp.system) == {"val_chosen"} and comp.value.tolist() == [0.5] * 3 + [0.4] * 3
    low = VC.choose(it, "m", roles, lower_is_better=True)
    assert low.per_fold == {0: "b", 1: "a"}
    unfolded = VC.choose(it.assign(fold=None), "m", roles)
    assert list(unfolded.per_fold) == [None]


def test_choose_value_is_choose_from_on_a_grid():
    """A hyperparameter's value chosen on val: the one tie rule (rounded scores, the first
    stated wins), keys of any type (None for "keep all"), NaN never chosen."""
    assert VC.choose_value({10: 0.2, None: 0.3, 5: 0.3}, "m") is None  # ties: first stated
    assert VC.choose_value({3: 0.5, 1: 0.5 + 1e-12}, "m") == 3  # float noise is a tie
    assert VC.choose_value({3: 0.5, 1: 0.5 + 1e-6}, "m") == 1
    assert VC.choose_value({(0, 0.1): float("nan"), (50, 0.2): 0.1}, "m") == (50, 0.2)
    assert VC.choose_value({"a": float("nan"), "b": float("nan")}, "m") == "a"  # no evidence
    assert VC.choose_value({"a": 0.1, "b": 0.2}, "m", lower_is_better=True) == "a"
    with pytest.raises(ValueError, match="no candidates"):
        VC.choose_value({}, "m")


def test_adjust_keeps_the_primary_and_holms_the_rest():
    c = pd.DataFrame({"system": ["a", "b", "c"], "reference": "r", "metric": "m",
                      "p_value": [0.01, 0.02, 0.04]})
    out = P.adjust(c, {"system": "a"})
    assert out.primary.tolist() == [True, False, False]
    assert out.p_adj.tolist() == pytest.approx([0.01, 0.04, 0.04])
    with pytest.raises(ValueError, match="primary"):
        P.adjust(c, {"reference": "r"})


def test_verdict_wording_follows_the_test():
    sig = {"system": "a", "reference": "b", "metric": "accuracy", "diff": 0.05, "ci_low": 0.01,
           "ci_high": 0.09, "p_value": 0.01, "p_adj": 0.02, "mde": 0.04,
           "estimand": "new answers to these questions", "method": "randomization"}
    assert "a is better than b" in V.verdict(sig) and "Holm-adjusted p = 0.020" in V.verdict(sig)
    assert "a is worse than b" in V.verdict({**sig, "diff": 0.05}, lower_is_better=True)
    ns = {**sig, "p_adj": 0.3}
    text = V.verdict(ns)
    assert "not distinguishable" in text and "minimum detectable effect about 0.04" in text
    assert "not distinguishable" in V.lead_sentence("a", "b", ns, "accuracy")
    assert "resolved" in V.lead_sentence("a", "b", sig, "accuracy")
    assert "not tested" in V.lead_sentence("a", "b", None, "accuracy")
    # the raw interval excludes 0 but Holm does not reach alpha: the sentence says why
    assert V.UNADJUSTED in text and V.UNADJUSTED in V.lead_sentence("a", "b", ns, "accuracy")
    assert V.UNADJUSTED not in V.verdict(sig)
    assert V.UNADJUSTED not in V.verdict({**ns, "ci_low": -0.01})
    assert V.UNADJUSTED not in V.verdict({**ns, "primary": True, "p_value": 0.3})


def test_choose_row_rounds_and_breaks_ties_by_grid_order() -> None:
    grid = pd.DataFrame({"C": [0.1, 1.0, 10.0], "score": [0.5, 0.7 + 1e-12, 0.7]})
    assert VC.choose_row(grid, "score") == 1  # 0.7 + noise ties 0.7: the first row wins
    assert VC.choose_row(grid.iloc[::-1].reset_index(drop=True), "score") == 0
    assert VC.choose_row(grid, "score", lower_is_better=True) == 0
    grid.loc[1, "score"] = float("nan")  # a missing score is never chosen
    assert VC.choose_row(grid, "score") == 2
