"""Message-pair browser: each ArgSciChat test pair with its history, gold and selected facts
and the replies of the val-chosen systems, texts whole (for ``tables.show``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from saf_utils.argscichat.data import MessagePair

WRAP = ("history", "query", "gold_reply", "gold_facts", "selected_facts", "reply")


def _facts(content: Sequence[str], indexes: Sequence[int]) -> str:
    return "\n".join(f"[{i}] {content[i]}" for i in indexes if 0 <= i < len(content))


def _history(p: MessagePair) -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(p.history, 1))


def _seed(x: object) -> str:
    """A seed as text: blank for a system without one."""
    return "" if pd.isna(x) else str(int(x))


def _f1(x: object) -> str:
    """Fact-F1 as text, blank where a pair has no gold facts (a float column shows None)."""
    return "" if x is None or pd.isna(x) else f"{float(x):.3g}"


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """Test rows, each system's first seed per fold, with ``key`` ``"<fold>:<pair id>"``."""
    test = frame[frame["split"] == "test"]
    seeds = pd.to_numeric(test["seed"], errors="coerce").fillna(-1)
    test = test[seeds == seeds.groupby([test["fold"], test["system"]]).transform("min")]
    return test.assign(key=test["fold"].astype(str) + ":" + test["pair_id"].astype(str))


def pair_table(pairs: Sequence[MessagePair], selections: pd.DataFrame,
               chosen_selector: Mapping[int, str], generations: pd.DataFrame,
               chosen_generator: Mapping[int, str]) -> pd.DataFrame:
    """One row per test pair of the folds in ``chosen_selector``: history (one numbered
    line per message), query, gold reply, gold and selected fact sentences (the fold's val-chosen
    selector, first seed) with Fact-F1, and the reply of the fold's val-chosen system."""
    sel, gen = _keyed(selections), _keyed(generations)
    reply = {r.key: r.output for r in gen.itertuples() if chosen_generator.get(r.fold) == r.system}
    by_id = {p.pair_id: p for p in pairs}
    rows = []
    for f, system in chosen_selector.items():
        for r in sel[(sel["fold"] == f) & (sel["system"] == system)].itertuples():
            if (p := by_id.get(r.pair_id)) is None:
                continue
            f1 = getattr(r, "fact_f1", None)
            rows.append({
                "fold": f, "paper": p.title, "turn": p.turn, "history": _history(p),
                "query": p.query, "gold_reply": p.reply,
                "gold_facts": _facts(p.content, p.fact_indexes),
                "selector": system, "selected_facts": _facts(p.content, list(r.selected)),
                "fact_f1": None if f1 is None or pd.isna(f1) else float(f1),
                "generator": chosen_generator.get(f, ""), "reply": reply.get(r.key, ""),
                "pair_id": r.pair_id,
            })
    return pd.DataFrame(rows)


def every_system(pairs: Sequence[MessagePair], selections: pd.DataFrame,
                 generations: pd.DataFrame) -> pd.DataFrame:
    """One row per test pair that a selector or reply system answered, a column per selector
    (sentence indexes, Fact-F1) and per reply system (shortened reply), first seeds."""
    from saf_utils.text import shorten

    sel, gen = _keyed(selections), _keyed(generations)
    keys = list(dict.fromkeys([*sel["key"], *gen["key"]]))
    cells = {**{(r.key, r.system): f"{list(r.selected)} F1 "
                f"{_f1(getattr(r, 'fact_f1', None)) or '—'}"
                for r in sel.itertuples()},
             **{(r.key, r.system): shorten(str(r.output or ""), 80) for r in gen.itertuples()}}
    systems = [*dict.fromkeys(sel["system"]), *dict.fromkeys(gen["system"])]
    by_id = {p.pair_id: p for p in pairs}
    rows = []
    for key in keys:
        fold, pid = key.split(":", 1)
        p = by_id.get(pid)
        rows.append({"fold": int(fold), "pair_id": pid, "turn": p.turn if p else None,
                     "query": p.query if p else "", "gold_reply": p.reply if p else "",
                     "gold_facts": str(list(p.fact_indexes)) if p else "",
                     **{s: cells.get((key, s), "") for s in systems}})
    return pd.DataFrame(rows)


def one_pair(pairs: Sequence[MessagePair], selections: pd.DataFrame,
             generations: pd.DataFrame, items: pd.DataFrame, example: str | None
             ) -> tuple[str, dict[str, str], pd.DataFrame, pd.DataFrame]:
    """The test pair ``example`` (``"<fold>:<pair id>"``; None: the first) in full."""
    sel, gen = _keyed(selections), _keyed(generations)
    keys = list(dict.fromkeys([*sel["key"], *gen["key"]]))
    example = keys[0] if example is None and keys else str(example)
    if example not in keys:
        raise ValueError(f"example {example!r}: no test pair has this '<fold>:<pair id>'"
                         + (f" (for instance {keys[0]!r})" if keys else ""))
    fold, pid = example.split(":", 1)
    p = {q.pair_id: q for q in pairs}.get(pid)
    texts = {"paper": p.title, "history": _history(p) or "(first message)",
             f"query (turn {p.turn})": p.query, "gold facts": _facts(p.content, p.fact_indexes),
             "gold reply": p.reply} if p else {}
    mine = sel[sel["key"] == example]
    selectors = pd.DataFrame({
        "system": mine["system"], "role": mine.get("role", ""), "seed": mine["seed"].map(_seed),
        "selected": [_facts(p.content, list(r)) if p else "\n".join(s) for r, s in
                     zip(mine["selected"], mine["selected_sentences"], strict=True)],
        "fact_f1": [_f1(x) for x in mine.get("fact_f1", [None] * len(mine))]}
    ).reset_index(drop=True)
    mine = gen[gen["key"] == example]
    replies = pd.DataFrame({"system": mine["system"], "role": mine.get("role", ""),
                            "seed": mine["seed"].map(_seed), "reply": mine["output"].fillna("")})
    scored = items[(items["split"] == "test") & (items["fold"].astype(str) == fold)
                   & (items["item"].astype(str) == pid)] if len(items) else items
    if len(scored):
        seed = dict(zip(mine["system"], mine["seed"], strict=True))
        same = scored[[(pd.isna(seed.get(s)) and pd.isna(x)) or seed.get(s) == x
                       for s, x in zip(scored.system, scored.seed, strict=True)]]
        replies = replies.join(same.pivot_table(index="system", columns="metric",
                                                values="value", sort=False), on="system")
    return example, texts, selectors, replies.reset_index(drop=True)
