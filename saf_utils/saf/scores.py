"""Evaluation of SAF prediction tables: which inputs each metric compares (docs/metrics.md),
per-item scores, intervals and paired tests with one design per split (:func:`design_for`;
the estimands, and why a split under :data:`FEW_QUESTIONS` questions gets none at question
level: docs/statistics.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import metrics as M
from saf_utils.saf.data import SAF_LABELS
from saf_utils.statistics import protocol as P
from saf_utils.statistics import uncertainty

#: Every metric scored per table, in table order: names only, everything else is the metric
#: object's (:mod:`saf_utils.metrics`). A new metric of this task is one name here.
SCORED_METRICS = ("accuracy", "macro_f1", "weighted_f1", "mse", "mse_max_penalty", "sacrebleu",
                  "chrf", "rouge2", "meteor", "bertscore_f1", "bertscore_f1_rescaled",
                  "moverscore", "unparseable_rate")
#: Scored and recorded, but no column of the result tables (no intervals or tests).
UNTABULATED_METRICS = ("mse_max_penalty", "unparseable_rate")
#: The metrics of the result tables (intervals, paired tests), in table order.
TABLE_METRICS = tuple(m for m in SCORED_METRICS if m not in UNTABULATED_METRICS)
#: Metrics with one score per item (the mean over items is the metric).
ITEM_METRICS = M.of_level(SCORED_METRICS, "item")
#: Corpus metrics, bootstrapped from per-item sufficient statistics (exact, not averages).
CORPUS_METRICS = M.of_level(SCORED_METRICS, "corpus")
#: Metrics where lower is better.
LOWER_IS_BETTER = tuple(m for m in SCORED_METRICS if M.lower_is_better(m))
#: Metrics that load a model (``embedding_metrics``).
EMBEDDING_METRICS = ("bertscore_f1", "bertscore_f1_rescaled", "moverscore")
#: No interval over 2 or 3 clusters can be calibrated: fewer questions, no question-level inference.
ANSWERS = P.Design("answers within questions", "item",
                   estimand="new answers to these questions")
QUESTIONS = P.Design("questions", "cluster", estimand="new questions (answer-weighted)",
                     label="new questions")
FEW_QUESTIONS = 5


def design_for(n_questions: int, n_resamples: int = 1000, seed: int = 0) -> P.Design:
    """The headline design of a split with ``n_questions`` questions."""
    d = ANSWERS.but(n_resamples=n_resamples, seed=seed)
    if n_questions < FEW_QUESTIONS:
        d = d.but(estimand=f"new answers to these {n_questions} questions (conditional on "
                           "them; no claim about new questions)")
    return d


def _inputs(preds: pd.DataFrame) -> dict[str, tuple[list[Any], list[Any]]]:
    """(gold, pred) of one table for each kind of metric input."""
    raw = preds.raw_output if "raw_output" in preds else pd.Series([None] * len(preds))
    return {"labels": (preds.gold_label.tolist(),
                       [p if isinstance(p, str) else None for p in preds.pred_label]),
            "scores": (preds.gold_score.tolist(),
                       [None if s is None or pd.isna(s) else float(s) for s in preds.pred_score]),
            "texts": (preds.gold_feedback.astype(str).tolist(),
                      [str(h) if isinstance(h, str) else "" for h in preds.pred_feedback]),
            "outputs": ([o if ok else None for o, ok in zip(raw, raw.notna(), strict=True)],
                        preds.parseable.astype(bool).tolist() if "parseable" in preds
                        else [True] * len(preds))}


def _options(name: str, bertscore_kwargs: Mapping[str, Any] | None,
             moverscore_model: Any) -> dict[str, Any]:
    """The options of this task that metric ``name``'s compute function takes."""
    return M.metric(name).options({"labels": SAF_LABELS, **dict(bertscore_kwargs or {}),
                                   "model": moverscore_model})


