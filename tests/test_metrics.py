"""Hand-computed cases for saf_utils.metrics (no model downloads, CPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from saf_utils import metrics as m
from saf_utils.saf.data import SAF_LABELS  # noqa: E402

C, P, INC = SAF_LABELS


# --- ArgSciChat overlap --------------------------------------------------------------


def test_fact_f1_hand_cases() -> None:
    assert m.fact_f1([1, 2, 3], [2, 3, 4]) == pytest.approx(2 / 3)
    assert m.fact_f1([1], [1, 2, 3, 4]) == pytest.approx(2 * 1 * 0.25 / 1.25)
    assert m.fact_f1(["Satz A.", "Satz B."], ["Satz B."]) == pytest.approx(2 / 3)
    assert m.fact_f1([5], [6]) == 0.0
    assert m.fact_f1([], [1]) == 0.0
    assert m.fact_f1([1], []) == 0.0
    assert m.fact_f1([], []) == 0.0


def test_fact_f1_equals_sklearn_binary_f1_on_masks() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        gold = set(rng.choice(12, size=rng.integers(1, 5), replace=False).tolist())
        pred = set(rng.choice(12, size=rng.integers(1, 5), replace=False).tolist())
        gm = [int(i in gold) for i in range(12)]
        pm = [int(i in pred) for i in range(12)]
        assert m.fact_f1(pred, gold) == pytest.approx(f1_score(gm, pm, zero_division=0))


def test_message_f1_plain_whitespace_tokens() -> None:
    assert m.message_f1("Das ist gut", "Das ist gut") == 1.0
    # case matters: Das != das -> 2 of 3 tokens shared
    assert m.message_f1("Das ist gut", "das ist gut") == pytest.approx(2 / 3)
    # punctuation stays attached: "gut." != "gut"
    assert m.message_f1("ist gut.", "ist gut") == pytest.approx(0.5)
    # Counter overlap: repeated tokens only match as often as they occur in gold
    assert m.message_f1("ja ja ja", "ja nein") == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert m.message_f1("", "") == 1.0
    assert m.message_f1("   ", "\n") == 1.0
    assert m.message_f1("", "etwas") == 0.0
    assert m.message_f1("etwas", " ") == 0.0


def test_message_f1_squad_normalised() -> None:
    assert m.message_f1_squad("The cat sat.", "a cat  sat") == 1.0
    assert m.message_f1_squad("Für die Ärzte!", "für die ärzte") == 1.0
    assert m.normalize_answer("An Übergangsgeld, the end.") == "übergangsgeld end"
    assert m.message_f1_squad("cat dog", "cat") == pytest.approx(2 / 3)
    # official LED/Qasper code: no overlap -> 0, even for two empty strings
    assert m.message_f1_squad("", "") == 0.0
    assert m.message_f1_squad("the", "a") == 0.0
    assert m.message_f1_squad("x", "") == 0.0


# --- SAF labels and scores -----------------------------------------------------------


def label_metrics(gold, pred) -> dict[str, float]:
    return {k: m.METRICS[k].score(gold, pred, labels=SAF_LABELS).value
            for k in ("accuracy", "macro_f1", "weighted_f1")}


def test_label_metrics_unparseable_is_wrong_but_not_a_class() -> None:
    gold = [C, C, C, P, INC]
    pred = [C, C, None, P, C]
    out = label_metrics(gold, pred)
    # C: tp 2, fp 1, fn 1 -> F 2/3; P: F 1; I: F 0
    assert out["accuracy"] == pytest.approx(0.6)
    assert out["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert out["weighted_f1"] == pytest.approx((3 * 2 / 3 + 1 + 0) / 5)


@pytest.mark.parametrize("name", ["accuracy", "macro_f1", "weighted_f1"])
def test_label_metrics_perfect_and_errors(name) -> None:
    score = m.METRICS[name].score
    assert score([C, P, INC], [C, P, INC], labels=SAF_LABELS).value == 1.0
    with pytest.raises(ValueError):
        score([C], [C, P], labels=SAF_LABELS)
    with pytest.raises(ValueError, match="None"):
        score([C], ["correct"], labels=SAF_LABELS)
    with pytest.raises(ValueError):
        score(["Richtig"], [C], labels=SAF_LABELS)


def test_score_mse() -> None:
    mse, worst = m.METRICS["mse"].score, m.METRICS["mse_max_penalty"].score
    gold, pred = [1.0, 0.5, 0.0, 0.25], [0.5, None, 0.0, float("nan")]
    assert mse(gold, pred).value == pytest.approx((0.25 + 0.0) / 2)
    assert worst(gold, pred).value == pytest.approx((0.25 + 0.25 + 0.0 + 0.75**2) / 4)
    assert np.isnan(mse([0.5], [None]).value)
    assert worst([0.5], [None]).value == pytest.approx(0.25)
    for score in (mse, worst):
        with pytest.raises(ValueError):
            score([2.0], [1.0])
        with pytest.raises(ValueError):
            score([1.0], [])


def test_confusion_has_unparseable_column() -> None:
    table = m.confusion([C, C, C, P, INC], [C, C, None, P, C], SAF_LABELS)
    assert list(table.columns) == [C, P, INC, "unparseable"]
    assert list(table.index) == [C, P, INC]
    assert table.loc[C, C] == 2 and table.loc[C, "unparseable"] == 1
    assert table.loc[INC, C] == 1 and table.loc[P, P] == 1
    assert int(table.to_numpy().sum()) == 5


# --- text metrics --------------------------------------------------------------------

DE = "Das Übergangsgeld für Ärzte wird monatlich ausgezahlt."


def test_unicode_tokenizer_keeps_umlauts() -> None:
    tok = m.UnicodeWordTokenizer()
    assert tok.tokenize("Übergangsgeld für Ärzte") == ["übergangsgeld", "für", "ärzte"]
    assert tok.tokenize("Straße, Maß!") == ["straße", "maß"]
    assert tok.tokenize("   ") == []


def rouge(hyps, refs) -> float:
    return m.METRICS["rouge2"].score(refs, hyps).value


def meteor(hyps, refs, **options) -> float:
    return m.METRICS["meteor"].score(refs, hyps, **options).value


def test_rouge_hand_case_german() -> None:
    assert rouge(["Übergangsgeld für Ärzte"], ["Übergangsgeld für Ärzte"]) == 1.0
    assert rouge(["für Ärzte"], ["Übergangsgeld für Ärzte"]) == pytest.approx(2 / 3)  # P 1, R 1/2
    # umlaut words must not collapse: the default rouge-score tokenizer would make
    # "Ärzte kommen" and "Erzte kommen" share the bigram "rzte kommen"
    assert rouge(["Ärzte kommen"], ["Erzte kommen"]) == 0.0
    assert rouge(["", "   "], ["etwas da", ""]) == 0.0
    # mean over pairs
    assert rouge(["a b", "x y"], ["a b", "y z"]) == pytest.approx(0.5)


def test_bleu_chrf() -> None:
    assert m.bleu([DE], [DE]) == pytest.approx(100.0)
    assert m.chrf([DE], [DE]) == pytest.approx(100.0)
    assert m.bleu(["völlig anders"], [DE]) == pytest.approx(0.0)
    assert 0 < m.chrf(["Übergangsgeld für Ärzte"], [DE]) < 100
    assert m.bleu(["", "x"], ["a", "b"]) == pytest.approx(0.0)


@pytest.mark.parametrize("fn", [m.bleu, m.chrf, rouge, meteor])
def test_text_metrics_require_parallel_lists(fn) -> None:
    with pytest.raises(ValueError):
        fn(["a", "b"], ["a"])
    with pytest.raises(ValueError):
        fn([], [])


CORPUS_METRICS = {"bleu": m.bleu, "chrf": m.chrf, "rouge": rouge, "meteor": meteor,
                  "output_stats": m.output_stats}
PAIR_METRICS = {"message_f1": m.message_f1, "message_f1_squad": m.message_f1_squad,
                "content_f1": m.content_f1}
BAD_TEXTS = [None, 3, 0.5, float("nan"), b"bytes", ["a"]]


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=repr)
@pytest.mark.parametrize("name", sorted(CORPUS_METRICS))
def test_corpus_text_metrics_name_the_bad_position(name, bad) -> None:
    fn = CORPUS_METRICS[name]
    with pytest.raises(ValueError, match=r"hyps\[1\] is .*not a string"):
        fn(["a b", bad, "c"], ["a b", "x", "c"])
    with pytest.raises(ValueError, match=r"refs\[2\] is .*not a string"):
        fn(["a b", "x", "c"], ["a b", "x", bad])
    with pytest.raises(ValueError, match="one string"):
        fn("a b", "a b")


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=repr)
@pytest.mark.parametrize("name", sorted(PAIR_METRICS))
def test_pair_text_metrics_name_the_bad_side(name, bad) -> None:
    fn = PAIR_METRICS[name]
    with pytest.raises(ValueError, match=r"pred is .*not a string"):
        fn(bad, "a b")
    with pytest.raises(ValueError, match=r"gold is .*not a string"):
        fn("a b", bad)


def _wordnet_available() -> bool:
    try:
        m.find_wordnet()
    except m.MissingResourceError:
        return False
    return True


needs_wordnet = pytest.mark.skipif(not _wordnet_available(), reason="WordNet not installed")


@needs_wordnet
def test_meteor_hand_case() -> None:
    # 3 exact matches in one chunk: Fmean 1, penalty 0.5 * (1/3)**3
    assert meteor(["Die Ärzte kommen"], ["die ärzte kommen"]) == pytest.approx(
        1 - 0.5 / 27
    )
    assert meteor(["", "x"], ["etwas", ""]) == 0.0
    # WordNet synonymy: hound ~ dog
    assert meteor(["the hound barked"], ["the dog barked"]) > meteor(
        ["the cat barked"], ["the dog barked"]
    )


@needs_wordnet
def test_wordnet_reader_lexnames() -> None:
    wn = m.load_wordnet()
    assert wn is m.load_wordnet()  # cached
    assert wn.synset("dog.n.01").lexname() == "noun.animal"
    assert wn.synset("run.v.01").lexname() == "verb.motion"


def test_missing_wordnet_raises_clearly(tmp_path, monkeypatch) -> None:
    with pytest.raises(m.MissingResourceError, match="wordnet-base"):
        meteor(["a"], ["a"], wordnet_dir=tmp_path)
    monkeypatch.setenv("WORDNET_DIR", str(tmp_path))
    with pytest.raises(m.MissingResourceError, match="WORDNET_DIR"):
        m.find_wordnet()


def test_sacrebleu_segments_are_extracted_once_per_distinct_pair(monkeypatch) -> None:
    """A report scores the same retrieved feedback texts in many tables: each distinct
    (hypothesis, reference) pair's statistics are extracted once, and the corpus scores
    stay exactly sacreBLEU's."""
    from sacrebleu.metrics import BLEU, CHRF

    from saf_utils.metrics import generation as G

    hyps = ["the cat sat", "a dog", "the cat sat", "x y z", ""]
    refs = ["the cat sat on the mat", "a dog ran", "the cat sat on the mat", "x y", "q"]
    want = {"bleu": BLEU().corpus_score(hyps, [refs]).score,
            "chrf": CHRF().corpus_score(hyps, [refs]).score,
            "bleu_tail": BLEU().corpus_score(hyps[1:], [refs[1:]]).score}
    extracted: list[int] = []
    for cls in (BLEU, CHRF):
        original = cls._extract_corpus_statistics
        def spy(self, h, r, f=original):
            extracted.append(len(h))
            return f(self, h, r)

        monkeypatch.setattr(cls, "_extract_corpus_statistics", spy)
    monkeypatch.setattr(G, "_SEGMENT_STATS", {})
    assert m.bleu(hyps, refs) == want["bleu"] and m.chrf(hyps, refs) == want["chrf"]
    assert extracted == [4, 4]  # 5 pairs, 4 distinct, once per metric
    assert m.bleu(hyps[1:], refs[1:]) == want["bleu_tail"] and extracted == [4, 4]
    assert m.bleu(["new"], ["pair"]) >= 0 and extracted == [4, 4, 1]
    monkeypatch.setattr(G, "SEGMENT_CACHE_LIMIT", 4)  # full: starts afresh, same numbers
    assert m.bleu(hyps, refs) == want["bleu"] and extracted == [4, 4, 1, 4]
    assert max(len(c) for c in G._SEGMENT_STATS.values()) <= 4
