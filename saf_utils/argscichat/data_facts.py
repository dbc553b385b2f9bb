"""Gold facts to content-sentence indexes, as the official ArgSciChat baseline script maps
them (:func:`map_facts`, through a per-paper :class:`ContentIndex`)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import accumulate

from saf_utils.text import split_sentences, squash


class ContentIndex:
    """A paper's content sentences, normalised once (:func:`squash`: never a newline) and
    joined by newlines, so "the first sentence that contains a piece" is one ``str.find``
    and a bisection instead of a scan per fact."""

    def __init__(self, content: Sequence[str], title: str):
        self.norm = [squash(s) for s in content]
        self.title = squash(title)
        self.text = "\n".join(self.norm)
        self.starts = list(accumulate((len(n) + 1 for n in self.norm[:-1]), initial=0))

    def find(self, key: str) -> int | None:
        """Index of the first content sentence containing ``key`` (normalised), or None."""
        at = self.text.find(key) if key else -1
        return None if at < 0 else bisect.bisect_right(self.starts, at) - 1


def map_facts(
    facts: Sequence[str], content: Sequence[str] | ContentIndex, title: str = ""
) -> tuple[tuple[int, ...], list[tuple[str, str]]]:
    """Map gold fact strings to content-sentence indexes, as ``fact_selection_baselines.py``
    of the release: each sentence of a fact maps to the first content sentence that contains
    it once both are normalised (:func:`squash`). A piece only in the title, or nowhere, is
    returned as dropped with the reason where the official script would stop with an assertion."""
    index = content if isinstance(content, ContentIndex) else ContentIndex(content, title)
    indexes: set[int] = set()
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        fact = fact.replace("\n", " ").strip()
        whole = squash(fact)
        if not whole:
            dropped.append((fact, "empty"))
            continue
        pieces = [fact] if index.find(whole) is not None else split_sentences(fact)
        for piece in pieces:
            npiece = squash(piece)
            if not npiece:
                continue
            hit = index.find(npiece)
            if hit is not None:
                indexes.add(hit)
            else:
                dropped.append((piece, "title" if npiece in index.title else "not_found"))
    return tuple(sorted(indexes)), dropped
