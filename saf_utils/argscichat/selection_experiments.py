"""ArgSciChat fact-selection experiments: a registry of selectors and one function that runs
them over folds, splits and seeds and returns tidy prediction rows.

Protocol (every choice inside a fold, never another fold's papers, never test):

- Per-query selectors (baselines, oracle) have nothing to tune.
- Learned selectors are fit on the fold's train pairs; every hyperparameter (ranker grid
  candidate, ensemble member set, BM25 mix weight) is chosen on **that fold's val** split
  with models fit on train only, so val selections are out of sample. Test (and train)
  selections come from a refit on train+val with the chosen values
  (``SelectionConfig.refit_on_train_val``).
- Which system is "best" is decided later on val as well (:mod:`.evaluation`).

Adding a selector = one function + one registration (:class:`saf_utils.registry.Registry`)::

    @SELECTORS.register("my_selector", "baseline", params=("k",))
    def select_mine(pair, k, env):  # env.embed, env.rng
        return [...]  # k content-sentence indexes (description: the docstring's first line)

A ``kind="fold"`` selector instead receives ``(ctx, fold)`` and returns a
:class:`FoldSelection` (selections per split and its tuning rows).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import fact_selection as FS
from saf_utils.argscichat.data import ArgSciChatFold, MessagePair
from saf_utils.registry import Registry

TASK, DATASET, METRIC = "argscichat_fact_selection", "argscichat", "fact_f1"

#: Candidate member sets of ``ranker_ensemble`` / ``ensemble_bm25``; one is chosen per fold on
#: that fold's val Fact-F1 (train-only fits).
#: ``small_hgb``: eight small boosting models; ``small_hgb+logreg``: plus the ranker grid's
#: three logistic regressions (linear and tree scores mixed by rank).
ENSEMBLE_MEMBER_SETS: dict[str, tuple[dict[str, Any], ...]] = {
    "small_hgb": FS.ENSEMBLE_GRID,
    "small_hgb+logreg": FS.ENSEMBLE_GRID + tuple(g for g in FS.DEFAULT_GRID
                                                 if g["kind"] == "logreg"),
}


# --------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class SelectionConfig:
    """Everything the selectors read besides the data (the notebook's parameters)."""

    k: int = 2
    random_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    seed: int = 0  # learned models (deterministic: no early stopping, lbfgs)
    grid: tuple[dict[str, Any], ...] = FS.DEFAULT_GRID
    member_sets: Mapping[str, tuple[dict[str, Any], ...]] = field(
        default_factory=lambda: dict(ENSEMBLE_MEMBER_SETS))
    mix_weights: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
    refit_on_train_val: bool = True
    splits: tuple[str, ...] = A.SPLITS


@dataclass
class SelectionEnv:
    """What a per-query selector may use besides the pair: embeddings and a seeded RNG."""

    embed: Callable[[Sequence[str]], np.ndarray]
    rng: np.random.Generator | None = None


@dataclass
class FoldSelection:
    """A fold-level selector's output: per split one index list per pair, and tuning rows."""

    selections: dict[str, list[list[int]]]
    tuning: list[dict[str, Any]] = field(default_factory=list)


#: Fact selectors. ``kind="pair"``: ``fn(pair, k, env) -> k sentence indexes`` (``seeded``:
#: once per ``SelectionConfig.random_seeds``); ``kind="fold"``: ``fn(ctx, fold) ->``
#: :class:`FoldSelection`, fit and tuned per fold. ``gold_history``: reads earlier turns' gold
#: facts; ``ablation_of``: the selector it ablates. ``params``: SelectionConfig fields read.
SELECTORS = Registry("selector", defaults={"kind": "pair", "seeded": False,
                                           "gold_history": False, "ablation_of": None},
                     param_names=[f.name for f in fields(SelectionConfig)])


# --------------------------------------------------------------------------- data helpers

def split_pairs(data: Mapping[int, ArgSciChatFold], max_rows: int | None = None
                ) -> dict[tuple[int, str], list[MessagePair]]:
    """(fold, split) -> the split's pairs, the first ``max_rows`` of each (smoke runs)."""
    return {(f, s): list(data[f][s])[:max_rows] if max_rows else list(data[f][s])
            for f in data for s in A.SPLITS}


def data_overview(pairs: Mapping[tuple[int, str], Sequence[MessagePair]]) -> pd.DataFrame:
    """Per fold and split: pairs, scored pairs, pairs skipped (no gold fact sentence), papers."""
    rows = []
    for (f, s), ps in pairs.items():
        kept, skipped = A.scored_pairs(ps)
        rows.append({"fold": f, "split": s, "pairs": len(ps), "scored": len(kept),
                     "skipped_no_gold": skipped, "papers": len({p.paper_id for p in ps})})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- shared state

def _key(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True)


class SelectionContext:
    """The folds' pairs plus caches shared by all selectors of a run.

    Feature frames are computed once per pair; every (fold, fit split, model parameters,
    feature set) is fit once, whichever selectors use it (e.g. the ranker grid's models are
    also the ``ranker_grid`` ensemble's members).
    """

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

    def table(self, fold: int, split: str):
        """(X, y, groups) of all pairs of a split (memoised)."""
        key = ("table", fold, split)
        if key not in self.memo:
            self.memo[key] = FS.feature_table(self.pairs[(fold, split)], self.embed, self.index,
                                              self.feature_cache)
        return self.memo[key]

    def fit_table(self, fold: int, on: str):
        """Training table: scored pairs of ``train`` or ``train+val``."""
        key = ("fit_table", fold, on)
        if key not in self.memo:
            ps = [p for s in on.split("+") for p in A.scored_pairs(self.pairs[(fold, s)])[0]]
            if not ps:
                raise ValueError(f"fold {fold}: no scored pairs in {on} to fit on")
            self.memo[key] = FS.feature_table(ps, self.embed, self.index, self.feature_cache)
        return self.memo[key]

    def model(self, fold: int, on: str, params: Mapping[str, Any], features: Sequence[str]):
        """One fitted classifier, memoised by (fold, fit split, parameters, features)."""
        key = ("model", fold, on, _key(params), tuple(features))
        if key not in self.memo:
            X, y, _ = self.fit_table(fold, on)
            cand = dict(params)
            kind = cand.pop("kind")
            self.memo[key] = FS.make_ranker(kind, seed=self.config.seed, **cand).fit(
                X[list(features)], y)
        return self.memo[key]

    def fit_for(self, split: str) -> str:
        """Val selections come from train-only fits; train/test from the refit (if enabled)."""
        return "train" if split == "val" or not self.config.refit_on_train_val else "train+val"

    def val_f1(self, fold: int, selections: Mapping[int, Sequence[int]]) -> float:
        return FS.mean_fact_f1(selections, self.pairs[(fold, "val")])

    def memoized(self, key: Any, compute: Callable[[], Any]) -> Any:
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


# --------------------------------------------------------------------------- learned scorers

@dataclass(frozen=True)
class ScorerSpec:
    """A learned scorer: one model (raw probability) or several (mean within-pair rank),
    plus ``bm25_weight`` times BM25's within-pair rank."""

    members: tuple[dict[str, Any], ...]
    features: tuple[str, ...] = FS.FEATURES
    bm25_weight: float = 0.0

    @property
    def key(self) -> tuple:
        return (tuple(_key(m) for m in self.members), self.features, self.bm25_weight)

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

        if memo is None:
            base = base_scores()
        else:
            base = ctx.memoized(("scores", fold, on, memo, self.key[:2]), base_scores)
        if self.bm25_weight:
            base = FS.mix_ranks(base, X["bm25"].to_numpy(), groups, self.bm25_weight)
        return base


def _select_split(ctx: SelectionContext, fold: int, split: str, spec: ScorerSpec,
                  history: str = "gold", on: str | None = None) -> list[list[int]]:
    """Top-k of ``spec``'s scores for every pair of a split.

    ``history="gold"``: history features from the earlier turns' gold facts (as annotated);
    ``"own"``: from this scorer's own selections of the earlier turns, turn by turn (earlier
    turns that were not selected here, e.g. in another split, count as having no facts).
    """
    on = on or ctx.fit_for(split)
    pairs = ctx.pairs[(fold, split)]
    if not pairs:
        return []
    k = ctx.config.k
    if history == "gold":
        X, _, g = ctx.table(fold, split)
        sel = FS.grouped_top_k(spec.scores(ctx, fold, on, X, g, memo=split), g, k)
        return [sel[i] for i in range(len(pairs))]
    if history != "own":
        raise ValueError(f"history must be 'gold' or 'own', got {history!r}")
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
        sel = FS.grouped_top_k(spec.scores(ctx, fold, on, X, groups), groups, k)
        for j, i in enumerate(batch):
            out[i] = own[pairs[i].pair_id] = sel[j]
    return [out[i] for i in range(len(pairs))]


def _val_choice(ctx: SelectionContext, fold: int, system: str, param: str,
                candidates: Mapping[str, ScorerSpec]) -> tuple[str, list[dict[str, Any]]]:
    """The candidate with the best val Fact-F1 of this fold (first wins ties), tuning rows."""
    scores = {}
    for name, spec in candidates.items():
        sel = _select_split(ctx, fold, "val", spec, on="train")
        scores[name] = ctx.val_f1(fold, dict(enumerate(sel)))
    order = list(candidates)
    best = max(order, key=lambda n: (-np.inf if np.isnan(scores[n]) else scores[n],
                                     -order.index(n)))
    rows = [{"fold": fold, "system": system, "param": param, "value": name,
             "val_fact_f1": v, "chosen": name == best} for name, v in scores.items()]
    return best, rows


def _label(params: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def ranker_choice(ctx: SelectionContext, fold: int) -> tuple[ScorerSpec, list[dict]]:
    """``ranker``'s grid candidate chosen on this fold's val (memoised)."""
    def compute():
        cands = {_label(p): ScorerSpec((dict(p),)) for p in ctx.config.grid}
        best, rows = _val_choice(ctx, fold, "ranker", "grid", cands)
        return cands[best], rows
    return ctx.memoized(("ranker_choice", fold), compute)


def ensemble_choice(ctx: SelectionContext, fold: int, features: Sequence[str] = FS.FEATURES
                    ) -> tuple[ScorerSpec, list[dict]]:
    """``ranker_ensemble``'s member set, chosen on this fold's val (full features)."""
    def compute():
        cands = {name: ScorerSpec(tuple(m), tuple(features))
                 for name, m in ctx.config.member_sets.items()}
        best, rows = _val_choice(ctx, fold, "ranker_ensemble", "members", cands)
        return cands[best], rows
    return ctx.memoized(("ensemble_choice", fold, tuple(features)), compute)


def mix_choice(ctx: SelectionContext, fold: int, base: ScorerSpec, system: str
               ) -> tuple[ScorerSpec, list[dict]]:
    """``base`` plus the BM25 rank weight chosen on this fold's val."""
    def compute():
        cands = {str(w): replace(base, bm25_weight=float(w)) for w in ctx.config.mix_weights}
        best, rows = _val_choice(ctx, fold, system, "bm25_weight", cands)
        return cands[best], rows
    return ctx.memoized(("mix_choice", fold, base.key, system), compute)


def _run_spec(ctx: SelectionContext, fold: int, spec: ScorerSpec, tuning: list[dict],
              history: str = "gold") -> FoldSelection:
    """Selections of every split; with ``history="own"`` val and test only (train pairs are
    in-sample anyway, and turn-by-turn prediction is the expensive part)."""
    splits = [s for s in ctx.config.splits if history == "gold" or s != "train"]
    return FoldSelection({s: _select_split(ctx, fold, s, spec, history) for s in splits},
                         tuning)


# --------------------------------------------------------------------------- registry

_RANKER = ("k", "seed", "grid", "refit_on_train_val")
_ENSEMBLE = ("k", "seed", "member_sets", "refit_on_train_val")
_MIX = (*_ENSEMBLE, "mix_weights")


@SELECTORS.register("random", "baseline", seeded=True, params=("k", "random_seeds"))
def select_random(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """k distinct sentences uniformly at random (official "Random"; mean over seeds)."""
    return FS.select_random(pair, k, env.rng)


@SELECTORS.register("first", "baseline", params=("k",))
def select_first(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """The paper's first k sentences (official "First")."""
    return FS.select_first(pair, k)


@SELECTORS.register("tfidf", "baseline", params=("k",))
def select_tfidf(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """TF-IDF cosine to the query, vectoriser fit on the paper (official "TF-IDF")."""
    return FS.select_tfidf(pair, k)


@SELECTORS.register("bm25", "baseline", params=("k",))
def select_bm25(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """BM25Okapi of the query over the paper's sentences."""
    return FS.select_bm25(pair, k)


@SELECTORS.register("sbert", "baseline", params=("k",))
def select_sbert(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """Cosine of sentence-transformers embeddings (official "SBERT")."""
    return FS.select_sbert(pair, k, env.embed)


@SELECTORS.register("gold_k", "oracle", params=("k",))
def select_gold_k(pair: MessagePair, k: int, env: SelectionEnv) -> list[int]:
    """Oracle: the gold sentences (first k), padded with the paper's first other sentences."""
    gold = list(pair.fact_indexes)[:k]
    rest = [i for i in range(len(pair.content)) if i not in gold]
    return gold + rest[: max(0, min(k, len(pair.content)) - len(gold))]


@SELECTORS.register("ranker", "system", kind="fold", gold_history=True,
                    params=_RANKER)
def run_ranker(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Learned ranker: the grid candidate with the best val Fact-F1 of the fold."""
    spec, rows = ranker_choice(ctx, fold)
    return _run_spec(ctx, fold, spec, rows)


@SELECTORS.register("ranker_ensemble", "system", kind="fold", gold_history=True,
                    params=_ENSEMBLE)
def run_ranker_ensemble(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Mean within-paper rank of a member set chosen on the fold's val."""
    spec, rows = ensemble_choice(ctx, fold)
    return _run_spec(ctx, fold, spec, rows)


@SELECTORS.register("ensemble_bm25", "system", kind="fold", gold_history=True,
                    params=_MIX)
def run_ensemble_bm25(ctx: SelectionContext, fold: int) -> FoldSelection:
    """ranker_ensemble's rank plus w x BM25's rank, w chosen on the fold's val."""
    spec, rows = mix_choice(ctx, fold, ensemble_choice(ctx, fold)[0], "ensemble_bm25")
    return _run_spec(ctx, fold, spec, rows)


@SELECTORS.register("ranker_no_history", "system", kind="fold", ablation_of="ranker",
                    params=_RANKER)
def run_ranker_no_history(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Ablation: ranker's chosen candidate refit without the gold-history features."""
    spec = replace(ranker_choice(ctx, fold)[0], features=FS.NO_HISTORY_FEATURES)
    return _run_spec(ctx, fold, spec, [])


@SELECTORS.register("ranker_own_history", "system", kind="fold", ablation_of="ranker",
                    params=_RANKER)
def run_ranker_own_history(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Ablation: ranker with its own earlier selections in place of earlier gold facts."""
    return _run_spec(ctx, fold, ranker_choice(ctx, fold)[0], [], history="own")


@SELECTORS.register("ensemble_bm25_no_history", "system", kind="fold",
                    ablation_of="ensemble_bm25", params=_MIX)
def run_ensemble_bm25_no_history(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Ablation: ensemble_bm25's member set without gold-history features (w re-chosen)."""
    base = replace(ensemble_choice(ctx, fold)[0], features=FS.NO_HISTORY_FEATURES)
    spec, rows = mix_choice(ctx, fold, base, "ensemble_bm25_no_history")
    return _run_spec(ctx, fold, spec, rows)


@SELECTORS.register("ensemble_bm25_own_history", "system", kind="fold",
                    ablation_of="ensemble_bm25", params=_MIX)
def run_ensemble_bm25_own_history(ctx: SelectionContext, fold: int) -> FoldSelection:
    """Ablation: ensemble_bm25 with its own earlier selections as the fact history."""
    spec = mix_choice(ctx, fold, ensemble_choice(ctx, fold)[0], "ensemble_bm25")[0]
    return _run_spec(ctx, fold, spec, [], history="own")


# --------------------------------------------------------------------------- experiment

@dataclass
class SelectionRun:
    """Tidy output of :func:`run_selectors`."""

    predictions: pd.DataFrame  # one row per fold, split, system, seed and pair
    tuning: pd.DataFrame  # fold, system, param, value, val_fact_f1, chosen
    seconds: dict[str, float]


PREDICTION_COLUMNS = ("fold", "split", "pair_id", "paper_id", "system", "role", "seed",
                      "selected", "selected_sentences", "gold", "fact_f1")


def _rows(pairs: Sequence[MessagePair], selections: Sequence[Sequence[int]], fold: int,
          split: str, system: str, seed: int | None) -> list[dict[str, Any]]:
    rows = A.prediction_rows(pairs, selections, fold=fold, split=split, system=system, seed=seed)
    for r, p in zip(rows, pairs, strict=True):
        r["paper_id"] = p.paper_id
        r["role"] = SELECTORS[system].role
    return rows


def run_selectors(ctx: SelectionContext, systems: Iterable[str]) -> SelectionRun:
    """Run ``systems`` over every fold and split of ``ctx`` (seeded ones once per seed).

    Returns prediction rows (:data:`PREDICTION_COLUMNS`; ``fact_f1`` is None for pairs
    without gold fact sentences, which the official protocol skips), the tuning rows of
    the per-fold val choices, and seconds per system.
    """
    systems = SELECTORS.check(systems)
    cfg = ctx.config
    rows: list[dict[str, Any]] = []
    tuning: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for name in systems:
        sel = SELECTORS[name]
        t0 = time.perf_counter()
        for f in ctx.folds:
            if sel.kind == "fold":
                out = sel.fn(ctx, f)
                tuning += out.tuning
                for s in [s for s in cfg.splits if s in out.selections]:
                    rows += _rows(ctx.pairs[(f, s)], out.selections[s], f, s, name, None)
                continue
            for s in cfg.splits:
                pairs = ctx.pairs[(f, s)]
                for seed in (cfg.random_seeds if sel.seeded else (None,)):
                    env = SelectionEnv(ctx.embed, np.random.default_rng(seed)
                                       if seed is not None else None)
                    rows += _rows(pairs, [sel.fn(p, cfg.k, env) for p in pairs], f, s, name,
                                  seed)
        seconds[name] = time.perf_counter() - t0
    preds = pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS))
    return SelectionRun(preds, _tuning_frame(tuning), seconds)


def _tuning_frame(rows: Any) -> pd.DataFrame:
    t = pd.DataFrame(rows, columns=["fold", "system", "param", "value", "val_fact_f1", "chosen"])
    return t.astype({"fold": int, "system": str, "param": str, "value": str,
                     "val_fact_f1": float, "chosen": bool})


def combine(*runs: SelectionRun) -> SelectionRun:
    """One run from several (e.g. one per family of systems)."""
    return SelectionRun(pd.concat([r.predictions for r in runs], ignore_index=True),
                        _tuning_frame(pd.concat([r.tuning for r in runs if not r.tuning.empty]
                                                or [r.tuning for r in runs[:1]],
                                                ignore_index=True)),
                        {k: v for r in runs for k, v in r.seconds.items()})
