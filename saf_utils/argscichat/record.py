"""What 03, 04 and 06 record and conclude, each in one call. ``rec`` is a
:class:`notebook_reports.records.Recorder`; ``md`` the notebooks' Markdown escaping
(passed in: :mod:`notebook_reports` is a layer above the task packages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    """Everything 03 records: per fold and split the scored and skipped queries
    (:func:`saf_utils.argscichat.experiments.data_overview`), then
    :func:`EV.record_selection_results`."""
    for r in overview.itertuples():
        for metric, value in (("n_scored_queries", r.scored),
                              ("n_skipped_queries", r.skipped_no_gold)):
            rec.add(EV.TASK, EV.DATASET, r.split, "data", metric, value, fold=r.fold,
                    kind="analysis")
    EV.record_selection_results(rec, an, tuning)


def selection_conclusions(an: EV.Analysis, summary: pd.DataFrame, overview: pd.DataFrame,
                          seconds: float, md: Markdown) -> str:
    """03's conclusions as Markdown: the tests' sentences, the oracle ceiling, the skipped
    test queries and the notebook's time."""
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
    means (seeded systems per seed), output statistics per fold and their means, the val
    choice and its composite, the headline and the comparisons."""
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
    """04's conclusions as Markdown: the floor's val-chosen word counts, the tests'
    sentences on content-word F1 and BERTScore, and the notebook's time."""
    floor_n = run.logs[run.logs.system == FLOOR].set_index("fold")["n"]
    floor = listing({f"fold {k}": v for k, v in floor_n.astype(int).items()})
    lines = [f"- Floor `{FLOOR}`: {md(floor)} words per fold, chosen on val."]
    lines += [f"- {md(line)}" for line in REV.reply_sentences(
        an, [m for m in ("content_f1", "bertscore_f1") if m in metric_names])]
    lines.append(f"- Notebook time: {seconds:.0f} s.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- 06

@dataclass
class ErrorAnalysis:
    """What 06 found, collected cell by cell and recorded in one call: grouped Fact-F1 per
    grouping column, the val-chosen selectors' scored test queries, per reply system its
    error statistics and grouped scores."""

    selection: dict[str, tuple[str, pd.DataFrame]] = field(default_factory=dict)
    chosen: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    roles: dict[str, str] = field(default_factory=dict)
    generation: dict[str, pd.DataFrame] = field(default_factory=dict)
    score: str | None = None

    @property
    def failures(self) -> pd.DataFrame:
        """The val-chosen selectors' test queries with Fact-F1 0."""
        return self.chosen[self.chosen.fact_f1 == 0]


def record_errors(rec: Any, ea: ErrorAnalysis) -> None:
    """Everything 06 records (kind analysis, test): Fact-F1 per group, the share of the
    val-chosen selectors' queries without a gold sentence, the reply error statistics and
    ``ea.score`` per group."""
    for by, (name, t) in ea.selection.items():
        for r in t.itertuples():
            rec.add(EV.TASK, EV.DATASET, "test", r.system, "fact_f1", r.fact_f1,
                    kind="analysis", subset=f"{name}={getattr(r, by)}")
    if ea.chosen is not None:
        rec.add(EV.TASK, EV.DATASET, "test", "val_chosen", "zero_fact_f1_share",
                len(ea.failures) / len(ea.chosen), kind="analysis", subset="all")
    for system, row in (ea.summary.iterrows() if ea.summary is not None else ()):
        for metric, value in row.drop("outputs").items():
            rec.add(GEN_TASK, GEN_DATASET, "test", system, metric, value, kind="analysis",
                    subset="all", role=ea.roles[system])
    for by, t in ea.generation.items():
        for r in t.itertuples():
            rec.add(GEN_TASK, GEN_DATASET, "test", r.system, ea.score, getattr(r, ea.score),
                    kind="analysis", subset=f"{by.replace('_bucket', '')}={getattr(r, by)}")


def error_conclusions(ea: ErrorAnalysis, chosen_selectors: Sequence[str],
                      order: Sequence[str], md: Markdown) -> str:
    """06's conclusions as Markdown: where the val-chosen selectors fail by turn, the most
    generic / empty / copying reply systems, and ``ea.score`` when the selector found a
    gold sentence minus when it missed."""
    turn = ea.selection["turn_bucket"][1]
    turn = turn[turn.system.isin(set(chosen_selectors))].groupby("turn_bucket").fact_f1.mean()
    lines = [f"- Fact selection: the val-chosen selector(s) score Fact-F1 {turn.max():.3f} at "
             f"turn {md(turn.idxmax())} and {turn.min():.3f} at turn {md(turn.idxmin())}; "
             f"{len(ea.failures)} of {len(ea.chosen)} scored test queries get no gold "
             "sentence."]
    worst = ea.summary.drop(columns="outputs")
    lines.append(f"- Generation: most generic outputs "
                 f"{md(worst.generic_share.idxmax(), code=True)} "
                 f"({worst.generic_share.max():.0%} of its replies shared with another "
                 f"query); most empty {md(worst.empty_share.idxmax(), code=True)} "
                 f"({worst.empty_share.max():.0%}); most copied from the paper "
                 f"{md(worst.paper_bigram_share.idxmax(), code=True)} "
                 f"({worst.paper_bigram_share.max():.0%} of bigrams); mean gold reply "
                 f"{worst.gold_words.mean():.1f} words.")
    if "selection" in ea.generation:
        by_sel = ea.generation["selection"].pivot(index="system", columns="selection",
                                                  values=ea.score)
        if {"found gold", "missed gold"} <= set(by_sel.columns):
            gap = (by_sel["found gold"] - by_sel["missed gold"]).dropna()
            lines.append(f"- {md(ea.score)} when the selector found a gold sentence minus "
                         "when it missed: " + ", ".join(
                             f"{md(s, code=True)} {v:+.3f}" for s, v in
                             gap.reindex([s for s in order if s in gap.index]).items()))
    return "\n".join(lines)
