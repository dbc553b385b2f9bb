"""ArgSciChat task logic: tables of message pairs, fact selectors and generation inputs.

Fact selection follows the official baselines script (UKPLab/acl2023-argscichat,
``argscichat_allennlp/scripts/fact_selection_baselines.py``): exactly ``k`` content
sentences per query, Fact-F1 on sentence index sets, queries without gold fact sentences
skipped. Beyond it: BM25 and a learned (query, sentence) ranker with dialogue features.
Generation helpers build model inputs, copy/trim facts and retrieve training replies;
the error-analysis helpers join predictions with dialogue properties and intents.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.data import MessagePair

#: Message pairs are looked up by id; the fold objects list them per split.
SPLITS = ("train", "val", "test")
GENERATION_INPUTS = ("query", "history", "article", "gold_facts", "selected_facts")
PREDICTIONS_FILE = "predictions.jsonl"


def pairs_frame(pairs: Iterable[MessagePair], **extra) -> pd.DataFrame:
    """One row per message pair (without the paper text), plus constant ``extra`` columns."""
    rows = []
    for p in pairs:
        rows.append({
            "pair_id": p.pair_id, "paper_id": p.paper_id, "title": p.title,
            "dialogue_id": p.dialogue_id, "turn": p.turn, "query": p.query, "reply": p.reply,
            "n_sentences": len(p.content), "n_facts": len(p.facts),
            "n_fact_sentences": len(p.fact_indexes), "fact_indexes": list(p.fact_indexes),
            "query_tokens": len(p.query.split()), "reply_tokens": len(p.reply.split()),
            **extra,
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- tokens & scores

_WORD = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """Lower-cased ``\\w+`` tokens (the BM25 and overlap tokenisation)."""
    return _WORD.findall(text.lower())


def top_k(scores: Sequence[float] | np.ndarray, k: int) -> list[int]:
    """Indexes of the ``k`` highest scores, as the official script (``np.argsort(s)[-k:]``).

    Keeping numpy's tie order makes TF-IDF/SBERT reproduce the published protocol exactly
    (e.g. all-zero TF-IDF rows). Returned best first. ``k`` larger than the number of
    sentences returns every sentence.
    """
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


class EmbeddingTable:
    """Text -> vector lookup, filled by one ``encode`` call over all texts a notebook needs."""

    def __init__(self, texts: Iterable[str], model: str, batch_size: int = 64):
        from saf_utils.encoders import encode

        unique = list(dict.fromkeys(texts))
        vecs = encode(unique, model=model, batch_size=batch_size, show_progress=False)
        self.model = model
        self._index = {t: i for i, t in enumerate(unique)}
        self._vecs = vecs

    @classmethod
    def from_dict(cls, table: Mapping[str, Sequence[float]]) -> EmbeddingTable:
        """A table from given vectors (tests, cached embeddings)."""
        obj = cls.__new__(cls)
        obj.model = "given"
        obj._index = {t: i for i, t in enumerate(table)}
        obj._vecs = np.asarray(list(table.values()), dtype=float)
        return obj

    def __len__(self) -> int:
        return len(self._index)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._index]
        if missing:
            raise KeyError(f"{len(missing)} text(s) were not embedded, e.g. {missing[0][:80]!r}")
        return self._vecs[[self._index[t] for t in texts]]


def pair_index(pairs: Iterable[MessagePair]) -> dict[str, MessagePair]:
    """pair_id -> pair, over all splits of a fold (dialogues never cross splits)."""
    return {p.pair_id: p for p in pairs}


def previous_exchanges(pair: MessagePair, index: Mapping[str, MessagePair],
                       turns: int = 1) -> list[str]:
    """Proponent and expert messages of the last ``turns`` earlier turns, oldest first.

    Earlier turns are found through ``history_ids``; an id missing from ``index`` raises,
    since a silently shorter history would change every feature built on it.
    """
    out: list[str] = []
    ids = pair.history_ids[-turns:] if turns > 0 else ()
    for pid in ids:
        if pid not in index:
            raise KeyError(f"pair {pair.pair_id!r}: earlier turn {pid!r} not in the index")
        out += [index[pid].query, index[pid].reply]
    return out


def dialogue_context(pair: MessagePair, index: Mapping[str, MessagePair] | None = None,
                     turns: int = 1) -> str:
    """The query preceded by the last ``turns`` exchanges (just the query without index)."""
    prev = previous_exchanges(pair, index, turns) if index is not None else []
    return " ".join([*prev, pair.query]).strip()


def texts_to_embed(pairs: Iterable[MessagePair],
                   index: Mapping[str, MessagePair] | None = None) -> list[str]:
    """Every text the selectors embed: sentences, queries and dialogue contexts."""
    out: list[str] = []
    for p in pairs:
        out.extend(p.content)
        out.append(p.query)
        out.append(dialogue_context(p, index))
        out.append(p.title)
        if previous_reply(p, index):
            out.append(previous_reply(p, index))
    return out


def _norm_text(text: str) -> str:
    table = str.maketrans("", "", string.punctuation)
    return "".join(text.lower().translate(table).split())


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


def previous_reply(pair: MessagePair, index: Mapping[str, MessagePair] | None) -> str:
    """The expert's reply of the previous turn ("" at the first turn or without index)."""
    if index is None or not pair.history_ids:
        return ""
    return previous_exchanges(pair, index, 1)[-1]


