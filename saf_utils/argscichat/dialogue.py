"""ArgSciChat message pairs in dialogue: pair tables and lookup, the context of a turn,
scored pairs and prediction rows of a selection (notebooks 01, 03, 04 and the fact
selection and reply modules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from saf_utils.argscichat.data import MessagePair

#: Message pairs are looked up by id; the fold objects list them per split.
SPLITS = ("train", "val", "test")
SELECTION_TASK = "argscichat_fact_selection"


def pairs_frame(pairs: Iterable[MessagePair], **extra) -> pd.DataFrame:
    """One row per message pair (without the paper text), plus constant ``extra`` columns."""
    return pd.DataFrame([{
        "pair_id": p.pair_id, "paper_id": p.paper_id, "title": p.title,
        "dialogue_id": p.dialogue_id, "turn": p.turn, "query": p.query, "reply": p.reply,
        "n_sentences": len(p.content), "n_facts": len(p.facts),
        "n_fact_sentences": len(p.fact_indexes), "fact_indexes": list(p.fact_indexes),
        "query_tokens": len(p.query.split()), "reply_tokens": len(p.reply.split()), **extra,
    } for p in pairs])


def pair_index(pairs: Iterable[MessagePair]) -> dict[str, MessagePair]:
    """pair_id -> pair, over all splits of a fold (dialogues never cross splits)."""
    return {p.pair_id: p for p in pairs}


def previous_exchanges(pair: MessagePair, index: Mapping[str, MessagePair],
                       turns: int = 1) -> list[str]:
    """Proponent and expert messages of the last ``turns`` earlier turns, oldest first; an
    id missing from ``index`` raises (a shorter history would change every feature)."""
    out: list[str] = []
    ids = pair.history_ids[-turns:] if turns > 0 else ()
    for pid in ids:
        if pid not in index:
            raise KeyError(f"pair {pair.pair_id!r}: earlier turn {pid!r} not in the index")
        out += [index[pid].query, index[pid].reply]
    return out


def dialogue_context(pair: MessagePair, index: Mapping[str, MessagePair] | None = None) -> str:
    """The query preceded by the last exchange (just the query without index)."""
    prev = previous_exchanges(pair, index) if index is not None else []
    return " ".join([*prev, pair.query]).strip()


def previous_reply(pair: MessagePair, index: Mapping[str, MessagePair] | None) -> str:
    """The expert's reply of the previous turn ("" at the first turn or without index)."""
    if index is None or not pair.history_ids:
        return ""
    return previous_exchanges(pair, index)[-1]


# --------------------------------------------------------------------------- evaluation

def scored_pairs(pairs: Sequence[MessagePair]) -> tuple[list[MessagePair], int]:
    """Pairs with at least one gold fact sentence, and how many were skipped."""
    kept = [p for p in pairs if p.fact_indexes]
    return kept, len(pairs) - len(kept)


def prediction_rows(pairs: Sequence[MessagePair], selected: Sequence[Sequence[int]], *,
                    fold: int, split: str, system: str, seed: int | None = None
                    ) -> list[dict[str, Any]]:
    """03's selection rows, with Fact-F1 for pairs that have gold sentences."""
    from saf_utils.metrics import fact_f1

    if len(pairs) != len(selected):
        raise ValueError(f"{system}: {len(pairs)} pairs but {len(selected)} selections")
    rows = []
    for p, sel in zip(pairs, selected, strict=True):
        sel = [int(i) for i in sel]
        bad = [i for i in sel if not 0 <= i < len(p.content)]
        if bad:
            raise ValueError(f"{system}: pair {p.pair_id!r} selects missing sentence(s) {bad}")
        rows.append({
            "fold": fold, "split": split, "pair_id": p.pair_id, "paper_id": p.paper_id,
            "system": system, "seed": seed,
            "selected": sel, "selected_sentences": [p.content[i] for i in sel],
            "gold": list(p.fact_indexes),
            "fact_f1": fact_f1(sel, p.fact_indexes) if p.fact_indexes else None,
        })
    return rows


def selection_lookup(preds: pd.DataFrame) -> dict[tuple[int, str, str], list[int]]:
    """(fold, split, pair_id) -> selected indexes of one system (first seed if several)."""
    systems = preds.groupby("fold").system.nunique()
    if (systems > 1).any():
        raise ValueError(f"selection_lookup: several systems {sorted(set(preds.system))} "
                         "in one fold")
    out: dict[tuple[int, str, str], list[int]] = {}
    for r in preds.itertuples():
        out.setdefault((int(r.fold), r.split, r.pair_id), list(r.selected))
    return out