def _scored(embedding_metrics: bool, moverscore_model: Any,
            names: Sequence[str] = SCORED_METRICS,
            bertscore_kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """The metrics a table gets: rescaled BERTScore only where bert-score ships a baseline for
    the BERTScore model and language."""
    from saf_utils.metrics.embedding import baseline_path, minilm_path

    kw = bertscore_kwargs or {}
    rescaled = baseline_path(kw.get("lang"), kw.get("model_type") or minilm_path()) is not None
    return [n for n in names if (embedding_metrics or n not in EMBEDDING_METRICS)
            and (n != "moverscore" or moverscore_model is not None)
            and (n != "bertscore_f1_rescaled" or rescaled)]


def evaluate_predictions(preds: pd.DataFrame, bertscore_kwargs: Mapping[str, Any] | None = None,
                         moverscore_model: Any = None, embedding_metrics: bool = True
                         ) -> dict[str, float]:
    """All SAF metrics of one prediction table (one system, seed and split), point values,
    for tuning grids (reported numbers come from :func:`headline_per_split`)."""
    inputs = _inputs(preds)
    out: dict[str, float] = {}
    names = [n for n in SCORED_METRICS if n != "unparseable_rate"]  # below, over every row
    for name in _scored(embedding_metrics, moverscore_model, names, bertscore_kwargs):
        m = M.metric(name)
        value = m.score(*inputs[m.inputs],
                        **_options(name, bertscore_kwargs, moverscore_model)).value
        if not math.isnan(value):
            out[name] = value
    n_bad = sum(p is None for p in inputs["labels"][1])
    out["n_unparseable"] = float(n_bad)
    out["unparseable_rate"] = n_bad / max(len(preds), 1)
    return out


# --------------------------------------------------------------------------- seeds


def seed_key(preds: pd.DataFrame) -> pd.Series:
    """The seed as an integer key (-1 for deterministic systems, seed None)."""
    return pd.to_numeric(preds.seed, errors="coerce").fillna(-1).astype(int)


def collapse_identical_seeds(preds: pd.DataFrame) -> pd.DataFrame:
    """Per (system, split): if every seed predicted the same, keep one copy with seed None,
    so a deterministic system is never recorded as n identical seeds with std 0."""
    cols = ["pred_label", "pred_score", "pred_feedback"]
    out = []
    for _, g in preds.groupby(["system", "split"], sort=False):
        keys = seed_key(g)
        per_seed = [t.sort_values("id", kind="stable")[["id", *cols]].astype(str)
                    .reset_index(drop=True) for _, t in g.groupby(keys, sort=True)]
        if len(per_seed) > 1 and all(t.equals(per_seed[0]) for t in per_seed[1:]):
            g = g[keys == keys.min()].assign(seed=None)
        out.append(g)
    res = pd.concat(out, ignore_index=True) if out else preds.copy()
    res["seed"] = pd.array([None if pd.isna(s) else int(s) for s in res.seed], dtype="Int64")
    return res


# --------------------------------------------------------------------------- per-item scores


def item_scores(preds: pd.DataFrame, bertscore_kwargs: Mapping[str, Any] | None = None,
                moverscore_model: Any = None, embedding_metrics: bool = True) -> pd.DataFrame:
    """Per-item scores of :data:`ITEM_METRICS`; their means equal :func:`evaluate_predictions`."""
    p = preds.reset_index(drop=True)
    inputs = _inputs(p)
    cols: dict[str, pd.Series] = {}
    for name in _scored(embedding_metrics and len(p) > 0, moverscore_model, ITEM_METRICS,
                        bertscore_kwargs):
        m = M.metric(name)
        if name == "moverscore":
            cols[name] = _moverscore_by_split(p, *inputs["texts"], moverscore_model)
        else:
            cols[name] = pd.Series(m.items(*inputs[m.inputs],
                                           **_options(name, bertscore_kwargs, None)))
    keys = p[["split", "system", "seed", "id", "question"]]
    long = [keys.assign(metric=m, value=v.to_numpy()) for m, v in cols.items()]
    out = pd.concat(long, ignore_index=True)
    return out[out.value.notna()].reset_index(drop=True)


def _moverscore_by_split(p: pd.DataFrame, refs: list[str], hyps: list[str],
                         model: Any) -> pd.Series:
    """Per-row MoverScore, one call per split (every table of a split shares its references,
    hence the IDF), so each distinct pair is scored once."""
    out = pd.Series(np.nan, index=p.index)
    for _, g in p.groupby("split", sort=False):
        first_table = g[(g.system == g.system.iloc[0]) & (seed_key(g) == seed_key(g).iloc[0])]
        out[g.index] = M.metric("moverscore").items(
            [refs[i] for i in g.index], [hyps[i] for i in g.index], model=model,
            idf_texts=[refs[i] for i in first_table.index])
    return out



def corpus_stat(metric: str, preds: pd.DataFrame) -> tuple[np.ndarray, uncertainty.Statistic]:
    """Per-item sufficient statistics and statistic of a corpus metric for one table."""
    if metric not in CORPUS_METRICS:
        raise ValueError(f"unknown corpus metric {metric!r}; known: {list(CORPUS_METRICS)}")
    m = M.metric(metric)
    return m.statistics(*_inputs(preds)[m.inputs], **_options(metric, None, None))


def _seed_tables(g: pd.DataFrame) -> list[pd.DataFrame]:
    """One table per seed of a (system, split) group, rows sorted by id (paired across seeds)."""
    tables = [t.sort_values("id", kind="stable").reset_index(drop=True)
              for _, t in g.groupby(seed_key(g), sort=True)]
    ids = tables[0]["id"].tolist()
    if any(t["id"].tolist() != ids for t in tables[1:]):
        raise ValueError(f"{g.system.iloc[0]} / {g.split.iloc[0]}: seeds predicted different items")
    return tables


def _seed_mean_stat(metric: str, tables: Sequence[pd.DataFrame], reps: int = 1):
    """Stats of several seeds side by side; statistic = mean over seeds of the metric.
    ``reps`` repeats the blocks (paired tests tile a one-seed system to the other's width)."""
    parts = [corpus_stat(metric, t) for t in tables] * reps
    widths = np.cumsum([0] + [m.shape[1] for m, _ in parts])
    mat = np.hstack([m for m, _ in parts])

    def fn(s: np.ndarray) -> np.ndarray:
        return np.mean([f(s[:, a:b]) for (_, f), a, b in zip(parts, widths[:-1], widths[1:],
                                                             strict=True)], axis=0)

    return mat, fn


# --------------------------------------------------------------------------- CIs and tests


def per_seed_table(preds: pd.DataFrame, items: pd.DataFrame,
                   metrics: Sequence[str] = TABLE_METRICS) -> pd.DataFrame:
    """Point value of every metric per (split, system, seed): the per-seed records."""
    rows = []
    it = items[items.metric.isin(metrics)]
    for (split, system, seed, metric), g in it.groupby(
            [it.split, it.system, it.seed.fillna(-1), it.metric], sort=False):
        rows.append({"split": split, "system": system, "seed": seed, "metric": metric,
                     "value": float(g.value.mean())})
    for (split, system), g in preds.groupby(["split", "system"], sort=False):
        for t in _seed_tables(g):
            for metric in [m for m in CORPUS_METRICS if m in metrics]:
                mat, fn = corpus_stat(metric, t)
                rows.append({"split": split, "system": system,
                             "seed": -1 if pd.isna(t.seed.iloc[0]) else int(t.seed.iloc[0]),
                             "metric": metric, "value": float(fn(mat.sum(0)[None])[0])})
    out = pd.DataFrame(rows)
    out["seed"] = pd.array([None if s == -1 else int(s) for s in out.seed], dtype="Int64")
    return out


def protocol_items(items: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """:func:`item_scores` rows in the protocol's layout (item = id, cluster = question)."""
    return items[items.metric.isin(metrics)].rename(columns={"id": "item",
                                                             "question": "cluster"})


def headline_per_split(preds: pd.DataFrame, items: pd.DataFrame,
                   designs: Mapping[str, P.Design], metrics: Sequence[str] = TABLE_METRICS
                   ) -> pd.DataFrame:
    """Mean and 95 % interval of every (split, system, metric) under its split's design;
    corpus metrics from their sufficient statistics, seeds side by side."""
    rows = []
    it = protocol_items(items, metrics)
    for split, g in it.groupby("split", sort=False):
        rows += P.headline_table(g, designs[split]).to_dict("records")
    for (split, system), g in preds.groupby(["split", "system"], sort=False):
        tables = _seed_tables(g)
        frame = pd.DataFrame({"cluster": tables[0].question.to_numpy()})
        for metric in [m for m in CORPUS_METRICS if m in metrics]:
            est = P.estimate(frame, designs[split], corpus=_seed_mean_stat(metric, tables))
            rows.append({"split": split, "system": system, "metric": metric, **est})
    out = pd.DataFrame(rows)
    spread = per_seed_table(preds, items, metrics).groupby(["split", "system", "metric"]).value
    out = out.merge(spread.agg(n_seeds="size", seed_std=lambda v: float(np.std(v, ddof=0)))
                    .reset_index(), on=["split", "system", "metric"], how="left")
    return out[["split", "system", "metric", "mean", "ci_low", "ci_high", "n_items",
                "n_units", "n_seeds", "seed_std", "method", "estimand"]]


def paired_per_split(preds: pd.DataFrame, items: pd.DataFrame, reference: str,
                 designs: Mapping[str, P.Design], metrics: Sequence[str] = TABLE_METRICS,
                 systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Systems minus ``reference`` per split and metric, on the items both scored."""
    rows = []
    it = protocol_items(items, metrics)
    it = it[it.split.isin(list(designs))]
    for split, g in it.groupby("split", sort=False):
        rows += P.paired_table(g, reference, designs[split], systems=systems).to_dict("records")
    for split, g in preds[preds.split.isin(list(designs))].groupby("split", sort=False):
        if reference not in set(g.system):
            continue
        ref_tables = _seed_tables(g[g.system == reference])
        for system, gs in g[g.system != reference].groupby("system", sort=False):
            if systems is not None and system not in systems:
                continue
            tables = _seed_tables(gs)
            if tables[0]["id"].tolist() != ref_tables[0]["id"].tolist():
                continue  # a system run on a subset of the split (e.g. unseen questions only)
            frame = pd.DataFrame({"cluster": tables[0].question.to_numpy()})
            for metric in [m for m in CORPUS_METRICS if m in metrics]:
                a, fn = _seed_mean_stat(metric, tables, reps=len(ref_tables))
                b, _ = _seed_mean_stat(metric, ref_tables, reps=len(tables))
                rows.append({"split": split, "metric": metric, "system": system,
                             "reference": reference,
                             **P.compare(frame, frame, designs[split], corpus=(a, b, fn))})
    return pd.DataFrame(rows)



def question_ids(questions: Sequence[str]) -> dict[str, str]:
    """Short stable ids ``q01, q02, ...`` for question texts (sorted), for ``subset``."""
    uniq = sorted(set(questions))
    width = max(2, len(str(len(uniq))))
    return {q: f"q{i + 1:0{width}d}" for i, q in enumerate(uniq)}


def per_question_table(items: pd.DataFrame, metrics: Sequence[str] = ("accuracy", "mse"),
                       n_resamples: int = 1000, seed: int = 0,
                       ids: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Per (split, system, question): mean of per-item metrics with an interval for new
    answers to *that* question; ``ids`` (question text -> id) of all splits keep a
    question's id the same in every table."""
    it = protocol_items(items, metrics).assign(question=lambda d: d.cluster)
    design = ANSWERS.but(n_resamples=n_resamples, seed=seed,
                         estimand="new answers to this question")
    ci = P.headline_table(it, design, by=("split", "system", "question", "metric"))
    ids = ids if ids is not None else question_ids(items.question)
    ci.insert(3, "question_id", ci.question.map(ids))
    return ci


def new_questions_table(items: pd.DataFrame, splits: Sequence[str],
                        metrics: Sequence[str] = ("accuracy", "mse")) -> pd.DataFrame:
    """Mean metrics with the *new questions* estimand (t-interval over questions) on
    ``splits`` (those with at least :data:`FEW_QUESTIONS` questions)."""
    it = protocol_items(items, metrics)
    it = it[it.split.isin(list(splits))]
    return P.headline_table(it, QUESTIONS) if len(it) else pd.DataFrame()


# --------------------------------------------------------------------------- notebook 02


def bertscore_settings(language: str, model: str | None = None, num_layers: int | None = None,
                       lang: str | None = None) -> dict[str, Any]:
    """BERTScore keyword arguments; the rescaling language defaults to the data's language."""
    return {"model_type": model, "num_layers": num_layers, "lang": lang or language}
