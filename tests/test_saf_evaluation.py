"""saf_utils.saf.scores: item scores, corpus statistics, headline and paired tables,
per-question tables, the oracle and the error-analysis helpers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fakes import FAKE_ENCODER, FakeTok, bow_encoder
from saf_frames import toy_frame

from saf_utils.saf import baselines, browse, scores
from saf_utils.saf import formats as S
from saf_utils.saf import record as RC

# --------------------------------------------------------------------------- evaluation


def _preds():
    gold = toy_frame("test_unseen_answers", ("Q1", "Q2"), 3)
    outs = ["Correct Feedback: Korrekt!", "Incorrect Feedback: Teilweise: Q1 fehlt etwas.",
            "kaputt", "Correct Feedback: Korrekt!", "Partially correct Feedback: Teilweise",
            "Incorrect Feedback: Leider falsch zu Q2."]
    return S.parsed_prediction_table(gold, "m", outs, seed=1)


def test_evaluate_predictions_counts_unparseable():
    m = scores.evaluate_predictions(_preds(), embedding_metrics=False)
    assert m["n_unparseable"] == 1 and m["accuracy"] == pytest.approx(4 / 6)
    assert 0 <= m["macro_f1"] <= 1 and 0 <= m["sacrebleu"] <= 100 and "mse" in m
    assert m["mse_max_penalty"] >= m["mse"] * 5 / 6


def _two_systems(seeds=(None,)):
    """Prediction tables of two label systems (+ seeds) on 3 questions, 18 answers."""
    gold = toy_frame("test_unseen_answers", ("Q1", "Q2", "Q3"), 6)
    rng = np.random.default_rng(0)
    tables = []
    for system, noise in (("ref", 0.5), ("sys", 0.2)):
        for seed in seeds:
            flip = rng.random(len(gold)) < noise
            labels = [S.SAF_LABELS[(S.SAF_LABELS.index(g) + 1) % 3] if f else g
                      for g, f in zip(gold.verification_feedback, flip, strict=True)]
            fbs = [f if not fl else "anders" for f, fl in zip(gold.answer_feedback, flip,
                                                               strict=True)]
            tables.append(S.prediction_table(gold, system, labels=labels,
                                             scores=[S.LABEL_SCORE[x] for x in labels],
                                             feedback=fbs, seed=seed))
    return pd.concat(tables, ignore_index=True)


def test_collapse_identical_seeds():
    p = _preds()
    both = pd.concat([p, p.assign(seed=2)], ignore_index=True)
    c = scores.collapse_identical_seeds(both)
    assert len(c) == len(p) and c.seed.isna().all()
    other = p.assign(seed=2, pred_feedback="x")
    c2 = scores.collapse_identical_seeds(pd.concat([p, other], ignore_index=True))
    assert sorted(c2.seed.dropna().unique()) == [1, 2]


def test_item_scores_mean_equals_point_metrics():
    p = _preds()
    items = scores.item_scores(p, embedding_metrics=False)
    point = scores.evaluate_predictions(p, embedding_metrics=False)
    means = items.groupby("metric").value.mean()
    for m in ("accuracy", "mse", "mse_max_penalty", "rouge2", "meteor", "unparseable_rate"):
        assert means[m] == pytest.approx(point[m]), m
    assert items[items.metric == "mse"].shape[0] == 5  # the unparseable row has no score
    assert set(items.question) == {"Q1", "Q2"}
    rows = RC.recorder_items(items, "saf", "toy")
    assert rows.cluster.tolist() == items.question.tolist() and rows.fold.isna().all()


@pytest.mark.parametrize("metric", ["macro_f1", "weighted_f1", "sacrebleu", "chrf"])
def test_corpus_stat_matches_point_metric(metric):
    p = _preds()
    mat, fn = scores.corpus_stat(metric, p)
    point = scores.evaluate_predictions(p, embedding_metrics=False)[metric]
    assert float(fn(mat.sum(0)[None])[0]) == pytest.approx(point)


def _designs(p):
    return {s: scores.design_for(g.question.nunique(), n_resamples=200)
            for s, g in p.groupby("split")}


def test_headline_table_estimates_seed_means_and_cis():
    p = scores.collapse_identical_seeds(_two_systems(seeds=(1, 2)))
    items = scores.item_scores(p, embedding_metrics=False)
    h = scores.headline_per_split(p, items, _designs(p), ("accuracy", "macro_f1", "sacrebleu"))
    per_seed = scores.per_seed_table(p, items, ("accuracy", "macro_f1", "sacrebleu"))
    for r in h.itertuples():
        seeds = per_seed[(per_seed.system == r.system) & (per_seed.metric == r.metric)]
        assert r.mean == pytest.approx(seeds.value.mean())  # seeds averaged first
        assert r.seed_std == pytest.approx(np.std(seeds.value, ddof=0))
        assert r.ci_low <= r.mean <= r.ci_high and r.n_units == 18 and r.n_seeds == 2
        assert "these 3 questions" in r.estimand  # 3 < FEW_QUESTIONS: conditional label
    nq = scores.new_questions_table(items, ["test_unseen_answers"], ("accuracy",))
    assert (nq.n_units == 3).all() and nq.method.str.startswith("cluster t").all()
    assert (nq.estimand == scores.QUESTIONS.estimand).all()


def test_paired_table_against_reference():
    p = scores.collapse_identical_seeds(_two_systems(seeds=(1, 2)))
    items = scores.item_scores(p, embedding_metrics=False)
    designs = _designs(p)
    h = scores.headline_per_split(p, items, designs, ("accuracy", "macro_f1"))
    d = scores.paired_per_split(p, items, "ref", designs, ("accuracy", "macro_f1"))
    assert set(d.system) == {"sys"} and set(d.metric) == {"accuracy", "macro_f1"}
    for r in d.itertuples():
        est = h.set_index(["system", "metric"])["mean"]
        assert r.diff == pytest.approx(est["sys", r.metric] - est["ref", r.metric])
        assert r.ci_low <= r.diff <= r.ci_high and 0 < r.p_value <= 1
        assert (r.p_value <= 0.05) == (r.ci_low > 0 or r.ci_high < 0)  # never contradict
    wide = browse.wide_table(d, "test_unseen_answers", value="diff")
    assert "p=" in wide.loc["sys", "accuracy"]


def test_per_question_table_and_ids():
    items = scores.item_scores(_preds(), embedding_metrics=False)
    pq = scores.per_question_table(items, ("accuracy",), n_resamples=100)
    assert set(pq.question_id) == {"q01", "q02"} and (pq.n_items == 3).all()
    assert (pq.estimand == "new answers to this question").all()
    assert scores.question_ids(["b", "a", "b"]) == {"a": "q01", "b": "q02"}
    # ids of all splits: a question keeps its id when the table holds a subset
    ids = {q: f"x{i}" for i, q in enumerate(sorted(set(items.question)))}
    sub = scores.per_question_table(items, ("accuracy",), n_resamples=100, ids=ids)
    assert set(sub.question_id) == set(ids.values())


def test_moverscore_by_split_matches_per_table_calls(monkeypatch):
    import saf_utils.metrics.mover as E

    def fake(refs, hyps, model, idf_dict_ref=None, idf_dict_hyp=None, **kw):
        assert idf_dict_ref is idf_dict_hyp and kw.get("degenerate_score") == 0.0
        return [0.0 if not h.strip() else sum(idf_dict_ref[t] for t in FakeTok()
                                                 .convert_tokens_to_ids(h.split())) / 10
                for h in hyps]
    monkeypatch.setattr(E, "load_encoder", lambda model, device="cpu": FAKE_ENCODER)
    monkeypatch.setattr(E, "moverscore", fake)
    p = _two_systems()
    refs, hyps = scores._inputs(p.reset_index(drop=True))["texts"]
    got = scores._moverscore_by_split(p.reset_index(drop=True), refs, hyps, "m")
    for _, g in p.reset_index(drop=True).groupby("system"):
        want = E.moverscore_items([refs[i] for i in g.index], [hyps[i] for i in g.index], "m")
        assert np.allclose(got[g.index].to_numpy(), want)


def test_published_table():
    pub = S.published_table()
    assert {"model", "source", "split", "accuracy"} <= set(pub.columns) and len(pub) == 4


def test_label_oracle_and_loqo_baselines():
    train = toy_frame("train", ("Q1", "Q2"), 6)
    test = pd.concat([toy_frame("test", ("Q1",), 3), toy_frame("t", ("Q3",), 3)],
                     ignore_index=True)
    o = baselines.label_oracle(train, test, bow_encoder)
    assert (o.pred_label == o.gold_label).all() and o.backoff.tolist() == [False] * 3 + [True] * 3
    assert o.pred_feedback.iloc[0] == "Korrekt!"
    cv = baselines.loqo_baselines(train, bow_encoder)
    assert list(cv.system) == ["majority", "nearest_neighbour"]
    assert cv.accuracy.between(0, 1).all() and cv.macro_f1.between(0, 1).all()
