"""Tokenise, normalise and split text: the one implementation of each, for both tasks.

No nltk data or model is needed, so every caller (features, BM25, metrics, fact mapping)
tokenises the same way on any machine.
"""

from __future__ import annotations

import re
import string

_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


def word_tokens(text: str) -> list[str]:
    """Lower-cased Unicode ``\\w+`` runs (keeps ä, ö, ü, ß; drops punctuation)."""
    return _WORD.findall(text.lower())


def punctuation_filtering(text: str) -> str:
    """Remove punctuation and all whitespace, as the official ArgSciChat baseline script does."""
    return "".join(w.translate(_PUNCT_TABLE) for w in text.split())


def squash(text: str) -> str:
    """Lower-cased :func:`punctuation_filtering`: a key for matching sentences across files."""
    return punctuation_filtering(text.lower())


def split_sentences(text: str, enders: str = ".!?") -> list[str]:
    """Rough sentence split after any of ``enders`` followed by space (no nltk data needed)."""
    pattern = rf"(?<=[{re.escape(enders)}])\s+"
    return [s.strip() for s in re.split(pattern, text.strip()) if s.strip()]
