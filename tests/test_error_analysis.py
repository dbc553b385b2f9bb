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


def test_query_intent_prefers_ask_tags_then_any_tag():
    from types import SimpleNamespace

    from saf_utils.argscichat.diagnostics import query_properties

    intents = pd.DataFrame({"Role": ["Proponent"] * 3 + ["Opponent"],
                            "Sentence": ["What is it?", "I see.", "Tell me more", "What is it?"],
                            "Tag": ["Ask_what", "Ack", "Ask_more", "Opp_tag"]})

    def pair(pid, query, facts=(1,), history=((), (4,))):
        return SimpleNamespace(pair_id=pid, turn=1, fact_indexes=list(facts), content=["a"] * 9,
                               query=query, reply="r", history_fact_indexes=list(history))

    props = query_properties([pair("a", "I see. What is it?"), pair("b", "I see."),
                              pair("c", "Nothing known", facts=()), pair("a", "dup")], intents)
    assert props.pair_id.tolist() == ["a", "b", "c"]
    assert props.intent.tolist() == ["Ask_what", "Ack", "unmatched"]
    assert props.gold_dist_last_facts.iloc[0] == 3 and pd.isna(props.gold_dist_last_facts.iloc[2])
    assert query_properties([pair("a", "x")], None).intent.tolist() == ["no intents file"]


def test_reply_diagnostics_flags_generic_copies_and_empty_replies():
    from saf_utils.argscichat.diagnostics import reply_diagnostics

    gen = pd.DataFrame({"system": ["s"] * 3, "fold": [0] * 3, "seed": [None] * 3,
                        "pair_id": ["a", "b", "c"], "output": ["same reply", "same reply", ""],
                        "gold": ["one two three four five", "x", "y z"]})
    content = {"a": ["the same reply here"], "b": ["nothing"], "c": ["c"]}
    out = reply_diagnostics(gen, content, {0: {"same reply"}}, pd.DataFrame())
    assert out.generic.tolist() == [True, True, False]
    assert out.train_copy.tolist() == [True, True, False]
    assert out.length_bucket.tolist() == ["<0.5x gold", "0.5-2x gold", "empty"]
    assert out.paper_bigram_share.tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="not in the fold files"):
        reply_diagnostics(gen, {"a": ["x"]}, {}, pd.DataFrame())
