"""saf_utils.argscichat.generation: reply sources, trimmed and compressed facts, nearest
replies and the generation metrics (a tiny local encoder for the embedding ones)."""

from __future__ import annotations

import numpy as np
import pytest
from dialogues import CONTENT, INDEX, P1, P2
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import generation as RG


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """Gradient boosting's OpenMP threads crawl on shared cores; one thread is fast here."""
    with threadpool_limits(1, user_api="openmp"):
        yield

# --------------------------------------------------------------------------- generation


def test_build_source_parts_and_errors() -> None:
    src = RG.build_source(P2, ["query", "selected_facts"], selected=[3, 1])
    assert src == f"query: {P2.query} | facts: {CONTENT[1]} {CONTENT[3]}"
    assert RG.build_source(P2, ["history"], index=INDEX).startswith("history: Hi Hi! Which data")
    assert RG.build_source(P2, ["gold_facts"]) == f"facts: {CONTENT[3]}"
    assert RG.build_source(P2, ["article"]) == "article: " + " ".join(CONTENT)
    with pytest.raises(ValueError, match="no selection"):
        RG.build_source(P2, ["selected_facts"])
    with pytest.raises(ValueError, match="subset"):
        RG.build_source(P2, ["reply"])
    with pytest.raises(ValueError, match="no pair index"):
        RG.build_source(P2, ["history"])


def test_facts_text_and_trim() -> None:
    assert RG.facts_text(P1, [3, 1]) == f"{CONTENT[1]} {CONTENT[3]}"
    assert RG.trim_words("a b c", 2) == "a b" and RG.trim_words("a b", None) == "a b"


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




def _scored(hyps: list[str], refs: list[str], **options) -> dict[str, list[float]]:
    """04's per-item scores of one system's replies, per metric."""
    import pandas as pd

    from saf_utils.argscichat.reply_evaluation import score_predictions

    preds = pd.DataFrame({"system": "s", "role": "system", "fold": 0, "seed": None,
                          "split": "test", "pair_id": [f"p{i}" for i in range(len(hyps))],
                          "paper_id": "P", "output": hyps, "gold": refs})
    items = score_predictions(preds, **options)
    return {m: g.value.tolist() for m, g in items.groupby("metric", sort=False)}


def test_overlap_scores_per_reply() -> None:
    m = {k: np.mean(v) for k, v in _scored(["The cat sat", ""], ["the cat sat", "Hi!"]).items()}
    assert set(m) == set(RG.OVERLAP_METRICS)
    assert m["message_f1"] == pytest.approx((2 / 3) / 2)
    assert m["message_f1_squad"] == pytest.approx(0.5)
    assert m["content_f1"] == pytest.approx(0.5)  # "cat sat" matches; "" vs "Hi!" is 0


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
    per = _scored(hyps, refs, embedding=True, bertscore_model=str(tmp_path),
                  bertscore_layers=1, moverscore_model=str(tmp_path))
    assert set(per) == {*RG.OVERLAP_METRICS, *RG.EMBEDDING_METRICS}
    assert per["moverscore"][1] == 0.0  # the empty output: no weighted token, scored 0
    assert per["moverscore"][0] == pytest.approx(1.0)  # identical texts
    assert np.isfinite(per["bertscore_f1"]).all() and np.mean(per["moverscore"]) < 1.0
