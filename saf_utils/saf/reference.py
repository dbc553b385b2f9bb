"""The reference answer as content units: its text without grading annotations, its
sentences or clauses, and how much of each unit a learner's answer covers. It reads only
the reference and the answer, so it serves questions that have no graded answers yet."""

from __future__ import annotations

import re

from saf_utils.text import split_sentences, word_tokens

_POINTS = re.compile(r"\(\s*(?:je\s+)?[\d.,\s\-–]+\s*P\.?\s*\)", re.IGNORECASE)
#: Content units: ``sentence`` or ``clause`` (also split at a grading annotation and a comma:
#: one graded point is often one clause; a piece with fewer than :data:`MIN_CLAUSE_WORDS`
#: content words, "(0.5 P) angefertigt werden.", joins its neighbour).
UNITS = ("sentence", "clause")
MIN_CLAUSE_WORDS = 3
#: Negation words (German and English): an answer that negates where the reference does not
#: (or the reverse) often contradicts it, whatever the question.
NEGATIONS = frozenset({"nicht", "kein", "keine", "keinen", "keinem", "keiner", "nie",
                       "niemals", "nichts", "ohne", "not", "no", "never", "none", "nothing",
                       "without", "cannot"})
#: The question-agnostic answer–reference alignment features of :func:`alignment`.
ALIGNMENT_FEATURES = ("unit_cov_mean", "unit_covered", "stem_recall", "negation_mismatch")
#: Characters of a word's prefix that stand for its stem: a crude, language-agnostic stemmer
#: (German and English inflect mostly at the end), so "geöffnet" matches "geöffneten".
STEM_CHARS = 5


def strip_points(text: str) -> str:
    """Remove grading annotations like ``(0.25 P)`` / ``(je 0.25 P)`` from a reference answer."""
    return " ".join(_POINTS.sub("", text).split())


def content_words(text: str) -> set[str]:
    return {t for t in word_tokens(text) if len(t) > 3 and not t.isdigit()}


def reference_sentences(text: str) -> list[str]:
    return split_sentences(strip_points(text), ".!?;") or [text]


def stems(text: str) -> set[str]:
    """Prefix stems of the content words of ``text``, numbers kept (an amount is content)."""
    return {t[:STEM_CHARS] for t in word_tokens(text) if len(t) > 3 or t.isdigit()}


def content_units(reference: str, unit: str = "clause") -> list[str]:
    """The reference's content units (``UNITS``) in order, annotations removed; units
    without content words are dropped (none at all: the whole reference)."""
    if unit not in UNITS:
        raise ValueError(f"unknown content unit {unit!r}; known: {list(UNITS)}")
    text = _POINTS.sub(" | ", reference) if unit == "clause" else strip_points(reference)
    parts = _sentences(text)
    if unit == "clause":
        parts = [c for p in parts for c in _joined(re.split(r"\s*\|\s*|,\s+", p))]
    units = [re.sub(r"\s+([.,;!?])", r"\1", " ".join(p.strip(" ,;|").split())) for p in parts]
    units = [u for u in units if content_words(u)]
    return units or [strip_points(reference)]


def _sentences(text: str) -> list[str]:
    """Sentences (ends ``.!?;``); a piece that starts in lower case continues the one
    before, so that an abbreviation ("z.B. die Begrüßung") does not end a sentence."""
    out: list[str] = []
    for piece in split_sentences(text, ".!?;"):
        if out and piece[:1].islower():
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def _joined(pieces: list[str]) -> list[str]:
    """Pieces of one sentence, each short one joined to its neighbour."""
    out: list[str] = []
    for piece in (p for p in pieces if p.strip(" ,;|")):
        if out and (len(content_words(piece)) < MIN_CLAUSE_WORDS
                    or len(content_words(out[-1])) < MIN_CLAUSE_WORDS):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def coverage(answer: str, unit: str) -> float:
    """Share of the unit's stems that the answer contains (1.0 for a unit without any)."""
    need = stems(unit)
    return len(need & stems(answer)) / len(need) if need else 1.0


def negated(text: str) -> bool:
    """Whether ``text`` holds a negation word (:data:`NEGATIONS`) or an English "n't"."""
    return "n't" in text.lower() or any(t in NEGATIONS for t in word_tokens(text))


def alignment(answer: str, reference: str, unit: str = "clause", tau: float = 0.5
              ) -> dict[str, float]:
    """Answer–reference alignment that reads no other answer (:data:`ALIGNMENT_FEATURES`):
    the mean coverage of the reference's content units, the share covered at least ``tau``,
    the stem recall of the whole reference, and 1 where exactly one of the two negates."""
    cov = [coverage(answer, u) for u in content_units(reference, unit)]
    return {"unit_cov_mean": sum(cov) / len(cov),
            "unit_covered": sum(c >= tau for c in cov) / len(cov),
            "stem_recall": coverage(answer, strip_points(reference)),
            "negation_mismatch": float(negated(answer) != negated(strip_points(reference)))}
