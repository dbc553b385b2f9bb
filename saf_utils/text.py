"""Tokenise, normalise and split text, one implementation of each for both tasks (no nltk data
or model: the same tokens on any machine); :func:`identity_key` is the one text identity."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCT_OR_SPACE = re.compile(f"[ {re.escape(string.punctuation)}]+")
#: Invisible characters: control characters that are not whitespace (C0, DEL, C1) and every
#: format character (Unicode category Cf: zero-width space/joiners, soft hyphen, bidi marks,
#: byte-order mark, tags, ...; tests/test_text.py checks this against ``unicodedata``).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def identity_key(text: str) -> str:
    """The one text identity: invisible characters (controls, zero-width and bidi marks, soft
    hyphens, BOMs) removed, Unicode NFKC (NFD ``Prüfung`` equals NFC ``Prüfung``), whitespace
    trimmed and collapsed; case and punctuation kept."""
    if text.isascii() and text.isprintable():  # fast path: only plain spaces to collapse
        if "  " in text or text[:1] == " " or text[-1:] == " ":
            return " ".join(text.split())
        return text
    return " ".join(unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)).split())


def is_blank(text: str) -> bool:
    """Empty once :func:`identity_key` removed whitespace and invisible characters."""
    return not identity_key(text)


def word_tokens(text: str) -> list[str]:
    """Lower-cased Unicode ``\\w+`` runs (keeps ä, ö, ü, ß; drops punctuation)."""
    return _WORD.findall(text.lower())


def squash(text: str) -> str:
    """:func:`identity_key`, lower-cased, without punctuation and whitespace (the official
    ArgSciChat script's ``punctuation_filtering``): the looser key for matching content."""
    return _PUNCT_OR_SPACE.sub("", identity_key(text).lower())


def split_sentences(text: str, enders: str = ".!?") -> list[str]:
    """Rough sentence split after any of ``enders`` followed by space (no nltk data needed)."""
    pattern = rf"(?<=[{re.escape(enders)}])\s+"
    return [s.strip() for s in re.split(pattern, text.strip()) if s.strip()]


def listing(x: Mapping[Any, Any] | Iterable[Any] | None, sep: str = ", ") -> str:
    """A mapping as ``key value, key value``, any other collection as ``a, b, c`` (floats to 3
    significant digits, nested ones in brackets, ``None`` as ``none``): a dict or list for
    people."""
    def one(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        if isinstance(v, Mapping) or (isinstance(v, Iterable) and not isinstance(v, str)):
            return f"[{listing(v)}]"
        return str(v)

    if x is None:
        return "none"
    if isinstance(x, Mapping):
        return sep.join(f"{one(k)} {one(v)}" for k, v in x.items())
    return sep.join(one(v) for v in x)


def interval(value: float | None, low: float | None = None, high: float | None = None,
             spec: str | Callable[[float], str] = ".3g") -> str:
    """``value [low, high]``, how every page writes an estimate with its interval; ``spec``: a
    format spec or a function; a missing or non-finite bound leaves the interval out, a
    missing value gives ``""``."""
    def f(x: float | None) -> str | None:
        if x is None or not math.isfinite(float(x)):
            return None
        return spec(x) if callable(spec) else format(float(x), spec)

    text, lo, hi = f(value), f(low), f(high)
    if text is None:
        return ""
    return f"{text} [{lo}, {hi}]" if lo is not None and hi is not None else text


def shorten(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, ending in "…" where it was cut."""
    text = str(text)
    return text if len(text) <= n else text[: max(n - 1, 0)].rstrip() + "…"
