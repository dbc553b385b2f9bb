"""Unit tests for saf_utils.saf: formats, the output parser, baselines, classifier, analysis."""

from __future__ import annotations

import os
import types
import zlib

import numpy as np
import pandas as pd
import pytest

from saf_utils import artifacts as AR
from saf_utils.saf import evaluation, systems
from saf_utils.saf import formats as S
from saf_utils.text import word_tokens

DE = S.prompt_words("de")
EN = S.prompt_words("en")


def bow_encoder(texts):
    """Deterministic bag-of-words hashing encoder (no model download)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in word_tokens(t):
            out[i, zlib.crc32(w.encode()) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def toy_frame(split: str, questions=("Q1", "Q2"), n_per=6, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    refs = {"Q1": "Das Foto der Tür (0.5 P) und die Antwort im Formular (0.5 P).",
            "Q2": "Tanken (0.25 P) und im Shop einkaufen (0.25 P), Budget 16 Euro.",
            "Q3": "Seife und Papier müssen vorhanden sein (0.5 P)."}
    good = {"Q1": "foto der tür und antwort im formular", "Q2": "tanken und shop einkaufen budget",
            "Q3": "seife und papier vorhanden"}
    for q in questions:
        for j in range(n_per):
            kind = j % 3
            if kind == 0:
                ans, lab, sc, fb = good[q], "Correct", 1.0, "Korrekt!"
            elif kind == 1:
                ans = good[q].split(" und ")[0] + f" vielleicht {rng.integers(9)}"
                lab, sc, fb = "Partially correct", 0.5, f"Teilweise: {q} fehlt etwas."
            else:
                ans, lab, sc, fb = f"keine ahnung {rng.integers(99)}", "Incorrect", 0.0, \
                    f"Leider falsch zu {q}."
            rows.append({"id": f"{split}-{q}-{j}", "question": q, "reference_answer": refs[q],
                         "provided_answer": ans, "answer_feedback": fb,
                         "verification_feedback": lab, "score": sc})
    return pd.DataFrame(rows).assign(split=split)


# --------------------------------------------------------------------------- formats


def test_source_and_target_formats_match_hub_cards():
    src = S.make_source(" Ich  gebe mich zu erkennen ", "Zu erkennen geben.", "Frage 1: Wie?", DE)
    assert src == ("Antwort: Ich gebe mich zu erkennen Lösung: Zu erkennen geben. "
                   "Frage: Frage 1: Wie?")
    assert S.make_source("a", "r", None, DE) == "Antwort: a Lösung: r"
    assert S.make_target("Gut so.", "Partially correct", words=DE) == \
        "Partially correct Feedback: Gut so."
    assert S.make_target("ok", score=0.75, mode="score") == "0.75 Feedback: ok"
    assert S.make_target("ok", score=1.0, mode="score") == "1 Feedback: ok"
    assert S.make_target("ok", score=0.5, mode="score") == "0.5 Feedback: ok"
    assert S.make_source("a", "r", "q", EN) == "Answer: a Reference: r Question: q"


def test_format_errors_are_clear():
    with pytest.raises(ValueError, match="label"):
        S.make_target("x", "Wrong")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        S.make_target("x", score=1.5, mode="score")
    with pytest.raises(ValueError, match="mode"):
        S.make_target("x", "Correct", mode="grade")
    with pytest.raises(ValueError, match="lack"):
        S.prompt_words("fr")
    words = S.prompt_words("fr", {"answer": "Réponse", "reference": "Solution",
                                  "question": "Question", "feedback": "Commentaire"})
    assert S.make_target("x", "Correct", words=words) == "Correct Commentaire: x"


def test_format_examples_question_switch():
    df = toy_frame("train", n_per=3)
    src, tgt = S.format_examples(df, "verification", include_question=False, words=DE)
    assert len(src) == len(tgt) == len(df)
    assert "Frage:" not in src[0] and tgt[0].startswith("Correct Feedback: ")
    _, tgt_s = S.format_examples(df, "score", words=DE)
    assert tgt_s[1].startswith("0.5 Feedback: ")


# --------------------------------------------------------------------------- parser


@pytest.mark.parametrize("text,label,feedback", [
    ("Correct Feedback: Korrekt!", "Correct", "Korrekt!"),
    ("Partially correct Feedback: Fast.", "Partially correct", "Fast."),
    ("partially correct Feedback: klein geschrieben", "Partially correct", "klein geschrieben"),
    ("PARTIALLY   CORRECT   feedback :   viele  Leerzeichen", "Partially correct",
     "viele Leerzeichen"),
    ("Incorrect Feedback: Nein.", "Incorrect", "Nein."),
    ("incorrect feedback: nein", "Incorrect", "nein"),
    ("  Correct   Feedback:Korrekt!  ", "Correct", "Korrekt!"),
    ("<pad> Correct Feedback: Korrekt!</s>", "Correct", "Korrekt!"),
    ("Correct. Feedback: Punkt nach dem Label", "Correct", "Punkt nach dem Label"),
    ("Partially correct Korrekt, aber unvollständig", "Partially correct",
     "Korrekt, aber unvollständig"),
    ("Correct", "Correct", ""),
    ("Partially-correct Feedback: Bindestrich", "Partially correct", "Bindestrich"),
])
def test_parser_recovers_labels(text, label, feedback):
    p = S.parse_output(text)
    assert p.parseable and p.label == label and p.feedback == feedback
    assert p.score == S.LABEL_SCORE[label]
    assert p.raw == text


def test_parser_prefix_ambiguity():
    # "Partially correct" must never be read as "Correct", nor "Incorrect" as "Correct".
    assert S.parse_output("Partially correct Feedback: x").label == "Partially correct"
    assert S.parse_output("Incorrect Feedback: x").label == "Incorrect"
    assert S.parse_output("Correctness Feedback: x").label is None
    assert S.parse_output("Partially Feedback: x").label is None


@pytest.mark.parametrize("text", ["", None, "   ", "Feedback: nur Feedback", "Vielleicht richtig",
                                  "<pad></s>", "Correctly Feedback: x", "🙂 Feedback:"])
def test_parser_never_raises_on_garbage(text):
    p = S.parse_output(text)
    assert not p.parseable and p.label is None and p.score is None and p.problem


def test_parser_missing_marker_keeps_text_as_feedback():
    p = S.parse_output("irgendein Text ohne Label")
    assert not p.parseable and p.feedback == "irgendein Text ohne Label"
    assert "no feedback marker" in p.problem
    p2 = S.parse_output("Correct Korrekt!")
    assert p2.label == "Correct" and p2.feedback == "Korrekt!"
    assert "no feedback marker" in p2.problem


def test_parser_extra_text_before_marker_is_noted():
    p = S.parse_output("Correct weil gut Feedback: Korrekt!")
    assert p.label == "Correct" and p.feedback == "Korrekt!" and "extra text" in p.problem


@pytest.mark.parametrize("text,score,label", [
    ("0.75 Feedback: Fast.", 0.75, "Partially correct"),
    ("1 Feedback: Korrekt!", 1.0, "Correct"),
    ("1.0 Feedback: Korrekt!", 1.0, "Correct"),
    ("0 feedback: falsch", 0.0, "Incorrect"),
    ("0,5 Feedback: Komma", 0.5, "Partially correct"),
    (".25 Feedback: ohne Null", 0.25, "Partially correct"),
    ("0.5 ohne Marker", 0.5, "Partially correct"),
    ("0.5. Feedback: Punkt", 0.5, "Partially correct"),
    ("0.25: ohne Marker", 0.25, "Partially correct"),
])
def test_parser_score_mode(text, score, label):
    p = S.parse_output(text, mode="score")
    assert p.parseable and p.score == pytest.approx(score) and p.label == label


@pytest.mark.parametrize("text", ["1.5 Feedback: zu groß", "-0.5 Feedback: negativ",
                                  "Correct Feedback: Label statt Score", ""])
def test_parser_score_mode_unparseable(text):
    p = S.parse_output(text, mode="score")
    assert not p.parseable and p.score is None


@pytest.mark.parametrize("text", ["1e-1 Feedback: Exponent", "0,25,5 Feedback: zwei Kommas",
                                  "0.5.5 Feedback: zwei Punkte", "٠٫٥ Feedback: arabisch",
                                  "0٫5 Feedback: arabisches Komma", "０.５ Feedback: breit",
                                  "1/2 Feedback: Bruch", "50% Feedback: Prozent",
                                  "½ Feedback: Bruchzeichen", "0.5ohne Leerzeichen"])
def test_parser_score_mode_never_reads_a_wrong_number(text):
    p = S.parse_output(text, mode="score")
    assert not p.parseable and p.score is None and p.label is None
    assert "not a plain decimal score" in p.problem
    t = S.parsed_prediction_table(toy_frame("validation", n_per=3, questions=("Q1",)), "m",
                                  [text] * 3, mode="score")
    assert (~t.parseable).sum() == 3  # counted as unparseable


def test_parser_other_language_marker():
    words = {**EN, "feedback": "Rückmeldung"}
    p = S.parse_output("Incorrect Rückmeldung: Nein", words=words)
    assert p.label == "Incorrect" and p.feedback == "Nein"
    with pytest.raises(ValueError, match="mode"):
        S.parse_output("x", mode="nope")


def test_score_to_label():
    assert S.score_to_label(1.0) == "Correct"
    assert S.score_to_label(0.0) == "Incorrect"
    assert S.score_to_label(0.25) == "Partially correct"


# --------------------------------------------------------------------------- tables


def test_parsed_prediction_table_keeps_unparseable(tmp_path):
    gold = toy_frame("validation", n_per=3, questions=("Q1",))
    outs = ["Correct Feedback: Korrekt!", "blah", "partially correct Feedback: x"]
    t = S.parsed_prediction_table(gold, "m", outs, seed=3)
    assert list(t.columns[: len(S.PREDICTION_COLUMNS)]) == list(S.PREDICTION_COLUMNS)
    assert t.parseable.tolist() == [True, False, True]
    assert pd.isna(t.pred_label.tolist()[1]) and t.raw_output.tolist()[1] == "blah"
    AR.write_saf_predictions(t, tmp_path)
    back = AR.read_saf_predictions(tmp_path)
    assert len(back) == 3 and back.pred_label.isna().sum() == 1 and back.seed.iloc[0] == 3
    with pytest.raises(ValueError, match="labels"):
        S.prediction_table(gold, "m", labels=["Correct"], scores=[1.0] * 3, feedback=[""] * 3)


def test_saf_frame_sampling_is_fixed():
    class DS:
        def to_pandas(self):
            return toy_frame("x", n_per=10)
    a, b = S.saf_frame(DS(), "validation", max_rows=5), S.saf_frame(DS(), "validation", 5)
    assert a.id.tolist() == b.id.tolist() and len(a) == 5 and (a.split == "validation").all()


# --------------------------------------------------------------------------- baselines


def test_majority_baseline_backs_off_for_unseen_questions():
    train = toy_frame("train")
    test = pd.concat([toy_frame("test", ("Q1",), 3), toy_frame("test", ("Q3",), 3)])
    p = systems.majority_baseline(train, test)
    assert p.backoff.tolist() == [False] * 3 + [True] * 3
    assert set(p.pred_label) <= set(S.SAF_LABELS)
    assert (p.pred_feedback != "").all()


def test_nearest_neighbour_baseline_copies_neighbour():
    train = toy_frame("train")
    test = train.iloc[:4].assign(split="test")
    p = systems.nearest_neighbour_baseline(train, test, bow_encoder)
    # identical answers: the neighbour is the row itself (or an identical copy)
    assert (p.pred_label.to_numpy() == test.verification_feedback.to_numpy()).all()
    unseen = toy_frame("test", ("Q3",), 3)
    pu = systems.nearest_neighbour_baseline(train, unseen, bow_encoder)
    assert pu.backoff.all() and set(pu.pred_label) <= set(S.SAF_LABELS)


def test_reference_thresholds_fit():
    cos = np.array([0.1, 0.2, 0.5, 0.55, 0.9, 0.95])
    y = ["Incorrect", "Incorrect", "Partially correct", "Partially correct", "Correct", "Correct"]
    thr = systems.ReferenceThresholds().fit(cos, y)
    assert thr.predict(cos) == y


def test_feedback_bank_strategies():
    train = toy_frame("train")
    bank = systems.FeedbackBank(train, bow_encoder)
    assert bank.most_frequent("Q1", "Correct") == "Korrekt!"
    assert bank.unseen("Q1 neu", "Ref (0.5 P) text", "Correct") == "Korrekt!"
    assert bank.unseen("Q9", "Ref (0.5 P) text", "Incorrect", "reference") == "Ref text"
    assert bank.unseen("Q1", "r", "Incorrect", "nearest_question").startswith("Leider falsch")
    with pytest.raises(ValueError, match="strategy"):
        bank.unseen("Q1", "r", "Incorrect", "magic")


def test_strip_points():
    assert systems.strip_points("A (0.25 P) und B (je 0.25 P), C (0.25-0.5 P).") == "A und B , C ."


def test_generic_and_knn_features_shapes():
    train = toy_frame("train")
    f = systems.generic_features(train, bow_encoder)
    assert list(f.columns) == list(systems.GENERIC_FEATURES) and f.notna().all().all()
    a = bow_encoder(train.provided_answer.tolist())
    k = systems.knn_features(train, a, train, a, k=3, leave_one_out=True)
    assert len(k) == len(train) and k.notna().all().all()
    shares = k[[f"knn_{lab}" for lab in S.SAF_LABELS]].sum(axis=1)
    assert np.allclose(shares, 1.0)


@pytest.mark.parametrize("model,feedback", [("logreg", "most_frequent"), ("logreg", "nearest")])
def test_feature_classifier_fits_and_predicts(model, feedback):
    train = toy_frame("train", n_per=9)
    test = pd.concat([toy_frame("test", ("Q1", "Q2"), 6, seed=1), toy_frame("t", ("Q3",), 3)])
    clf = systems.FeatureClassifier(bow_encoder, model=model, feedback=feedback,
                              normalize_unseen=True).fit(train)
    p = clf.predict(test)
    assert len(p) == len(test) and set(p.pred_label) <= set(S.SAF_LABELS)
    assert p.backoff.tolist() == [False] * 12 + [True] * 3
    seen = p[~p.backoff]
    assert (seen.pred_label == seen.gold_label).mean() >= 0.75
    assert p.pred_score.between(0, 1).all()


def test_classifier_choices():
    clf = systems.FeatureClassifier(bow_encoder)
    assert clf._make(1.0, None).__class__.__name__ == "Pipeline"
    assert clf._make(1.0, "none")[-1].class_weight is None
    assert clf._make(1.0, float("nan"))[-1].class_weight is None
    assert clf._make(1.0).__class__.__name__ == "Pipeline"
    assert systems.FeatureClassifier(bow_encoder, model="hgb")._make(1.0).__class__.__name__ == \
        "HistGradientBoostingClassifier"
    with pytest.raises(ValueError, match="classifier"):
        systems.FeatureClassifier(bow_encoder, model="svm")._make(1.0)


def test_grouped_cv_generic_table():
    cv = systems.grouped_cv_generic(toy_frame("train", ("Q1", "Q2", "Q3"), 6), bow_encoder,
                              Cs=(1.0,), class_weights=(None,), normalize=(False, True),
                              feature_sets={"all": None, "cos": ["cos_ref"]})
    assert len(cv) == 4 and cv.accuracy.between(0, 1).all()
    assert set(cv.feature_set) == {"all", "cos"}
    with pytest.raises(ValueError, match="unknown feature"):
        systems.grouped_cv_generic(toy_frame("train"), bow_encoder, feature_sets={"x": ["nope"]})
    clf = systems.FeatureClassifier(bow_encoder, generic_feature_names=["cos_ref"]).fit(
        toy_frame("train", ("Q1", "Q2"), 6))
    assert len(clf.predict(toy_frame("t", ("Q3",), 3))) == 3


def test_per_question_zscore():
    x = np.array([[1.0], [3.0], [10.0], [10.0]])
    z = systems.per_question_zscore(x, ["a", "a", "b", "b"])
    assert np.allclose(z[:2, 0], [-1, 1], atol=1e-4) and np.allclose(z[2:, 0], 0)


# --------------------------------------------------------------------------- evaluation


def _preds():
    gold = toy_frame("test_unseen_answers", ("Q1", "Q2"), 3)
    outs = ["Correct Feedback: Korrekt!", "Incorrect Feedback: Teilweise: Q1 fehlt etwas.",
            "kaputt", "Correct Feedback: Korrekt!", "Partially correct Feedback: Teilweise",
            "Incorrect Feedback: Leider falsch zu Q2."]
    return S.parsed_prediction_table(gold, "m", outs, seed=1)


def test_evaluate_predictions_counts_unparseable():
    m = evaluation.evaluate_predictions(_preds(), embedding_metrics=False)
    assert m["n_unparseable"] == 1 and m["accuracy"] == pytest.approx(4 / 6)
    assert 0 <= m["macro_f1"] <= 1 and 0 <= m["sacrebleu"] <= 100 and "mse" in m
    assert m["mse_max_penalty"] >= m["mse"] * 5 / 6


def _two_systems(seeds=(None,)):
    """Prediction tables of two label systems (+ seeds) on 3 questions, 18 answers."""
    gold = toy_frame("test_unseen_answers", ("Q1", "Q2", "Q3"), 6)
    rng = np.random.default_rng(0)
    tables = []
    for system, noise in (("ref", 0.5), ("sys", 0.2)):
        for seed in seeds:
            flip = rng.random(len(gold)) < noise
            labels = [S.SAF_LABELS[(S.SAF_LABELS.index(g) + 1) % 3] if f else g
                      for g, f in zip(gold.verification_feedback, flip, strict=True)]
            fbs = [f if not fl else "anders" for f, fl in zip(gold.answer_feedback, flip,
                                                               strict=True)]
            tables.append(S.prediction_table(gold, system, labels=labels,
                                             scores=[S.LABEL_SCORE[x] for x in labels],
                                             feedback=fbs, seed=seed))
    return pd.concat(tables, ignore_index=True)


def test_collapse_identical_seeds():
    p = _preds()
    both = pd.concat([p, p.assign(seed=2)], ignore_index=True)
    c = evaluation.collapse_identical_seeds(both)
    assert len(c) == len(p) and c.seed.isna().all()
    other = p.assign(seed=2, pred_feedback="x")
    c2 = evaluation.collapse_identical_seeds(pd.concat([p, other], ignore_index=True))
    assert sorted(c2.seed.dropna().unique()) == [1, 2]


def test_item_scores_mean_equals_point_metrics():
    p = _preds()
    items = evaluation.item_scores(p, embedding_metrics=False)
    point = evaluation.evaluate_predictions(p, embedding_metrics=False)
    means = items.groupby("metric").value.mean()
    for m in ("accuracy", "mse", "mse_max_penalty", "rouge2", "meteor", "unparseable_rate"):
        assert means[m] == pytest.approx(point[m]), m
    assert items[items.metric == "mse"].shape[0] == 5  # the unparseable row has no score
    assert set(items.question) == {"Q1", "Q2"}
    rows = evaluation.recorder_items(items, "saf", "toy")
    assert rows.cluster.tolist() == items.question.tolist() and rows.fold.isna().all()


@pytest.mark.parametrize("metric", ["macro_f1", "weighted_f1", "sacrebleu", "chrf"])
def test_corpus_stat_matches_point_metric(metric):
    p = _preds()
    mat, fn = evaluation.corpus_stat(metric, p)
    point = evaluation.evaluate_predictions(p, embedding_metrics=False)[metric]
    assert float(fn(mat.sum(0)[None])[0]) == pytest.approx(point)


def _designs(p):
    return {s: evaluation.design_for(g.question.nunique(), n_resamples=200)
            for s, g in p.groupby("split")}


def test_headline_table_estimates_seed_means_and_cis():
    p = evaluation.collapse_identical_seeds(_two_systems(seeds=(1, 2)))
    items = evaluation.item_scores(p, embedding_metrics=False)
    h = evaluation.headline_table(p, items, _designs(p), ("accuracy", "macro_f1", "sacrebleu"))
    per_seed = evaluation.per_seed_table(p, items, ("accuracy", "macro_f1", "sacrebleu"))
    for r in h.itertuples():
        seeds = per_seed[(per_seed.system == r.system) & (per_seed.metric == r.metric)]
        assert r.mean == pytest.approx(seeds.value.mean())  # seeds averaged first
        assert r.seed_std == pytest.approx(np.std(seeds.value, ddof=0))
        assert r.ci_low <= r.mean <= r.ci_high and r.n_units == 18 and r.n_seeds == 2
        assert "these 3 questions" in r.estimand  # 3 < FEW_QUESTIONS: conditional label
    nq = evaluation.new_questions_table(items, ["test_unseen_answers"], ("accuracy",))
    assert (nq.n_units == 3).all() and nq.method.str.startswith("cluster t").all()
    assert (nq.estimand == evaluation.QUESTIONS.estimand).all()


def test_paired_table_against_reference():
    p = evaluation.collapse_identical_seeds(_two_systems(seeds=(1, 2)))
    items = evaluation.item_scores(p, embedding_metrics=False)
    designs = _designs(p)
    h = evaluation.headline_table(p, items, designs, ("accuracy", "macro_f1"))
    d = evaluation.paired_table(p, items, "ref", designs, ("accuracy", "macro_f1"))
    assert set(d.system) == {"sys"} and set(d.metric) == {"accuracy", "macro_f1"}
    for r in d.itertuples():
        est = h.set_index(["system", "metric"])["mean"]
        assert r.diff == pytest.approx(est["sys", r.metric] - est["ref", r.metric])
        assert r.ci_low <= r.diff <= r.ci_high and 0 < r.p_value <= 1
        assert (r.p_value <= 0.05) == (r.ci_low > 0 or r.ci_high < 0)  # never contradict
    wide = evaluation.wide_table(d, "test_unseen_answers", value="diff")
    assert "p=" in wide.loc["sys", "accuracy"]


def test_per_question_table_and_ids():
    items = evaluation.item_scores(_preds(), embedding_metrics=False)
    pq = evaluation.per_question_table(items, ("accuracy",), n_resamples=100)
    assert set(pq.question_id) == {"q01", "q02"} and (pq.n_items == 3).all()
    assert (pq.estimand == "new answers to this question").all()
    assert evaluation.question_ids(["b", "a", "b"]) == {"a": "q01", "b": "q02"}


def test_moverscore_by_split_matches_per_table_calls(monkeypatch):
    import saf_utils.metrics.embedding as E

    def fake(refs, hyps, model, idf_dict_ref=None, idf_dict_hyp=None, **kw):
        assert idf_dict_ref is idf_dict_hyp and kw.get("degenerate_score") == 0.0
        return [0.0 if not h.strip() else sum(idf_dict_ref[t] for t in FakeTok()
                                                 .convert_tokens_to_ids(h.split())) / 10
                for h in hyps]
    monkeypatch.setattr(E, "load_encoder", lambda model, device="cpu": FAKE_ENCODER)
    monkeypatch.setattr(E, "moverscore", fake)
    p = _two_systems()
    hyps, refs = evaluation._texts(p.reset_index(drop=True))
    got = evaluation._moverscore_by_split(p.reset_index(drop=True), hyps, refs, "m")
    for _, g in p.reset_index(drop=True).groupby("system"):
        want = E.moverscore_items([hyps[i] for i in g.index], [refs[i] for i in g.index], "m")
        assert np.allclose(got[g.index].to_numpy(), want)


def test_gap_and_published_table():
    summ = pd.DataFrame([
        {"split": "test_unseen_answers", "system": "a", "metric": "accuracy", "mean": 0.9},
        {"split": "test_unseen_questions", "system": "a", "metric": "accuracy", "mean": 0.6}])
    gap = evaluation.seen_unseen_gap(summ, metrics=("accuracy",))
    assert gap.set_index("system").loc["a", "gap"] == pytest.approx(0.3)
    pub = S.published_table()
    assert {"model", "source", "split", "accuracy"} <= set(pub.columns) and len(pub) == 4


def test_label_oracle_and_loqo_baselines():
    train = toy_frame("train", ("Q1", "Q2"), 6)
    test = pd.concat([toy_frame("test", ("Q1",), 3), toy_frame("t", ("Q3",), 3)],
                     ignore_index=True)
    o = systems.label_oracle(train, test, bow_encoder)
    assert (o.pred_label == o.gold_label).all() and o.backoff.tolist() == [False] * 3 + [True] * 3
    assert o.pred_feedback.iloc[0] == "Korrekt!"
    cv = systems.loqo_baselines(train, bow_encoder)
    assert list(cv.system) == ["majority", "nearest_neighbour"]
    assert cv.accuracy.between(0, 1).all() and cv.macro_f1.between(0, 1).all()


def test_error_analysis_helpers():
    p = _preds()
    cm = evaluation.confusion_by_split(p)[("m", "test_unseen_answers")]
    assert cm.to_numpy().sum() == len(p) and cm["unparseable"].sum() == 1
    pq = evaluation.per_question_metrics(p)
    assert set(pq.question) == {"Q1", "Q2"} and pq.n.sum() == 6
    assert evaluation.error_class_breakdown(p) is None
    pe = p.assign(error_class=["a", "b", "a", "b", "a", "b"])
    eb = evaluation.error_class_breakdown(pe)
    assert set(eb.error_class) == {"a", "b"} and eb.miss_rate.between(0, 1).all()
    w = evaluation.worst_examples(p, n=2)
    assert len(w) == 2 and not (w.gold_label == w.pred_label).any()
    fl = evaluation.feedback_by_answer_length(p)
    assert fl.n.sum() == 6 and set(fl.length_bin) <= {"0-4", "5-9", "10-19", "20-39", "40+"}


@pytest.mark.realdata
@pytest.mark.skipif(not os.environ.get("SAF_DATA"), reason="SAF_DATA not set")
def test_majority_baseline_on_real_data():
    from saf_utils.saf.data import load_saf

    d = load_saf(splits=["train", "test_unseen_questions"])
    train = S.saf_frame(d["train"], "train")
    uq = S.saf_frame(d["test_unseen_questions"], "test_unseen_questions")
    p = systems.majority_baseline(train, uq)
    assert p.backoff.all() and len(p) == len(uq)


class FakeTok:
    """Whitespace tokenizer with BERT's special tokens, for the MoverScore plumbing tests."""

    cls_token, sep_token, cls_token_id, sep_token_id, model_max_length = "[CLS]", "[SEP]", 0, 1, 512

    def tokenize(self, t):
        return t.split()

    def convert_tokens_to_ids(self, toks):
        special = {"[CLS]": 0, "[SEP]": 1}
        return [special.get(w, 2 + zlib.crc32(w.encode()) % 50) for w in toks]


