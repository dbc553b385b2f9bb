"""Token-overlap metrics: Fact-F1, Message-F1 (card and SQuAD variants), content-word F1,
and the output statistics that make degenerate generations visible (length ratio,
distinct-2, repetition rate)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence

from saf_utils.metrics.base import Metric, add_metric, register_metric
from saf_utils.metrics.checks import check_pairs, check_parallel

_ARGSCICHAT = ("Ruggeri et al. (2023), A Dataset of Argumentative Dialogues on Scientific "
               "Papers (ArgSciChat), ACL")


def fact_f1(pred_sentences: Iterable[Hashable], gold_sentences: Iterable[Hashable]) -> float:
    """Set-based F1 between predicted and gold fact sentences, 0.0 when either set is
    empty: the official script's ``sklearn`` binary F1 on sentence masks."""
    pred, gold = set(pred_sentences), set(gold_sentences)
    if not pred or not gold:
        return 0.0
    hit = len(pred & gold)
    if hit == 0:
        return 0.0
    precision, recall = hit / len(pred), hit / len(gold)
    return 2 * precision * recall / (precision + recall)


@register_metric("fact_f1", inputs="sentence_sets",
                 description="F1 of selected against gold fact sentences",
                 definition="Per message pair: set F1 of the selected paper sentences against "
                 "the gold fact sentences (0 when either set is empty); mean over pairs with "
                 "gold facts.", reference=_ARGSCICHAT)
def fact_f1_items(gold: Sequence[Iterable[Hashable]], pred: Sequence[Iterable[Hashable]]
                  ) -> list[float]:
    """:func:`fact_f1` per item of parallel gold and selected sentence sets."""
    check_parallel(pred, gold, "gold/pred")
    return [fact_f1(p, g) for g, p in zip(gold, pred, strict=True)]


def _per_reply(fn, refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    hyps, refs = check_pairs(hyps, refs)
    return [float(fn(h, r)) for h, r in zip(hyps, refs, strict=True)]


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
    """Token F1 as in the ArgSciChat model card: ``str.split()`` tokens, no normalisation; two
    empty messages score 1.0 (as SQuAD v2)."""
    pred_tokens, gold_tokens = _str(pred, "pred").split(), _str(gold, "gold").split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return _token_f1(pred_tokens, gold_tokens)


@register_metric("message_f1", inputs="texts",
                 description="token F1 of the reply (ArgSciChat card)",
                 definition="Per reply: F1 of whitespace tokens against the gold reply, no "
                 "normalisation (as the ArgSciChat model card).", reference=_ARGSCICHAT)
def message_f1_items(refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    """:func:`message_f1` per reply."""
    return _per_reply(message_f1, refs, hyps)


_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop ASCII punctuation, drop a/an/the, squash spaces."""
    text = _str(text, "text").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def message_f1_squad(pred: str, gold: str) -> float:
    """Token F1 after SQuAD normalisation, exactly ``token_f1_score`` of
    allenai/qasper-led-baseline (two empty messages score 0.0)."""
    p, g = normalize_answer(_str(pred, "pred")), normalize_answer(_str(gold, "gold"))
    return _token_f1(p.split(), g.split())


@register_metric("message_f1_squad", inputs="texts",
                 description="token F1 with SQuAD normalisation",
                 definition="Per reply: token F1 after lower-casing and removing punctuation "
                 "and articles.",
                 reference="Rajpurkar et al. (2016), SQuAD, EMNLP; allenai/qasper-led-baseline")
def message_f1_squad_items(refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    """:func:`message_f1_squad` per reply."""
    return _per_reply(message_f1_squad, refs, hyps)


def content_tokens(text: str) -> list[str]:
    """SQuAD-normalised tokens minus scikit-learn's English stop words."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return [t for t in normalize_answer(text).split() if t not in ENGLISH_STOP_WORDS]


def content_f1(pred: str, gold: str) -> float:
    """Token F1 on :func:`content_tokens`: a constant string of frequent function words,
    which games Message-F1, scores ~0 here. Empty on either side: 1.0 only if both are."""
    p, g = content_tokens(_str(pred, "pred")), content_tokens(_str(gold, "gold"))
    if not p or not g:
        return float(p == g)
    return _token_f1(p, g)


@register_metric("content_f1", inputs="texts", library="scikit-learn stop words",
                 description="F1 over content words (stop words out)",
                 definition="Per reply: token F1 on SQuAD-normalised tokens without English "
                 "stop words, so a reply of frequent function words scores low.",
                 reference="this collection")
def content_f1_items(refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    """:func:`content_f1` per reply."""
    return _per_reply(content_f1, refs, hyps)


def output_stats(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    """Corpus statistics that show degenerate output: ``length_ratio`` (hypothesis / reference
    words), ``distinct_2``, ``repetition`` (mean share of tokens repeating an earlier one of
    the output) and ``identical_outputs`` (share equal to the most frequent output)."""
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


def _output_metric(key: str) -> Callable[[Sequence[str], Sequence[str]], float]:
    def compute(refs: Sequence[str], hyps: Sequence[str]) -> float:
        return output_stats(hyps, refs)[key]

    compute.__name__ = "output_stats"  # the card names the function that computes it
    return compute


_DISTINCT = ("Li et al. (2016), A Diversity-Promoting Objective Function for Neural "
             "Conversation Models, NAACL")
for _name, _better, _short, _definition, _ref in (
    ("distinct_2", True, "distinct bigrams / bigrams", "Distinct word bigrams over all bigrams "
     "of a system's outputs (1: no bigram reused).", _DISTINCT),
    ("repetition", False, "share of repeated tokens in an output", "Mean share of an "
     "output's tokens that repeat an earlier token of the same output.", "this collection"),
    ("identical_outputs", False, "share of the most frequent output", "Share of outputs "
     "equal to the system's most frequent output (1: one reply for everything).",
     "this collection"),
):
    add_metric(Metric(_name, level="output", higher_is_better=_better, inputs="texts",
                      description=_short,
                      definition=_definition, reference=_ref, compute=_output_metric(_name)))


@register_metric("empty_share", level="output", higher_is_better=False, inputs="texts",
                 description="share of empty outputs",
                 definition="Share of outputs that are empty or whitespace.",
                 reference="this collection")
def empty_share(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Share of outputs that are empty or whitespace only."""
    hyps, refs = check_pairs(hyps, refs)
    return sum(not h.strip() for h in hyps) / len(hyps)
