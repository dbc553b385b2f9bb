"""Input checks every metric makes first (parallel lists, real strings, clear errors): a silent
``zip`` truncation or a ``None`` deep in a library reports a metric on the wrong pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class MissingResourceError(RuntimeError):
    """A data resource a metric needs (e.g. WordNet) is not installed locally."""


def check_parallel(hyps: Sequence[Any], refs: Sequence[Any], what: str = "hyps/refs") -> None:
    """Refuse lists of different lengths and empty input."""
    if len(hyps) != len(refs):
        raise ValueError(f"{what}: lists must be parallel, got {len(hyps)} hypotheses and "
                         f"{len(refs)} references")
    if len(hyps) == 0:
        raise ValueError(f"{what}: empty input, nothing to score")


def check_texts(texts: Sequence[Any], what: str) -> list[str]:
    """Return ``texts`` as a list of str, or raise naming the first non-string position."""
    if isinstance(texts, str):
        raise ValueError(f"{what}: expected a list of strings, got one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValueError(f"{what}[{i}] is {t!r} ({type(t).__name__}), not a string")
    return out


def check_pairs(hyps: Sequence[Any], refs: Sequence[Any]) -> tuple[list[str], list[str]]:
    """:func:`check_parallel` plus :func:`check_texts` on both sides."""
    h, r = check_texts(hyps, "hyps"), check_texts(refs, "refs")
    check_parallel(h, r)
    return h, r


def per_distinct_pair(score: Callable[[list[str], list[str]], Sequence[float]],
                      hyps: Sequence[Any], refs: Sequence[Any]) -> list[float]:
    """``score(hyps, refs)`` on each distinct (hyp, ref) pair once, spread back to every pair
    (retrieval systems repeat many texts; a per-pair score does not depend on the others)."""
    h, r = check_pairs(hyps, refs)
    pairs = list(zip(h, r, strict=True))
    unique = list(dict.fromkeys(pairs))
    values = score([a for a, _ in unique], [b for _, b in unique])
    lookup = dict(zip(unique, values, strict=True))
    return [float(lookup[p]) for p in pairs]
