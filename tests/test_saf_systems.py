"""saf_utils.saf.systems: majority and nearest-neighbour baselines, reference thresholds,
the feedback bank, features and the feature classifier (hand-made frames; real data when
SAF_DATA is set)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from fakes import bow_encoder
from saf_frames import toy_frame
from threadpoolctl import threadpool_limits

from saf_utils.saf import baselines, features, reference
from saf_utils.saf import experiments as R
from saf_utils.saf import formats as S
from saf_utils.saf import systems as SY
from saf_utils.saf.context import SAFData


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """Gradient boosting's OpenMP threads crawl on shared cores; one thread is fast here."""
    with threadpool_limits(1, user_api="openmp"):
        yield


# --------------------------------------------------------------------------- baselines


def test_majority_baseline_backs_off_for_unseen_questions():
    train = toy_frame("train")
    test = pd.concat([toy_frame("test", ("Q1",), 3), toy_frame("test", ("Q3",), 3)])
    p = baselines.majority_baseline(train, test)
    assert p.backoff.tolist() == [False] * 3 + [True] * 3
    assert set(p.pred_label) <= set(S.SAF_LABELS)
    assert (p.pred_feedback != "").all()


def test_nearest_neighbour_baseline_copies_neighbour():
    train = toy_frame("train")
    test = train.iloc[:4].assign(split="test")
    p = baselines.nearest_neighbour_baseline(train, test, bow_encoder)
    # identical answers: the neighbour is the row itself (or an identical copy)
    assert (p.pred_label.to_numpy() == test.verification_feedback.to_numpy()).all()
    unseen = toy_frame("test", ("Q3",), 3)
    pu = baselines.nearest_neighbour_baseline(train, unseen, bow_encoder)
    assert pu.backoff.all() and set(pu.pred_label) <= set(S.SAF_LABELS)


def test_reference_thresholds_fit():
    cos = np.array([0.1, 0.2, 0.5, 0.55, 0.9, 0.95])
    y = ["Incorrect", "Incorrect", "Partially correct", "Partially correct", "Correct", "Correct"]
    thr = baselines.ReferenceThresholds().fit(cos, y)
    assert thr.predict(cos) == y


def test_feedback_bank_strategies():
    train = toy_frame("train")
    bank = baselines.FeedbackBank(train, bow_encoder)
    assert bank.most_frequent("Q1", "Correct") == "Korrekt!"
    assert bank.unseen("Q1 neu", "Ref (0.5 P) text", "Correct") == "Korrekt!"
    assert bank.unseen("Q9", "Ref (0.5 P) text", "Incorrect", "reference") == "Ref text"
    assert bank.unseen("Q1", "r", "Incorrect", "nearest_question").startswith("Leider falsch")
    with pytest.raises(ValueError, match="strategy"):
        bank.unseen("Q1", "r", "Incorrect", "magic")


def test_strip_points():
    assert (reference.strip_points("A (0.25 P) und B (je 0.25 P), C (0.25-0.5 P).")
            == "A und B , C .")


def test_generic_and_knn_features_shapes():
    train = toy_frame("train")
    f = features.generic_features(train, bow_encoder)
    assert list(f.columns) == list(features.QUESTION_AGNOSTIC) and f.notna().all().all()
    a = bow_encoder(train.provided_answer.tolist())
    k = features.knn_features(train, a, train, a, k=3, leave_one_out=True)
    assert len(k) == len(train) and k.notna().all().all()
    shares = k[[f"knn_{lab}" for lab in S.SAF_LABELS]].sum(axis=1)
    assert np.allclose(shares, 1.0)


@pytest.mark.parametrize("model,feedback", [("logreg", "most_frequent"), ("logreg", "nearest")])
def test_feature_classifier_fits_and_predicts(model, feedback):
    train = toy_frame("train", n_per=9)
    test = pd.concat([toy_frame("test", ("Q1", "Q2"), 6, seed=1), toy_frame("t", ("Q3",), 3)])
    clf = features.FeatureClassifier(bow_encoder, model=model, feedback=feedback,
                              normalize_unseen=True).fit(train)
    p = clf.predict(test)
    assert len(p) == len(test) and set(p.pred_label) <= set(S.SAF_LABELS)
    assert p.backoff.tolist() == [False] * 12 + [True] * 3
    seen = p[~p.backoff]
    assert (seen.pred_label == seen.gold_label).mean() >= 0.75
    assert p.pred_score.between(0, 1).all()


def test_classifier_choices():
    clf = features.FeatureClassifier(bow_encoder)
    assert clf._make(1.0, None).__class__.__name__ == "Pipeline"
    assert clf._make(1.0, "none")[-1].class_weight is None
    assert clf._make(1.0, float("nan"))[-1].class_weight is None
    assert clf._make(1.0).__class__.__name__ == "Pipeline"
    assert features.FeatureClassifier(bow_encoder, model="hgb")._make(1.0).__class__.__name__ == \
        "HistGradientBoostingClassifier"
    with pytest.raises(ValueError, match="classifier"):
        features.FeatureClassifier(bow_encoder, model="svm")._make(1.0)


def test_grouped_cv_generic_table():
    cv = features.grouped_cv_generic(toy_frame("train", ("Q1", "Q2", "Q3"), 6), bow_encoder,
                              Cs=(1.0,), class_weights=(None,), normalize=(False, True),
                              feature_sets={"all": None, "cos": ["cos_ref"]})
    assert len(cv) == 4 and cv.accuracy.between(0, 1).all()
    assert set(cv.feature_set) == {"all", "cos"}
    with pytest.raises(ValueError, match="unknown feature"):
        features.grouped_cv_generic(toy_frame("train"), bow_encoder, feature_sets={"x": ["nope"]})
    clf = features.FeatureClassifier(bow_encoder, generic_feature_names=["cos_ref"]).fit(
        toy_frame("train", ("Q1", "Q2"), 6))
    assert len(clf.predict(toy_frame("t", ("Q3",), 3))) == 3


