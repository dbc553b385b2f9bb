"""ArgSciChat fact selectors: the registry :data:`SELECTORS`, each selector's parameters
dataclass (its defaults live only there) and the selectors; a selector is
``fn(ctx: SelectionContext, params, **context) -> predictions frame`` (adding one:
docs/recipes.md). Learned selectors choose every hyperparameter on **that fold's val**
with models fit on train only; test selections come from a refit on train+val."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from saf_utils.argscichat import fact_selection as FS
from saf_utils.argscichat.selection_fit import (
    ScorerSpec,
    SelectionContext,
    select_split,
)
from saf_utils.registry import NoParams, Registry
from saf_utils.statistics import validation_choice

TASK, DATASET, METRIC = "argscichat_fact_selection", "argscichat", "fact_f1"

#: Candidate member sets of the ensembles (``EnsembleParams.member_sets``), one chosen per
#: fold on its val Fact-F1: eight small boosting models, or those plus the ranker grid's
#: three logistic regressions (linear and tree scores mixed by rank).
ENSEMBLE_MEMBER_SETS: dict[str, tuple[dict[str, Any], ...]] = {
    "small_hgb": FS.ENSEMBLE_GRID,
    "small_hgb+logreg": FS.ENSEMBLE_GRID + tuple(g for g in FS.DEFAULT_GRID
                                                 if g["kind"] == "logreg"),
}

#: Fact selectors. Role ``gold_input``: reads earlier turns' gold facts at test time (a
#: deployed assistant has only its own earlier selections); ``ablation_of``: the selector it
#: ablates.
SELECTORS = Registry("selector", defaults={"ablation_of": None})


# --------------------------------------------------------------------------- parameters

@dataclass(frozen=True)
class RandomParams:
    """``random``: one run per seed (the mean over seeds is reported)."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class RankerParams:
    """The ranker's candidate models (one chosen per fold on val)."""

    grid: tuple[dict[str, Any], ...] = FS.DEFAULT_GRID


@dataclass(frozen=True)
class EnsembleParams:
    """Names of candidate member sets (:data:`ENSEMBLE_MEMBER_SETS`), one chosen per fold."""

    member_sets: tuple[str, ...] = ("small_hgb", "small_hgb+logreg")


@dataclass(frozen=True)
class MixParams(EnsembleParams):
    """An ensemble plus w x BM25's within-paper rank, w chosen per fold on val."""

    mix_weights: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)


# --------------------------------------------------------------------------- val choices

def val_choice(ctx: SelectionContext, fold: int, system: str, param: str,
               candidates: dict[str, ScorerSpec]) -> tuple[ScorerSpec, list[dict[str, Any]]]:
    """The candidate with the best val Fact-F1 of this fold (train-only fits;
    :func:`saf_utils.statistics.validation_choice.choose_value`) and the tuning rows
    (memoised: selectors that share a choice make it once)."""
    def choose() -> tuple[ScorerSpec, list[dict[str, Any]]]:
        scores = {name: FS.mean_fact_f1(dict(enumerate(select_split(
            ctx, fold, "val", spec, on="train"))), ctx.pairs[(fold, "val")])
            for name, spec in candidates.items()}
        best = validation_choice.choose_value(scores, METRIC)
        return candidates[best], [{"fold": fold, "system": system, "param": param,
                                   "value": name, "val_fact_f1": v, "chosen": name == best}
                                  for name, v in scores.items()]
    key = tuple((name, spec.key) for name, spec in candidates.items())
    return ctx.memoized(("val_choice", fold, system, param, key), choose)


def ranker_choice(ctx: SelectionContext, fold: int, grid: tuple[dict[str, Any], ...]
                  ) -> tuple[ScorerSpec, list[dict]]:
    """``ranker``'s grid candidate chosen on this fold's val."""
    return val_choice(ctx, fold, "ranker", "grid", {
        ",".join(f"{k}={v}" for k, v in p.items()): ScorerSpec((dict(p),)) for p in grid})


def ensemble_choice(ctx: SelectionContext, fold: int, member_sets: tuple[str, ...]
                    ) -> tuple[ScorerSpec, list[dict]]:
    """``ranker_ensemble``'s member set, chosen on this fold's val."""
    unknown = sorted(set(member_sets) - set(ENSEMBLE_MEMBER_SETS))
    if unknown:
        raise ValueError(f"unknown ensemble member set(s) {unknown}; "
                         f"known: {list(ENSEMBLE_MEMBER_SETS)}")
    return val_choice(ctx, fold, "ranker_ensemble", "members", {
        name: ScorerSpec(tuple(ENSEMBLE_MEMBER_SETS[name])) for name in member_sets})


def mix_choice(ctx: SelectionContext, fold: int, base: ScorerSpec, system: str,
               weights: tuple[float, ...]) -> tuple[ScorerSpec, list[dict]]:
    """``base`` plus the BM25 rank weight chosen on this fold's val."""
    return val_choice(ctx, fold, system, "bm25_weight", {
        str(w): replace(base, bm25_weight=float(w)) for w in weights})


def per_fold(ctx: SelectionContext, choose: Callable[[int], tuple[ScorerSpec, list[dict]]],
             history: str = "gold") -> pd.DataFrame:
    """A learned selector's predictions: per fold, the scorer ``choose(fold)`` returns
    selects every split (with ``history="own"`` val and test only: the expensive part)."""
    rows: list[dict[str, Any]] = []
    for f in ctx.folds:
        spec, tuning = choose(f)
        ctx.tuning += tuning
        for s in [s for s in ctx.config.splits if history == "gold" or s != "train"]:
            rows += ctx.rows(f, s, select_split(ctx, f, s, spec, history))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the selectors

