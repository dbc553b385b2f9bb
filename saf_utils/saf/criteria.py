"""Criteria-style grading (``criteria``): the reference answer split into content units
(:func:`saf_utils.saf.reference.content_units`), each unit scored against the answer, the
label from the share of the reference the answer covers, with two cut points learned
across the training questions.

Nothing here reads a question's own graded answers or its wording, so a question without
any graded answer is graded the same way as a training question: this is a grader for new
questions. A unit's score is the best cosine (offline sentence encoder) between the unit
and the answer or one of its sentences, or that cosine raised to the unit's word-stem
coverage where the answer repeats the unit's words (``semlex``). The settings (unit and
score) are chosen by leave-one-question-out on train, on macro-F1 (declared first: the cut
points maximise macro-F1 too, so that a grader that gives every answer the most frequent
label cannot win).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import metrics as M
from saf_utils.encoders.sentence import l2_normalize
from saf_utils.saf.baselines import Encoder, ReferenceThresholds, per_question_accuracy
from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.reference import UNITS, content_units, coverage
from saf_utils.statistics import validation_choice
from saf_utils.text import split_sentences

#: How a unit's scores become the answer's covered share: the mean unit cosine (``sem``),
#: the mean of the larger of cosine and stem coverage (``semlex``), or the share of units
#: whose cosine reaches ``tau`` (``covered``).
SCORES = ("sem", "semlex", "covered")


@dataclass(frozen=True)
class CriteriaSetting:
    """One candidate: content unit, how units make a share, and the cosine bar of
    ``covered``."""

    unit: str = "clause"
    score: str = "semlex"
    tau: float = 0.5

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"criteria unit {self.unit!r}: use one of {UNITS}")
        if self.score not in SCORES:
            raise ValueError(f"criteria score {self.score!r}: use one of {SCORES}")

    @property
    def name(self) -> str:
        return (f"{self.unit}/{self.score}" + (f"@{self.tau:g}" if self.score == "covered"
                                               else ""))


def unit_scores(df: pd.DataFrame, encoder: Encoder, unit: str = "clause"
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per answer, per content unit of its reference: the best cosine between the unit and
    the answer or one of its sentences, and the unit's stem coverage by the answer."""
    units = [content_units(str(r), unit) for r in df.reference_answer]
    answers = [str(a) for a in df.provided_answer.fillna("")]
    pieces = [[a, *split_sentences(a, ".!?;")] for a in answers]
    u_vec = l2_normalize(encoder([u for us in units for u in us]))
    p_vec = l2_normalize(encoder([p for ps in pieces for p in ps]))
    out, iu, ip = [], 0, 0
    for us, ps, a in zip(units, pieces, answers, strict=True):
        sims = (u_vec[iu:iu + len(us)] @ p_vec[ip:ip + len(ps)].T).max(axis=1)
        iu, ip = iu + len(us), ip + len(ps)
        out.append((sims, np.array([coverage(a, u) for u in us])))
    return out


def covered_share(scores: Sequence[tuple[np.ndarray, np.ndarray]], setting: CriteriaSetting
                  ) -> np.ndarray:
    """The answer's covered share of its reference under ``setting``."""
    if setting.score == "sem":
        v = [s.mean() for s, _ in scores]
    elif setting.score == "semlex":
        v = [np.maximum(s, lex).mean() for s, lex in scores]
    else:
        v = [(s >= setting.tau).mean() for s, _ in scores]
    return np.round(np.asarray(v, dtype=float), 6)


def _macro_f1(y: Sequence[str], pred: Sequence[str]) -> float:
    return M.metric("macro_f1").score(list(y), list(pred), labels=SAF_LABELS).value


@dataclass
class CriteriaCV:
    """Leave-one-question-out of every setting on train and the chosen one."""

    table: pd.DataFrame  # setting, accuracy, macro_f1, per_question, oof (per setting)
    chosen: int  # row of ``table``
    setting: CriteriaSetting
    params: Any = None  # the candidates' parameters it was run with (cache key)

    def oof_labels(self, train: pd.DataFrame) -> list[str]:
        """The chosen setting's label of every training answer, its question held out."""
        oof = self.table.oof.iloc[self.chosen]
        return [oof[str(i)] for i in train["id"]]


def loqo_criteria(train: pd.DataFrame, encoder: Encoder,
                  settings: Sequence[CriteriaSetting]) -> CriteriaCV:
    """Each setting held out question by question (cut points learned on the other
    questions), scored on accuracy and macro-F1; the setting with the best macro-F1 is
    chosen (ties: the first listed)."""
    tr = train.reset_index(drop=True)
    y = tr.verification_feedback.astype(str).to_numpy()
    qs = tr.question.to_numpy()
    ids = tr["id"].astype(str).tolist()
    by_unit = {u: unit_scores(tr, encoder, u) for u in dict.fromkeys(s.unit for s in settings)}
    rows = []
    for s in settings:
        x = covered_share(by_unit[s.unit], s)
        pred = np.empty(len(tr), dtype=object)
        for q in dict.fromkeys(qs):
            held = qs == q
            pred[held] = ReferenceThresholds().fit(x[~held], y[~held]).predict(x[held])
        rows.append({"setting": s.name, "accuracy": float((pred == y).mean()),
                     "macro_f1": _macro_f1(y, pred),
                     "per_question": per_question_accuracy(qs, y, pred),
                     "oof": dict(zip(ids, map(str, pred), strict=True))})
    table = pd.DataFrame(rows)
    chosen = validation_choice.choose_row(table, "macro_f1", "train")
    return CriteriaCV(table, chosen, list(settings)[chosen])


def settings_grid(units: Sequence[str], scores: Sequence[str], taus: Sequence[float]
                  ) -> list[CriteriaSetting]:
    """Every (unit, score[, tau]) candidate, ``covered`` once per ``tau``."""
    out = []
    for unit, score in itertools.product(units, scores):
        for tau in (taus if score == "covered" else taus[:1]):
            out.append(CriteriaSetting(unit, score, float(tau)))
    return out


class CriteriaGrader:
    """The chosen setting with its cut points fitted on every training answer."""

    def __init__(self, encoder: Encoder, setting: CriteriaSetting):
        self.encoder, self.setting = encoder, setting
        self.thresholds = ReferenceThresholds()

    def share(self, df: pd.DataFrame) -> np.ndarray:
        return covered_share(unit_scores(df, self.encoder, self.setting.unit), self.setting)

    def fit(self, train: pd.DataFrame) -> CriteriaGrader:
        self.thresholds.fit(self.share(train), train.verification_feedback.astype(str))
        return self

    def predict(self, df: pd.DataFrame) -> list[str]:
        return self.thresholds.predict(self.share(df))
