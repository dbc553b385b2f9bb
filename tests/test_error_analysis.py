"""saf_utils.argscichat.error_analysis: query intents, dialogue properties, the selection
analysis frame and grouped Fact-F1, on hand-made dialogues."""

from __future__ import annotations

import pandas as pd
import pytest
from dialogues import P0, PAIRS

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import error_analysis as EA
from saf_utils.text import split_sentences

# --------------------------------------------------------------------------- error analysis


INTENTS = pd.DataFrame({
    "Role": ["Proponent", "Proponent", "Proponent", "Domain Expert"],
    "Message Number": ["0", "2", "2", "1"], "Sentence Number": ["0", "0", "1", "0"],
    "Sentence": ["Hi", "Interesting!", "Which classifier works best?", "Which data?"],
    "Tag": ["Intro", "Give_Opinion", "Ask_Info", "Reply_Info"],
})


def test_split_sentences_and_query_intents() -> None:
    assert split_sentences("Interesting! Which one? Fine.") == ["Interesting!", "Which one?",
                                                                 "Fine."]
    got = EA.query_intents(["hi", "Interesting! Which classifier works best?", "Which data?",
                           "Unknown"], INTENTS)
    assert got == ["Intro", "Ask_Info", "unmatched", "unmatched"]  # expert rows are ignored
    assert EA.query_intents(["x"], None) == ["no intents file"]
    with pytest.raises(ValueError, match="lacks column"):
        EA.query_intents(["x"], INTENTS.drop(columns="Tag"))


def test_dialogue_properties_and_analysis_frame() -> None:
    props = EA.dialogue_properties(PAIRS)
    assert props.gold_dist_last_facts.isna().tolist() == [True, True, False]
    assert props.gold_dist_last_facts.iloc[2] == 1
    rows = A.prediction_rows(PAIRS, [[0, 1], [2, 3], [3, 0]], fold=0, split="test",
                             system="first")
    frame = EA.selection_analysis_frame(pd.DataFrame(rows), PAIRS, INTENTS)
    assert len(frame) == 2  # P0 has no gold and is skipped
    assert frame.dist_bucket.tolist() == ["n/a", "1"]
    assert frame.turn_bucket.tolist() == ["1", "2"]
    assert frame.intent.tolist() == ["unmatched", "Ask_Info"]
    table = EA.grouped_mean(frame, "turn_bucket", "fact_f1")
    assert table.fact_f1.tolist() == pytest.approx([2 / 3, 2 / 3]) and table.n.tolist() == [1, 1]
    with pytest.raises(KeyError):
        EA.grouped_mean(frame, "nope", "fact_f1")
    with pytest.raises(ValueError, match="not in the given pairs"):
        EA.selection_analysis_frame(pd.DataFrame(rows), [P0], INTENTS)


def test_06_records_and_concludes_through_one_call_each() -> None:
    import pandas as pd

    from notebook_reports.sharing import md
    from saf_utils.argscichat import record as REC

    class Rec:
        def __init__(self):
            self.rows = []

        def add(self, task, dataset, split, system, metric, value, **kw):
            self.rows.append((task, system, metric, value, kw.get("subset")))

    turn = pd.DataFrame({"system": ["a", "a", "b"], "turn_bucket": ["0", "1-2", "0"],
                         "fact_f1": [0.5, 0.25, 0.1]})
    ea = REC.ErrorAnalysis(
        selection={"turn_bucket": ("turn", turn)},
        chosen=pd.DataFrame({"fact_f1": [0.0, 0.5, 0.0, 1.0]}),
        summary=pd.DataFrame({"outputs": [4, 4], "generic_share": [0.5, 0.0],
                              "empty_share": [0.0, 0.25], "paper_bigram_share": [0.1, 0.2],
                              "gold_words": [10.0, 10.0]}, index=["x", "y_z"]),
        roles={"x": "baseline", "y_z": "system"},
        generation={"selection": pd.DataFrame({
            "system": ["x", "x"], "selection": ["found gold", "missed gold"],
            "content_f1": [0.3, 0.1]})},
        score="content_f1")
    rec = Rec()
    REC.record_errors(rec, ea)
    assert ("argscichat_fact_selection", "a", "fact_f1", 0.25, "turn=1-2") in rec.rows
    assert ("argscichat_fact_selection", "val_chosen", "zero_fact_f1_share", 0.5,
            "all") in rec.rows
    assert ("argscichat_generation", "y_z", "empty_share", 0.25, "all") in rec.rows
    assert ("argscichat_generation", "x", "content_f1", 0.1, "selection=missed gold") in rec.rows
    text = REC.error_conclusions(ea, ["a"], ["x", "y_z"], md)
    assert "Fact-F1 0.500 at turn 0 and 0.250 at turn 1\\-2" in text
    assert "2 of 4 scored test queries" in text and "most empty ` y_z `" in text
    assert "` x ` +0.200" in text
