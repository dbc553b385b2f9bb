"""Notebook 06 computes its error analysis in its cells: its records, read from the smoke run,
follow 03's selections and 04's replies (groups, shares, copies)."""

from __future__ import annotations

import pandas as pd
import pytest

from saf_utils.argscichat.data import load_argscichat
from saf_utils.data import artifacts as AR


@pytest.mark.slow
def test_smoke_06_records_follow_03_and_04(smoke_run):
    out, _ = smoke_run
    rows = pd.DataFrame(AR.record_rows([out / "06_argscichat_error_analysis" / "records.jsonl"]))
    assert (rows.kind == "analysis").all() and (rows.split == "test").all()
    sel = rows[rows.task == "argscichat_fact_selection"]
    group, value = sel.subset.str.split("=", n=1, expand=True).T.to_numpy()
    assert set(group) == {"turn", "gold_facts", "distance", "intent", "all"}
    assert set(value[group == "turn"]) <= {"0", "1", "2", "3-4", "5+"}
    assert set(value[group == "distance"]) <= {"n/a", "0 (same)", "1", "2-3", "4-10", ">10"}
    assert sel.value.between(0, 1).all()
    # Fact-F1 per turn: the mean of 03's scored test selections of that turn (folds, seeds)
    preds = AR.read_selections(out / "03_fact_selection")
    preds = preds[(preds.split == "test") & preds.fact_f1.notna()]
    label = {0: "turn=0", 1: "turn=1", 2: "turn=2", 3: "turn=3-4", 4: "turn=3-4"}
    turn = {p.pair_id: label.get(p.turn, "turn=5+")
            for f in set(preds.fold) for p in load_argscichat(fold=f).test}
    want = preds.assign(subset=preds.pair_id.map(turn)).groupby(["system", "subset"]).fact_f1
    got = sel[group == "turn"].set_index(["system", "subset"]).value
    assert got.sort_index().to_dict() == pytest.approx(want.mean().sort_index().to_dict())
    gen = rows[rows.task == "argscichat_generation"]
    summary = gen[gen.subset == "all"].pivot(index="system", columns="metric", values="value")
    shares = [c for c in summary.columns if c.endswith("_share")]
    assert len(shares) == 6 and summary[shares].stack().between(0, 1).all()
    # the floor gives every query of a fold one string: all its replies are generic
    assert summary.loc["constant_frequent", "generic_share"] == 1.0
    parts = gen[gen.subset != "all"].subset.str.split("=", n=1, expand=True)
    assert set(parts[0]) == {"length", "selection"}
    assert set(parts[1][parts[0] == "selection"]) <= {"found gold", "missed gold",
                                                      "no gold facts"}
