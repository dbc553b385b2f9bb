"""Notebook 02's val choices, adjusted comparisons and feedback contrast, over evaluate's scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from saf_utils.saf.scores import (
    ANSWERS,
    FEW_QUESTIONS,
    LOWER_IS_BETTER,
    QUESTIONS,
    TABLE_METRICS,
    UNTABULATED_METRICS,
    collapse_identical_seeds,
    design_for,
    headline_per_split,
    item_scores,
    new_questions_table,
    paired_per_split,
    per_question_table,
    per_seed_table,
    protocol_items,
    question_ids,
    seed_key,
)
from saf_utils.statistics import conclusions as V
from saf_utils.statistics import protocol as P
from saf_utils.statistics import validation_choice


@dataclass
class Evaluation:
    """Everything :func:`evaluate` measured; :func:`record` writes it."""

    preds: pd.DataFrame
    items: pd.DataFrame
    designs: dict[str, P.Design]  # the headline design of each split
    headline: pd.DataFrame  # every split × system × metric under its design
    per_seed: pd.DataFrame
    reference: str  # strongest baseline on validation
    chosen: str  # val-chosen system (baselines and systems only)
    choice: validation_choice.Choice  # the validation table behind ``chosen``
    selection_metric: str
    comparisons: pd.DataFrame  # test splits: systems minus the reference, leads; adjusted
    new_questions: pd.DataFrame  # mean metrics, estimand "new questions" (enough questions)
    per_question: pd.DataFrame  # few-question splits: per question, item-level intervals
    few_question_splits: list[str]

    role_of: dict[str, str]  # system -> role (the registry's), every system of ``preds``

    def roles(self) -> dict[str, str]:
        return dict(self.role_of)


#: The pre-specified primary comparison of notebook 02 (the val-chosen system minus the
#: val-strongest baseline); ``evaluate`` fills in the systems.
PRIMARY = {"split": "test_unseen_answers", "metric": "accuracy"}


def choose_on_validation(headline: pd.DataFrame, role_of: Mapping[str, str],
                         metric: str = "macro_f1",
                         allowed: Sequence[str] = ("baseline", "system"),
                         split: str = "validation") -> validation_choice.Choice:
    """The system with role in ``allowed`` and the best validation ``metric``."""
    v = headline[(headline.split == split) & (headline.metric == metric)]
    names = {s: role_of[s] for s in dict.fromkeys(v.system)}
    return validation_choice.choose_from(
        v.rename(columns={"mean": "value"})[["system", "value"]], metric, names, allowed, split,
        metric in LOWER_IS_BETTER)


def evaluate(preds: pd.DataFrame, role_of: Mapping[str, str],
             bertscore_kwargs: Mapping[str, Any] | None = None,
             moverscore_model: Any = None, embedding_metrics: bool = True,
             selection_metric: str = "macro_f1", n_resamples: int = 1000, seed: int = 0
             ) -> Evaluation:
    """Per-item scores, headline intervals, the val choices and the adjusted comparisons.

    The reference is the baseline with the best validation ``selection_metric``, the chosen
    system the best baseline-or-system. Comparisons on the test splits: eligible systems
    minus the reference, each leader minus its runner-up, and the chosen system minus the
    reference for new questions where there are enough; Holm-adjusted except :data:`PRIMARY`."""
    preds = collapse_identical_seeds(preds)
    metrics = (*TABLE_METRICS, *UNTABULATED_METRICS)
    items = item_scores(preds, bertscore_kwargs, moverscore_model, embedding_metrics)
    n_q = preds.groupby("split").question.nunique()
    designs = {s: design_for(int(n_q[s]), n_resamples, seed) for s in n_q.index}
    headline = headline_per_split(preds, items, designs, metrics)
    roles = {s: role_of[s] for s in dict.fromkeys(preds.system)}
    reference = choose_on_validation(headline, roles, selection_metric, ("baseline",))
    choice = choose_on_validation(headline, roles, selection_metric)
    ref, chosen = reference.per_fold[None], choice.per_fold[None]
    eligible = [s for s in roles if roles[s] in validation_choice.ELIGIBLE]
    tests = {s: d for s, d in designs.items() if s.startswith("test")}
    frames = [paired_per_split(preds, items, ref, tests, TABLE_METRICS, eligible)]
    leads = V.leaders(headline[headline.split.isin(list(tests))
                               & headline.metric.isin(TABLE_METRICS)], roles, LOWER_IS_BETTER)
    for (split, metric), (top, runner) in leads.items():
        if ref not in (top, runner):
            frames.append(paired_per_split(preds, items, runner, {split: tests[split]},
                                          (metric,), [top]))
    many = [s for s in tests if n_q[s] >= FEW_QUESTIONS]
    if chosen != ref and many:
        it = protocol_items(items, ("accuracy",))
        it = it[it.split.isin(many) & it.system.isin([chosen, ref])]
        frames.append(P.paired_table(it, ref, QUESTIONS.but(n_resamples=n_resamples,
                                                                seed=seed)))
    comp = pd.concat([f for f in frames if len(f)], ignore_index=True)
    comp = comp.drop_duplicates(["split", "metric", "system", "reference", "estimand"])
    primary = ({**PRIMARY, "system": chosen, "reference": ref,
                "estimand": designs.get(PRIMARY["split"], ANSWERS).estimand}
               if chosen != ref and PRIMARY["split"] in designs else None)
    comp = P.adjust(comp, primary)
    few = [s for s in n_q.index if n_q[s] < FEW_QUESTIONS]
    per_question = (per_question_table(items[items.split.isin(few)], ("accuracy", "mse"),
                                          n_resamples, seed, question_ids(items.question))
                    if few else pd.DataFrame())  # ids over all splits, as in 05
    return Evaluation(preds, items, designs, headline, per_seed_table(preds, items, metrics),
                      ref, chosen, choice, selection_metric, comp,
                      new_questions_table(items, many), per_question, few, roles)


#: The feedback metrics of :func:`feedback_contrast` (the label metrics are the same on
#: both sides of its retrieval contrast).
FEEDBACK_METRICS = ("sacrebleu", "chrf", "rouge2", "meteor")


def feedback_contrast(ev: Evaluation, train: pd.DataFrame, evals: Mapping[str, pd.DataFrame],
                      system: str, twin: str, split: str = "test_unseen_questions",
                      baseline: str = "majority", encoder: Any = None
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``system`` on ``split`` against the same labels with retrieved feedback (``twin``:
    its labels, feedback of the nearest question), and against ``baseline``:
    the headline of the three and the paired differences (minus the twin on the feedback
    metrics, where only the feedback differs; minus the baseline on all)."""
    from saf_utils.saf.baselines import retrieved_feedback_table

    mine = ev.preds[(ev.preds.system == system) & (ev.preds.split == split)]
    gold = evals[split].set_index("id")
    twins = []
    for _, t in mine.groupby(seed_key(mine), sort=True):
        t = t.set_index("id").loc[gold.index]
        seed = None if pd.isna(t.seed.iloc[0]) else int(t.seed.iloc[0])
        twins.append(retrieved_feedback_table(
            train, gold.reset_index(), t.pred_label.tolist(), twin, encoder,
            scores=t.pred_score.astype(float).tolist(), seed=seed,
            unseen_feedback="nearest_question"))
    base = (ev.preds[(ev.preds.system == baseline) & (ev.preds.split == split)]
            if baseline != system else mine.iloc[:0])
    preds = collapse_identical_seeds(pd.concat([mine, *twins, base], ignore_index=True))
    items = item_scores(preds, embedding_metrics=False)
    metrics = ("accuracy", "macro_f1", *FEEDBACK_METRICS)
    designs = {split: ev.designs[split]}
    head = headline_per_split(preds, items, designs, metrics)
    paired = pd.concat([
        paired_per_split(preds, items, twin, designs, FEEDBACK_METRICS, [system]),
        *([paired_per_split(preds, items, baseline, designs, metrics, [system])]
          if len(base) else [])], ignore_index=True)
    return head, paired