def _each_pair(select: Callable[[SelectionContext, Any, Any], list[int]]
               ) -> Callable[..., pd.DataFrame]:
    """A per-query selector: ``select(ctx, pair, rng)`` on every pair, once per seed of its
    parameters (``seeds``; none: one deterministic run)."""
    return lambda ctx, params, **context: ctx.each_pair(
        lambda pair, rng: select(ctx, pair, rng), getattr(params, "seeds", (None,)))


def _each_fold(choose: Callable[[SelectionContext, Any, int], tuple[ScorerSpec, list[dict]]],
               history: str = "gold") -> Callable[..., pd.DataFrame]:
    """A learned selector: per fold, the scorer ``choose(ctx, params, fold)`` picks
    (:func:`per_fold`; ``history="own"``: its own earlier selections as fact history)."""
    return lambda ctx, params, **context: per_fold(ctx, lambda f: choose(ctx, params, f),
                                                   history)


def gold_k(pair: Any, k: int) -> list[int]:
    """The gold sentences (first k), padded with the paper's first other sentences."""
    gold = list(pair.fact_indexes)[:k]
    rest = [i for i in range(len(pair.content)) if i not in gold]
    return gold + rest[: max(0, min(k, len(pair.content)) - len(gold))]


def _ensemble(ctx: SelectionContext, params: EnsembleParams, f: int, **features: Any
              ) -> ScorerSpec:
    return replace(ensemble_choice(ctx, f, params.member_sets)[0], **features)


SELECTORS.register("random", "baseline", params=RandomParams, description=(
    'k distinct sentences uniformly at random (official "Random"; mean over seeds).'))(
    _each_pair(lambda ctx, pair, rng: FS.select_random(pair, ctx.config.k, rng)))
SELECTORS.register("first", "baseline", params=NoParams, description=(
    'The paper\'s first k sentences (official "First").'))(
    _each_pair(lambda ctx, pair, rng: FS.select_first(pair, ctx.config.k)))
SELECTORS.register("tfidf", "baseline", params=NoParams, description=(
    'TF-IDF cosine to the query, vectoriser fit on the paper (official "TF-IDF").'))(
    _each_pair(lambda ctx, pair, rng: FS.select_tfidf(pair, ctx.config.k)))
SELECTORS.register("bm25", "baseline", params=NoParams, description=(
    "BM25Okapi of the query over the paper's sentences."))(
    _each_pair(lambda ctx, pair, rng: FS.select_bm25(pair, ctx.config.k)))
SELECTORS.register("sbert", "baseline", params=NoParams, description=(
    'Cosine of sentence-transformers embeddings (official "SBERT").'))(
    _each_pair(lambda ctx, pair, rng: FS.select_sbert(pair, ctx.config.k, ctx.embed)))
SELECTORS.register("gold_k", "oracle", params=NoParams, description=(
    "Oracle: the gold sentences (first k), padded with the paper's first other sentences."))(
    _each_pair(lambda ctx, pair, rng: gold_k(pair, ctx.config.k)))

SELECTORS.register("ranker", "gold_input", params=RankerParams, description=(
    "Learned ranker, reading earlier turns' gold facts: the grid candidate with the best val "
    "Fact-F1 of the fold."))(
    _each_fold(lambda ctx, params, f: ranker_choice(ctx, f, params.grid)))
SELECTORS.register("ranker_ensemble", "gold_input", params=EnsembleParams, description=(
    "Mean within-paper rank of a member set chosen on the fold's val, reading earlier turns' "
    "gold facts."))(
    _each_fold(lambda ctx, params, f: ensemble_choice(ctx, f, params.member_sets)))
SELECTORS.register("ensemble_bm25", "gold_input", params=MixParams, description=(
    "ranker_ensemble's rank plus w x BM25's rank, w chosen on the fold's val (reads earlier "
    "turns' gold facts)."))(
    _each_fold(lambda ctx, params, f: mix_choice(ctx, f, _ensemble(ctx, params, f),
                                                 "ensemble_bm25", params.mix_weights)))
SELECTORS.register("ranker_no_history", "system", ablation_of="ranker", params=RankerParams,
                   description="Ablation: ranker's chosen candidate refit without the "
                   "gold-history features.")(
    _each_fold(lambda ctx, params, f: (replace(ranker_choice(ctx, f, params.grid)[0],
                                               features=FS.NO_HISTORY_FEATURES), [])))
SELECTORS.register("ranker_own_history", "system", ablation_of="ranker", params=RankerParams,
                   description="Ablation: ranker with its own earlier selections in place of "
                   "earlier gold facts.")(
    _each_fold(lambda ctx, params, f: (ranker_choice(ctx, f, params.grid)[0], []), "own"))
SELECTORS.register("ensemble_bm25_no_history", "system", ablation_of="ensemble_bm25",
                   params=MixParams, description="Ablation: ensemble_bm25's member set without "
                   "gold-history features (w re-chosen).")(
    _each_fold(lambda ctx, params, f: mix_choice(
        ctx, f, _ensemble(ctx, params, f, features=FS.NO_HISTORY_FEATURES),
        "ensemble_bm25_no_history", params.mix_weights)))
SELECTORS.register("ensemble_bm25_own_history", "system", ablation_of="ensemble_bm25",
                   params=MixParams, description="Ablation: ensemble_bm25 with its own earlier "
                   "selections as the fact history.")(
    _each_fold(lambda ctx, params, f: (mix_choice(ctx, f, _ensemble(ctx, params, f),
                                                  "ensemble_bm25", params.mix_weights)[0], []),
               "own"))
