"""The choice for questions without graded answers, and how that choice is itself chosen.

Every inductive system leaves a leave-one-question-out (or grouped k-fold) row on train:
its accuracy on each held-out training question and its label for every training answer
out of fold (``oof``). Three rules turn these rows into the grader of a new question
(:data:`RULES`, simplest first):

- ``one_se``: the simplest candidate within one standard error (over questions) of the
  best mean (:func:`saf_utils.statistics.validation_choice.choose_within_se`);
- ``best_mean``: the candidate with the best mean;
- ``stacking``: no single candidate: a logistic regression over the candidates' labels
  (one-hot), fitted on their out-of-fold labels across the training questions
  (:class:`LabelStacker`); it reads no question id and no question's own answers.

Which rule is used is decided by what each would have lost (regret) on held-out training
questions: each training question in turn plays the new one, each rule chooses from the
other questions, and its pick is compared with the best candidate on the held-out one.
The rule with the lowest mean regret is kept; ties go to the simpler rule. The procedure
is fixed before any score is seen, so it is a choice made on train alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from saf_utils import determinism
from saf_utils.saf.data import SAF_LABELS
from saf_utils.statistics import validation_choice

#: The rules that turn the per-question CV into the unseen-question grader, simplest first.
RULES = ("one_se", "best_mean", "stacking")
#: The name under which stacking's predictions are reported.
STACKED = "unseen_stacked"
#: A grader that gives one label to more than this share of the answers is collapsed: on
#: a new question it only restates the most frequent label. Such a path (out of fold on
#: train) cannot be chosen for unseen questions, and a system that does it on a split is
#: flagged on the page.
COLLAPSE_SHARE = 0.9


def top_share(labels: Sequence[str] | Mapping[str, str]) -> float:
    """The largest share any one label has among ``labels`` (a mapping: its values)."""
    values = list(labels.values()) if isinstance(labels, Mapping) else list(labels)
    return float(pd.Series(values, dtype=object).value_counts(normalize=True).iloc[0]
                 ) if values else float("nan")


class LabelStacker:
    """A multinomial logistic regression over the candidates' one-hot labels (no class
    weights: the label shares across training questions are part of what it learns)."""

    def __init__(self, candidates: Sequence[str], C: float = 1.0, seed: int = 0):
        self.candidates = list(candidates)
        self.C = C
        self.seed = seed
        self.model = None

    def matrix(self, labels: pd.DataFrame) -> np.ndarray:
        """One-hot columns per (candidate, label) of ``labels`` (one column per candidate)."""
        return np.column_stack([(labels[c].astype(str).to_numpy() == lab).astype(float)
                                for c in self.candidates for lab in SAF_LABELS])

    def fit(self, labels: pd.DataFrame, y: Sequence[str]) -> LabelStacker:
        from saf_utils.training.classifiers import make_classifier

        self.model = make_classifier("logreg", C=self.C, class_weight=None,
                                     seed=self.seed).fit(self.matrix(labels), list(y))
        return self

    def predict(self, labels: pd.DataFrame) -> list[str]:
        if self.model is None:
            raise ValueError("LabelStacker.predict before fit")
        return [str(v) for v in self.model.predict(self.matrix(labels))]


def oof_labels(cv: pd.DataFrame, train: pd.DataFrame, systems: Sequence[str]) -> pd.DataFrame:
    """The out-of-fold label of every training answer (rows, in ``train``'s order) by each
    system of ``systems`` (columns), read from the CV rows' ``oof`` (id -> label)."""
    by = {r.system: r.oof for r in cv.itertuples() if isinstance(getattr(r, "oof", None),
                                                                 Mapping)}
    missing = [s for s in systems if s not in by]
    if missing:
        raise ValueError(f"no out-of-fold labels for {missing}")
    ids = train["id"].astype(str).tolist()
    return pd.DataFrame({s: [by[s].get(i) for i in ids] for s in systems}, index=train.index)


def nested_stacking(labels: pd.DataFrame, y: Sequence[str], questions: Sequence[str]
                    ) -> np.ndarray:
    """Stacking's own label for every training answer, its question held out: fitted on
    the other questions' out-of-fold labels (those come from models that did see the held
    out question's answers, as in every stacking on one CV)."""
    y, qs = np.asarray(list(y), dtype=object), np.asarray(list(questions), dtype=object)
    pred = np.empty(len(y), dtype=object)
    for q in dict.fromkeys(qs):
        held = qs == q
        stacker = LabelStacker(list(labels.columns)).fit(labels[~held], y[~held])
        pred[held] = stacker.predict(labels[held])
    return pred


@dataclass
class UnseenChoice:
    """The rule kept, its pick, and every rule's regret over held-out training questions."""

    rule: str  # one of RULES
    choice: validation_choice.Choice  # the kept rule's choice (its table: mean, se, bar, chosen)
    regret: pd.DataFrame  # rule, fold (held-out question), chosen, best, regret
    rules: pd.DataFrame  # per rule: mean and max regret, kept

    @property
    def system(self) -> str:
        return self.choice.per_fold[None]


def rule_function(rule: str, metric: str, roles: Mapping[str, str],
                  n_se: float = 1.0) -> Callable[[pd.DataFrame], str]:
    """``rows -> system`` of one rule over per-question rows ``system, fold, value`` whose
    candidates are ``roles`` (simplest first) and, for ``stacking``, :data:`STACKED`."""
    if rule not in RULES:
        raise ValueError(f"unknown unseen-question rule {rule!r}; known: {list(RULES)}")
    if rule == "stacking":
        return lambda rows: STACKED
    k = n_se if rule == "one_se" else 0.0
    single = {s: r for s, r in roles.items() if s != STACKED}
    return lambda rows: validation_choice.choose_within_se(
        rows[rows.system != STACKED], metric, single, validation_choice.ELIGIBLE, "train",
        n_se=k).per_fold[None]


def choose_rule(folds: pd.DataFrame, metric: str, roles: Mapping[str, str],
                rules: Sequence[str] = RULES, n_se: float = 1.0) -> UnseenChoice:
    """Every rule's regret nested over held-out training questions (hindsight: the best
    single candidate of that question), the rule with the lowest mean regret (ties: the
    simpler, :data:`RULES` order), and that rule applied to every question's rows.

    ``folds``: ``system, fold, value`` of the single candidates and, where stacking is a
    rule, of :data:`STACKED` (its nested values); a rule whose candidates are missing is
    left out."""
    have = set(folds.system)
    rules = [r for r in rules if r != "stacking" or STACKED in have]
    single = folds[folds.system != STACKED]
    parts = []
    for rule in rules:
        fn = rule_function(rule, metric, roles, n_se)
        reg = validation_choice.rule_regret(folds, fn)
        parts.append(reg.assign(rule=rule))
    regret = pd.concat(parts, ignore_index=True)
    summary = (regret.groupby("rule", sort=False).regret.agg(["mean", "max"])
               .reindex(rules).rename_axis("rule").reset_index())
    v = summary["mean"].round(determinism.SCORE_DECIMALS).to_numpy()
    kept = rules[int(np.argmin(v))]  # ties: the first, the simpler rule
    summary["kept"] = summary.rule == kept
    if kept == "stacking":
        t = validation_choice.fold_summary(folds, [*roles, STACKED])
        t["chosen"] = t.system == STACKED
        t["role"] = t.system.map(lambda s: roles.get(s, "system"))
        t["fold"], t["bar"] = None, np.nan
        choice = validation_choice.Choice(metric, "train", {None: STACKED},
                                          t[["fold", "system", "role", "value", "se", "n_folds",
                                             "bar", "chosen"]])
    else:
        choice = validation_choice.choose_within_se(
            single, metric, {s: r for s, r in roles.items() if s != STACKED},
            validation_choice.ELIGIBLE, "train", n_se=n_se if kept == "one_se" else 0.0)
    return UnseenChoice(kept, choice, regret, summary)
