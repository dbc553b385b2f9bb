"""Unit tests for saf_utils.argscichat, fact_selection and reply_generation (tiny hand-made
dialogues, no models, no downloads)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest
from fakes import fake_embed
from threadpoolctl import threadpool_limits

from saf_utils import artifacts as AR
from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import fact_selection as FS
from saf_utils.argscichat import generation as RG
from saf_utils.argscichat.data import MessagePair

CONTENT = (
    "We study parody detection in social media.",
    "Parody accounts imitate politicians on Twitter.",
    "We collect a data set of tweets from real and parody accounts.",
    "A BERT classifier reaches the best accuracy.",
    "Linguistic analysis shows markers of parody.",
)
TITLE = "Analyzing Political Parody in Social Media"


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """Gradient boosting's OpenMP threads crawl on shared cores; one thread is fast here."""
    with threadpool_limits(1, user_api="openmp"):
        yield


def pair(pid: str, query: str, reply: str, facts=(), hist_ids=(), hist_facts=(), turn=None,
         content=CONTENT) -> MessagePair:
    return MessagePair(
        pair_id=pid, paper_id="paper", title=TITLE, content=tuple(content),
        dialogue_id=hist_ids[0] if hist_ids else pid,
        turn=len(hist_ids) if turn is None else turn, query=query, reply=reply, history=(),
        history_ids=tuple(hist_ids), facts=tuple(CONTENT[i] for i in facts),
        fact_indexes=tuple(sorted(facts)), history_fact_indexes=tuple(tuple(h) for h in hist_facts),
    )


P0 = pair("d_0", "Hi", "Hi!")
P1 = pair("d_1", "Which data do they collect?", "They collect tweets from parody accounts.",
          facts=(2,), hist_ids=("d_0",), hist_facts=((),))
P2 = pair("d_2", "Which classifier works best?", "A BERT classifier is best.", facts=(3,),
          hist_ids=("d_0", "d_1"), hist_facts=((), (2,)))
PAIRS = [P0, P1, P2]
INDEX = A.pair_index(PAIRS)




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


# --------------------------------------------------------------------------- dialogue context


def test_previous_exchanges_and_context() -> None:
    assert A.previous_exchanges(P2, INDEX, turns=1) == [P1.query, P1.reply]
    assert A.previous_exchanges(P2, INDEX, turns=2) == [P0.query, P0.reply, P1.query, P1.reply]
    assert A.dialogue_context(P2, INDEX).endswith(P2.query)
    assert A.dialogue_context(P2) == P2.query
    with pytest.raises(KeyError, match="not in the index"):
        A.previous_exchanges(P2, {"d_2": P2})


def test_sentence_features_history_signals() -> None:
    f = FS.sentence_features(P2, fake_embed, A.dialogue_context(P2, INDEX))
    assert list(f.columns) == list(FS.FEATURES) and len(f) == len(CONTENT)
    assert f.in_last_facts.tolist() == [0, 0, 1, 0, 0]
    assert f.in_prev_facts.tolist() == [0, 0, 1, 0, 0]
    assert f.near_last_facts.tolist() == [0, 1, 0, 1, 0]
    assert f.after_last_fact.tolist() == [-2, -1, 0, 1, 2]
    assert f.is_first2.tolist() == [1, 1, 0, 0, 0]
    assert f.bm25_rank[3] == 0  # "classifier" only in sentence 3
    no_hist = FS.sentence_features(P0, fake_embed)
    assert no_hist.has_last_facts.eq(0).all() and no_hist.dist_last_facts.eq(5).all()
    with pytest.raises(ValueError, match="no content"):
        FS.sentence_features(pair("x", "q", "r", content=()), fake_embed)