def sentence_features(pair: MessagePair, embed: Callable[[Sequence[str]], np.ndarray],
                      context: str | None = None, prev_reply: str = "") -> pd.DataFrame:
    """One row per content sentence of ``pair`` with the ranker features (:data:`FEATURES`).

    Lexical (TF-IDF, BM25) and semantic (SBERT) similarity to the query and to the query
    with the previous exchange; position and length; title overlap; and the dialogue's
    fact history: experts tend to read on from where the last turn's facts were.
    ``context``: the query with the previous exchange (:func:`dialogue_context`);
    ``prev_reply``: the expert's previous message (:func:`previous_reply`).
    """
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
    prev = {i for turn in pair.history_fact_indexes for i in turn}
    last = next((t for t in reversed(pair.history_fact_indexes) if t), ())
    last_arr = np.asarray(last, dtype=float)
    if len(last):
        dist = np.min(np.abs(idx[:, None] - last_arr[None, :]), axis=1)
        after = idx - last_arr.max()
        sim_last = (sent_vecs @ sent_vecs[list(last)].T).max(axis=1)
    else:
        dist = np.full(n, float(n))
        after = np.full(n, float(n))
        sim_last = np.zeros(n)
    title = set(word_tokens(pair.title))
    overlap = [len(title & set(word_tokens(s))) / max(1, len(title)) for s in pair.content]
    after_any = idx - max(prev) if prev else np.full(n, float(n))
    sim = sent_vecs @ sent_vecs.T
    centrality = (sim.sum(axis=1) - np.diag(sim)) / max(1, n - 1)
    sd = sbert.std()
    bm25_ctx = bm25_scores(pair.content, ctx)
    if prev_reply:
        sbert_prev = cosine_scores(sent_vecs, embed([prev_reply])[0])
        tfidf_prev = tfidf_scores(pair.content, prev_reply)
    else:
        sbert_prev, tfidf_prev = np.zeros(n), np.zeros(n)
    return pd.DataFrame({
        "tfidf": tfidf,
        "tfidf_ctx": tfidf_scores(pair.content, ctx),
        "bm25": bm25,
        "bm25_rel": bm25 / bm25.max() if bm25.max() > 0 else np.zeros(n),
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
        "in_prev_facts": [float(i in prev) for i in idx],
        "in_last_facts": [float(i in last) for i in idx],
        "near_last_facts": (dist == 1).astype(float),
        "after_last_fact": np.clip(after, -10, 10),
        "dist_last_facts": np.clip(dist, 0, 20),
        "has_last_facts": float(bool(len(last))),
        "sbert_last_facts": sim_last,
        "after_any_fact": np.clip(after_any, -10, 10),
        "tfidf_rank": _rank_desc(tfidf),
        "centrality": centrality,
        "sbert_title": cosine_scores(sent_vecs, embed([pair.title])[0]),
        "query_max_sbert": sbert.max(),
        "sbert_gap": sbert - sbert.max(),
        "query_len": float(len(pair.query.split())),
        "sbert_prev_reply": sbert_prev,
        "tfidf_prev_reply": tfidf_prev,
        "bm25_ctx_rel": bm25_ctx / bm25_ctx.max() if bm25_ctx.max() > 0 else np.zeros(n),
        **{k: float(bool(re.search(r, pair.query.lower()))) for k, r in QUERY_CUES.items()},
        **{k: [float(bool(re.search(r, sent.lower()))) for sent in pair.content]
           for k, r in SENTENCE_CUES.items()},
    }, columns=list(FEATURES))


