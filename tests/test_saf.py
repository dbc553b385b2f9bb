"""Unit tests for saf_utils.saf: formats, the output parser, baselines, classifier, analysis."""

from __future__ import annotations

import os
import types
import zlib

import numpy as np
import pandas as pd
import pytest

from saf_utils.saf import formats as S
from saf_utils.saf import evaluation
from saf_utils.saf import systems
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
])
def test_parser_score_mode(text, score, label):
    p = S.parse_output(text, mode="score")
    assert p.parseable and p.score == pytest.approx(score) and p.label == label


@pytest.mark.parametrize("text", ["1.5 Feedback: zu groß", "-0.5 Feedback: negativ",
                                  "Correct Feedback: Label statt Score", ""])
def test_parser_score_mode_unparseable(text):
    p = S.parse_output(text, mode="score")
    assert not p.parseable and p.score is None


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
    path = tmp_path / "p.jsonl"
    S.save_predictions(t, path)
    back = S.load_predictions(path)
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


def test_dedup_bertscore_matches_full(monkeypatch):
    import saf_utils.metrics.embedding as E

    seen = []

    def fake(h, r, **kw):
        seen.append(len(h))
        return {"f1_per_pair": [float(len(a) == len(b)) for a, b in zip(h, r, strict=True)]}
    monkeypatch.setattr(E, "bertscore", fake)
    v = evaluation._dedup_bertscore(["a", "a", "bb"], ["a", "a", "c"])
    assert seen == [2] and v == pytest.approx(2 / 3)


def test_summaries_and_targets():
    rows = []
    for system, acc in (("a", 0.9), ("b", 0.5)):
        for seed in (1, 2):
            rows += [{"split": "test_unseen_answers", "system": system, "metric": "accuracy",
                      "value": acc + seed / 100, "seed": seed},
                     {"split": "test_unseen_questions", "system": system, "metric": "accuracy",
                      "value": acc - 0.3, "seed": seed}]
    summ = evaluation.summarize_seeds(pd.DataFrame(rows))
    assert set(summ.n_seeds) == {2}
    t = evaluation.best_vs_targets(summ)
    ua = t[(t.split == "test_unseen_answers") & (t.metric == "accuracy")].iloc[0]
    assert ua.best_system == "a" and ua.met
    gap = evaluation.seen_unseen_gap(summ, metrics=("accuracy",))
    assert gap.set_index("system").loc["a", "gap"] == pytest.approx(0.315)
    pub = S.published_table()
    assert {"model", "source", "split", "accuracy"} <= set(pub.columns) and len(pub) == 4


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


def test_moverscore_mean_uses_reference_idf_and_zeroes_empty(monkeypatch):
    import saf_utils.metrics.embedding as E


    got = {}

    def fake(refs, hyps, model, idf_dict_ref=None, idf_dict_hyp=None, **kw):
        got["same"] = idf_dict_ref is idf_dict_hyp
        got["cls"] = idf_dict_ref[0]
        got["unseen"] = idf_dict_ref[999]
        got["degenerate_score"] = kw.get("degenerate_score")
        return [0.0 if not h.strip() else 0.5 for h in hyps]
    monkeypatch.setattr(E, "load_encoder", lambda model, device="cpu": FAKE_ENCODER)
    monkeypatch.setattr(E, "moverscore", fake)
    v = evaluation.moverscore_mean(["a b", "", "c"], ["a b", "a", "d"], "m")
    assert v == pytest.approx(1 / 3) and got["same"] and got["cls"] == 0.0
    assert got["unseen"] == pytest.approx(np.log(4)) and got["degenerate_score"] == 0.0


def test_evaluate_tables_matches_single_evaluation(monkeypatch):
    import saf_utils.metrics.embedding as E

    calls = {"bs": 0, "ms": 0}

    def fake_bs(h, r, **kw):
        calls["bs"] += 1
        return {"f1_per_pair": [len(set(a) & set(b)) / 10 for a, b in zip(h, r, strict=True)]}


    def fake_ms(refs, hyps, model, idf_dict_ref=None, idf_dict_hyp=None, **kw):
        calls["ms"] += 1
        return [len(h) / 100 for h in hyps]
    monkeypatch.setattr(E, "bertscore", fake_bs)
    monkeypatch.setattr(E, "moverscore", fake_ms)
    monkeypatch.setattr(E, "load_encoder", lambda model, device="cpu": FAKE_ENCODER)
    a = _preds()
    b = a.assign(system="n", pred_feedback=["x"] * len(a))
    many = evaluation.evaluate_tables([a, b], {}, "m")
    assert calls == {"bs": 1, "ms": 1}
    for table, res in zip([a, b], many, strict=True):
        single = evaluation.evaluate_predictions(table, {}, "m")
        assert single.keys() == res.keys()
        assert all(single[k] == pytest.approx(res[k]) for k in single)
