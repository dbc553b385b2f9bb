"""SAF baselines and the oracle: majority, nearest neighbour, reference thresholds, the
feedback bank and the label oracle; each returns a prediction table."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import determinism
from saf_utils import metrics as M
from saf_utils.encoders.sentence import l2_normalize
from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.formats import LABEL_SCORE, prediction_table
from saf_utils.saf.grounded import GroundedFeedback, GroundedParams
from saf_utils.saf.reference import strip_points

# --------------------------------------------------------------------------- helpers


def _mode(values: Sequence[Any]) -> Any:
    """Most frequent value; ties go to the first seen (deterministic)."""
    return Counter(values).most_common(1)[0][0]


Encoder = Callable[[Sequence[str]], np.ndarray]


# --------------------------------------------------------------------------- baselines


def majority_baseline(train: pd.DataFrame, test: pd.DataFrame,
                      system: str = "majority") -> pd.DataFrame:
    """Per question: most frequent label, score and feedback of its training answers;
    unseen questions back off to the global majority (``backoff=True``)."""
    per_q = train.groupby("question").agg(
        label=("verification_feedback", _mode), score=("score", _mode),
        feedback=("answer_feedback", _mode))
    glob = (_mode(train.verification_feedback.tolist()), _mode(train.score.tolist()),
            _mode(train.answer_feedback.tolist()))
    back = [q not in per_q.index for q in test.question]
    rows = [glob if b else tuple(per_q.loc[q]) for q, b in zip(test.question, back, strict=True)]
    return prediction_table(test, system, labels=[r[0] for r in rows],
                            scores=[float(r[1]) for r in rows], feedback=[r[2] for r in rows],
                            backoff=back)


def _macro_f1(y: np.ndarray, pred: np.ndarray, labels: Sequence[str] = SAF_LABELS) -> float:
    return M.metric("macro_f1").score(y, pred, labels=labels).value


def _macro_f1_of_cuts(x: np.ndarray, y: np.ndarray, pairs: Sequence[tuple[float, float]],
                      labels: Sequence[str] = SAF_LABELS) -> np.ndarray:
    """Macro-F1 over ``labels`` (sklearn's, zero_division=0) of the labels every cut-point
    pair ``(lo, hi)`` gives ``x`` (:meth:`ReferenceThresholds.predict`), all pairs at once."""
    lo = np.array([p[0] for p in pairs])[:, None]
    hi = np.array([p[1] for p in pairs])[:, None]
    pred = {"Correct": x[None, :] >= hi, "Incorrect": x[None, :] < lo}
    pred["Partially correct"] = ~pred["Correct"] & ~pred["Incorrect"]
    f1 = []
    for lab in labels:
        p, g = pred[lab], (y == lab)[None, :]
        tp = (p & g).sum(1)
        den = p.sum(1) + g.sum()
        f1.append(np.divide(2.0 * tp, den, out=np.zeros(len(pairs)), where=den != 0))
    return np.mean(f1, axis=0)


@dataclass
class ReferenceThresholds:
    """Label from cosine(answer, reference) with two cut points maximising train macro-F1
    (the unseen-question fallback): ``cos >= hi`` → Correct, ``cos < lo`` → Incorrect."""

    lo: float = 0.0
    hi: float = 1.0

    def fit(self, cos: np.ndarray, labels: Sequence[str]) -> ReferenceThresholds:
        cos = np.asarray(cos, dtype=float)
        y = np.asarray(list(labels))
        grid = np.unique(np.quantile(cos, np.linspace(0.02, 0.98, 49)))
        pairs = [(lo, hi) for i, lo in enumerate(grid) for hi in grid[i:]]
        f1 = np.round(_macro_f1_of_cuts(cos, y, pairs), determinism.SCORE_DECIMALS)
        best = int(np.argmax(f1))  # ties: the first (lowest) cut points
        self.lo, self.hi = float(pairs[best][0]), float(pairs[best][1])
        return self

    def predict(self, cos: np.ndarray) -> list[str]:
        cos = np.asarray(cos, dtype=float)
        return np.where(cos >= self.hi, "Correct",
                        np.where(cos < self.lo, "Incorrect", "Partially correct")).tolist()


#: How unseen questions get feedback: a retrieval strategy's name (``nearest_question``,
#: ``reference``, ``global``), ``grounded`` (the default :class:`GroundedParams`) or a
#: :class:`GroundedParams`.
UnseenFeedback = str | GroundedParams


class FeedbackBank:
    """Training feedback, looked up by (question, label) and by answer similarity; unseen
    questions: Correct's most frequent feedback, other labels per :data:`UnseenFeedback`."""

    def __init__(self, train: pd.DataFrame, encoder: Encoder | None = None):
        self.train = train.reset_index(drop=True)
        self.encoder = encoder
        self.by_q_label = train.groupby(["question", "verification_feedback"]).answer_feedback \
            .agg(_mode).to_dict()
        self.by_label = train.groupby("verification_feedback").answer_feedback.agg(_mode) \
            .to_dict()
        self.questions = sorted(set(train.question))
        self._q_emb: np.ndarray | None = None
        self._grounded: dict[GroundedParams, GroundedFeedback] = {}

    def most_frequent(self, question: str, label: str) -> str | None:
        return self.by_q_label.get((question, label))

    def nearest_question(self, question: str) -> str:
        if self.encoder is None:
            return self.questions[0]
        if self._q_emb is None:
            self._q_emb = l2_normalize(self.encoder(self.questions))
        v = l2_normalize(self.encoder([question]))[0]
        return self.questions[int(np.argmax(determinism.round_features(self._q_emb @ v)))]

    def grounded(self, params: GroundedParams) -> GroundedFeedback:
        """The grounded writer of ``params`` (lead-ins learned once from this bank's train)."""
        if params not in self._grounded:
            self._grounded[params] = GroundedFeedback(self.train, params)
        return self._grounded[params]

    def unseen(self, question: str, reference: str, label: str,
               strategy: UnseenFeedback = "nearest_question", answer: str = "") -> str:
        if label == "Correct" or strategy == "global":
            return self.by_label.get(label, "")
        if strategy == "grounded":
            strategy = GroundedParams()
        if isinstance(strategy, GroundedParams):
            return self.grounded(strategy).write(answer, reference, label)
        if strategy == "reference":
            return strip_points(reference)
        if strategy == "nearest_question":
            near = self.nearest_question(question)
            return self.by_q_label.get((near, label)) or self.by_label.get(label, "")
        raise ValueError(f"unknown unseen-question feedback strategy {strategy!r}")


def nearest_neighbour_baseline(train: pd.DataFrame, test: pd.DataFrame, encoder: Encoder,
                               system: str = "nearest_neighbour",
                               unseen_feedback: UnseenFeedback = "nearest_question"
                               ) -> pd.DataFrame:
    """Label, score and feedback of the most similar training answer to the same question;
    unseen questions: :class:`ReferenceThresholds` and :class:`FeedbackBank` (``backoff``)."""
    tr = train.reset_index(drop=True)
    a_tr = l2_normalize(encoder(tr.provided_answer.tolist()))
    a_te = l2_normalize(encoder(test.provided_answer.tolist()))
    thr = ReferenceThresholds().fit(_ref_cos(tr, a_tr, encoder), tr.verification_feedback)
    ref_cos_te = _ref_cos(test, a_te, encoder)
    bank = FeedbackBank(tr, encoder)
    idx_by_q = {q: np.flatnonzero(tr.question.to_numpy() == q) for q in set(tr.question)}
    labels, scores, fbs, back = [], [], [], []
    for i, (q, ref, ans) in enumerate(zip(test.question, test.reference_answer,
                                          test.provided_answer, strict=True)):
        cand = idx_by_q.get(q)
        if cand is not None and len(cand):
            j = cand[int(np.argmax(determinism.round_features(a_tr[cand] @ a_te[i])))]
            labels.append(tr.verification_feedback[j])
            scores.append(float(tr.score[j]))
            fbs.append(tr.answer_feedback[j])
            back.append(False)
        else:
            lab = thr.predict(ref_cos_te[i:i + 1])[0]
            labels.append(lab)
            scores.append(LABEL_SCORE[lab])
            fbs.append(bank.unseen(q, ref, lab, unseen_feedback, ans))
            back.append(True)
    return prediction_table(test, system, labels=labels, scores=scores, feedback=fbs,
                            backoff=back)


def label_oracle(train: pd.DataFrame, test: pd.DataFrame, encoder: Encoder | None = None,
                 system: str = "label_oracle") -> pd.DataFrame:
    """ORACLE: the gold label and score, feedback retrieved for the gold label: the ceiling
    of retrieved feedback when the label is right."""
    bank = FeedbackBank(train.reset_index(drop=True), encoder)
    fbs = [bank.most_frequent(q, lab) or bank.unseen(q, ref, lab, answer=ans)
           for q, ref, lab, ans in zip(test.question, test.reference_answer,
                                       test.verification_feedback, test.provided_answer,
                                       strict=True)]
    seen = test.question.isin(set(train.question)).to_numpy()
    return prediction_table(test, system, labels=test.verification_feedback.tolist(),
                            scores=test.score.astype(float).tolist(), feedback=fbs,
                            backoff=list(~seen))


def retrieved_feedback_table(train: pd.DataFrame, test: pd.DataFrame, labels: Sequence[str],
                             system: str, encoder: Encoder | None = None,
                             scores: Sequence[float] | None = None, seed: int | None = None,
                             raw: Sequence[str] | None = None,
                             unseen_feedback: UnseenFeedback = "nearest_question"
                             ) -> pd.DataFrame:
    """Prediction table of a label predictor with feedback retrieved as ``feature_clf`` does, so
    that the feedback metrics of label predictors differ only through their labels."""
    tr = train.reset_index(drop=True)
    bank = FeedbackBank(tr, encoder)
    mean_score = tr.groupby(["question", "verification_feedback"]).score.mean().to_dict()
    seen_q = set(tr.question)
    out_scores, fbs, back = [], [], []
    for i, (q, ref, lab, ans) in enumerate(zip(test.question, test.reference_answer, labels,
                                               test.provided_answer, strict=True)):
        seen = q in seen_q
        back.append(not seen)
        if seen:
            fbs.append(bank.most_frequent(q, lab) or bank.by_label.get(lab, ""))
            default = float(mean_score.get((q, lab), LABEL_SCORE[lab]))
        else:
            fbs.append(bank.unseen(q, ref, lab, unseen_feedback, ans))
            default = LABEL_SCORE[lab]
        out_scores.append(float(scores[i]) if scores is not None else default)
    return prediction_table(test, system, labels=list(labels), scores=out_scores,
                            feedback=fbs, raw=raw, seed=seed, backoff=back)


def _ref_cos(df: pd.DataFrame, a: np.ndarray, encoder: Encoder) -> np.ndarray:
    r = l2_normalize(encoder([strip_points(t) for t in df.reference_answer]))
    return determinism.round_features(np.einsum("ij,ij->i", a, r))




def per_question_accuracy(questions: Sequence[str], gold: Sequence[str],
                          pred: Sequence[str]) -> dict[str, float]:
    """Question -> accuracy of its held-out answers: the folds of an unseen-question CV,
    whose spread over questions is the standard error of a choice
    (:func:`saf_utils.statistics.validation_choice.choose_within_se`)."""
    hit = pd.Series(np.asarray(list(gold), dtype=object) == np.asarray(list(pred), dtype=object))
    return {str(q): float(v) for q, v in hit.groupby(np.asarray(list(questions)),
                                                      sort=False).mean().items()}


def loqo_baselines(train: pd.DataFrame, encoder: Encoder) -> pd.DataFrame:
    """Leave-one-question-out accuracy/macro-F1 of the baselines' unseen-question paths
    (protocol and columns of :func:`grouped_cv_generic`, so that one can be chosen)."""
    tr = train.reset_index(drop=True)
    a = l2_normalize(encoder(tr.provided_answer.tolist()))
    cos = _ref_cos(tr, a, encoder)
    y = tr.verification_feedback.to_numpy()
    qs = tr.question.to_numpy()
    preds = {"majority": np.empty(len(tr), dtype=object),
             "nearest_neighbour": np.empty(len(tr), dtype=object)}
    for q in dict.fromkeys(qs):
        held = qs == q
        preds["majority"][held] = _mode(list(y[~held]))
        thr = ReferenceThresholds().fit(cos[~held], y[~held])
        preds["nearest_neighbour"][held] = thr.predict(cos[held])
    ids = tr["id"].astype(str).tolist()
    return pd.DataFrame([{"system": name, "accuracy": M.metric("accuracy").score(y, p).value,
                          "macro_f1": _macro_f1(y, p),
                          "per_question": per_question_accuracy(qs, y, p),
                          "oof": dict(zip(ids, map(str, p), strict=True))}
                         for name, p in preds.items()])