def feature_table(pairs: Sequence[MessagePair], embed: Callable[[Sequence[str]], np.ndarray],
                  index: Mapping[str, MessagePair] | None = None,
                  cache: dict[str, pd.DataFrame] | None = None,
                  ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Stacked features of all pairs: (X, y gold-sentence labels, group id per row).

    Features of a pair do not depend on the fold, so a ``cache`` dict (pair_id -> frame)
    shared across folds computes each pair once.
    """
    frames, ys, groups = [], [], []
    for g, p in enumerate(pairs):
        if cache is not None and p.pair_id in cache:
            f = cache[p.pair_id]
        else:
            f = sentence_features(p, embed, dialogue_context(p, index) if index else None,
                                  previous_reply(p, index))
            if cache is not None:
                cache[p.pair_id] = f
        frames.append(f)
        gold = set(p.fact_indexes)
        ys.append(np.array([int(i in gold) for i in range(len(f))]))
        groups.append(np.full(len(f), g))
    if not frames:
        raise ValueError("feature_table: no pairs given")
    return pd.concat(frames, ignore_index=True), np.concatenate(ys), np.concatenate(groups)


@dataclass
class RankerResult:
    """A fitted ranker, its hyperparameters and the val Fact-F1 of every candidate."""

    model: Any
    params: dict[str, Any]
    val_fact_f1: float
    grid: list[dict[str, Any]] = field(default_factory=list)

    def scores(self, X: pd.DataFrame) -> np.ndarray:
        return self.model.predict_proba(X[list(FEATURES)])[:, 1]


def make_ranker(kind: str, seed: int = 0, **params: Any):
    """A pointwise sentence classifier: ``logreg`` (scaled) or ``hgb`` (gradient boosting)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(
            C=params.get("C", 1.0), class_weight=params.get("class_weight"), max_iter=2000))
    if kind == "hgb":
        return HistGradientBoostingClassifier(
            learning_rate=params.get("learning_rate", 0.05), max_iter=params.get("max_iter", 200),
            max_leaf_nodes=params.get("max_leaf_nodes", 15),
            min_samples_leaf=params.get("min_samples_leaf", 20),
            l2_regularization=params.get("l2_regularization", 1.0), early_stopping=False,
            random_state=seed)
    raise ValueError(f"unknown ranker kind {kind!r}; use 'logreg' or 'hgb'")


def grouped_top_k(scores: np.ndarray, groups: np.ndarray, k: int) -> dict[int, list[int]]:
    """Per group (pair), the within-group positions of the ``k`` best scores."""
    out: dict[int, list[int]] = {}
    for g in np.unique(groups):
        out[int(g)] = top_k(scores[groups == g], k)
    return out


def mean_fact_f1(selected: Mapping[int, Sequence[int]], pairs: Sequence[MessagePair]) -> float:
    """Mean Fact-F1 over the pairs that have gold fact sentences (others skipped)."""
    from saf_utils.metrics import fact_f1

    vals = [fact_f1(selected[g], p.fact_indexes) for g, p in enumerate(pairs) if p.fact_indexes]
    return float(np.mean(vals)) if vals else float("nan")


