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
    table = EA.grouped_fact_f1(frame, "turn_bucket")
    assert table.fact_f1.tolist() == pytest.approx([2 / 3, 2 / 3]) and table.n.tolist() == [1, 1]
    with pytest.raises(KeyError):
        EA.grouped_fact_f1(frame, "nope")
    with pytest.raises(ValueError, match="not in the given pairs"):
        EA.selection_analysis_frame(pd.DataFrame(rows), [P0], INTENTS)


def test_slug() -> None:
    assert EA.slug("3-4") == "3_4" and EA.slug("Ask_Info") == "ask_info"
    assert EA.slug("0 (same)") == "0_same" and EA.slug(">10") == "10" and EA.slug("") == "none"
