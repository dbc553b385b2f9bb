"""ArgSciChat task logic: tables of message pairs, fact selectors and generation inputs."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from saf_utils.data import MessagePair


def pairs_frame(pairs: Iterable[MessagePair], **extra) -> pd.DataFrame:
    """One row per message pair (without the paper text), plus constant ``extra`` columns."""
    rows = []
    for p in pairs:
        rows.append({
            "pair_id": p.pair_id, "paper_id": p.paper_id, "title": p.title,
            "dialogue_id": p.dialogue_id, "turn": p.turn, "query": p.query, "reply": p.reply,
            "n_sentences": len(p.content), "n_facts": len(p.facts),
            "n_fact_sentences": len(p.fact_indexes), "fact_indexes": list(p.fact_indexes),
            "query_tokens": len(p.query.split()), "reply_tokens": len(p.reply.split()),
            **extra,
        })
    return pd.DataFrame(rows)