def tune_ranker(
    train: tuple[pd.DataFrame, np.ndarray, np.ndarray],
    val: tuple[pd.DataFrame, np.ndarray, np.ndarray],
    val_pairs: Sequence[MessagePair],
    grid: Sequence[Mapping[str, Any]],
    k: int,
    seed: int = 0,
) -> RankerResult:
    """Fit every grid candidate on train, pick the best val Fact-F1 (first wins ties)."""
    X, y, _ = train
    if y.sum() == 0:
        raise ValueError("tune_ranker: the training pairs have no gold fact sentences")
    Xv, _, gv = val
    best: RankerResult | None = None
    tried: list[dict[str, Any]] = []
    for cand in grid:
        cand = dict(cand)
        kind = cand.pop("kind")
        model = make_ranker(kind, seed=seed, **cand).fit(X[list(FEATURES)], y)
        sel = grouped_top_k(model.predict_proba(Xv[list(FEATURES)])[:, 1], gv, k)
        f1 = mean_fact_f1(sel, val_pairs)
        tried.append({"kind": kind, **cand, "val_fact_f1": f1})
        if best is None or f1 > best.val_fact_f1:
            best = RankerResult(model, {"kind": kind, **cand}, f1)
    assert best is not None, "empty grid"
    best.grid = tried
    return best


DEFAULT_GRID: tuple[dict[str, Any], ...] = (
    {"kind": "logreg", "C": 0.1}, {"kind": "logreg", "C": 1.0},
    {"kind": "logreg", "C": 1.0, "class_weight": "balanced"},
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": 100, "max_leaf_nodes": 7},
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": 200, "max_leaf_nodes": 15},
    {"kind": "hgb", "learning_rate": 0.03, "max_iter": 300, "max_leaf_nodes": 7,
     "min_samples_leaf": 40},
)


#: Members of ``ranker_ensemble``: small, shallow boosting models (small data). Chosen over
#: DEFAULT_GRID's members by val Fact-F1 pooled over the five folds (train-only fits).
ENSEMBLE_GRID: tuple[dict[str, Any], ...] = tuple(
    {"kind": "hgb", "learning_rate": 0.05, "max_iter": it, "max_leaf_nodes": leaves,
     "min_samples_leaf": leaf}
    for it in (60, 120) for leaves in (4, 8) for leaf in (10, 30)
)


# --------------------------------------------------------------------------- evaluation

def scored_pairs(pairs: Sequence[MessagePair]) -> tuple[list[MessagePair], int]:
    """Pairs with at least one gold fact sentence, and how many were skipped."""
    kept = [p for p in pairs if p.fact_indexes]
    return kept, len(pairs) - len(kept)


def prediction_rows(pairs: Sequence[MessagePair], selected: Sequence[Sequence[int]], *,
                    fold: int, split: str, system: str, seed: int | None = None
                    ) -> list[dict[str, Any]]:
    """Rows for ``predictions.jsonl``, with Fact-F1 for pairs that have gold sentences."""
    from saf_utils.metrics import fact_f1

    if len(pairs) != len(selected):
        raise ValueError(f"{system}: {len(pairs)} pairs but {len(selected)} selections")
    rows = []
    for p, sel in zip(pairs, selected, strict=True):
        sel = [int(i) for i in sel]
        bad = [i for i in sel if not 0 <= i < len(p.content)]
        if bad:
            raise ValueError(f"{system}: pair {p.pair_id!r} selects missing sentence(s) {bad}")
        rows.append({
            "fold": fold, "split": split, "pair_id": p.pair_id, "system": system, "seed": seed,
            "selected": sel, "selected_sentences": [p.content[i] for i in sel],
            "gold": list(p.fact_indexes),
            "fact_f1": fact_f1(sel, p.fact_indexes) if p.fact_indexes else None,
        })
    return rows