def test_feature_table_labels_groups_and_cache() -> None:
    cache: dict = {}
    X, y, g = FS.feature_table([P1, P2], fake_embed, INDEX, cache)
    assert len(X) == 10 and y.tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 1, 0]
    assert g.tolist() == [0] * 5 + [1] * 5 and set(cache) == {"d_1", "d_2"}
    X2, _, _ = FS.feature_table([P2], fake_embed, INDEX, cache)
    assert X2 is cache["d_2"] or X2.equals(cache["d_2"])
    with pytest.raises(ValueError, match="no pairs"):
        FS.feature_table([], fake_embed)


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
    from saf_utils.argscichat import experiments as X

    train, val = synthetic(30, 0), synthetic(12, 1)
    grid = ({"kind": "logreg", "C": 1.0},
            {"kind": "hgb", "max_iter": 20, "max_leaf_nodes": 4, "min_samples_leaf": 5})
    cfg = X.SelectionConfig(k=1, grid=grid, member_sets={"both": grid}, mix_weights=(0.0,))
    ctx = X.SelectionContext({(0, "train"): train, (0, "val"): val, (0, "test"): val},
                             A.pair_index(train + val), fake_embed, cfg)
    spec, rows = X.ranker_choice(ctx, 0)
    assert len(rows) == 2 and sum(r["chosen"] for r in rows) == 1
    best = max(r["val_fact_f1"] for r in rows)
    assert best > 0.5
    sel = X.run_ranker(ctx, 0).selections["val"]
    assert FS.mean_fact_f1(dict(enumerate(sel)), val) == pytest.approx(best)
    ens, _ = X.ensemble_choice(ctx, 0)
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


# --------------------------------------------------------------------------- predictions


def test_prediction_rows_roundtrip(tmp_path) -> None:
    rows = A.prediction_rows(PAIRS, [[0, 1], [2, 3], [4, 0]], fold=0, split="test",
                             system="first")
    assert rows[0]["fact_f1"] is None and rows[1]["fact_f1"] == pytest.approx(2 / 3)
    assert rows[1]["selected_sentences"] == [CONTENT[2], CONTENT[3]]
    with pytest.raises(ValueError, match="missing sentence"):
        A.prediction_rows([P1], [[7]], fold=0, split="test", system="x")
    with pytest.raises(ValueError, match="selections"):
        A.prediction_rows([P1], [], fold=0, split="test", system="x")
    AR.write_selections(rows, tmp_path)
    df = AR.read_selections(tmp_path, "first")
    assert len(df) == 3
    lookup = A.selection_lookup(df)
    assert lookup[(0, "test", "d_1")] == [2, 3]
    with pytest.raises(ValueError, match="no predictions of system"):
        AR.read_selections(tmp_path, "bm25")
    with pytest.raises(FileNotFoundError, match="run notebook 03_fact_selection first"):
        AR.read_selections(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="several systems"):
        A.selection_lookup(pd.concat([df, df.assign(system="other")]))


# --------------------------------------------------------------------------- generation


def test_build_source_parts_and_errors() -> None:
    src = RG.build_source(P2, ["query", "selected_facts"], selected=[3, 1])
    assert src == f"query: {P2.query} | facts: {CONTENT[1]} {CONTENT[3]}"
    assert RG.build_source(P2, ["history"], index=INDEX).startswith("history: Hi Hi! Which data")
    assert RG.build_source(P2, ["gold_facts"]) == f"facts: {CONTENT[3]}"
    assert RG.build_source(P2, ["article"], article_sentences=1) == f"article: {CONTENT[0]}"
    with pytest.raises(ValueError, match="no selection"):
        RG.build_source(P2, ["selected_facts"])
    with pytest.raises(ValueError, match="subset"):
        RG.build_source(P2, ["reply"])
    with pytest.raises(ValueError, match="no pair index"):
        RG.build_source(P2, ["history"])


def test_facts_text_trim_and_tune_length() -> None:
    assert RG.facts_text(P1, [3, 1]) == f"{CONTENT[1]} {CONTENT[3]}"
    assert RG.facts_text(P1, [3, 1], order="rank") == f"{CONTENT[3]} {CONTENT[1]}"
    assert RG.trim_words("a b c", 2) == "a b" and RG.trim_words("a b", None) == "a b"
    best, scores = RG.tune_length(["a b c d", "a b x y"], ["a b", "a b"], [1, 2, 4, None],
                                 lambda p, g: float(p == g))
    assert best == 2 and scores[2] == 1.0
    with pytest.raises(ValueError):
        RG.tune_length([], [], [1], lambda p, g: 0.0)


