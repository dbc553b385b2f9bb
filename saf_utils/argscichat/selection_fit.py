"""What the learned fact selectors share within one run: the folds' pairs, the feature and
model caches (:class:`SelectionContext`), learned scorers (:class:`ScorerSpec`) and their
top-k selections per split (:func:`select_split`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import fact_selection as FS
from saf_utils.argscichat.data import MessagePair


@dataclass(frozen=True)
class SelectionConfig:
    """What every selector of a run shares (03's notebook-level parameters)."""

    k: int = 2  # sentences per query (the annotation protocol)
    seed: int = 0  # learned models (deterministic: no early stopping, lbfgs)
    refit_on_train_val: bool = True  # test/train selections from a refit on train+val
    splits: tuple[str, ...] = A.SPLITS


def param_key(params: Mapping[str, Any]) -> str:
    """A hashable, order-free key of a parameter mapping (caches)."""
    return json.dumps(dict(params), sort_keys=True)


class SelectionContext:
    """The folds' pairs plus caches shared by all selectors of a run: feature frames once per
    pair, one fit per (fold, fit split, parameters, feature set), whichever selectors use it."""

    def __init__(self, pairs: Mapping[tuple[int, str], Sequence[MessagePair]],
                 index: Mapping[str, MessagePair], embed: Callable[[Sequence[str]], np.ndarray],
                 config: SelectionConfig | None = None):
        self.pairs = {key: list(v) for key, v in pairs.items()}
        self.index = index
        self.embed = embed
        self.config = config or SelectionConfig()
        self.feature_cache: dict[str, pd.DataFrame] = {}
        self.memo: dict[Any, Any] = {}
        self.folds = sorted({f for f, _ in self.pairs})
        self.tuning: list[dict[str, Any]] = []

    def memoized(self, key: Any, compute: Callable[[], Any]) -> Any:
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    def table(self, fold: int, split: str):
        """(X, y, groups) of all pairs of a split (memoised)."""
        return self.memoized(("table", fold, split), lambda: FS.feature_table(
            self.pairs[(fold, split)], self.embed, self.index, self.feature_cache))

    def fit_table(self, fold: int, on: str):
        """Training table: scored pairs of ``train`` or ``train+val`` (memoised)."""
        def build():
            ps = [p for s in on.split("+") for p in A.scored_pairs(self.pairs[(fold, s)])[0]]
            if not ps:
                raise ValueError(f"fold {fold}: no scored pairs in {on} to fit on")
            return FS.feature_table(ps, self.embed, self.index, self.feature_cache)
        return self.memoized(("fit_table", fold, on), build)

    def model(self, fold: int, on: str, params: Mapping[str, Any], features: Sequence[str]):
        """One fitted classifier, memoised by (fold, fit split, parameters, features)."""
        def fit():
            X, y, _ = self.fit_table(fold, on)
            cand = dict(params)
            return FS.make_ranker(cand.pop("kind"), seed=self.config.seed, **cand).fit(
                X[list(features)], y)
        return self.memoized(("model", fold, on, param_key(params), tuple(features)), fit)

    def fit_for(self, split: str) -> str:
        """Val selections come from train-only fits; train/test from the refit (if enabled)."""
        return "train" if split == "val" or not self.config.refit_on_train_val else "train+val"

    def rows(self, fold: int, split: str, selections: Sequence[Sequence[int]],
             seed: int | None = None) -> list[dict[str, Any]]:
        """Prediction rows of one split's selections (system and role: the runner's)."""
        rows = A.prediction_rows(self.pairs[(fold, split)], selections, fold=fold, split=split,
                                 system="", seed=seed)
        return [{k: v for k, v in r.items() if k != "system"} for r in rows]

    def each_pair(self, select: Callable[[MessagePair, np.random.Generator | None], list[int]],
                  seeds: Sequence[int | None] = (None,)) -> pd.DataFrame:
        """A per-query selector's predictions: ``select(pair, rng)`` on every pair of every
        fold and split, once per seed (``rng`` a fresh generator per split and seed; None
        for deterministic selectors)."""
        rows: list[dict[str, Any]] = []
        for f in self.folds:
            for s in self.config.splits:
                for seed in seeds:
                    rng = np.random.default_rng(seed) if seed is not None else None
                    rows += self.rows(f, s, [select(p, rng) for p in self.pairs[(f, s)]], seed)
        return pd.DataFrame(rows)


@dataclass(frozen=True)
class ScorerSpec:
    """A learned scorer: one model (raw probability) or several (mean within-pair rank),
    plus ``bm25_weight`` times BM25's within-pair rank."""

    members: tuple[dict[str, Any], ...]
    features: tuple[str, ...] = FS.FEATURES
    bm25_weight: float = 0.0

    @property
    def key(self) -> tuple:
        return (tuple(param_key(m) for m in self.members), self.features, self.bm25_weight)

    def scores(self, ctx: SelectionContext, fold: int, on: str, X: pd.DataFrame,
               groups: np.ndarray, memo: Any = None) -> np.ndarray:
        """Scores of the rows of ``X`` (pairs = ``groups``); ``memo``: a key under which the
        members' part is cached (e.g. the split), so that weights share one prediction."""
        def base_scores() -> np.ndarray:
            models = [ctx.model(fold, on, m, self.features) for m in self.members]
            cols = list(self.features)
            if len(models) == 1:
                return models[0].predict_proba(X[cols])[:, 1]
            return np.mean([FS.group_rank01(m.predict_proba(X[cols])[:, 1], groups)
                            for m in models], axis=0)

        base = base_scores() if memo is None else ctx.memoized(
            ("scores", fold, on, memo, self.key[:2]), base_scores)
        if self.bm25_weight:
            base = FS.mix_ranks(base, X["bm25"].to_numpy(), groups, self.bm25_weight)
        return base


def select_split(ctx: SelectionContext, fold: int, split: str, spec: ScorerSpec,
                 history: str = "gold", on: str | None = None) -> list[list[int]]:
    """Top-k of ``spec``'s scores for every pair of a split; history features from the
    gold facts (``history="gold"``) or, turn by turn, this scorer's own selections."""
    on = on or ctx.fit_for(split)
    pairs = ctx.pairs[(fold, split)]
    if not pairs:
        return []
    if history == "gold":
        X, _, g = ctx.table(fold, split)
        sel = FS.grouped_top_k(spec.scores(ctx, fold, on, X, g, memo=split), g, ctx.config.k)
        return [sel[i] for i in range(len(pairs))]
    if history != "own":
        raise ValueError(f"history must be 'gold' or 'own', got {history!r}")
    return _select_own_history(ctx, fold, on, pairs, spec)


def _select_own_history(ctx: SelectionContext, fold: int, on: str,
                        pairs: Sequence[MessagePair], spec: ScorerSpec) -> list[list[int]]:
    """:func:`select_split` with ``history="own"``: turn by turn, each turn's history
    features from this scorer's selections of the earlier turns."""
    own: dict[str, list[int]] = {}
    out: dict[int, list[int]] = {}
    for turn in sorted({p.turn for p in pairs}):
        batch = [i for i, p in enumerate(pairs) if p.turn == turn]  # independent given history
        frames = []
        for i in batch:
            p = pairs[i]
            X = FS.feature_table([p], ctx.embed, ctx.index, ctx.feature_cache)[0]
            hist = [tuple(own.get(h, ())) for h in p.history_ids]
            frames.append(FS.with_history(X, p, ctx.embed, hist))
        groups = np.concatenate([np.full(len(f), j) for j, f in enumerate(frames)])
        X = pd.concat(frames, ignore_index=True)
        sel = FS.grouped_top_k(spec.scores(ctx, fold, on, X, groups), groups, ctx.config.k)
        for j, i in enumerate(batch):
            out[i] = own[pairs[i].pair_id] = sel[j]
    return [out[i] for i in range(len(pairs))]
