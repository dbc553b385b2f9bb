"""saf_utils.argscichat.fact_selection: the official selectors, the learned ranker and its
ensembles on hand-made dialogues, and the official baselines on the real folds."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from dialogues import CONTENT, P1, P2, PAIRS, pair
from fakes import fake_embed
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import fact_selection as FS


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """Gradient boosting's OpenMP threads crawl on shared cores; one thread is fast here."""
    with threadpool_limits(1, user_api="openmp"):
        yield


# --------------------------------------------------------------------------- selectors


def test_top_k_follows_official_argsort_including_ties() -> None:
    s = np.array([0.1, 0.9, 0.5, 0.9])
    assert set(FS.top_k(s, 2)) == set(np.argsort(s)[-2:].tolist())
    assert FS.top_k(s, 1) == [int(np.argsort(s)[-1])]
    zeros = np.zeros(5)
    assert FS.top_k(zeros, 2) == [int(i) for i in np.argsort(zeros)[-2:][::-1]]
    assert len(FS.top_k([1.0, 2.0], 5)) == 2
    with pytest.raises(ValueError, match="k must be"):
        FS.top_k(s, 0)


def test_baseline_selectors() -> None:
    assert FS.select_first(P1, 2) == [0, 1]
    assert FS.select_tfidf(P1, 1) == [2]  # "data" and "collect" only in sentence 2
    assert FS.select_bm25(P2, 1) == [3]
    assert FS.select_sbert(P2, 1, fake_embed) == [3]
    rng = np.random.default_rng(0)
    picks = FS.select_random(P1, 2, rng)
    assert len(set(picks)) == 2 and all(0 <= i < len(CONTENT) for i in picks)


def test_tfidf_of_stop_word_only_paper_is_zero() -> None:
    assert FS.tfidf_scores(["the a", "of the"], "the").tolist() == [0.0, 0.0]


def test_cosine_scores_handles_zero_vectors() -> None:
    s = FS.cosine_scores(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([2.0, 0.0]))
    assert s.tolist() == [1.0, 0.0]


# --------------------------------------------------------------------------- learned ranker


def synthetic(n_pairs: int, seed: int):
    """Pairs whose gold sentence is the one most lexically similar to the query."""
    rng = np.random.default_rng(seed)
    pairs = []
    for n in range(n_pairs):
        gold = int(rng.integers(len(CONTENT)))
        words = FS.word_tokens(CONTENT[gold])
        query = " ".join(rng.choice(words, size=3)) + "?"
        pairs.append(pair(f"s{seed}_{n}", query, "reply", facts=(gold,)))
    return pairs


@pytest.mark.slow
def test_val_chosen_ranker_and_ensemble_learn_a_lexical_signal() -> None:
    from saf_utils.argscichat import experiments as R
    from saf_utils.argscichat import selectors as X
    from saf_utils.argscichat.selection_fit import SelectionConfig, SelectionContext

    train, val = synthetic(30, 0), synthetic(12, 1)
    grid = ({"kind": "logreg", "C": 1.0},
            {"kind": "hgb", "max_iter": 20, "max_leaf_nodes": 4, "min_samples_leaf": 5})
    ctx = SelectionContext({(0, "train"): train, (0, "val"): val, (0, "test"): val},
                           A.pair_index(train + val), fake_embed, SelectionConfig(k=1))
    spec, rows = X.ranker_choice(ctx, 0, grid)
    assert len(rows) == 2 and sum(r["chosen"] for r in rows) == 1
    best = max(r["val_fact_f1"] for r in rows)
    assert best > 0.5
    preds = R.run_selectors(ctx, ["ranker"], {"ranker": {"grid": list(grid)}}).predictions
    sel = preds[preds.split == "val"].selected.tolist()
    assert FS.mean_fact_f1(dict(enumerate(sel)), val) == pytest.approx(best)
    X.ENSEMBLE_MEMBER_SETS["both"] = grid
    try:
        ens, _ = X.ensemble_choice(ctx, 0, ("both",))
    finally:
        del X.ENSEMBLE_MEMBER_SETS["both"]
    Xv, _, gv = ctx.table(0, "val")
    scores = ens.scores(ctx, 0, "train", Xv, gv)
    assert scores.min() >= 0 and scores.max() <= 1
    assert FS.mean_fact_f1(FS.grouped_top_k(scores, gv, 1), val) > 0.5
    with pytest.raises(ValueError, match="unknown classifier"):
        FS.make_ranker("svm")


def test_group_rank01_and_mix_ranks() -> None:
    groups = np.array([0, 0, 0, 1, 1])
    ranks = FS.group_rank01(np.array([0.2, 0.9, 0.5, 3.0, 1.0]), groups)
    assert ranks.tolist() == [0.0, 1.0, 0.5, 1.0, 0.0]
    base = np.array([1.0, 0.0, 0.5, 0.0, 1.0])  # wrong best sentence in both pairs
    other = np.array([0.0, 2.0, 1.0, 5.0, 0.0])  # right best sentence in both pairs
    assert FS.grouped_top_k(FS.mix_ranks(base, other, groups, 0.0), groups, 1) == {0: [0], 1: [1]}
    assert FS.grouped_top_k(FS.mix_ranks(base, other, groups, 2.0), groups, 1) == {0: [1], 1: [0]}


def test_scored_pairs_and_mean_fact_f1_skip_pairs_without_gold() -> None:
    kept, skipped = A.scored_pairs(PAIRS)
    assert kept == [P1, P2] and skipped == 1
    assert FS.mean_fact_f1({0: [9], 1: [2, 0], 2: [3]}, PAIRS) == pytest.approx((2 / 3 + 1) / 2)


# --------------------------------------------------------------------------- real data

needs_data = pytest.mark.skipif(not os.environ.get("ARGSCICHAT_DATA"),
                                reason="ARGSCICHAT_DATA not set")


@pytest.mark.slow
@pytest.mark.realdata
@needs_data
def test_official_first_and_tfidf_baselines_reproduce() -> None:
    """First ~0.078 and TF-IDF ~0.17 Fact-F1 (5-fold mean, k=2), as the official script."""
    from saf_utils.argscichat.data import load_argscichat
    from saf_utils.metrics import fact_f1

    scores: dict[str, dict[int, list[float]]] = {"first": {}, "tfidf": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fold in range(5):
            test, _ = A.scored_pairs(load_argscichat(fold=fold).test)
            scores["first"][fold] = [fact_f1(FS.select_first(p, 2), p.fact_indexes) for p in test]
            scores["tfidf"][fold] = [fact_f1(FS.select_tfidf(p, 2), p.fact_indexes) for p in test]
    def fold_mean(by_fold: dict[int, list[float]]) -> float:  # per fold, then over folds
        return float(np.mean([np.mean(v) for v in by_fold.values()]))

    assert fold_mean(scores["first"]) == pytest.approx(0.078, abs=0.01)
    assert fold_mean(scores["tfidf"]) == pytest.approx(0.17, abs=0.01)