def test_nearest_replies() -> None:
    train_q = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = RG.nearest_replies(np.array([[0.1, 0.9], [5.0, 0.0]]), train_q, ["r0", "r1"])
    assert out == ["r1", "r0"]
    with pytest.raises(ValueError, match="no training"):
        RG.nearest_replies(train_q, np.zeros((0, 2)), [])


def test_token_compressor_keeps_copied_tokens() -> None:
    queries = ["What data?"] * 6 + ["Which model?"] * 6
    facts = ["We collect tweets (Smith, 2020) here."] * 6 + ["A BERT model (Lee, 2019) wins."] * 6
    replies = ["They collect tweets."] * 6 + ["A BERT model wins."] * 6
    comp = RG.TokenCompressor().fit(queries, facts, replies)
    toks, prob = comp.keep_probabilities("What data?", "We collect tweets (Smith, 2020) here.")
    assert toks[:2] == ["We", "collect"] and len(prob) == len(toks)
    kept = comp.compress("What data?", "We collect tweets (Smith, 2020) here.", 0.5)
    assert "collect" in kept.split() and "(Smith," not in kept.split()
    th, scores = RG.tune_threshold(comp, queries[:2], facts[:2], replies[:2], [0.1, 0.5, 0.9],
                                  A_message_f1())
    assert th in scores and scores[th] == max(scores.values())
    with_prior = RG.TokenCompressor(prior_words=3).fit(queries, facts, replies)
    toks, _ = with_prior.keep_probabilities("Hi", "")
    assert set(toks) - {"Hi"} <= {"They", "collect", "tweets.", "A", "BERT", "model", "wins."}
    boosted = RG.TokenCompressor(kind="hgb").fit(queries * 10, facts * 10, replies * 10)
    toks, prob = boosted.keep_probabilities("What data?", facts[0])
    assert prob[toks.index("collect")] > prob[toks.index("(Smith,")]
    with pytest.raises(ValueError, match="unknown TokenCompressor kind"):
        RG.TokenCompressor(kind="svm")
    with pytest.raises(RuntimeError, match="fit first"):
        RG.TokenCompressor().compress("q", "f", 0.5)
    with pytest.raises(ValueError, match="equal"):
        RG.TokenCompressor().fit(["q"], [], ["r"])


def A_message_f1():
    from saf_utils.metrics import message_f1

    return message_f1


def test_generation_metrics_without_embeddings() -> None:
    m = RG.generation_metrics(["The cat sat", ""], ["the cat sat", "Hi!"], embedding=False)
    assert m["message_f1"] == pytest.approx((2 / 3) / 2)
    assert m["message_f1_squad"] == pytest.approx(0.5)
    assert m["empty_share"] == 0.5 and "bertscore_f1" not in m
    assert m["content_f1"] == pytest.approx(0.5)  # "cat sat" matches; "" vs "Hi!" is 0
    assert m["length_ratio"] == pytest.approx(3 / 4)
    with pytest.raises(ValueError):
        RG.generation_metrics(["a"], [], embedding=False)


# --------------------------------------------------------------------------- error analysis


INTENTS = pd.DataFrame({
    "Role": ["Proponent", "Proponent", "Proponent", "Domain Expert"],
    "Message Number": ["0", "2", "2", "1"], "Sentence Number": ["0", "0", "1", "0"],
    "Sentence": ["Hi", "Interesting!", "Which classifier works best?", "Which data?"],
    "Tag": ["Intro", "Give_Opinion", "Ask_Info", "Reply_Info"],
})


