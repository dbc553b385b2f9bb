"""ArgSciChat fact selection: similarity scores, baseline selectors and a learned ranker.

Follows the official baselines script (UKPLab/acl2023-argscichat,
``argscichat_allennlp/scripts/fact_selection_baselines.py``): exactly ``k`` content
sentences per query, Fact-F1 on sentence index sets, queries without gold fact sentences
skipped. Beyond it: BM25 and a learned (query, sentence) ranker with dialogue features
(fitted and chosen in :mod:`saf_utils.argscichat.selectors`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat.data import MessagePair
from saf_utils.argscichat.dialogue import dialogue_context, previous_reply
from saf_utils.text import word_tokens
from saf_utils.training.classifiers import make_classifier

# --------------------------------------------------------------------------- tokens & scores

def top_k(scores: Sequence[float] | np.ndarray, k: int) -> list[int]:
    """Indexes of the ``k`` highest scores, best first, as the official script
    (``np.argsort(s)[-k:]``): numpy's tie order reproduces the published protocol exactly."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    s = np.asarray(scores, dtype=float)
    return [int(i) for i in np.argsort(s, axis=0)[-k:][::-1]]


def tfidf_scores(sentences: Sequence[str], query: str) -> np.ndarray:
    """Cosine of the query to each sentence, TF-IDF fit on this paper's sentences only."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    vec = TfidfVectorizer(decode_error="replace", strip_accents="unicode", analyzer="word",
                          stop_words="english")
    try:
        index = vec.fit_transform(list(sentences))
    except ValueError:  # only stop words in the paper: no vocabulary, no signal
        return np.zeros(len(sentences))
    return cosine_similarity(index, vec.transform([query])).ravel()


def bm25_scores(sentences: Sequence[str], query: str) -> np.ndarray:
    """BM25Okapi (rank-bm25 defaults) of the query against this paper's sentences."""
    from rank_bm25 import BM25Okapi

    docs = [word_tokens(s) or ["<empty>"] for s in sentences]
    return np.asarray(BM25Okapi(docs).get_scores(word_tokens(query)), dtype=float)


