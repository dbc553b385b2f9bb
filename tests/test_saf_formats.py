"""saf_utils.saf.formats: prompts and targets as the hub cards, the output parser (labels,
scores, garbage), prediction tables."""

from __future__ import annotations

import pandas as pd
import pytest
from saf_frames import DE, EN, toy_frame

from saf_utils.data import artifacts as AR
from saf_utils.saf import formats as S

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
