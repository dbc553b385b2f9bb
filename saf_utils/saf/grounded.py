"""Feedback grounded in the reference answer, for questions without graded answers.

A tutor's feedback on a wrong or partial answer mostly restates what the reference says and
the answer misses: :class:`GroundedFeedback` writes the reference's content units the answer
does not cover behind the lead-in the training feedback of that label most often opens with.
Nothing here reads a question's own training answers, so it works on a new question."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from saf_utils.saf.reference import content_units, coverage


@dataclass(frozen=True)
class GroundedParams:
    """How grounded feedback is written (chosen in :mod:`saf_utils.saf.feedback_choice`)."""

    unit: str = "clause"  # content unit of the reference: sentence | clause
    tau: float = 0.5  # a unit whose coverage by the answer is below this is missing
    max_units: int | None = None  # most missing units named, least covered first (None: all)
    lead_words: int = 3  # words of the learned lead-in per label (0: no lead-in)
    incorrect: str = "all"  # Incorrect answers: "all" units or only the "missing" ones

    @property
    def name(self) -> str:
        return (f"grounded:{self.unit},tau={self.tau:g},max={self.max_units},"
                f"lead={self.lead_words},incorrect={self.incorrect}")


def lead_ins(train: pd.DataFrame, words: int) -> dict[str, str]:
    """Label -> the opening ``words`` words of its training feedback that the most
    training questions share (then the most frequent, then alphabetical): a phrase that
    transfers across questions rather than one question's wording."""
    if words <= 0:
        return {}
    out = {}
    for label, g in train.groupby("verification_feedback", sort=True):
        opening = [" ".join(str(f).split()[:words]) for f in g.answer_feedback]
        counts = Counter(opening)
        questions = pd.Series(g.question.to_numpy()).groupby(opening).nunique().to_dict()
        ranked = sorted(counts, key=lambda k: (-questions[k], -counts[k], k))
        if ranked and ranked[0]:
            out[label] = ranked[0]
    return out


class GroundedFeedback:
    """Writes grounded feedback with one :class:`GroundedParams`, lead-ins from ``train``."""

    def __init__(self, train: pd.DataFrame, params: GroundedParams = GroundedParams()):
        if params.incorrect not in ("all", "missing"):
            raise ValueError(f"incorrect must be 'all' or 'missing', not {params.incorrect!r}")
        self.params = params
        self.leads = lead_ins(train, params.lead_words)

    def missing(self, answer: str, reference: str) -> list[str]:
        """The reference's units the answer covers less than ``tau`` (in reference order;
        at most ``max_units``, least covered first); none below: the least covered one."""
        p = self.params
        units = content_units(reference, p.unit)
        cov = [coverage(answer, u) for u in units]
        idx = [i for i, c in enumerate(cov) if c < p.tau] or [min(range(len(units)),
                                                                 key=lambda i: (cov[i], i))]
        if p.max_units is not None:
            idx = sorted(sorted(idx, key=lambda i: (cov[i], i))[:p.max_units])
        return [units[i] for i in idx]

    def write(self, answer: str, reference: str, label: str) -> str:
        """Lead-in of ``label`` + the missing units (Incorrect, ``incorrect="all"``: all)."""
        units = (content_units(reference, self.params.unit)
                 if label == "Incorrect" and self.params.incorrect == "all"
                 else self.missing(answer, reference))
        body = " ".join(u if u[-1:] in ".!?" else u + "." for u in units)
        return f"{self.leads.get(label, '')} {body}".strip()