def cosine_scores(sentence_vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Cosine of one query vector to each sentence vector (vectors need not be normalised)."""
    a = np.asarray(sentence_vectors, dtype=float)
    q = np.asarray(query_vector, dtype=float).ravel()
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(q)
    return (a @ q) / np.where(den == 0, 1.0, den)


def texts_to_embed(pairs: Iterable[MessagePair],
                   index: Mapping[str, MessagePair] | None = None) -> list[str]:
    """Every text the selectors embed: sentences, queries and dialogue contexts."""
    out: list[str] = []
    for p in pairs:
        out += [*p.content, p.query, dialogue_context(p, index), p.title]
        if prev := previous_reply(p, index):
            out.append(prev)
    return out


# --------------------------------------------------------------------------- selectors

def select_first(pair: MessagePair, k: int) -> list[int]:
    """The paper's first ``k`` sentences (the official "First" baseline)."""
    return list(range(min(k, len(pair.content))))


def select_random(pair: MessagePair, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` distinct sentences uniformly at random (the official "Random" baseline)."""
    n = len(pair.content)
    return [int(i) for i in rng.choice(n, size=min(k, n), replace=False)]


def select_tfidf(pair: MessagePair, k: int) -> list[int]:
    return top_k(tfidf_scores(pair.content, pair.query), k)


def select_bm25(pair: MessagePair, k: int) -> list[int]:
    return top_k(bm25_scores(pair.content, pair.query), k)


def select_sbert(pair: MessagePair, k: int, embed: Callable[[Sequence[str]], np.ndarray]
                 ) -> list[int]:
    sents = embed(list(pair.content))
    return top_k(cosine_scores(sents, embed([pair.query])[0]), k)


# --------------------------------------------------------------------------- features

FEATURES = (
    "tfidf", "tfidf_ctx", "bm25", "bm25_rel", "bm25_rank", "sbert", "sbert_ctx", "sbert_rank",
    "sbert_z", "position", "position_rel", "is_first2", "length", "title_overlap",
    "turn", "in_prev_facts", "in_last_facts", "near_last_facts", "after_last_fact",
    "dist_last_facts", "has_last_facts", "sbert_last_facts", "after_any_fact", "tfidf_rank",
    "centrality", "sbert_title", "query_max_sbert", "sbert_gap", "query_len",
    "sbert_prev_reply", "tfidf_prev_reply", "bm25_ctx_rel",
)
#: Lexical cues of what a query asks for and what a sentence says; the ranker learns which
#: query cue goes with which sentence cue (e.g. a results question and a sentence with digits).
QUERY_CUES = {
    "q_result": r"result|perform|accura|score|better|outperform|how well|evaluat",
    "q_data": r"data|corpus|annotat|collect",
    "q_method": r"method|model|approach|architecture|how do|how does|propos",
    "q_generic": r"about|main|contribution|goal|summar|anything else|what else",
    "q_why": r"why|motivat|problem|important",
}
SENTENCE_CUES = {
    "s_digit": r"\d", "s_pct": r"%|percent", "s_we": r"\bwe\b|\bour\b",
    "s_propose": r"propos|introduc|present", "s_data": r"data|corpus|annotat",
    "s_result": r"result|outperform|achiev|improv|accura|f1|score",
    "s_cite": r"et al|\(\w+,? \d{4}",
}
FEATURES = FEATURES + tuple(QUERY_CUES) + tuple(SENTENCE_CUES)


def _rank_desc(x: np.ndarray) -> np.ndarray:
    order = np.argsort(-x, kind="stable")
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.arange(len(x))
    return ranks


#: Features that read the annotated facts of earlier turns, which a deployed system would not
#: have: :data:`NO_HISTORY_FEATURES` drops them (ablation), or a system's own selections
#: take their place (:func:`history_features`).
HISTORY_FEATURES = (
    "in_prev_facts", "in_last_facts", "near_last_facts", "after_last_fact", "dist_last_facts",
    "has_last_facts", "sbert_last_facts", "after_any_fact",
)
NO_HISTORY_FEATURES = tuple(f for f in FEATURES if f not in HISTORY_FEATURES)


def history_features(n: int, history: Sequence[Sequence[int]], sent_vecs: np.ndarray
                     ) -> dict[str, np.ndarray]:
    """The :data:`HISTORY_FEATURES` of a paper's ``n`` sentences; ``history``: sentence
    indexes per earlier turn, oldest first (gold, or a system's own selections)."""
    idx = np.arange(n)
    prev = {int(i) for turn in history for i in turn}
    last = next((tuple(t) for t in reversed(history) if len(t)), ())
    last_arr = np.asarray(last, dtype=float)
    if len(last):
        dist = np.min(np.abs(idx[:, None] - last_arr[None, :]), axis=1)
        after = idx - last_arr.max()
        sim_last = (sent_vecs @ sent_vecs[list(last)].T).max(axis=1)
    else:
        dist = np.full(n, float(n))
        after = np.full(n, float(n))
        sim_last = np.zeros(n)
    after_any = idx - max(prev) if prev else np.full(n, float(n))
    return {
        "in_prev_facts": np.array([float(i in prev) for i in idx]),
        "in_last_facts": np.array([float(i in last) for i in idx]),
        "near_last_facts": (dist == 1).astype(float),
        "after_last_fact": np.clip(after, -10, 10).astype(float),
        "dist_last_facts": np.clip(dist, 0, 20).astype(float),
        "has_last_facts": np.full(n, float(bool(len(last)))),
        "sbert_last_facts": sim_last,
        "after_any_fact": np.clip(after_any, -10, 10).astype(float),
    }


def with_history(frame: pd.DataFrame, pair: MessagePair,
                 embed: Callable[[Sequence[str]], np.ndarray],
                 history: Sequence[Sequence[int]]) -> pd.DataFrame:
    """``frame`` (features of ``pair``) with its history features recomputed from ``history``."""
    return frame.assign(**history_features(len(pair.content), history,
                                           embed(list(pair.content))))


def _rel(scores: np.ndarray) -> np.ndarray:
    """Scores over their maximum (zeros when none is positive)."""
    return scores / scores.max() if scores.max() > 0 else np.zeros(len(scores))


def sentence_features(pair: MessagePair, embed: Callable[[Sequence[str]], np.ndarray],
                      context: str | None = None, prev_reply: str = "") -> pd.DataFrame:
    """One row per content sentence of ``pair`` with the ranker features (:data:`FEATURES`);
    the fact history because experts tend to read on from where the last turn's facts were."""
    n = len(pair.content)
    if n == 0:
        raise ValueError(f"pair {pair.pair_id!r}: the paper has no content sentences")
    ctx = context if context is not None else pair.query
    idx = np.arange(n)
    tfidf = tfidf_scores(pair.content, pair.query)
    bm25 = bm25_scores(pair.content, pair.query)
    sent_vecs = embed(list(pair.content))
    sbert = cosine_scores(sent_vecs, embed([pair.query])[0])
    sbert_ctx = cosine_scores(sent_vecs, embed([ctx])[0])
    title = set(word_tokens(pair.title))
    overlap = [len(title & set(word_tokens(s))) / max(1, len(title)) for s in pair.content]
    sim = sent_vecs @ sent_vecs.T
    centrality = (sim.sum(axis=1) - np.diag(sim)) / max(1, n - 1)
    sd = sbert.std()
    bm25_ctx = bm25_scores(pair.content, ctx)
    sbert_prev, tfidf_prev = ((cosine_scores(sent_vecs, embed([prev_reply])[0]),
                               tfidf_scores(pair.content, prev_reply)) if prev_reply
                              else (np.zeros(n), np.zeros(n)))  # the first turn: none
    return pd.DataFrame({
        "tfidf": tfidf,
        "tfidf_ctx": tfidf_scores(pair.content, ctx),
        "bm25": bm25,
        "bm25_rel": _rel(bm25),
        "bm25_rank": _rank_desc(bm25),
        "sbert": sbert,
        "sbert_ctx": sbert_ctx,
        "sbert_rank": _rank_desc(sbert),
        "sbert_z": (sbert - sbert.mean()) / sd if sd > 0 else np.zeros(n),
        "position": idx.astype(float),
        "position_rel": idx / max(1, n - 1),
        "is_first2": (idx < 2).astype(float),
        "length": [len(s.split()) for s in pair.content],
        "title_overlap": overlap,
        "turn": float(pair.turn),
        **history_features(n, pair.history_fact_indexes, sent_vecs),
        "tfidf_rank": _rank_desc(tfidf),
        "centrality": centrality,
        "sbert_title": cosine_scores(sent_vecs, embed([pair.title])[0]),
        "query_max_sbert": sbert.max(),
        "sbert_gap": sbert - sbert.max(),
        "query_len": float(len(pair.query.split())),
        "sbert_prev_reply": sbert_prev,
        "tfidf_prev_reply": tfidf_prev,
        "bm25_ctx_rel": _rel(bm25_ctx),
        **{k: float(bool(re.search(r, pair.query.lower()))) for k, r in QUERY_CUES.items()},
        **{k: [float(bool(re.search(r, sent.lower()))) for sent in pair.content]
           for k, r in SENTENCE_CUES.items()},
    }, columns=list(FEATURES))


def feature_table(pairs: Sequence[MessagePair], embed: Callable[[Sequence[str]], np.ndarray],
                  index: Mapping[str, MessagePair] | None = None,
                  cache: dict[str, pd.DataFrame] | None = None,
                  ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Stacked features of all pairs: (X, y gold-sentence labels, group id per row); a
    ``cache`` (pair_id -> frame) shared across folds computes each pair once."""
    frames, ys, groups = [], [], []
    cache = {} if cache is None else cache
    for g, p in enumerate(pairs):
        if p.pair_id not in cache:
            cache[p.pair_id] = sentence_features(
                p, embed, dialogue_context(p, index) if index else None, previous_reply(p, index))
        f = cache[p.pair_id]
        frames.append(f)
        gold = set(p.fact_indexes)
        ys.append(np.array([int(i in gold) for i in range(len(f))]))
        groups.append(np.full(len(f), g))
    if not frames:
        raise ValueError("feature_table: no pairs given")
    return pd.concat(frames, ignore_index=True), np.concatenate(ys), np.concatenate(groups)


def make_ranker(kind: str, seed: int = 0, **params: Any):
    """A pointwise sentence classifier: ``logreg`` (scaled) or ``hgb`` (gradient boosting)."""
    if kind == "logreg":
        return make_classifier("logreg", seed, **params)
    return make_classifier(kind, seed, **{
        "learning_rate": 0.05, "max_iter": 200, "max_leaf_nodes": 15, "min_samples_leaf": 20,
        "l2_regularization": 1.0, **params, "early_stopping": False})


def grouped_top_k(scores: np.ndarray, groups: np.ndarray, k: int) -> dict[int, list[int]]:
    """Per group (pair), the within-group positions of the ``k`` best scores."""
    return {int(g): top_k(scores[groups == g], k) for g in np.unique(groups)}


def mean_fact_f1(selected: Mapping[int, Sequence[int]], pairs: Sequence[MessagePair]) -> float:
    """Mean Fact-F1 over the pairs that have gold fact sentences (others skipped)."""
    from saf_utils.metrics import fact_f1

    vals = [fact_f1(selected[g], p.fact_indexes) for g, p in enumerate(pairs) if p.fact_indexes]
    return float(np.mean(vals)) if vals else float("nan")


DEFAULT_GRID: tuple[dict[str, Any], ...] = (
    {"kind": "logreg", "C": 0.1}, {"kind": "logreg", "C": 1.0},
    {"kind": "logreg", "C": 1.0, "class_weight": "balanced"},
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": 100, "max_leaf_nodes": 7},
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": 200, "max_leaf_nodes": 15},
    {"kind": "hgb", "learning_rate": 0.03, "max_iter": 300, "max_leaf_nodes": 7,
     "min_samples_leaf": 40},
)


#: Candidate members of ``ranker_ensemble``: small, shallow boosting models (small data);
#: the member set is chosen per fold on its val split (``selectors.ENSEMBLE_MEMBER_SETS``).
ENSEMBLE_GRID: tuple[dict[str, Any], ...] = tuple(
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": it, "max_leaf_nodes": leaves,
     "min_samples_leaf": leaf}
    for it in (60, 120) for leaves in (4, 8) for leaf in (10, 30)
)


def group_rank01(scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Within-group rank of each score scaled to [0, 1] (1 = the group's best, ties
    stable): unlike raw scores, ranks of several scorers can be averaged."""
    s = np.asarray(scores, dtype=float)
    out = np.zeros(len(s))
    for g in np.unique(groups):
        sel = groups == g
        out[sel] = _rank_desc(-s[sel]) / max(1, sel.sum() - 1)
    return out


def mix_ranks(base: np.ndarray, other: np.ndarray, groups: np.ndarray, weight: float
              ) -> np.ndarray:
    """``base`` plus ``weight`` times the within-group rank of ``other`` (e.g. BM25 scores)."""
    return np.asarray(base, dtype=float) + weight * group_rank01(other, groups)
