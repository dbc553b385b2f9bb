"""What 03 and 04 record and conclude, each in one call (06 records in its cells). ``rec`` is a
:class:`notebook_reports.records.Recorder`; ``md`` the notebooks' Markdown escaping
(passed in: :mod:`notebook_reports` is a layer above the task packages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat import reply_evaluation as REV
from saf_utils.argscichat import selection_evaluation as EV
from saf_utils.argscichat.experiments import ReplyRun
from saf_utils.argscichat.replies import DATASET as GEN_DATASET
from saf_utils.argscichat.replies import FLOOR
from saf_utils.argscichat.replies import TASK as GEN_TASK
from saf_utils.statistics import protocol as P
from saf_utils.text import listing

Markdown = Callable[..., str]


# --------------------------------------------------------------------------- 03

def record_selection(rec: Any, overview: pd.DataFrame, an: EV.Analysis,
                     tuning: pd.DataFrame | None = None) -> None:
    """Everything 03 records: scored and skipped queries per fold and split, per-fold (and
    per-seed) Fact-F1, the headline, comparisons, val choices and grids, per-item scores."""
    for r in overview.itertuples():
        for metric, value in (("n_scored_queries", r.scored),
                              ("n_skipped_queries", r.skipped_no_gold)):
            rec.add(EV.TASK, EV.DATASET, r.split, "data", metric, value, fold=r.fold,
                    kind="analysis")
    items = an.items
    seeded = set(items[items.seed.notna()].system)
    for r in P.fold_means(items, per_seed=True).itertuples():
        if r.system in seeded and pd.isna(r.seed):
            continue  # seeded systems: per (fold, seed); their fold mean is in the headline
        rec.add(EV.TASK, EV.DATASET, r.split, r.system, EV.METRIC, r.value, fold=int(r.fold),
                seed=None if pd.isna(r.seed) else int(r.seed), role=an.roles.get(r.system))
    notes = {s: EV.GOLD_HISTORY_NOTE for s, role in an.roles.items() if role == "gold_input"}
    for r in an.headline.itertuples():
        rec.add(EV.TASK, EV.DATASET, r.split, r.system, EV.METRIC, r.mean,
                role=an.roles.get(r.system), ci_low=r.ci_low, ci_high=r.ci_high,
                method=r.method, estimand=r.estimand, note=notes.get(r.system))
    P.record(rec, EV.TASK, EV.DATASET, comparisons=an.comparisons, roles=an.roles)
    P.record(rec, EV.TASK, EV.DATASET, choice=an.chosen, composite_name=EV.CHOSEN)
    for r in an.baseline.table[an.baseline.table.chosen].itertuples():
        rec.add(EV.TASK, EV.DATASET, "val", r.system, EV.METRIC, r.value, fold=int(r.fold),
                kind="tuning", subset="reference baseline", role="baseline")
    if tuning is not None:
        for r in tuning.itertuples():
            if np.isfinite(r.val_fact_f1):
                rec.add(EV.TASK, EV.DATASET, "val", r.system, EV.METRIC, r.val_fact_f1,
                        fold=int(r.fold), kind="tuning", subset=f"{r.param}={r.value}",
                        role=an.roles.get(r.system))
    rec.add_items(items[list(EV.ITEM_COLUMNS)])


def selection_conclusions(an: EV.Analysis, summary: pd.DataFrame, overview: pd.DataFrame,
                          seconds: float, md: Markdown) -> str:
    """03's conclusions as Markdown."""
    lines = [f"- {md(line)}" for line in EV.selection_sentences(an)]
    for oracle in [s for s in summary.index if an.roles.get(s) == "oracle"]:
        lines.append(f"- Oracle ceiling ({md(oracle, code=True)}, not comparable): "
                     f"{summary.loc[oracle, 'test']:.3f}.")
    test = overview[overview.split == "test"]
    lines.append(f"- Test queries skipped for lacking gold fact sentences: "
                 f"{int(test.skipped_no_gold.sum())} of {int(test.pairs.sum())}.")
    lines.append(f"- Notebook time: {seconds:.1f} s.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- 04

def stat_means(stats: pd.DataFrame) -> pd.DataFrame:
    """Output statistics per system and role: mean over folds of the seed means."""
    return (stats.groupby(["system", "role", "fold"]).mean(numeric_only=True)
            .groupby(["system", "role"]).mean().drop(columns="seed", errors="ignore"))


def record_generation(rec: Any, run: ReplyRun, items: pd.DataFrame, stats: pd.DataFrame,
                      an: REV.ReplyAnalysis, roles: dict[str, str]) -> None:
    """Everything 04 records: train losses and val grids, per-item scores, per-fold test
    means and output statistics, the val choice, the headline and the comparisons."""
    trained = run.logs[run.logs.seed.notna()] if "seed" in run.logs else run.logs.iloc[:0]
    if "train_loss" in trained:
        losses = trained.dropna(subset=["train_loss"]).rename(columns={"train_loss": "value"})
        rec.add_frame(losses.assign(role=losses.system.map(roles)), GEN_TASK, GEN_DATASET,
                      split="train", metric="train_loss")
    rec.add_frame(run.tuning.assign(role=run.tuning.system.map(roles)), GEN_TASK,
                  GEN_DATASET, split="val", kind="tuning")
    rec.add_items(items)
    seeded = set(items[items.seed.notna()].system)
    per_fold = P.fold_means(items[items.split == "test"], per_seed=True)
    rec.add_frame(per_fold[~(per_fold.system.isin(seeded) & per_fold.seed.isna())],
                  GEN_TASK, GEN_DATASET, split="test")
    rec.add_frame(stats.melt(id_vars=["system", "role", "fold", "seed"], var_name="metric"),
                  GEN_TASK, GEN_DATASET, split="test")
    P.record(rec, GEN_TASK, GEN_DATASET, choice=an.choice, composite_name=REV.CHOSEN)
    composite = an.test_items[an.test_items.system == REV.CHOSEN]
    rec.add_frame(P.fold_means(composite), GEN_TASK, GEN_DATASET, split="test")
    P.record(rec, GEN_TASK, GEN_DATASET, headline=an.headline, comparisons=an.comparisons)
    rec.add_frame(stat_means(stats).reset_index().melt(id_vars=["system", "role"],
                                                       var_name="metric"),
                  GEN_TASK, GEN_DATASET, split="test")


def generation_conclusions(an: REV.ReplyAnalysis, run: ReplyRun, metric_names: Sequence[str],
                           seconds: float, md: Markdown) -> str:
    """04's conclusions as Markdown."""
    floor_n = run.logs[run.logs.system == FLOOR].set_index("fold")["n"]
    floor = listing({f"fold {k}": v for k, v in floor_n.astype(int).items()})
    lines = [f"- Floor `{FLOOR}`: {md(floor)} words per fold, chosen on val."]
    lines += [f"- {md(line)}" for line in REV.reply_sentences(
        an, [m for m in ("content_f1", "bertscore_f1") if m in metric_names])]
    lines.append(f"- Notebook time: {seconds:.0f} s.")
    return "\n".join(lines)
