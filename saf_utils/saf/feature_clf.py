"""Tuning and running the feature classifier (``feature_clf`` and its variants).

Every choice is made without a test split: the seen-question model on **validation**, the
unseen-question model by leave-one-question-out CV on **train** (validation holds only
seen questions), both through :func:`saf_utils.statistics.validation_choice.choose_row`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from saf_utils.saf import scores as EV
from saf_utils.saf.baselines import UnseenFeedback, loqo_baselines, nearest_neighbour_baseline
from saf_utils.saf.features import QUESTION_AGNOSTIC, FeatureClassifier, grouped_cv_generic
from saf_utils.saf.reference import ALIGNMENT_FEATURES
from saf_utils.statistics import validation_choice


@dataclass
class FeatureClfTuning:
    """Choices of :func:`tune_feature_clf` and the tables they were made on."""

    grid: pd.DataFrame  # validation grid of the seen-question model
    cv: pd.DataFrame  # leave-one-question-out CV on train of the unseen-question model
    config: dict[str, Any]  # chosen (inductive) FeatureClassifier settings
    transductive_config: dict[str, Any] | None  # best transductive unseen-question variant
    selection: str  # how the seen-question model was chosen
    cv_choice: dict[bool, int]  # normalize_unseen -> row of ``cv`` chosen (inductive: False)


def _seen_grid(data: Any, encoder: Any, models: Sequence[str], Cs: Sequence[float],
               feedback_strategies: Sequence[str]) -> pd.DataFrame:
    """Validation scores of every seen-question setting (classifier, C, feedback)."""
    val = data.evals["validation"]
    rows = []
    for model in models:
        for C in Cs if model == "logreg" else [1.0]:
            clf = FeatureClassifier(encoder, model=model, C=C).fit(data.train)
            for fb in feedback_strategies:
                clf.feedback = fb
                m = EV.evaluate_predictions(clf.predict(val), embedding_metrics=False)
                rows.append({"model": model, "C": C, "feedback": fb,
                             **{k: m[k] for k in ("accuracy", "macro_f1", "sacrebleu")}})
    grid = pd.DataFrame(rows)
    grid["selection_score"] = grid.macro_f1 + grid.sacrebleu / 100
    return grid


def _generic(row: pd.Series) -> dict[str, Any]:
    """FeatureClassifier settings of one row of the unseen-question CV."""
    return {"generic_model": row.generic_model, "generic_C": float(row.generic_C),
            "generic_class_weight": row.generic_class_weight,
            "generic_feature_names": row.generic_feature_names,
            "normalize_unseen": bool(row.normalize_unseen)}


def tune_feature_clf(data: Any, encoder: Any, models: Sequence[str], Cs: Sequence[float],
                     feedback_strategies: Sequence[str],
                     generic_feature_sets: Mapping[str, Sequence[str] | None] | None,
                     transductive: bool = True, generic_models: Sequence[str] = ("logreg",)
                     ) -> FeatureClfTuning:
    """Choose the feature classifier's settings without looking at any test split.

    The seen-question grid is scored on **validation** (macro-F1 + BLEU/100); the
    unseen-question model by leave-one-question-out CV on **train** (logistic regression:
    gradient boosting costs minutes there and overfits six questions). The chosen config is
    inductive; ``transductive=True`` keeps the best per-question z-scored variant as
    ``transductive_config``.
    """
    if "validation" not in data.evals:
        raise ValueError("tune_feature_clf needs a validation split")
    grid = _seen_grid(data, encoder, models, Cs, feedback_strategies)
    best = grid.iloc[validation_choice.choose_row(grid, "selection_score", "validation")]
    cv = grouped_cv_generic(data.train, encoder, Cs=Cs, feature_sets=generic_feature_sets,
                            normalize=(False, True) if transductive else (False,),
                            models=generic_models)
    chosen = {norm: int(sub.index[validation_choice.choose_row(sub, "macro_f1", "train")])
              for norm, sub in cv.groupby("normalize_unseen", sort=True)}
    seen = {"model": best.model, "C": float(best.C), "feedback": best.feedback}
    config = {**seen, **_generic(cv.loc[chosen[False]])}
    trans = ({**seen, **_generic(cv.loc[chosen[True]])} if True in chosen else None)
    return FeatureClfTuning(grid, cv, config, trans, "validation: macro_f1 + sacrebleu/100",
                            chosen)


def cv_row(tuning: FeatureClfTuning, system: str, normalize: bool = False) -> pd.DataFrame:
    """The chosen unseen-question CV row of ``tuning`` as a row of the unseen-question table
    (``system, accuracy, macro_f1, per_question``); empty without that variant."""
    if normalize not in tuning.cv_choice:
        return pd.DataFrame(columns=["system", "accuracy", "macro_f1", "per_question", "oof"])
    r = tuning.cv.loc[tuning.cv_choice[normalize]]
    return pd.DataFrame([{"system": system, "accuracy": r.accuracy, "macro_f1": r.macro_f1,
                          "per_question": r.per_question, "oof": r.get("oof")}])


def fitted_per_seed(data: Any, encoder: Any, config: Mapping[str, Any], seeds: Sequence[int],
                    system: str = "feature_clf", **extra: Any) -> list[FeatureClassifier]:
    """One fitted classifier per seed with the chosen ``config``."""
    return [FeatureClassifier(encoder, seed=seed, system=system, **extra, **config)
            .fit(data.train) for seed in seeds]


def predict_all(data: Any, classifiers: Sequence[FeatureClassifier],
                unseen_only: bool = False) -> pd.DataFrame:
    """Predictions of every classifier on every eval split (``unseen_only``: the splits
    with unseen questions), seeds that change nothing collapsed to one table."""
    seen = set(data.train.question)
    out = [clf.predict(df) for clf in classifiers for df in data.evals.values()
           if not unseen_only or not df.question.isin(seen).all()]
    return EV.collapse_identical_seeds(pd.concat(out, ignore_index=True))


def nearest_neighbour_variant(data: Any, encoder: Any, system: str,
                              unseen_feedback: UnseenFeedback = "nearest_question"
                              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``nearest_neighbour`` on another encoder: predictions and its LOQO row."""
    preds = pd.concat([nearest_neighbour_baseline(data.train, df, encoder, system=system,
                                                  unseen_feedback=unseen_feedback)
                       for df in data.evals.values()], ignore_index=True)
    loqo = loqo_baselines(data.train, encoder)
    return preds, loqo[loqo.system == "nearest_neighbour"].assign(system=system)


