"""ArgSciChat reply generation: model inputs, copy/retrieval baselines, token compression
and the names of the generation metrics (scored in
:mod:`~saf_utils.argscichat.reply_evaluation`)."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from saf_utils.argscichat.data import MessagePair
from saf_utils.argscichat.dialogue import previous_exchanges
from saf_utils.encoders.sentence import l2_normalize
from saf_utils.training.classifiers import make_classifier

GENERATION_INPUTS = ("query", "history", "article", "gold_facts", "selected_facts")


def build_source(pair: MessagePair, inputs: Sequence[str],
                 selected: Sequence[int] | None = None,
                 index: Mapping[str, MessagePair] | None = None) -> str:
    """The generator's input text: the ``inputs`` (:data:`GENERATION_INPUTS`), each behind a
    short tag; ``selected_facts`` needs ``selected``, ``history`` (two turns) ``index``."""
    unknown = [x for x in inputs if x not in GENERATION_INPUTS]
    if unknown or not inputs:
        raise ValueError(f"inputs {list(inputs)}: use a non-empty subset of {GENERATION_INPUTS}")
    if "history" in inputs and index is None:
        raise ValueError("inputs ask for history but no pair index was given")
    if "selected_facts" in inputs and selected is None:
        raise ValueError(f"pair {pair.pair_id!r}: inputs ask for selected_facts but no "
                         "selection was given")
    part = {"query": lambda: f"query: {pair.query}",
            "history": lambda: "history: " + " ".join(previous_exchanges(pair, index, 2)),
            "article": lambda: "article: " + " ".join(pair.content),
            "gold_facts": lambda: "facts: " + facts_text(pair, pair.fact_indexes),
            "selected_facts": lambda: "facts: " + facts_text(pair, selected)}
    return " | ".join(part[x]() for x in inputs)


def facts_text(pair: MessagePair, indexes: Sequence[int]) -> str:
    """The chosen sentences joined, in paper order."""
    return " ".join(pair.content[i] for i in sorted(indexes))


def trim_words(text: str, n_words: int | None) -> str:
    """The first ``n_words`` whitespace tokens (None: unchanged)."""
    return text if n_words is None else " ".join(text.split()[:n_words])


def nearest_replies(queries: np.ndarray, train_queries: np.ndarray,
                    train_replies: Sequence[str]) -> list[str]:
    """For each query vector, the reply of the most similar training query (cosine)."""
    if len(train_replies) == 0:
        raise ValueError("nearest_replies: no training pairs")
    a, b = l2_normalize(queries), l2_normalize(train_queries)
    return [train_replies[int(i)] for i in np.argmax(a @ b.T, axis=1)]


# --------------------------------------------------------------------------- token compression

TOKEN_FEATURES = (
    "type_copy_rate", "type_log_seen", "reply_rate", "is_stop", "from_query", "rel_position",
    "has_digit", "has_punct", "is_capitalized", "length", "in_other_segment", "is_prior",
)


def _type_key(token: str) -> str:
    return token.lower().strip(string.punctuation)


def source_segments(query: str, facts: str) -> list[tuple[str, list[str]]]:
    """The generator source as whitespace-token segments: facts first, then the query."""
    return [("facts", facts.split()), ("query", query.split())]


class TokenCompressor:
    """Keeps the source tokens (facts + query) a classifier expects in the expert's reply;
    ``prior_words`` > 0 also offers the most frequent training-reply tokens: this measures
    how much of Message-F1 a bag of words gains without fluency."""

    PRIOR_STRENGTH = 5.0  # pseudo-count of the overall copy rate in a word type's copy rate

    def __init__(self, prior_words: int = 0, kind: str = "logreg"):
        if kind not in ("logreg", "hgb"):
            raise ValueError(f"unknown TokenCompressor kind {kind!r}; use 'logreg' or 'hgb'")
        self.prior_words = prior_words
        self.kind = kind
        self.model: Any = None
        self._prior_tokens: list[str] = []

    def fit(self, queries: Sequence[str], facts: Sequence[str], replies: Sequence[str]
            ) -> TokenCompressor:
        if not (len(queries) == len(facts) == len(replies)) or not queries:
            raise ValueError(f"TokenCompressor.fit: {len(queries)} queries, {len(facts)} facts, "
                             f"{len(replies)} replies (need equal, non-zero counts)")
        seen: Counter[str] = Counter()
        copied: Counter[str] = Counter()
        reply_count: Counter[str] = Counter()
        for q, f, r in zip(queries, facts, replies, strict=True):
            rset = set(r.split())
            reply_count.update(rset)
            for _, toks in source_segments(q, f):
                for tok in set(toks):
                    seen[_type_key(tok)] += 1
                    copied[_type_key(tok)] += int(tok in rset)
        self._seen, self._copied = seen, copied
        self._reply_rate = {t: c / len(replies) for t, c in reply_count.items()}
        ranked = sorted(reply_count, key=lambda t: (-reply_count[t], t))
        self._prior_tokens = ranked[:self.prior_words]
        self._prior = sum(copied.values()) / max(1, sum(seen.values()))
        X, y = [], []
        for q, f, r in zip(queries, facts, replies, strict=True):
            rset = set(r.split())
            feats, toks = self._features(q, f)
            X.append(feats)
            y += [int(t in rset) for t in toks]
        Xa = np.vstack([x for x in X if len(x)])
        self.model = self._new_model().fit(Xa, np.asarray(y))
        return self

    def _new_model(self) -> Any:
        if self.kind == "hgb":  # feature interactions, e.g. stop word x from the query
            # sklearn's default early stopping ("auto") holds out 10% above 10k tokens
            return make_classifier("hgb", 0, learning_rate=0.05, max_iter=150,
                                   max_leaf_nodes=15, min_samples_leaf=40)
        return make_classifier("logreg", 0)

    def _features(self, query: str, facts: str) -> tuple[np.ndarray, list[str]]:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        segs = source_segments(query, facts)
        present = {t for _, toks in segs for t in toks}
        segs.append(("prior", [t for t in self._prior_tokens if t not in present]))
        keys = {name: {_type_key(t) for t in toks} for name, toks in segs}
        rows, toks_out = [], []
        for name, toks in segs:
            other = keys["query" if name == "facts" else "facts"]
            for i, tok in enumerate(toks):
                key = _type_key(tok)
                n = self._seen.get(key, 0)
                rate = (self._copied.get(key, 0) + self.PRIOR_STRENGTH * self._prior) / (
                    n + self.PRIOR_STRENGTH)
                rows.append([
                    rate, np.log1p(n), self._reply_rate.get(tok, 0.0),
                    float(key in ENGLISH_STOP_WORDS), float(name == "query"),
                    i / max(1, len(toks) - 1), float(any(c.isdigit() for c in tok)),
                    float(any(c in string.punctuation for c in tok)), float(tok[:1].isupper()),
                    float(len(tok)), float(key in other), float(name == "prior"),
                ])
                toks_out.append(tok)
        return np.asarray(rows, dtype=float).reshape(-1, len(TOKEN_FEATURES)), toks_out

    def keep_probabilities(self, query: str, facts: str) -> tuple[list[str], np.ndarray]:
        """Source tokens (facts then query) and their predicted probability of being copied."""
        if self.model is None:
            raise RuntimeError("TokenCompressor: call fit first")
        X, toks = self._features(query, facts)
        if not toks:
            return [], np.zeros(0)
        return toks, self.model.predict_proba(X)[:, 1]

    def compress(self, query: str, facts: str, threshold: float) -> str:
        """The tokens with keep-probability >= ``threshold``, in source order (prior last)."""
        toks, prob = self.keep_probabilities(query, facts)
        return " ".join(t for t, p in zip(toks, prob, strict=True) if p >= threshold)


# --------------------------------------------------------------------------- generation metrics

#: Per-reply overlap metrics (cheap; also scored on val for tuning and the val choice).
OVERLAP_METRICS = ("message_f1", "message_f1_squad", "content_f1")
#: Per-reply embedding metrics (test only: they load a model).
EMBEDDING_METRICS = ("bertscore_f1", "moverscore")
