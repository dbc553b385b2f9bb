"""The feature classifier of SAF (``feature_clf``): answer–reference features, kNN label
votes, the classifier with retrieved feedback, its unseen-question CV and stacked inputs."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import determinism
from saf_utils import metrics as M
from saf_utils.encoders.sentence import l2_normalize
from saf_utils.saf.baselines import (
    Encoder,
    UnseenFeedback,
    per_question_accuracy,
    retrieved_feedback_table,
)
from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.reference import (
    ALIGNMENT_FEATURES,
    alignment,
    content_words,
    reference_sentences,
    strip_points,
)
from saf_utils.text import word_tokens
from saf_utils.training.classifiers import make_classifier


@dataclass
class StackFeatures:
    """A stacked model's extra inputs by ``(split, id)`` (training rows: out-of-fold values).
    A row without an entry is an error: filling it would hide a leak or a misaligned split."""

    table: Mapping[tuple[str, Any], Sequence[float]]
    names: Sequence[str]

    def __call__(self, df: pd.DataFrame) -> pd.DataFrame:
        split = df["split"] if "split" in df else pd.Series(["train"] * len(df), index=df.index)
        missing = [(s, i) for s, i in zip(split, df["id"], strict=True)
                   if (s, i) not in self.table]
        if missing:
            raise KeyError(f"no stacked features for {len(missing)} row(s), e.g. {missing[:3]}")
        return pd.DataFrame([list(self.table[(s, i)]) for s, i in zip(split, df["id"],
                                                                       strict=True)],
                            columns=list(self.names), index=df.index)


# --------------------------------------------------------------------------- classifier

GENERIC_FEATURES = (
    "cos_ref", "cos_ref_sent_max", "cos_ref_sent_mean", "cos_question", "ref_recall",
    "ref_precision", "ref_jaccard", "log_len", "len_ratio", "cos_ref_rank",
)
#: Every question-agnostic feature a feature set may name: the generic ones (the seen-question
#: model's and the default unseen-question set) and the alignment of the answer with the
#: reference's content units (:func:`saf_utils.saf.reference.alignment`).
QUESTION_AGNOSTIC = (*GENERIC_FEATURES, *ALIGNMENT_FEATURES)


def generic_features(df: pd.DataFrame, encoder: Encoder) -> pd.DataFrame:
    """Question-agnostic answer–reference features (usable for unseen questions): cosines,
    lexical overlap, lengths, the cosine's rank among the reference's own sentences (a
    per-question normaliser that needs no other answers) and the alignment features."""
    a = l2_normalize(encoder(df.provided_answer.tolist()))
    refs = [strip_points(r) for r in df.reference_answer]
    r = l2_normalize(encoder(refs))
    qv = l2_normalize(encoder(df.question.tolist()))
    sent_lists = [reference_sentences(x) for x in df.reference_answer]
    flat = [s for ss in sent_lists for s in ss]
    s_emb = l2_normalize(encoder(flat)) if flat else np.zeros((0, a.shape[1]))
    out: dict[str, list[float]] = {k: [] for k in GENERIC_FEATURES}
    pos = 0
    for i, ss in enumerate(sent_lists):
        sims = s_emb[pos:pos + len(ss)] @ a[i]
        self_sims = s_emb[pos:pos + len(ss)] @ r[i]
        pos += len(ss)
        cos_ref = float(a[i] @ r[i])
        ans_c, ref_c = content_words(df.provided_answer.iloc[i]), content_words(refs[i])
        inter = len(ans_c & ref_c)
        n_ans = max(len(word_tokens(df.provided_answer.iloc[i])), 1)
        out["cos_ref"].append(cos_ref)
        out["cos_ref_sent_max"].append(float(sims.max()))
        out["cos_ref_sent_mean"].append(float(sims.mean()))
        out["cos_question"].append(float(a[i] @ qv[i]))
        out["ref_recall"].append(inter / max(len(ref_c), 1))
        out["ref_precision"].append(inter / max(len(ans_c), 1))
        out["ref_jaccard"].append(inter / max(len(ans_c | ref_c), 1))
        out["log_len"].append(math.log(n_ans))
        out["len_ratio"].append(n_ans / max(len(word_tokens(refs[i])), 1))
        out["cos_ref_rank"].append(cos_ref - float(self_sims.mean()))
        for k, v in alignment(df.provided_answer.iloc[i], df.reference_answer.iloc[i]).items():
            out.setdefault(k, []).append(v)
    return pd.DataFrame(determinism.round_features(pd.DataFrame(out).to_numpy()),
                        columns=list(out), index=df.index)


def knn_features(train: pd.DataFrame, a_train: np.ndarray, df: pd.DataFrame, a_df: np.ndarray,
                 k: int = 5, leave_one_out: bool = False) -> pd.DataFrame:
    """Similarity to training answers of the same question, per label (seen questions);
    ``leave_one_out`` (the training rows' own features) excludes each row's own entry, so
    the classifier never sees its own label."""
    q_tr = train.question.to_numpy()
    y_tr = train.verification_feedback.to_numpy()
    s_tr = train.score.to_numpy(dtype=float)
    cols = [f"max_cos_{lab}" for lab in SAF_LABELS] + [f"knn_{lab}" for lab in SAF_LABELS]
    cols += ["knn_score", "nn_cos"]
    rows = []
    for i, q in enumerate(df.question.to_numpy()):
        cand = np.flatnonzero(q_tr == q)
        if leave_one_out:
            cand = cand[cand != i]
        if len(cand) == 0:
            rows.append([np.nan] * len(cols))
            continue
        sims = determinism.round_features(a_train[cand] @ a_df[i])
        feats = [float(sims[y_tr[cand] == lab].max()) if (y_tr[cand] == lab).any() else -1.0
                 for lab in SAF_LABELS]
        top = np.argsort(-sims, kind="stable")[:k]
        w = np.clip(sims[top], 1e-3, None)
        feats += [float(w[y_tr[cand][top] == lab].sum() / w.sum()) for lab in SAF_LABELS]
        feats += [float((w * s_tr[cand][top]).sum() / w.sum()), float(sims[top[0]])]
        rows.append(feats)
    return pd.DataFrame(determinism.round_features(np.asarray(rows, dtype=float).reshape(
        len(rows), len(cols))), columns=cols, index=df.index)


def per_question_zscore(x: np.ndarray, questions: Sequence[str]) -> np.ndarray:
    """Standardise each feature within each question's answers (a per-question curve).
    Transductive: uses the other (unlabelled) answers to the same question."""
    x = np.asarray(x, dtype=float).copy()
    q = np.asarray(questions)
    for value in dict.fromkeys(q):
        m = q == value
        x[m] = (x[m] - x[m].mean(axis=0)) / (x[m].std(axis=0) + 1e-6)
    return determinism.round_features(x)


@dataclass
class FeatureClassifier:
    """``feature_clf``: a *seen-question* model (generic features + kNN label votes + a
    question one-hot) and a *generic* model (question-agnostic features only) for questions
    without training answers; feedback retrieved for the predicted label."""

    encoder: Encoder
    model: str = "logreg"  # logreg | hgb
    C: float = 1.0
    generic_model: str | None = None  # unseen-question model (None: same as ``model``)
    generic_C: float = 1.0
    generic_class_weight: str | None = "balanced"
    generic_feature_names: Sequence[str] | None = None  # None: all GENERIC_FEATURES
    normalize_unseen: bool = False
    k: int = 5
    feedback: str = "most_frequent"
    unseen_feedback: UnseenFeedback = "nearest_question"
    seed: int = 0
    system: str = "feature_clf"
    stack: StackFeatures | None = None  # extra seen-question features (stacking)

    def _make(self, C: float, class_weight: str | None = "balanced", kind: str | None = None):
        if class_weight is None or class_weight == "none" or (
                isinstance(class_weight, float) and math.isnan(class_weight)):
            class_weight = None
        kind = kind or self.model
        if kind == "hgb":
            return make_classifier("hgb", self.seed, class_weight=class_weight, max_depth=3,
                                   learning_rate=0.05, max_iter=200)
        return make_classifier(kind, self.seed, C=C, class_weight=class_weight)

    def _seen_matrix(self, df: pd.DataFrame, a: np.ndarray, loo: bool) -> np.ndarray:
        f = generic_features(df, self.encoder)[list(GENERIC_FEATURES)]
        knn = knn_features(self._train, self._a_train, df, a, self.k, leave_one_out=loo)
        qs = np.array([[float(q == u) for u in self._questions] for q in df.question])
        extra = [self.stack(df).to_numpy()] if self.stack is not None else []
        return determinism.round_features(
            np.hstack([f.to_numpy(), knn.fillna(0).to_numpy(), qs, *extra]))

    def _generic_matrix(self, df: pd.DataFrame) -> np.ndarray:
        names = list(self.generic_feature_names or GENERIC_FEATURES)
        x = generic_features(df, self.encoder)[names].to_numpy()
        return per_question_zscore(x, df.question.to_numpy()) if self.normalize_unseen else x

    def fit(self, train: pd.DataFrame) -> FeatureClassifier:
        tr = train.reset_index(drop=True)
        self._train = tr
        self._a_train = l2_normalize(self.encoder(tr.provided_answer.tolist()))
        self._questions = sorted(set(tr.question))
        y = tr.verification_feedback.to_numpy()
        self._seen = self._make(self.C).fit(self._seen_matrix(tr, self._a_train, True), y)
        self._generic = self._make(self.generic_C, self.generic_class_weight,
                                   self.generic_model).fit(self._generic_matrix(tr), y)
        return self

    def with_generic(self, **changes: Any) -> FeatureClassifier:
        """A copy with other unseen-question settings; only the generic model is refitted
        (the seen-question fields must stay: that model is shared)."""
        shared = ("model", "C", "k", "feedback", "seed")
        moved = [k for k in shared if k in changes and changes[k] != getattr(self, k)]
        if moved:
            raise ValueError(f"with_generic cannot change the seen-question fields {moved}")
        other = copy.copy(self)
        for key, value in changes.items():
            setattr(other, key, value)
        other._generic = other._make(other.generic_C, other.generic_class_weight,
                                     other.generic_model).fit(
            other._generic_matrix(self._train), self._train.verification_feedback.to_numpy())
        return other

    def predict_labels(self, test: pd.DataFrame) -> tuple[list[str], np.ndarray]:
        te = test.reset_index(drop=True)
        a = l2_normalize(self.encoder(te.provided_answer.tolist()))
        seen = te.question.isin(set(self._questions)).to_numpy()
        labels = np.empty(len(te), dtype=object)
        if seen.any():
            sub = te[seen]
            labels[seen] = self._seen.predict(self._seen_matrix(sub, a[seen], False))
        if (~seen).any():
            labels[~seen] = self._generic.predict(self._generic_matrix(te[~seen]))
        return list(labels), seen

    def predict(self, test: pd.DataFrame) -> pd.DataFrame:
        if self.feedback not in ("most_frequent", "nearest"):
            raise ValueError(f"unknown feedback strategy {self.feedback!r}")
        te = test.reset_index(drop=True)
        labels, seen = self.predict_labels(te)
        out = retrieved_feedback_table(self._train, te, labels, self.system, self.encoder,
                                       seed=self.seed, unseen_feedback=self.unseen_feedback)
        if self.feedback == "nearest":  # seen questions: the closest answer's, same label
            a = l2_normalize(self.encoder(te.provided_answer.tolist()))
            tr_q = self._train.question.to_numpy()
            tr_y = self._train.verification_feedback.to_numpy()
            for i in np.flatnonzero(seen):
                cand = np.flatnonzero((tr_q == te.question[i]) & (tr_y == labels[i]))
                if len(cand):
                    j = cand[int(np.argmax(determinism.round_features(
                        self._a_train[cand] @ a[i])))]
                    if self._train.answer_feedback[j]:
                        out.at[i, "pred_feedback"] = str(self._train.answer_feedback[j])
        return out


def grouped_cv_generic(train: pd.DataFrame, encoder: Encoder,
                       Cs: Sequence[float] = (0.1, 1.0),
                       class_weights: Sequence[str | None] = ("balanced", None),
                       normalize: Sequence[bool] = (False, True),
                       feature_sets: Mapping[str, Sequence[str] | None] | None = None,
                       models: Sequence[str] = ("logreg",)) -> pd.DataFrame:
    """Leave-one-question-out accuracy/macro-F1 of the generic classifier on train: validation
    holds only seen questions, so holding out each question is the proxy for "unseen"."""
    tr = train.reset_index(drop=True)
    feats = generic_features(tr, encoder)
    y = tr.verification_feedback.to_numpy()
    qs = tr.question.to_numpy()
    ids = tr["id"].astype(str).tolist()
    rows = []
    for set_name, names in (feature_sets or {"all": None}).items():
        unknown = sorted(set(names or ()) - set(QUESTION_AGNOSTIC))
        if unknown:
            raise ValueError(f"feature set {set_name!r}: unknown feature(s) {unknown}; "
                             f"known: {list(QUESTION_AGNOSTIC)}")
        raw = feats[list(names or GENERIC_FEATURES)].to_numpy()
        for norm in normalize:
            X = per_question_zscore(raw, qs) if norm else raw
            for model, cw in [(m, c) for m in models for c in class_weights]:
                for C in Cs if model == "logreg" else [1.0]:
                    clf = FeatureClassifier(encoder)
                    pred = np.empty(len(tr), dtype=object)
                    for q in dict.fromkeys(qs):
                        held = qs == q
                        pred[held] = clf._make(C, cw, model).fit(X[~held], y[~held]) \
                            .predict(X[held])
                    rows.append({
                        "generic_model": model, "feature_set": set_name,
                        "generic_feature_names": names,
                        "normalize_unseen": norm, "generic_class_weight": cw or "none",
                        "generic_C": C, "accuracy": M.metric("accuracy").score(y, pred).value,
                        "macro_f1": M.metric("macro_f1").score(y, pred,
                                                               labels=SAF_LABELS).value,
                        "per_question": per_question_accuracy(qs, y, pred),
                        "oof": dict(zip(ids, map(str, pred), strict=True))})
    return pd.DataFrame(rows)


