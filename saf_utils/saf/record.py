"""Records and conclusions of SAF notebook 02, through one call (:func:`record_and_conclude`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.registry import role_order
from saf_utils.saf import evaluation
from saf_utils.saf import scores as EV
from saf_utils.saf.context import UNSEEN_QUESTIONS
from saf_utils.saf.cross_encoder_jobs import CE_SYSTEM, CrossEncoderRun, stacking_choice
from saf_utils.saf.experiments import SAFRun
from saf_utils.saf.systems import STACKED_SYSTEM
from saf_utils.statistics import conclusions as V
from saf_utils.statistics import protocol as P

TASK = "saf"

def cross_encoder_notes(ce: CrossEncoderRun, headline: pd.DataFrame,
                        metric: str = "macro_f1") -> list[str]:
    """Sentences for the notebook's conclusions: the setting chosen on validation, whether stacking
    won there, the unseen-question CV, and the cost (time per seed, peak memory)."""
    stack = stacking_choice(headline, metric, STACKED_SYSTEM)
    vals = stack.table.set_index("system").value
    seeds = ce.logs[ce.logs.job.isin(["grid", "seed"])]
    first = ce.grid.iloc[ce.chosen_row]
    per_seed = [float(first.epochs) / ce.grid.epochs.max()
                * float(seeds[(seeds.job == "grid") & (seeds.system == first.system)]
                        .train_seconds.iloc[0]),
                *seeds[seeds.job == "seed"].train_seconds.astype(float)]
    cv = ce.grouped_cv.iloc[0]
    return [
        "cross_encoder: chosen on validation (" + ce.selection + "): "
        + ", ".join(f"{k} {v}" for k, v in ce.config.items()) + ".",
        f"Stacking chosen on validation ({metric}): `{stack.per_fold[None]}` "
        f"(feature_clf {vals.get('feature_clf', float('nan')):.3f}, feature_clf:stacked "
        f"{vals.get(STACKED_SYSTEM, float('nan')):.3f}).",
        f"cross_encoder unseen-question path, {cv.protocol} on train: accuracy "
        f"{cv.accuracy:.3f}, macro-F1 {cv.macro_f1:.3f}.",
        f"Cost: training time per seed {np.mean(per_seed):.0f} s (first seed: its share of "
        f"the grid run's epochs), all {len(ce.logs)} cross-encoder jobs "
        f"{ce.logs.seconds_total.sum():.0f} s; peak resident memory "
        f"{ce.logs.peak_rss_mb.max():.0f} MiB (process lifetime)"
        + (f", peak GPU memory {ce.logs.peak_cuda_mb.max():.0f} MiB"
           if "peak_cuda_mb" in ce.logs else "") + ".",
    ]


def conclusions(ev: evaluation.Evaluation) -> list[str]:
    """Sentences from the tests, the primary comparison first, grouped by estimand."""
    c, lower, shown_metrics = ev.comparisons, EV.LOWER_IS_BETTER, ("accuracy", "macro_f1",
                                                                   "sacrebleu")
    out = [] if c.primary.any() else [
        f"The val-chosen system `{ev.chosen}` is the strongest baseline itself: there is no "
        "primary comparison."]
    shown = c[c.primary | ((c.system == ev.chosen) & (c.reference == ev.reference)
                           & c.metric.isin(shown_metrics))]
    h = ev.headline[ev.headline.split.isin(c.split.unique())]
    leads = {k: v for k, v in V.leaders(h, ev.roles(), lower).items()
             if k[1] in shown_metrics}
    return out + V.conclusions(c, shown, leads, lower, split_prefix=True)


def _write_evaluation(rec: Any, ev: evaluation.Evaluation, dataset: str) -> None:
    """Headline, per-seed values, the val choice and reference, comparisons, *new
    questions* intervals and per-question rows of few-question splits."""
    roles = ev.roles()
    P.record(rec, TASK, dataset, headline=ev.headline, roles=roles)
    seeded = ev.per_seed[ev.per_seed.seed.notna()]
    rec.add_frame(seeded.assign(role=seeded.system.map(ev.role_of)), TASK, dataset)
    P.record(rec, TASK, dataset, comparisons=ev.comparisons, choice=ev.choice, roles=roles)
    val = ev.choice.table.set_index("system").value
    if ev.reference in val.index:
        rec.add(TASK, dataset, ev.choice.split, ev.reference, ev.selection_metric,
                val[ev.reference], kind="tuning", subset="reference baseline", role="baseline")
    for table, subset in ((ev.new_questions, None), (ev.per_question, "question_id")):
        if len(table):
            rec.add_frame(_analysis(table, ev.role_of).assign(
                subset=table[subset] if subset else "new questions"), TASK, dataset)


def _analysis(table: pd.DataFrame, roles: Any) -> pd.DataFrame:
    """A table of means with intervals as records of kind analysis, roles looked up."""
    return table.assign(value=table["mean"], kind="analysis", role=table.system.map(roles))


def _record_grid(rec: Any, dataset: str, split: str, system: str, table: pd.DataFrame,
                 metrics: Sequence[str], subset: Any) -> None:
    """One tuning record per row of ``table`` and metric; ``subset(row)`` names the row."""
    for r in table.itertuples():
        for metric in metrics:
            rec.add(TASK, dataset, split, system, metric, getattr(r, metric), kind="tuning",
                    subset=subset(r), role="system")


def _record_unseen(rec: Any, dataset: str, run: SAFRun) -> None:
    """Each system's unseen-question CV on train, the one-SE rule's choice
    (:func:`saf_utils.statistics.protocol.chosen_for`), its nested regret and the feedback
    choice."""
    choice = run.unseen_choice
    for r in run.unseen_cv.itertuples():
        rec.add(TASK, dataset, "train", r.system, "macro_f1", r.macro_f1, kind="tuning",
                subset=("loqo unseen-question path" if r.protocol == "leave one question out"
                        else f"{r.protocol} unseen-question path"), role=r.role)
    rule = run.unseen_rule.rule if run.unseen_rule is not None else "one_se"
    how = (f"rule {rule} (of one_se, best_mean, stacking: the lowest regret nested over "
           f"held-out training questions), mean per-question {choice.metric}; validation "
           f"has no unseen questions")
    for r in choice.table.itertuples():
        rec.add(TASK, dataset, "train", r.system, choice.metric, r.value, kind="tuning",
                subset=P.chosen_for(UNSEEN_QUESTIONS) if r.chosen
                else "unseen-question candidate", role=r.role, method=how)
    if run.unseen_regret is not None and len(run.unseen_regret):
        for rule, g in run.unseen_regret.groupby("rule", sort=False):
            rec.add(TASK, dataset, "train", f"rule:{rule}", "regret_accuracy",
                    float(g.regret.mean()), kind="analysis", subset="unseen-question choice",
                    method="nested leave-one-question-out on train")
    fb = run.state.unseen_feedback
    if fb is not None:
        for r in fb.choice.table.itertuples():
            rec.add(TASK, dataset, "train", str(r.system), fb.choice.metric, r.value,
                    kind="tuning", subset="unseen-question feedback chosen" if r.chosen
                    else "unseen-question feedback candidate", role="system",
                    method="one-standard-error rule, leave-one-question-out on train, "
                    "labels predicted out of fold by criteria")


CONTRAST = "unseen-question feedback contrast"  # subset of :func:`record_contrast`'s records


def record_contrast(rec: Any, dataset: str, headline: pd.DataFrame, paired: pd.DataFrame
                    ) -> int:
    """:func:`saf_utils.saf.evaluation.feedback_contrast`'s tables (kind analysis): each
    system's mean and interval (subset :data:`CONTRAST`), each difference (``minus <ref>``)
    with its interval and its p Holm-adjusted within the contrast."""
    n = rec.add_frame(headline.rename(columns={"mean": "value"}), TASK, dataset,
                      kind="analysis", subset=CONTRAST)
    if len(paired):
        adj = P.adjust(paired)
        n += rec.add_frame(adj.assign(value=adj["diff"], subset="minus " + adj.reference),
                           TASK, dataset, kind="analysis")
        n += rec.add_frame(adj.assign(value=adj.p_adj, subset="p_adj vs " + adj.reference,
                                      ci_low=None, ci_high=None), TASK, dataset,
                           kind="analysis")
    return n


def contrast_sentence(headline: pd.DataFrame, paired: pd.DataFrame, system: str,
                      metrics: Sequence[str] = ("accuracy", "sacrebleu", "chrf", "meteor")
                      ) -> str:
    """The conclusions' sentence on :func:`record_contrast`'s tables: ``system``'s value
    and interval per metric, then each difference to a reference with its interval."""
    def cell(r: Any, value: str) -> str:
        return f"{r[value]:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]"

    h = headline[headline.system == system].set_index("metric")
    parts = [f"{m} {cell(h.loc[m], 'mean')}" for m in metrics if m in h.index]
    text = f"`{system}` on {headline.split.iloc[0]}: " + ", ".join(parts)
    for ref, g in paired[paired.system == system].groupby("reference", sort=False):
        d = g.set_index("metric")
        text += f"; minus `{ref}`: " + ", ".join(f"{m} {cell(d.loc[m], 'diff')}"
                                                 for m in metrics if m in d.index)
    return text + " (answers resampled within their question; conditional on them)."


def record_evaluation(rec: Any, ev: evaluation.Evaluation, dataset: str,
                      run: SAFRun | None = None) -> int:
    """Write the evaluation, the tuning grids and choices, and the per-item scores."""
    start = len(rec.records)
    _write_evaluation(rec, ev, dataset)
    if run is not None and run.state.feature_clf is not None:
        tuning = run.state.feature_clf.tuning
        _record_grid(rec, dataset, "validation", "feature_clf", tuning.grid,
                     ("accuracy", "macro_f1", "sacrebleu"),
                     lambda r: f"model={r.model} C={r.C} feedback={r.feedback}")
        _record_grid(rec, dataset, "train", "feature_clf", tuning.cv, ("accuracy", "macro_f1"),
                     lambda r: (f"loqo model={r.generic_model} features={r.feature_set} "
                                f"normalize={r.normalize_unseen} "
                                f"class_weight={r.generic_class_weight} C={r.generic_C}"))
    if run is not None and run.state.cross_encoder is not None:
        _record_grid(rec, dataset, "validation", CE_SYSTEM, run.state.cross_encoder.grid,
                     ("accuracy", "macro_f1"),
                     lambda r: (f"lr={r.learning_rate} epochs={r.epochs} order={r.order} "
                                f"question={r.include_question}"))
    if run is not None and len(run.unseen_cv):
        _record_unseen(rec, dataset, run)
    rec.add_items(recorder_items(ev.items, TASK, dataset))
    return len(rec.records) - start


def recorder_items(items: pd.DataFrame, task: str, dataset: str) -> pd.DataFrame:
    """:func:`item_scores` rows in the layout of ``Recorder.add_items`` (cluster = question)."""
    return pd.DataFrame({"task": task, "dataset": dataset, "split": items.split,
                         "system": items.system, "metric": items.metric, "item": items["id"],
                         "cluster": items.question, "value": items.value,
                         "seed": items.seed.astype(object).where(items.seed.notna(), None),
                         "fold": None})


# --------------------------------------------------------------------------- corpus statistics


def unseen_sentence(ev: evaluation.Evaluation, run: SAFRun, split: str = UNSEEN_QUESTIONS
                    ) -> str | None:
    """Accuracy per question of each non-oracle system on the few-question split, and the
    system chosen for unseen questions by CV on train; None without per-question rows."""
    pq = ev.per_question
    if not len(pq):
        return None
    acc = pq[(pq.split == split) & (pq.metric == "accuracy")]
    roles = ev.roles()
    per_q = "; ".join(f"`{s}` " + ", ".join(f"{r.question_id} {r.mean:.3f}"
                                            for r in acc[acc.system == s].itertuples())
                      for s in role_order(roles) if s in set(acc.system)
                      and roles[s] != "oracle")
    t = run.unseen_choice.table
    best = t.iloc[int(t.value.to_numpy().argmax())]
    chosen = t[t.chosen].iloc[0]
    rule = run.unseen_rule.rule if run.unseen_rule is not None else "one_se"
    text = (f"Unseen questions (conditional on these questions, no claim about new "
            f"questions): accuracy per question: {per_q}. Chosen for unseen questions by "
            f"the rule `{rule}` on leave-one-question-out {run.unseen_choice.metric}"
            f" over training questions: `{run.unseen_chosen}` ({chosen.value:.3f} ± "
            f"{chosen.se:.3f}; best mean `{best.system}` {best.value:.3f} ± {best.se:.3f}).")
    if run.unseen_regret is not None and len(run.unseen_regret):
        reg = run.unseen_regret.groupby("rule", sort=False).regret.mean()
        text += (" The rule was kept for the lowest regret nested over held-out training "
                 "questions (accuracy lost against the best candidate on that question): "
                 + ", ".join(f"{k} {v:.3f}" for k, v in reg.items()) + ".")
    fb = run.state.unseen_feedback
    if fb is not None:
        ft = fb.choice.table.set_index("system")
        text += (f" Unseen-question feedback chosen by the same rule on leave-one-question-out "
                 f"{fb.choice.metric} (labels predicted out of fold): `{fb.name}` "
                 f"({ft.value[fb.name]:.1f}; "
                 f"retrieval `nearest_question` {ft.value.get('nearest_question', np.nan):.1f}"
                 f", best {ft.value.max():.1f}).")
    return text


#: The split whose test answers can repeat train answers (same question, same text), and the
#: ``subset`` of its headline records over the answers that do not.
LEAKY_SPLIT, LEAK_FREE = "test_unseen_answers", "leak-free answers"


def record_leak_free(rec: Any, ev: evaluation.Evaluation, train: pd.DataFrame,
                     dataset: str) -> int:
    """Records of the headline of :data:`LEAKY_SPLIT` over its answers that are not also train
    answers to the same question; none where no answer is leaked."""
    from saf_utils.saf.data_checks import answers_in_train

    split = LEAKY_SPLIT
    p = ev.preds[ev.preds.split == split]
    if p.empty or split not in ev.designs:
        return 0
    answers = p.drop_duplicates("id")
    leaked = set(answers.id[answers_in_train(train, answers)])
    if not leaked:
        return 0
    keep = p[~p.id.isin(leaked)]
    items = ev.items[(ev.items.split == split) & ~ev.items.id.isin(leaked)]
    h = EV.headline_per_split(keep, items, {split: ev.designs[split]})
    return rec.add_frame(_analysis(h, ev.roles()).assign(
        subset=f"{LEAK_FREE} ({len(answers) - len(leaked)} of {len(answers)})"), TASK, dataset)


def record_and_conclude(rec: Any, ev: evaluation.Evaluation, run: SAFRun, dataset: str,
                        train: pd.DataFrame | None = None) -> tuple[int, list[str]]:
    """Notebook 02's one call: record everything (with ``train``, the leak-free headline
    too); the number of records and the closing sentences."""
    n = record_evaluation(rec, ev, dataset, run)
    if train is not None:
        n += record_leak_free(rec, ev, train, dataset)
    lines = [f"Chosen on validation by {ev.selection_metric}: `{ev.chosen}` "
             f"({ev.roles()[ev.chosen]}); strongest baseline on validation: `{ev.reference}`."]
    lines += conclusions(ev)
    if run.state.cross_encoder is not None:
        lines += cross_encoder_notes(run.state.cross_encoder, ev.headline, ev.selection_metric)
    unseen = unseen_sentence(ev, run)
    return n, lines + ([unseen] if unseen else [])