def write_predictions(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """Write prediction rows as JSON lines (one selection per pair, system, seed, fold)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(dict(r)) + "\n")
    return path


def read_predictions(folder: str | os.PathLike, system: str | None = None) -> pd.DataFrame:
    """03's saved selections (optionally one system); a clear error if 03 has not run."""
    path = Path(folder) / PREDICTIONS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: run notebook 03_fact_selection first (same run / output folder), "
            f"e.g. python -m saf_utils.run --profile cpu --only 03_fact_selection")
    df = pd.read_json(path, lines=True, dtype=False)
    if system is not None:
        if system not in set(df.system):
            raise ValueError(f"{path}: no predictions of system {system!r}; "
                             f"available: {sorted(set(df.system))}")
        df = df[df.system == system].reset_index(drop=True)
    return df


def selection_lookup(preds: pd.DataFrame) -> dict[tuple[int, str, str], list[int]]:
    """(fold, split, pair_id) -> selected indexes of one system (first seed if several)."""
    if preds.system.nunique() > 1:
        raise ValueError(f"selection_lookup: several systems {sorted(set(preds.system))}")
    out: dict[tuple[int, str, str], list[int]] = {}
    for r in preds.itertuples():
        out.setdefault((int(r.fold), r.split, r.pair_id), list(r.selected))
    return out


# --------------------------------------------------------------------------- generation

def build_source(pair: MessagePair, inputs: Sequence[str],
                 selected: Sequence[int] | None = None,
                 index: Mapping[str, MessagePair] | None = None, history_turns: int = 2,
                 article_sentences: int | None = None) -> str:
    """The generator's input text: the chosen parts, each behind a short tag.

    ``inputs`` from :data:`GENERATION_INPUTS`. ``selected_facts`` needs ``selected`` (a
    fact selector's indexes). ``article`` is the paper's sentences (optionally the first
    ``article_sentences``). ``history`` needs ``index`` (:func:`pair_index`).
    """
    unknown = [x for x in inputs if x not in GENERATION_INPUTS]
    if unknown or not inputs:
        raise ValueError(f"inputs {list(inputs)}: use a non-empty subset of {GENERATION_INPUTS}")
    parts = []
    for x in inputs:
        if x == "query":
            parts.append(f"query: {pair.query}")
        elif x == "history":
            if index is None:
                raise ValueError("inputs ask for history but no pair index was given")
            parts.append("history: " + " ".join(previous_exchanges(pair, index, history_turns)))
        elif x == "gold_facts":
            parts.append("facts: " + " ".join(pair.content[i] for i in pair.fact_indexes))
        elif x == "selected_facts":
            if selected is None:
                raise ValueError(f"pair {pair.pair_id!r}: inputs ask for selected_facts but no "
                                 "selection was given")
            parts.append("facts: " + " ".join(pair.content[i] for i in sorted(selected)))
        elif x == "article":
            sents = pair.content[:article_sentences] if article_sentences else pair.content
            parts.append("article: " + " ".join(sents))
    return " | ".join(parts)


def facts_text(pair: MessagePair, indexes: Sequence[int], order: str = "paper") -> str:
    """The chosen sentences joined, in paper order (``paper``) or as given (``rank``)."""
    idx = sorted(indexes) if order == "paper" else list(indexes)
    return " ".join(pair.content[i] for i in idx)


def trim_words(text: str, n_words: int | None) -> str:
    """The first ``n_words`` whitespace tokens (None: unchanged)."""
    return text if n_words is None else " ".join(text.split()[:n_words])


def tune_length(texts: Sequence[str], refs: Sequence[str], candidates: Sequence[int | None],
                metric: Callable[[str, str], float]) -> tuple[int | None, dict[Any, float]]:
    """The word budget that maximises mean ``metric`` on (val) texts; ties: shortest first."""
    if len(texts) != len(refs) or not texts:
        raise ValueError(f"tune_length: {len(texts)} texts and {len(refs)} references")
    scores = {c: float(np.mean([metric(trim_words(t, c), r) for t, r in zip(texts, refs,
                                                                          strict=True)]))
              for c in candidates}
    best = max(candidates, key=lambda c: scores[c])
    return best, scores