def test_split_sentences_and_query_intents() -> None:
    assert A.split_sentences("Interesting! Which one? Fine.") == ["Interesting!", "Which one?",
                                                                 "Fine."]
    got = A.query_intents(["hi", "Interesting! Which classifier works best?", "Which data?",
                           "Unknown"], INTENTS)
    assert got == ["Intro", "Ask_Info", "unmatched", "unmatched"]  # expert rows are ignored
    assert A.query_intents(["x"], None) == ["no intents file"]
    with pytest.raises(ValueError, match="lacks column"):
        A.query_intents(["x"], INTENTS.drop(columns="Tag"))


def test_dialogue_properties_and_analysis_frame() -> None:
    props = A.dialogue_properties(PAIRS)
    assert props.gold_dist_last_facts.isna().tolist() == [True, True, False]
    assert props.gold_dist_last_facts.iloc[2] == 1
    rows = A.prediction_rows(PAIRS, [[0, 1], [2, 3], [3, 0]], fold=0, split="test",
                             system="first")
    frame = A.selection_analysis_frame(pd.DataFrame(rows), PAIRS, INTENTS)
    assert len(frame) == 2  # P0 has no gold and is skipped
    assert frame.dist_bucket.tolist() == ["n/a", "1"]
    assert frame.turn_bucket.tolist() == ["1", "2"]
    assert frame.intent.tolist() == ["unmatched", "Ask_Info"]
    table = A.grouped_fact_f1(frame, "turn_bucket")
    assert table.fact_f1.tolist() == pytest.approx([2 / 3, 2 / 3]) and table.n.tolist() == [1, 1]
    with pytest.raises(KeyError):
        A.grouped_fact_f1(frame, "nope")
    with pytest.raises(ValueError, match="not in the given pairs"):
        A.selection_analysis_frame(pd.DataFrame(rows), [P0], INTENTS)


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
    from saf_utils.stats import fold_summary

    scores: dict[str, dict[int, list[float]]] = {"first": {}, "tfidf": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fold in range(5):
            test, _ = A.scored_pairs(load_argscichat(fold=fold).test)
            scores["first"][fold] = [fact_f1(FS.select_first(p, 2), p.fact_indexes) for p in test]
            scores["tfidf"][fold] = [fact_f1(FS.select_tfidf(p, 2), p.fact_indexes) for p in test]
    assert fold_summary(scores["first"])["mean"] == pytest.approx(0.078, abs=0.01)
    assert fold_summary(scores["tfidf"])["mean"] == pytest.approx(0.17, abs=0.01)


def test_slug() -> None:
    assert A.slug("3-4") == "3_4" and A.slug("Ask_Info") == "ask_info"
    assert A.slug("0 (same)") == "0_same" and A.slug(">10") == "10" and A.slug("") == "none"


@pytest.mark.slow
def test_generation_metrics_with_a_tiny_local_encoder(tmp_path) -> None:
    """Embedding metrics through a tiny BERT saved to disk; empty outputs get MoverScore 0."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran",
             "hi", ".", "!"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    assert "[UNK]" not in AutoTokenizer.from_pretrained(tmp_path).tokenize("the dog ran")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(tmp_path)
    hyps, refs = ["the cat sat", "", "the dog ran"], ["the cat sat", "hi !", "the dog ran"]
    m = RG.generation_metrics(hyps, refs, bertscore_model=str(tmp_path), bertscore_layers=1,
                             moverscore_model=str(tmp_path))
    assert set(m) == {*RG.OVERLAP_METRICS, *RG.EMBEDDING_METRICS, *RG.OUTPUT_STATS,
                      "empty_share"}
    per = RG.embedding_scores(hyps, refs, bertscore_model=str(tmp_path), bertscore_layers=1,
                              moverscore_model=str(tmp_path))
    assert per["moverscore"][1] == 0.0  # the empty output: no weighted token, scored 0
    assert per["moverscore"][0] == pytest.approx(1.0)  # identical texts
    assert np.isfinite(m["bertscore_f1"]) and m["moverscore"] < 1.0
    assert m["empty_share"] == pytest.approx(1 / 3)
