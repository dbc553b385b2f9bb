"""Message-pair browser: each ArgSciChat test pair with its history, gold and selected facts
and the replies of the val-chosen systems, texts whole (for ``tables.show``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from saf_utils.argscichat.data import MessagePair

WRAP = ("history", "query", "gold_reply", "gold_facts", "selected_facts", "reply")


def _first_seed(frame: pd.DataFrame) -> pd.DataFrame:
    seeds = frame["seed"]
    return frame[seeds.isna() | (seeds == seeds.min())]


def _facts(content: Sequence[str], indexes: Sequence[int]) -> str:
    return "\n".join(f"[{i}] {content[i]}" for i in indexes if 0 <= i < len(content))


def pair_table(pairs: Sequence[MessagePair], selections: pd.DataFrame,
               chosen_selector: Mapping[int, str], generations: pd.DataFrame,
               chosen_generator: Mapping[int, str]) -> pd.DataFrame:
    """One row per test pair of the folds in ``chosen_selector``: history (one numbered
    line per message), query, gold reply, gold and selected fact sentences (the fold's val-chosen
    selector, first seed) with Fact-F1, and the reply of the fold's val-chosen system."""
    rows = []
    fold_of = {}
    for f in chosen_selector:
        sel = selections[(selections["fold"] == f) & (selections["system"] == chosen_selector[f])
                         & (selections["split"] == "test")]
        for r in _first_seed(sel).itertuples():
            fold_of[(f, r.pair_id)] = (list(r.selected), getattr(r, "fact_f1", None))
    gen_of = {}
    for f, system in chosen_generator.items():
        gen = generations[(generations["fold"] == f) & (generations["system"] == system)
                          & (generations["split"] == "test")]
        for r in _first_seed(gen).itertuples():
            gen_of[(f, r.pair_id)] = r.output
    by_id = {p.pair_id: p for p in pairs}
    for (f, pid), (selected, f1) in fold_of.items():
        p = by_id.get(pid)
        if p is None:
            continue
        rows.append({
            "fold": f, "paper": p.title, "turn": p.turn,
            "history": "\n".join(f"{i}. {t}" for i, t in enumerate(p.history, 1)),
            "query": p.query, "gold_reply": p.reply,
            "gold_facts": _facts(p.content, p.fact_indexes),
            "selector": chosen_selector[f], "selected_facts": _facts(p.content, selected),
            "fact_f1": None if f1 is None or pd.isna(f1) else float(f1),
            "generator": chosen_generator.get(f, ""), "reply": gen_of.get((f, pid), ""),
            "pair_id": pid,
        })
    return pd.DataFrame(rows)
