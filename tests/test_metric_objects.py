"""A metric is one object (saf_utils.metrics.base): every registered metric declares its level,
direction, scale, scorer, definition and reference; one scorer gives the point value and the
per-item values or sufficient statistics; the metric cards page is generated from the objects;
and the shared scorers give exactly the numbers of the libraries they stand for."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import sacrebleu
from sklearn.metrics import accuracy_score, f1_score

from notebook_reports import metric_cards
from saf_utils import metrics as M
from saf_utils.statistics import uncertainty as S

LABELS = ["Correct", "Partially correct", "Incorrect"]
HYPS = ["The cat sat on the mat.", "A quick brown fox jumps.", "", "Hallo Welt, schön hier!",
        "the the the", "Dies ist ein längerer Satz mit mehreren Wörtern darin."] * 3
REFS = ["The cat is on the mat.", "The quick brown fox jumped over.", "Nothing here",
        "Hallo Welt, schön ist es hier!", "the cat", "Dies ist ein langer Satz mit Wörtern."] * 3


def _labels(seed: int = 4, n: int = 200) -> tuple[list[str], list[str | None]]:
    rng = np.random.default_rng(seed)
    gold = [str(x) for x in rng.choice(LABELS, n)]
    pred = [None if rng.random() < 0.1 else str(rng.choice(LABELS)) for _ in gold]
    pred[:3] = [None, "Correct", None]
    return gold, pred


def test_every_registered_metric_is_declared_completely() -> None:
    assert len(M.METRICS) >= 20
    for m in M.METRICS.values():
        assert m.level in M.base.LEVELS and m.definition and m.reference and m.description
        assert m.implementation, m.name
        if m.level == "summary":
            assert m.compute is None and m.where
            continue
        module, _, name = m.implementation.split(" (")[0].rpartition(".")
        assert getattr(importlib.import_module(module), name), m.name  # names real code
        assert m.inputs, m.name


def test_macro_and_weighted_f1_and_accuracy_equal_sklearn_exactly() -> None:
    gold, pred = _labels()
    mapped = ["<unparseable>" if p is None else p for p in pred]
    kw = {"labels": LABELS, "zero_division": 0}
    assert M.metric("macro_f1").score(gold, pred, labels=LABELS).value == \
        f1_score(gold, mapped, average="macro", **kw)
    assert M.metric("weighted_f1").score(gold, pred, labels=LABELS).value == \
        f1_score(gold, mapped, average="weighted", **kw)
    acc = M.metric("accuracy").score(gold, pred)
    assert acc.value == accuracy_score(gold, mapped)
    assert acc.per_item.tolist() == [float(g == p) for g, p in zip(gold, pred, strict=True)]
    # a label neither in gold nor predicted scores 0 (sklearn zero_division=0)
    two = M.metric("macro_f1").score(["a", "a"], ["a", None], labels=["a", "b"]).value
    assert two == f1_score(["a", "a"], ["a", "x"], labels=["a", "b"], average="macro",
                           zero_division=0)
    # numpy string arrays (threshold grids) give the same number as lists
    arr = M.metric("macro_f1").score(np.asarray(gold, dtype=object),
                                     np.asarray([p or "Incorrect" for p in pred]),
                                     labels=LABELS).value
    assert arr == f1_score(gold, [p or "Incorrect" for p in pred], average="macro", **kw)


def test_macro_f1_resamples_from_its_per_item_counts() -> None:
    gold, pred = _labels()
    mat, fn = M.metric("macro_f1").statistics(gold, pred, labels=LABELS)
    assert mat.shape == (200, 9) and set(np.unique(mat)) <= {0.0, 1.0}
    res = S.cluster_bootstrap(mat, fn, clusters=np.arange(200) // 10)
    assert res.estimate == M.metric("macro_f1").score(gold, pred, labels=LABELS).value
    assert res.low < res.estimate < res.high
    with pytest.raises(ValueError, match="predicted labels outside"):
        M.metric("macro_f1").score(["a"], ["z"], labels=["a", "b"])
    with pytest.raises(ValueError, match="gold labels outside"):
        M.metric("macro_f1").score(["z"], ["a"], labels=["a", "b"])


@pytest.mark.parametrize("name, corpus", [("sacrebleu", sacrebleu.corpus_bleu),
                                          ("chrf", sacrebleu.corpus_chrf)])
def test_bleu_and_chrf_are_sacrebleus_numbers_from_segment_statistics(name, corpus) -> None:
    s = M.metric(name).score(REFS, HYPS)
    assert s.value == corpus(HYPS, [REFS]).score
    assert s.per_item.shape[0] == len(HYPS)
    res = S.cluster_bootstrap(s.per_item, s.statistic, clusters=np.arange(len(HYPS)) % 6,
                              n_resamples=200)
    assert res.estimate == s.value and res.low <= res.estimate <= res.high
    with pytest.raises(ValueError, match="parallel"):
        M.metric(name).score(["a"], [])


def test_item_metrics_keep_unscored_items_aligned() -> None:
    gold, pred = [1.0, 0.5, 0.0, 0.25], [0.5, None, 0.0, float("nan")]
    s = M.metric("mse").score(gold, pred)
    assert np.isnan(s.per_item[[1, 3]]).all() and s.value == pytest.approx(0.125)
    mat, fn = M.metric("mse").statistics(gold, pred)
    assert mat.tolist() == [[0.25, 1.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    assert fn(mat.sum(0)[None])[0] == s.value
    assert M.metric("mse_max_penalty").items(gold, pred) == [0.25, 0.25, 0.0, 0.5625]


def test_text_item_metrics_score_each_pair_as_alone() -> None:
    for name in ("rouge2", "message_f1", "message_f1_squad", "content_f1", "feedback_chrf"):
        many = M.metric(name).items(REFS, HYPS)
        alone = [M.metric(name).items([r], [h])[0] for h, r in zip(HYPS, REFS, strict=True)]
        assert many == alone, name
    assert M.metric("message_f1").items(["a b"], ["a b"]) == [1.0]


def test_output_and_summary_metrics() -> None:
    s = M.metric("empty_share").score(["a", "b", "c", "d"], ["", " ", "x", "y"])
    assert s.value == 0.5 and s.per_item is None
    assert M.metric("distinct_2").score(REFS, HYPS).value == M.output_stats(HYPS, REFS)[
        "distinct_2"]
    with pytest.raises(ValueError, match="not resampled"):
        M.metric("distinct_2").statistics(REFS, HYPS)
    with pytest.raises(ValueError, match="no scorer"):
        M.metric("train_loss").score([1.0], [1.0])
    assert M.metric("unparseable_rate").items(["x", None, "y"], [True, True, False])[1:] == [
        pytest.approx(float("nan"), nan_ok=True), 1.0]


def test_a_new_metric_is_one_registration_and_reaches_the_cards() -> None:
    @M.register_metric("share_of_questions", level="item", inputs="texts",
                       description="reply ends with a question mark",
                       definition="1 where the reply ends with '?', else 0.",
                       reference="this test")
    def question_items(refs: list[str], hyps: list[str]) -> list[float]:
        return [float(h.rstrip().endswith("?")) for h in hyps]

    try:
        s = M.metric("share_of_questions").score(["x", "y"], ["Why?", "Because."])
        assert s.value == 0.5 and M.scale_label("share_of_questions") == "↑ 0–1"
        card = metric_cards.card(M.metric("share_of_questions"))
        assert "question_items" in card and "per-item values" in card and "this test" in card
        body = metric_cards.cards_body()
        assert 'id="share_of_questions"' in body and "<th>level</th>" in body
        with pytest.raises(ValueError, match="already registered"):
            M.register_metric("share_of_questions", level="corpus")(question_items)
    finally:
        M.METRICS.pop("share_of_questions")


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="level"):
        M.Metric("x", level="sentence", compute=len)
    with pytest.raises(ValueError, match="needs"):
        M.Metric("x", level="item")
    with pytest.raises(ValueError, match="has no"):
        M.Metric("x", level="summary", compute=len)
    with pytest.raises(ValueError, match="corpus-level, not per item"):
        M.metric("macro_f1").items(["a"], ["a"], labels=["a"])


@pytest.mark.slow  # ~3 s alone: SAF's item scores load WordNet for METEOR
def test_both_tasks_score_bertscore_and_moverscore_through_the_same_objects(monkeypatch):
    """SAF's item scores and ArgSciChat's reply scores call the one registered scorer of each
    embedding metric, with the same call shape (references, hypotheses, options)."""
    import dataclasses
    import inspect

    import pandas as pd
    from saf_frames import toy_frame

    from saf_utils.argscichat import reply_evaluation as REV
    from saf_utils.saf import formats as SF
    from saf_utils.saf import scores

    calls: list[tuple[str, int, dict]] = []

    def fake(name):
        def compute(refs, hyps, **options):
            calls.append((name, len(refs), options))
            return [float(len(h)) for h in hyps]
        # a metric is handed the options its function names: the spy names the real ones
        compute.__signature__ = inspect.signature(M.METRICS[name].compute)
        return compute

    for name in ("bertscore_f1", "moverscore"):
        monkeypatch.setitem(M.METRICS, name,
                            dataclasses.replace(M.METRICS[name], compute=fake(name)))
    gold = toy_frame("test_unseen_answers", ("Q1", "Q2"), 2)
    preds = SF.parsed_prediction_table(gold, "m", ["Correct Feedback: gut"] * 4, seed=1)
    items = scores.item_scores(preds, {"model_type": "bert-x"}, moverscore_model="mv")
    assert set(items.metric) >= {"bertscore_f1", "moverscore"}
    saf_calls, calls[:] = list(calls), []
    replies = pd.DataFrame({"system": "s", "role": "system", "fold": 0, "seed": None,
                            "split": "test", "pair_id": ["p0", "p1"], "paper_id": "P",
                            "output": ["a", "bb"], "gold": ["x", "y"]})
    per = REV.score_predictions(replies, embedding=True, bertscore_model="bert-x",
                                moverscore_model="mv")
    per = per[per.metric.isin(["bertscore_f1", "moverscore"])]
    assert per.groupby("metric").value.agg(list).to_dict() == {
        "bertscore_f1": [1.0, 2.0], "moverscore": [1.0, 2.0]}
    assert [c[0] for c in saf_calls] == [c[0] for c in calls] == ["bertscore_f1", "moverscore"]
    assert saf_calls[0][2]["model_type"] == calls[0][2]["model_type"] == "bert-x"
    assert saf_calls[1][2]["model"] == calls[1][2]["model"] == "mv"