@dataclass(frozen=True)
class FeatureClfParams:
    """Candidates of the feature classifier, chosen on validation (seen questions) and by
    leave-one-question-out CV on train (unseen questions)."""

    models: tuple[str, ...] = ("logreg", "hgb")  # seen-question classifier candidates
    Cs: tuple[float, ...] = (0.1, 1.0)  # regularisation candidates of the logistic regression
    feedback_strategies: tuple[str, ...] = ("most_frequent", "nearest")
    #: unseen-question feature sets (name -> feature names, None: all), CV candidates
    generic_feature_sets: dict = field(default_factory=lambda: {
        "all": None, "cos": ["cos_ref"],
        "core": ["cos_ref", "cos_ref_sent_max", "ref_recall", "log_len"],
        "core+alignment": ["cos_ref", "cos_ref_sent_max", "ref_recall", "log_len",
                           *ALIGNMENT_FEATURES],
        "all+alignment": list(QUESTION_AGNOSTIC)})
    generic_models: tuple[str, ...] = ("logreg",)  # unseen-question classifier candidates

    def tune(self, data: Any, encoder: Any, transductive: bool) -> FeatureClfTuning:
        """:func:`tune_feature_clf` over these candidates."""
        return tune_feature_clf(data, encoder, self.models, self.Cs, self.feedback_strategies,
                                self.generic_feature_sets, transductive, self.generic_models)


@dataclass
class FeatureClfRun:
    """``feature_clf``'s choices and its fitted classifiers (one per seed)."""

    params: FeatureClfParams
    tuning: FeatureClfTuning
    classifiers: list