def nearest_replies(queries: np.ndarray, train_queries: np.ndarray,
                    train_replies: Sequence[str]) -> list[str]:
    """For each query vector, the reply of the most similar training query (cosine)."""
    if len(train_replies) == 0:
        raise ValueError("nearest_replies: no training pairs")
    a = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    b = train_queries / np.maximum(np.linalg.norm(train_queries, axis=1, keepdims=True), 1e-12)
    return [train_replies[int(i)] for i in np.argmax(a @ b.T, axis=1)]


# --------------------------------------------------------------------------- error analysis

def split_sentences(text: str) -> list[str]:
    """Rough sentence split on ., ! and ? followed by space (no nltk data needed)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def query_intents(queries: Sequence[str], intents: pd.DataFrame | None,
                  role: str = "Proponent") -> list[str]:
    """Dialogue intent of each query from ``intents.csv`` (sentence-level, by ``role``).

    The query's sentences are matched to intent rows by normalised text (lower-case, no
    punctuation or spaces). The query gets the first ``Ask_*`` tag among its sentences,
    else its first matched tag, else ``"unmatched"`` (``"no intents file"`` if absent).
    """
    if intents is None:
        return ["no intents file"] * len(queries)
    need = {"Role", "Sentence", "Tag"}
    if not need <= set(intents.columns):
        raise ValueError(f"intents table lacks column(s) {sorted(need - set(intents.columns))}")
    rows = intents[intents.Role == role]
    table: dict[str, str] = {}
    for s, tag in zip(rows.Sentence, rows.Tag, strict=True):
        table.setdefault(_norm_text(str(s)), str(tag))
    out = []
    for q in queries:
        tags = [table[n] for n in (_norm_text(s) for s in split_sentences(q)) if n in table]
        if not tags and _norm_text(q) in table:
            tags = [table[_norm_text(q)]]
        ask = [t for t in tags if t.startswith("Ask")]
        out.append(ask[0] if ask else tags[0] if tags else "unmatched")
    return out


def dialogue_properties(pairs: Sequence[MessagePair]) -> pd.DataFrame:
    """Per pair: turn, gold-fact count and the distance of gold to the last turn's facts.

    ``gold_dist_last_facts``: smallest |gold index - index of a fact of the latest earlier
    turn that had facts| (NaN without gold or without earlier facts).
    """
    rows = []
    for p in pairs:
        last = next((t for t in reversed(p.history_fact_indexes) if t), ())
        dist = (min(abs(g - f) for g in p.fact_indexes for f in last)
                if p.fact_indexes and last else np.nan)
        rows.append({"pair_id": p.pair_id, "turn": p.turn, "n_gold": len(p.fact_indexes),
                     "n_sentences": len(p.content), "gold_dist_last_facts": dist,
                     "query": p.query, "reply": p.reply})
    return pd.DataFrame(rows)


def bucket(values: pd.Series, edges: Sequence[float], labels: Sequence[str]) -> pd.Series:
    """Right-closed bins with readable labels; NaN stays ``"n/a"``."""
    out = pd.cut(values, bins=list(edges), labels=list(labels), right=True)
    return out.astype(object).where(values.notna(), "n/a")


def selection_analysis_frame(preds: pd.DataFrame, pairs: Sequence[MessagePair],
                             intents: pd.DataFrame | None = None) -> pd.DataFrame:
    """03's scored test predictions joined with dialogue properties and query intents.

    One row per (fold, system, seed, pair) with a Fact-F1, plus ``turn_bucket``,
    ``n_gold``, ``dist_bucket`` and ``intent``. Pairs missing from ``pairs`` raise.
    """
    props = dialogue_properties(pairs).drop_duplicates("pair_id")
    props["intent"] = query_intents(list(props["query"]), intents)
    scored = preds[preds.fact_f1.notna()].copy()
    missing = sorted(set(scored.pair_id) - set(props.pair_id))
    if missing:
        raise ValueError(f"{len(missing)} predicted pair(s) not in the given pairs, "
                         f"e.g. {missing[0]!r}")
    out = scored.merge(props, on="pair_id", how="left", validate="many_to_one")
    out["turn_bucket"] = bucket(out.turn.astype(float), [-1, 0, 1, 2, 4, 100],
                                ["0", "1", "2", "3-4", "5+"])
    out["dist_bucket"] = bucket(out.gold_dist_last_facts, [-1, 0, 1, 3, 10, 1000],
                                ["0 (same)", "1", "2-3", "4-10", ">10"])
    out["fact_f1"] = out.fact_f1.astype(float)
    return out


def grouped_fact_f1(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean Fact-F1 and query count per system and group (averaged over folds and seeds)."""
    if by not in frame.columns:
        raise KeyError(f"no column {by!r}; have {list(frame.columns)}")
    g = frame.groupby(["system", by], observed=True).fact_f1
    return g.agg(fact_f1="mean", n="size").reset_index()


