"""Token-overlap metrics: Fact-F1, Message-F1 (card and SQuAD variants), content-word F1,
and the output statistics that make degenerate generations visible (length ratio,
distinct-2, repetition rate)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

from saf_utils.metrics.checks import check_pairs


def fact_f1(pred_sentences: Iterable[Hashable], gold_sentences: Iterable[Hashable]) -> float:
    """Set-based F1 between predicted and gold fact sentences (ids or strings).

    Precision over the predicted set, recall over the gold set; 0.0 when either set is
    empty. Equals the official ArgSciChat script's ``sklearn`` binary F1 on sentence masks
    (duplicates collapse, as they do in a mask).
    """
    pred, gold = set(pred_sentences), set(gold_sentences)
    if not pred or not gold:
        return 0.0
    hit = len(pred & gold)
    if hit == 0:
        return 0.0
    precision, recall = hit / len(pred), hit / len(gold)
    return 2 * precision * recall / (precision + recall)


def _str(x: object, what: str) -> str:
    if not isinstance(x, str):
        raise ValueError(f"{what} is {x!r} ({type(x).__name__}), not a string")
    return x


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    num_same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def message_f1(pred: str, gold: str) -> float:
    """Token F1 as in the ArgSciChat model card: ``str.split()`` tokens, no normalisation.

    Case and punctuation count ("Yes." != "yes"). Empty case follows the SQuAD v2
    convention: if either side has no tokens (empty or whitespace-only), the score is
    ``float(pred_tokens == gold_tokens)``, so two empty messages score 1.0.
    See :func:`message_f1_squad` for the normalised LED/Qasper variant.
    """
    pred_tokens, gold_tokens = _str(pred, "pred").split(), _str(gold, "gold").split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return _token_f1(pred_tokens, gold_tokens)


_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop ASCII punctuation, drop a/an/the, squash spaces."""
    text = _str(text, "text").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def message_f1_squad(pred: str, gold: str) -> float:
    """Token F1 after SQuAD normalisation, as ``token_f1_score`` in allenai/qasper-led-baseline.

    Replicates the official LED/Qasper code exactly, including its empty case: the score is
    0.0 whenever no token overlaps, so two empty (or whitespace/punctuation/article-only)
    messages score 0.0 here, unlike :func:`message_f1`.
    """
    p, g = normalize_answer(_str(pred, "pred")), normalize_answer(_str(gold, "gold"))
    return _token_f1(p.split(), g.split())




def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def content_tokens(text: str) -> list[str]:
    """SQuAD-normalised tokens minus scikit-learn's English stop words."""
    stop = _stop_words()
    return [t for t in normalize_answer(text).split() if t not in stop]


def content_f1(pred: str, gold: str) -> float:
    """Token F1 on :func:`content_tokens`: a constant string of frequent function words,
    which games Message-F1, scores ~0 here. Empty on either side: 1.0 only if both are."""
    p, g = content_tokens(_str(pred, "pred")), content_tokens(_str(gold, "gold"))
    if not p or not g:
        return float(p == g)
    return _token_f1(p, g)


def output_stats(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    """Corpus statistics of generated text, so degenerate output shows in numbers.

    ``length_ratio``: total hypothesis words / total reference words (whitespace tokens);
    ``distinct_2``: distinct word bigrams / all bigrams over the outputs (1 = no reuse);
    ``repetition``: mean share of an output's tokens that repeat an earlier token of the
    same output; ``identical_outputs``: share of outputs equal to the most frequent one.
    """
    hyps, refs = check_pairs(hyps, refs)
    toks = [h.split() for h in hyps]
    n_hyp, n_ref = sum(map(len, toks)), sum(len(r.split()) for r in refs)
    bigrams = [tuple(t[i:i + 2]) for t in toks for i in range(len(t) - 1)]
    reps = [1 - len(set(t)) / len(t) for t in toks if t]
    return {
        "length_ratio": n_hyp / n_ref if n_ref else float("nan"),
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        "repetition": sum(reps) / len(reps) if reps else 0.0,
        "identical_outputs": Counter(hyps).most_common(1)[0][1] / len(hyps),
    }
