"""Scoring and analysing ArgSciChat replies: per-item scores, output statistics, the
per-fold choice on validation (the composite ``val_chosen``), headline intervals and
comparisons under the ArgSciChat design
(:data:`saf_utils.argscichat.selection_evaluation.DESIGN`), and 04's conclusions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from saf_utils.argscichat import generation as RG
from saf_utils.argscichat import selection_evaluation as EV
from saf_utils.argscichat.replies import (
    DATASET,
    FLOOR,
    REPLY_SYSTEMS,
    TASK,
    seed_column,
)
from saf_utils.argscichat.selection_evaluation import DESIGN
from saf_utils.registry import ELIGIBLE
from saf_utils.statistics import conclusions as V
from saf_utils.statistics import protocol as P
from saf_utils.statistics import validation_choice

# --------------------------------------------------------------------------- scoring

def score_predictions(preds: pd.DataFrame, splits: Sequence[str] = ("test",),
                      embedding: bool = False, bertscore_model: str | None = None,
                      bertscore_layers: int | None = None,
                      moverscore_model: str | None = None) -> pd.DataFrame:
    """Per-item scores in the Recorder's items layout (+ ``role``), ``cluster`` = paper id;
    all systems of a (fold, split) are scored in one call (one IDF, each text embedded once)."""
    from saf_utils.metrics import metric

    sub = preds[preds.split.isin(splits)].reset_index(drop=True)
    if sub.empty:
        raise ValueError(f"score_predictions: no predictions for split(s) {list(splits)}")
    scores = pd.DataFrame({m: metric(m).items(list(sub.gold), list(sub.output))
                           for m in RG.OVERLAP_METRICS})
    if embedding:
        for _, g in sub.groupby(["fold", "split"], sort=False):
            refs, hyps = list(g.gold), list(g.output)
            scores.loc[g.index, "bertscore_f1"] = metric("bertscore_f1").items(
                refs, hyps, model_type=bertscore_model, num_layers=bertscore_layers)
            scores.loc[g.index, "moverscore"] = metric("moverscore").items(
                refs, hyps, model=moverscore_model,
                idf_texts=g.drop_duplicates("pair_id").gold.tolist())
    keys = ["system", "role", "fold", "seed", "split"]
    wide = pd.concat([sub[keys + ["pair_id", "paper_id"]], scores], axis=1)
    out = wide.melt(id_vars=keys + ["pair_id", "paper_id"], var_name="metric",
                    value_name="value").rename(columns={"pair_id": "item",
                                                        "paper_id": "cluster"})
    out.insert(0, "dataset", DATASET)
    out.insert(0, "task", TASK)
    out["seed"] = seed_column(out.seed)
    out["value"] = out.value.astype(float)
    return out


def output_stat_table(preds: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Output statistics per system, fold and seed."""
    from saf_utils.metrics import metric, output_stats

    rows = []
    sub = preds[preds.split == split]
    for (system, role, fold, seed), g in sub.groupby(["system", "role", "fold", "seed"],
                                                     dropna=False, sort=False):
        rows.append({"system": system, "role": role, "fold": fold,
                     "seed": None if pd.isna(seed) else int(seed),
                     **output_stats(list(g.output), list(g.gold)),
                     "empty_share": metric("empty_share").score(list(g.gold),
                                                                list(g.output)).value})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["seed"] = seed_column(out.seed)
    return out


# --------------------------------------------------------------------------- analysis

CHOSEN = "val_chosen"
PRIMARY_METRIC = "content_f1"  # 04's pre-specified primary comparison: val_chosen - FLOOR


@dataclass
class ReplyAnalysis:
    """04's conclusions: the per-fold choice, test items with the composite, the headline
    under the ArgSciChat design and the adjusted comparisons to the floor."""

    choice: validation_choice.Choice
    test_items: pd.DataFrame
    headline: pd.DataFrame
    comparisons: pd.DataFrame


def analyse_replies(items: pd.DataFrame, best_metric: str = PRIMARY_METRIC,
            design: P.Design = DESIGN, eligible: Sequence[str] = ELIGIBLE) -> ReplyAnalysis:
    """Choose per fold on that fold's val (``best_metric``; oracles and probes never), build
    the composite ``val_chosen``, estimate every test metric and compare every system with
    the floor. Primary: ``val_chosen`` - ``constant_frequent`` on content-word F1; the rest
    Holm-adjusted."""
    roles_ = items.drop_duplicates("system").set_index("system").role.to_dict()
    order = {n: roles_[n] for n in REPLY_SYSTEMS if n in roles_}
    order.update({n: r for n, r in roles_.items() if n not in order})
    choice = validation_choice.choose(items, best_metric, order, allowed=eligible)
    test = items[items.split == "test"]
    test_items = pd.concat([test, validation_choice.composite(test, choice, CHOSEN)],
                           ignore_index=True)
    headline = P.headline_table(test_items, design)
    roles_all = {**order, CHOSEN: test_items[test_items.system == CHOSEN].role.iloc[0]}
    comp, _ = EV.compare(test_items, headline, roles_all, FLOOR, design,
                         {"system": CHOSEN, "reference": FLOOR, "metric": PRIMARY_METRIC})
    return ReplyAnalysis(choice, test_items, headline, comp)


def comparison_tables(an: ReplyAnalysis, metrics: Sequence[str]
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two tables of 04's test section: every system minus the floor (system x metric)
    and each test leader minus its runner-up (one row per metric). Kept apart because a
    leader can also be compared with the floor, so one pivot would hold two cells."""
    c = an.comparisons
    if not len(c):
        return pd.DataFrame(), pd.DataFrame()
    c = c.assign(cell=[f"{x:+.3f} [{lo:+.3f}, {hi:+.3f}] p={p:.3f} (adj. {pa:.3f})"
                       for x, lo, hi, p, pa in zip(c["diff"], c.ci_low, c.ci_high,
                                                   c.p_value, c.p_adj, strict=True)])
    floor = c[c.reference == FLOOR]
    order = REPLY_SYSTEMS.order(floor.system.unique())
    vs_floor = (floor.pivot(index=["system", "role"], columns="metric", values="cell")
                .reindex(order, level="system")
                .reindex(columns=[m for m in metrics if m in set(floor.metric)]))
    leads = (c[(c.reference != FLOOR) & c.metric.isin(metrics)]
             .set_index("metric")[["system", "reference", "cell"]]
             .reindex([m for m in metrics if m in set(c.metric)]).dropna(how="all"))
    return vs_floor, leads


def reply_sentences(an: ReplyAnalysis, metrics: Sequence[str] = (PRIMARY_METRIC, "bertscore_f1")
                ) -> list[str]:
    """Sentences from the tests: the primary comparison, then each readable system against
    the floor on ``metrics`` (Holm-adjusted) and the leaders."""
    c = an.comparisons
    if not len(c):
        return []
    shown = c[c.primary | (c.metric.isin(metrics) & c.role.isin(ELIGIBLE)
                           & (c.reference == FLOOR))]
    leads = {k: v for k, v in V.leaders(an.headline).items() if k[1] in metrics}
    return V.conclusions(c, shown, leads)