class RankerEnsemble:
    """Mean within-pair rank-normalised scores of several rankers (less val-noise)."""

    def __init__(self, grid: Sequence[Mapping[str, Any]], seed: int = 0):
        self.grid = [dict(g) for g in grid]
        self.seed = seed
        self.models: list[Any] = []

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> RankerEnsemble:
        self.models = []
        for cand in self.grid:
            cand = dict(cand)
            kind = cand.pop("kind")
            self.models.append(make_ranker(kind, seed=self.seed, **cand).fit(X[list(FEATURES)], y))
        return self

    def scores(self, X: pd.DataFrame, groups: np.ndarray) -> np.ndarray:
        if not self.models:
            raise RuntimeError("RankerEnsemble: call fit first")
        total = np.zeros(len(X))
        for m in self.models:
            s = m.predict_proba(X[list(FEATURES)])[:, 1]
            for g in np.unique(groups):
                sel = groups == g
                total[sel] += _rank_desc(-s[sel]) / max(1, sel.sum() - 1)
        return total / len(self.models)


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
    """Keeps the source tokens (facts + query) likely to reappear in the expert's reply.

    A logistic regression over per-token features (how often this word type was copied
    from the source into the reply in training, how common the exact token is in training
    replies, stop word, query or facts, position, digits/punctuation/case) predicts
    whether a source token occurs in the reply; tokens above ``threshold`` are kept in
    source order. Tokens are ``str.split()`` tokens, as Message-F1 (model card) counts them.

    ``prior_words`` > 0 also offers the most frequent exact tokens of training replies that
    are not in the source (e.g. "the", "is"): token F1 rewards any word likely to be in the
    reply, so this measures how much of Message-F1 a bag of words gains without fluency.
    """

    def __init__(self, prior_strength: float = 5.0, C: float = 1.0, prior_words: int = 0):
        self.prior_strength = prior_strength
        self.C = C
        self.prior_words = prior_words
        self.model: Any = None
        self._prior_tokens: list[str] = []

    def fit(self, queries: Sequence[str], facts: Sequence[str], replies: Sequence[str]
            ) -> TokenCompressor:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if not (len(queries) == len(facts) == len(replies)) or not queries:
            raise ValueError(f"TokenCompressor.fit: {len(queries)} queries, {len(facts)} facts, "
                             f"{len(replies)} replies (need equal, non-zero counts)")
        seen: dict[str, int] = {}
        copied: dict[str, int] = {}
        reply_count: dict[str, int] = {}
        for q, f, r in zip(queries, facts, replies, strict=True):
            rset = set(r.split())
            for tok in rset:
                reply_count[tok] = reply_count.get(tok, 0) + 1
            for _, toks in source_segments(q, f):
                for tok in set(toks):
                    key = _type_key(tok)
                    seen[key] = seen.get(key, 0) + 1
                    copied[key] = copied.get(key, 0) + int(tok in rset)
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
        self.model = make_pipeline(StandardScaler(), LogisticRegression(C=self.C, max_iter=2000))
        self.model.fit(Xa, np.asarray(y))
        return self

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
                rate = (self._copied.get(key, 0) + self.prior_strength * self._prior) / (
                    n + self.prior_strength)
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


