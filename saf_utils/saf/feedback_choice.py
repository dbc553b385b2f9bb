"""Which feedback a question without graded answers gets, chosen on train.

Validation holds only seen questions, so the strategy is chosen by leave-one-question-out
on train: each training question in turn gets feedback written from the other questions'
bank, for the labels predicted out of fold (a new question's feedback is written for
predicted labels, right or wrong), scored by corpus chrF per held-out question (declared
before any score was seen: character n-grams are robust to inflection and compounds, where
METEOR's stemmer is English). The choice is the one-SE rule, retrieval before grounded."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from saf_utils import metrics as M
from saf_utils.saf.baselines import Encoder, FeedbackBank, UnseenFeedback
from saf_utils.saf.grounded import GroundedParams
from saf_utils.statistics import validation_choice


@dataclass(frozen=True)
class FeedbackGrid:
    """Candidates of the unseen-question feedback, and the metric that chooses."""

    #: retrieval strategies of :class:`~saf_utils.saf.baselines.FeedbackBank`, simplest first
    retrieval: tuple[str, ...] = ("global", "nearest_question", "reference")
    units: tuple[str, ...] = ("sentence", "clause")
    taus: tuple[float, ...] = (0.34, 0.67)
    max_units: tuple[int | None, ...] = (None, 2)
    lead_words: tuple[int, ...] = (0, 3)
    incorrect: tuple[str, ...] = ("all", "missing")
    metric: str = "chrf"  # declared before any score: corpus chrF per held-out question
    n_se: float = 1.0  # the rule: simplest within this many standard errors of the best

    def candidates(self) -> dict[str, UnseenFeedback]:
        """Name -> strategy, simplest first (retrieval, then grounded: no lead-in before a
        lead-in, every unit before capped ones)."""
        out: dict[str, UnseenFeedback] = {r: r for r in self.retrieval}
        for lead, cap, unit, tau, inc in itertools.product(
                self.lead_words, self.max_units, self.units, self.taus, self.incorrect):
            g = GroundedParams(unit, tau, cap, lead, inc)
            out[g.name] = g
        return out


@dataclass
class FeedbackChoice:
    """The chosen strategy, the per-question CV it was chosen on, and the rule's regret."""

    strategy: UnseenFeedback
    choice: validation_choice.Choice  # the rule's table (mean, se, bar, chosen)
    cv: pd.DataFrame  # system (candidate), fold (held-out question), value
    regret: pd.DataFrame  # the rule, nested over held-out questions
    regret_best_mean: pd.DataFrame  # the plain best mean, nested the same way

    @property
    def name(self) -> str:
        return self.choice.per_fold[None]


def loqo_feedback_cv(train: pd.DataFrame, candidates: dict[str, UnseenFeedback],
                     encoder: Encoder | None = None, metric: str = "chrf",
                     labels: Sequence[str] | None = None) -> pd.DataFrame:
    """``metric`` of each candidate's feedback on each held-out training question;
    ``labels``: those feedback is written for (predicted out of fold; None: gold)."""
    tr = train.reset_index(drop=True)
    if labels is not None and len(labels) != len(tr):
        raise ValueError(f"{len(labels)} labels for {len(tr)} training answers")
    lab_of = (tr.verification_feedback.astype(str) if labels is None
              else pd.Series(list(labels), index=tr.index, dtype=object))
    m = M.metric(metric)
    rows = []
    for q in dict.fromkeys(tr.question):
        held, bank = tr[tr.question == q], FeedbackBank(tr[tr.question != q], encoder)
        gold = held.answer_feedback.astype(str).tolist()
        for name, strategy in candidates.items():
            hyps = [bank.unseen(q, ref, lab, strategy, ans) for ref, lab, ans in zip(
                held.reference_answer, lab_of[held.index], held.provided_answer,
                strict=True)]
            rows.append({"system": name, "fold": q, "value": m.score(gold, hyps).value,
                         "n": len(held)})
    return pd.DataFrame(rows)


def choose_unseen_feedback(train: pd.DataFrame, encoder: Encoder | None = None,
                           grid: FeedbackGrid = FeedbackGrid(),
                           labels: Sequence[str] | None = None) -> FeedbackChoice:
    """Leave-one-question-out CV of every candidate (feedback for ``labels``: predicted
    out of fold; None: gold), the one-SE rule, and its regret (and the plain best mean's)
    nested over held-out questions."""
    cands = grid.candidates()
    cv = loqo_feedback_cv(train, cands, encoder, grid.metric, labels)
    roles = dict.fromkeys(cands, "system")
    lower = M.lower_is_better(grid.metric)

    def rule(n_se: float):
        return lambda rows: validation_choice.choose_within_se(
            rows, grid.metric, roles, split="train", lower_is_better=lower,
            n_se=n_se).per_fold[None]

    choice = validation_choice.choose_within_se(cv, grid.metric, roles, split="train",
                                                lower_is_better=lower, n_se=grid.n_se)
    return FeedbackChoice(cands[choice.per_fold[None]], choice, cv,
                          validation_choice.rule_regret(cv, rule(grid.n_se), lower),
                          validation_choice.rule_regret(cv, rule(0.0), lower))
