"""One example through every system, the section of 05 and 06: the browser (a row per
example, a column per system) and the example the notebook's ``example`` parameter picks,
shown in full."""

from __future__ import annotations

import pandas as pd
import pytest

from notebook_reports import tables
from saf_utils.argscichat import browse as AB
from saf_utils.argscichat.data import MessagePair
from saf_utils.saf import browse as SB
from tests.test_sharing import PAYLOADS, unsafe_markup

SPLIT = "test_unseen_answers"


def _saf() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two answers; majority (no seed) right on both, feature_clf (seeds 1, 2) right on a0
    only with seed 1 and wrong everywhere with seed 2; an oracle, never counted."""
    rows, items = [], []
    for system, seeds, labels in (("majority", [None], ["Correct", "Correct"]),
                                  ("feature_clf", [1, 2], ["Correct", "Incorrect"]),
                                  ("oracle", [None], ["Correct", "Correct"])):
        for seed in seeds:
            for k, label in enumerate(labels):
                label = label if seed != 2 else "Incorrect"
                rows.append({"id": f"a{k}", "split": SPLIT, "question": f"Q{k}?",
                             "provided_answer": f"answer {PAYLOADS[k]}",
                             "reference_answer": f"ref {k}", "gold_label": "Correct",
                             "gold_score": 1.0, "gold_feedback": f"gold feedback {k}",
                             "system": system, "seed": seed, "pred_label": label,
                             "pred_score": 1.0, "pred_feedback": f"{system} says {k}/{seed}",
                             "parseable": True})
                items.append({"task": "saf", "split": SPLIT, "system": system,
                              "metric": "accuracy", "item": f"a{k}", "seed": seed,
                              "value": float(label == "Correct")})
    return pd.DataFrame(rows), pd.DataFrame(items)


def _first_seed(preds: pd.DataFrame) -> pd.DataFrame:  # as 05 does
    key = preds.seed.fillna(-1)
    return preds[key == key.groupby([preds.system, preds.split]).transform("min")]


def test_saf_browser_has_a_row_per_answer_and_a_column_per_system():
    preds, _ = _saf()
    t = SB.every_system(_first_seed(preds), ["majority", "feature_clf", "oracle"],
                        counted=["majority", "feature_clf"])
    assert t.id.tolist() == ["a0", "a1"]
    assert list(t.columns[-3:]) == ["majority", "feature_clf", "oracle"]
    assert t.feature_clf.tolist() == ["✓ Correct", "✗ Incorrect"]  # seed 1, not seed 2
    assert t.right.tolist() == ["2/2", "1/2"]  # the oracle is not counted
    text = tables.html(t, "every system", wrap=SB.WRAP)
    assert not unsafe_markup(text) and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_saf_example_in_full_gives_each_systems_feedback_and_item_scores():
    preds, items = _saf()
    name, texts, per = SB.one_answer(_first_seed(preds), items, ["majority", "feature_clf"],
                                     {"majority": "baseline"}, f"{SPLIT}:a1")
    assert name == f"{SPLIT}:a1" and texts["gold feedback"] == "gold feedback 1"
    assert per.system.tolist() == ["majority", "feature_clf"]
    assert per.feedback.tolist() == ["majority says 1/None", "feature_clf says 1/1"]
    assert per.label.tolist() == ["✓ Correct", "✗ Incorrect"]
    assert per.accuracy.tolist() == [1.0, 0.0]  # the item score of the same seed
    assert SB.one_answer(_first_seed(preds), items, ["majority"], {}, None)[0] == f"{SPLIT}:a0"
    _, _, bare = SB.one_answer(_first_seed(preds), pd.DataFrame(), ["majority"], {}, None)
    assert list(bare.columns) == ["system", "role", "seed", "label", "score", "feedback"]


def test_an_unknown_example_names_the_expected_form():
    preds, items = _saf()
    with pytest.raises(ValueError, match=r"'test:a9'.*<split>:<id>.*test_unseen_answers:a0"):
        SB.one_answer(preds, items, ["majority"], {}, "test:a9")


def _argscichat() -> tuple[list[MessagePair], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    pair = MessagePair(pair_id="p 1", paper_id="P", title="T", content=("s0", "s1", "s2"),
                       dialogue_id="d", turn=1, query=PAYLOADS[0], reply="because",
                       history=("hi", "hello"), history_ids=("a", "b"), facts=("s1",),
                       fact_indexes=(1,), history_fact_indexes=((),))
    sel = pd.DataFrame({"fold": [0, 0, 0], "system": ["bm25", "bm25", "first"],
                        "split": ["test"] * 3, "pair_id": ["p 1"] * 3, "role": ["baseline"] * 3,
                        "seed": [0.0, 1.0, None], "selected": [[1, 2], [0], [0]],
                        "selected_sentences": [["s1", "s2"], ["s0"], ["s0"]],
                        "fact_f1": [0.667, 0.0, 0.0]})
    gen = pd.DataFrame({"fold": [0], "system": ["copy"], "split": ["test"], "pair_id": ["p 1"],
                        "role": ["baseline"], "seed": [None], "output": ["s1 s2"]})
    items = pd.DataFrame({"split": ["test"], "fold": [0], "system": ["copy"], "item": ["p 1"],
                          "seed": [None], "metric": ["content_f1"], "value": [0.25]})
    return [pair], sel, gen, items


def test_argscichat_browser_and_one_pair_in_full():
    pairs, sel, gen, items = _argscichat()
    t = AB.every_system(pairs, sel, gen)
    assert t.pair_id.tolist() == ["p 1"] and t.gold_facts.tolist() == ["[1]"]
    assert t.bm25.tolist() == ["[1, 2] F1 0.667"] and t["copy"].tolist() == ["s1 s2"]  # 1st seed
    assert not unsafe_markup(tables.html(t, "pairs", wrap=AB.WRAP))
    name, texts, selectors, replies = AB.one_pair(pairs, sel, gen, items, None)
    assert name == "0:p 1" and texts["history"] == "1. hi\n2. hello"
    assert selectors.selected.tolist() == ["[1] s1\n[2] s2", "[0] s0"]
    assert selectors.fact_f1.tolist() == ["0.667", "0"] and selectors.seed.tolist() == ["0", ""]
    assert replies.content_f1.tolist() == [0.25] and replies.reply.tolist() == ["s1 s2"]
    with pytest.raises(ValueError, match=r"'1:p 1'.*<fold>:<pair id>.*'0:p 1'"):
        AB.one_pair(pairs, sel, gen, items, "1:p 1")
