"""Evaluation of ArgSciChat fact selections on top of :mod:`saf_utils.statistics.protocol`:
the official aggregation (Fact-F1 per query, mean per fold, mean over folds), papers as the
sampled unit (:data:`DESIGN`), choices per fold on that fold's val only, and
``val_chosen`` minus ``val_best_baseline`` as the one primary comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from saf_utils.statistics import conclusions as V
from saf_utils.statistics import protocol as P
from saf_utils.statistics import validation_choice

TASK, DATASET, METRIC = "argscichat_fact_selection", "argscichat", "fact_f1"
ITEM_COLUMNS = ("task", "dataset", "split", "system", "metric", "item", "cluster", "value",
                "seed", "fold")
DESIGN = P.Design("papers within folds", "cluster", strata="fold",
                  estimand="new papers (mean over folds)")
CHOSEN, BASELINE = "val_chosen", "val_best_baseline"
GOLD_HISTORY_NOTE = "reads earlier turns' gold facts"


def fact_f1_table(preds: pd.DataFrame, splits: Sequence[str] = ("val", "test")) -> pd.DataFrame:
    """Per-item Fact-F1 rows (+ ``role``) of the pairs with gold fact sentences."""
    need = {"fold", "split", "pair_id", "paper_id", "system", "seed", "fact_f1"}
    missing = sorted(need - set(preds.columns))
    if missing:
        raise ValueError(f"fact_f1_table: predictions lack column(s) {missing}")
    p = preds[preds.split.isin(splits) & preds.fact_f1.notna()]
    out = pd.DataFrame({
        "task": TASK, "dataset": DATASET, "split": p.split.to_numpy(),
        "system": p.system.to_numpy(), "metric": METRIC, "item": p.pair_id.to_numpy(),
        "cluster": p.paper_id.astype(str).to_numpy(), "value": p.fact_f1.astype(float).to_numpy(),
        "seed": pd.array([None if pd.isna(s) else int(s) for s in p.seed], dtype="Int64"),
        "fold": p.fold.astype(int).to_numpy(),
    })
    if "role" in p:
        out["role"] = p.role.to_numpy()
    return out.reset_index(drop=True)


@dataclass
class Analysis:
    """Everything 03 concludes: choices, composites, headline and comparisons."""

    items: pd.DataFrame  # with the composites
    roles: dict[str, str]
    chosen: validation_choice.Choice
    baseline: validation_choice.Choice
    headline: pd.DataFrame  # val and test, per system
    comparisons: pd.DataFrame  # adjusted; the primary marked
    leads: dict

    def primary(self) -> pd.Series:
        return self.comparisons[self.comparisons.primary].iloc[0]


def analyse_selection(items: pd.DataFrame, roles: Mapping[str, str],
            ablations: Mapping[str, str] | None = None, design: P.Design = DESIGN) -> Analysis:
    """Choose per fold on val, build the composites, estimate and compare on test: every
    system minus ``val_best_baseline``, each ablation minus its full system (``ablations``)
    and the test leader minus the runner-up."""
    roles = dict(roles)
    chosen = validation_choice.choose(items, METRIC, roles)
    baseline = validation_choice.choose(items, METRIC, roles, allowed=("baseline",))
    all_items = pd.concat([items, validation_choice.composite(items, chosen, CHOSEN),
                           validation_choice.composite(items, baseline, BASELINE)
                           .assign(role="baseline")],
                          ignore_index=True)
    roles.update({CHOSEN: "system", BASELINE: "baseline"})
    headline = P.headline_table(all_items, design)
    test = all_items[all_items.split == "test"]
    frames = [P.paired_table(test[test.system.isin([abl, full])], full, design)
              for abl, full in (ablations or {}).items() if {abl, full} <= set(test.system)]
    comp, leads = compare(test, headline, roles, BASELINE, design, {
        "split": "test", "system": CHOSEN, "reference": BASELINE, "metric": METRIC}, frames)
    return Analysis(all_items, roles, chosen, baseline, headline, comp, leads)


def compare(test: pd.DataFrame, headline: pd.DataFrame, roles: Mapping[str, str],
            reference: str, design: P.Design, primary: Mapping[str, str],
            frames: Sequence[pd.DataFrame] = ()) -> tuple[pd.DataFrame, dict]:
    """The test comparisons of 03 and 04: every system minus ``reference``, then ``frames``
    (e.g. ablations), then each test leader minus its runner-up (neither the reference);
    Holm-adjusted with ``primary`` marked, with each system's role; and the leaders."""
    first = [P.paired_table(test, reference, design)] if reference in set(test.system) else []
    frames = first + list(frames)
    leads = V.leaders(headline[headline.split == "test"], roles)
    for (_split, metric), (top, runner) in leads.items():
        if reference not in (top, runner):
            pair = test[test.system.isin([top, runner]) & (test.metric == metric)]
            frames.append(P.paired_table(pair, runner, design, systems=[top]))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return P.adjust(pd.DataFrame(columns=["split", "metric", "system", "reference",
                                              "p_value"])), leads
    comp = pd.concat(frames, ignore_index=True).drop_duplicates(
        ["split", "metric", "system", "reference"])
    comp = P.adjust(comp, primary)
    comp["role"] = comp.system.map(roles)
    return comp, leads


def summary_table(an: Analysis) -> pd.DataFrame:
    """Per system: role, inputs, val and test mean [CI], per-fold test means, and the
    difference to ``val_best_baseline`` with CI, raw and adjusted p."""
    h = an.headline.set_index(["system", "split"])
    fm = P.fold_means(an.items)
    fm = fm[fm.split == "test"].pivot(index="system", columns="fold", values="value")
    diff = an.comparisons[an.comparisons.reference == BASELINE].set_index("system")
    rows = []
    for system in [s for s in an.roles if s in set(an.headline.system)]:
        t = h.loc[system].reindex(["val", "test"])  # a split without a row: NaN
        row = {"system": system, "role": an.roles[system],
               "inputs": GOLD_HISTORY_NOTE if an.roles[system] == "gold_input" else "",
               "val": t.at["val", "mean"], "test": t.at["test", "mean"],
               "ci_low": t.at["test", "ci_low"], "ci_high": t.at["test", "ci_high"]}
        if system in fm.index:
            row["std_folds"] = float(fm.loc[system].std(ddof=0))
            row.update({f"fold {f}": fm.loc[system, f] for f in fm.columns})
        if system in diff.index:
            d = diff.loc[system]
            row.update({f"minus {BASELINE}": d["diff"], "diff_low": d.ci_low,
                        "diff_high": d.ci_high, "p": d.p_value, "p_adj": d.p_adj})
        rows.append(row)
    return pd.DataFrame(rows).set_index("system")


def selection_sentences(an: Analysis) -> list[str]:
    """The notebook's conclusions from the tests, primary first, grouped by estimand."""
    return V.conclusions(an.comparisons, an.comparisons, an.leads)