def tune_threshold(compressor: TokenCompressor, queries: Sequence[str], facts: Sequence[str],
                   refs: Sequence[str], thresholds: Sequence[float],
                   metric: Callable[[str, str], float]) -> tuple[float, dict[float, float]]:
    """The keep threshold with the best mean ``metric`` on (val) pairs; ties: lowest."""
    if not (len(queries) == len(facts) == len(refs)) or not refs:
        raise ValueError("tune_threshold: need equal, non-zero numbers of queries/facts/refs")
    probs = [compressor.keep_probabilities(q, f) for q, f in zip(queries, facts, strict=True)]
    scores = {}
    for th in thresholds:
        outs = [" ".join(t for t, p in zip(toks, pr, strict=True) if p >= th)
                for toks, pr in probs]
        scores[th] = float(np.mean([metric(o, r) for o, r in zip(outs, refs, strict=True)]))
    best = max(thresholds, key=lambda t: (scores[t], -t))
    return best, scores


# --------------------------------------------------------------------------- generation metrics

def generation_metrics(hyps: Sequence[str], refs: Sequence[str], embedding: bool = True,
                       bertscore_model: str | None = None, bertscore_layers: int | None = None,
                       moverscore_model: str | None = None) -> dict[str, float]:
    """Mean Message-F1 (card recipe and SQuAD-normalised) and, optionally, BERTScore F1 and
    MoverScore of parallel hypotheses and references.

    Embedding metrics default to the packaged all-MiniLM-L6-v2 (6 layers, offline, no
    rescaling baseline); pass hub ids for the published setting. Empty hypotheses are
    scored by BERTScore as "."; hypotheses without any weighted token get MoverScore 0
    (not moverscore_v2's 1.0); ``empty_share`` and ``moverscore_degenerate_share`` count them.
    """
    from saf_utils.metrics import message_f1, message_f1_squad

    if len(hyps) != len(refs) or not refs:
        raise ValueError(f"generation_metrics: {len(hyps)} hypotheses, {len(refs)} references")
    out = {
        "message_f1": float(np.mean([message_f1(h, r) for h, r in zip(hyps, refs, strict=True)])),
        "message_f1_squad": float(np.mean([message_f1_squad(h, r)
                                           for h, r in zip(hyps, refs, strict=True)])),
    }
    if embedding:
        from saf_utils.embedding_metrics import bertscore
        from saf_utils.embedding_metrics import moverscore as mover
        from saf_utils.encoders import minilm_path

        safe = [h if h.strip() else "." for h in hyps]  # bert-score cannot embed ""
        out["bertscore_f1"] = float(bertscore(safe, list(refs), model_type=bertscore_model,
                                              num_layers=bertscore_layers)["f1"])
        ms = mover(list(refs), list(hyps), model=moverscore_model or minilm_path())
        # moverscore_v2 gives 1.0 when a text has no weighted token (empty, or only "##"
        # word pieces and punctuation, as degenerate generations can be): such an output
        # says nothing, so it scores 0 here. A genuine 1.0 needs the reference itself.
        degenerate = [m >= 1.0 - 1e-9 and h.strip() != r.strip()
                      for h, r, m in zip(hyps, refs, ms, strict=True)]
        out["moverscore"] = float(np.mean([0.0 if d else m
                                           for d, m in zip(degenerate, ms, strict=True)]))
        out["moverscore_degenerate_share"] = float(np.mean(degenerate))
    out["empty_share"] = float(np.mean([not h.strip() for h in hyps]))
    return out


def slug(text: str) -> str:
    """lower_snake_case name part for metric names ("3-4" -> "3_4", "Ask_Info" -> "ask_info")."""
    out = re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")
    return out or "none"