FAKE_ENCODER = (types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=512)),
                FakeTok())


def test_grouped_cv_scores_the_deployed_generic_model():
    from threadpoolctl import threadpool_limits

    train = toy_frame("train", ("Q1", "Q2", "Q3"), 6)
    with threadpool_limits(1):  # HGB's OpenMP threads crawl on a busy machine
        cv = systems.grouped_cv_generic(train, bow_encoder, Cs=(0.1, 1.0), normalize=(False,),
                                        class_weights=("balanced",), models=("logreg", "hgb"))
    assert set(cv.generic_model) == {"logreg", "hgb"}
    assert cv[cv.generic_model == "hgb"].generic_C.tolist() == [1.0]  # C is logreg's
    clf = systems.FeatureClassifier(bow_encoder, model="hgb", generic_model="logreg").fit(train)
    assert type(clf._generic).__name__ == "Pipeline" and type(clf._seen).__name__ != "Pipeline"


def test_with_generic_refits_only_the_unseen_question_model():
    train = toy_frame("train", ("Q1", "Q2"), 6)
    clf = systems.FeatureClassifier(bow_encoder).fit(train)
    other = clf.with_generic(normalize_unseen=True, generic_C=0.1)
    assert other._seen is clf._seen and other._generic is not clf._generic
    assert other.normalize_unseen and not clf.normalize_unseen
    assert len(other.predict(toy_frame("t", ("Q3",), 3))) == 3
    with pytest.raises(ValueError, match="seen-question"):
        clf.with_generic(model="hgb")