def test_per_question_zscore():
    x = np.array([[1.0], [3.0], [10.0], [10.0]])
    z = features.per_question_zscore(x, ["a", "a", "b", "b"])
    assert np.allclose(z[:2, 0], [-1, 1], atol=1e-4) and np.allclose(z[2:, 0], 0)


@pytest.mark.realdata
@pytest.mark.skipif(not os.environ.get("SAF_DATA"), reason="SAF_DATA not set")
def test_majority_baseline_on_real_data():
    from saf_utils.saf.data import load_saf

    d = load_saf(splits=["train", "test_unseen_questions"])
    train = S.saf_frame(d["train"], "train")
    uq = S.saf_frame(d["test_unseen_questions"], "test_unseen_questions")
    p = baselines.majority_baseline(train, uq)
    assert p.backoff.all() and len(p) == len(uq)


def test_grouped_cv_scores_the_deployed_generic_model():
    from threadpoolctl import threadpool_limits

    train = toy_frame("train", ("Q1", "Q2", "Q3"), 6)
    with threadpool_limits(1):  # HGB's OpenMP threads crawl on a busy machine
        cv = features.grouped_cv_generic(train, bow_encoder, Cs=(0.1, 1.0), normalize=(False,),
                                        class_weights=("balanced",), models=("logreg", "hgb"))
    assert set(cv.generic_model) == {"logreg", "hgb"}
    assert cv[cv.generic_model == "hgb"].generic_C.tolist() == [1.0]  # C is logreg's
    clf = features.FeatureClassifier(bow_encoder, model="hgb", generic_model="logreg").fit(train)
    assert type(clf._generic).__name__ == "Pipeline" and type(clf._seen).__name__ != "Pipeline"


def test_with_generic_refits_only_the_unseen_question_model():
    train = toy_frame("train", ("Q1", "Q2"), 6)
    clf = features.FeatureClassifier(bow_encoder).fit(train)
    other = clf.with_generic(normalize_unseen=True, generic_C=0.1)
    assert other._seen is clf._seen and other._generic is not clf._generic
    assert other.normalize_unseen and not clf.normalize_unseen
    assert len(other.predict(toy_frame("t", ("Q3",), 3))) == 3
    with pytest.raises(ValueError, match="seen-question"):
        clf.with_generic(model="hgb")


# --------------------------------------------------------------------------- other encoders


def test_choose_encoders_by_language():
    from saf_utils.encoders.multilingual import E5_NAME, USE_NAME
    from saf_utils.encoders.sentence import DEFAULT_ENCODER

    de = R.choose_encoders("de")
    assert (de.sentence, de.cross_encoder) == (E5_NAME, E5_NAME)
    assert de.extras == (DEFAULT_ENCODER, USE_NAME) and len(de.defaulted) == 3
    en = R.choose_encoders("en", extra_encoders=[USE_NAME, DEFAULT_ENCODER])
    assert (en.sentence, en.extras, en.cross_encoder) == (DEFAULT_ENCODER, (USE_NAME,),
                                                          DEFAULT_ENCODER)
    assert "`feature_clf:use`" in en.describe() and "set by the run" in en.describe()
    hub = R.choose_encoders("de", "sentence-transformers/LaBSE", [],
                            {"cross_encoder": {"model": "xlm-roberta-base"}})
    assert hub.extras == () and hub.cross_encoder == "xlm-roberta-base" and not hub.defaulted


@pytest.mark.slow
def test_encoder_variants_are_tuned_and_named_per_encoder(monkeypatch):
    def shifted(texts):  # a second, different encoder
        return bow_encoder([t[::-1] for t in texts])

    fakes = {"enc-a": bow_encoder, "org/enc-b": shifted}
    monkeypatch.setattr(SY, "make_encoder", lambda name: fakes[name])
    data = SAFData(toy_frame("train"), {
        "validation": toy_frame("validation", seed=1),
        "test_unseen_questions": toy_frame("test_unseen_questions", ("Q3",), 3)}, "toy")
    fc = {"models": ["logreg"], "Cs": [1.0], "feedback_strategies": ["most_frequent"]}
    encoders = R.choose_encoders("en", "bow", list(fakes))
    out = R.run_systems(data, ["feature_clf", "nearest_neighbour:", "feature_clf:"], encoders,
                        {"feature_clf": fc, "feature_clf:": fc}, embed=bow_encoder)
    v = out.preds[out.preds.system.map(lambda s: SY.SYSTEMS[s].name.endswith(":"))]
    assert set(v.system) == {"nearest_neighbour:enc-a", "feature_clf:enc-a",
                             "nearest_neighbour:enc-b", "feature_clf:enc-b"}
    assert {SY.SYSTEMS[s].role for s in v.system} == {"baseline", "system"}
    assert set(out.state.variant_tunings) == set(fakes)
    assert set(v.system) <= set(out.state.seconds)
    assert len(v) == 4 * (len(data.evals["validation"]) + 3)
    cv = out.unseen_cv
    assert set(v.system) <= set(cv.system)
    assert (cv[cv.system.isin(set(v.system))].protocol == "leave one question out").all()
    assert {"feature_clf:enc-b", "nearest_neighbour", "feature_clf"} <= set(cv.system)
    # rows in the stated order: per further encoder its nearest_neighbour, then feature_clf
    assert cv.system.tolist()[2:6] == ["nearest_neighbour:enc-a", "feature_clf:enc-a",
                                       "nearest_neighbour:enc-b", "feature_clf:enc-b"]
