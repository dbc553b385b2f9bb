"""ArgSciChat shared helpers: pair tables, dialogue context, predictions I/O, error analysis.

Used by the fact-selection (:mod:`saf_utils.argscichat.fact_selection`) and reply-generation
(:mod:`saf_utils.argscichat.generation`) modules and by notebooks 01, 03, 04 and 05. Predictions of
notebook 03 are JSON lines (one selection per fold, split, system, seed and pair); the
error-analysis helpers join them with dialogue properties and query intents. The files
themselves are read and written by :mod:`saf_utils.artifacts`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat.data import MessagePair
from saf_utils.text import split_sentences, squash

#: Message pairs are looked up by id; the fold objects list them per split.
SPLITS = ("train", "val", "test")
SELECTION_TASK = "argscichat_fact_selection"


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



def pair_index(pairs: Iterable[MessagePair]) -> dict[str, MessagePair]:
    """pair_id -> pair, over all splits of a fold (dialogues never cross splits)."""
    return {p.pair_id: p for p in pairs}


def previous_exchanges(pair: MessagePair, index: Mapping[str, MessagePair],
                       turns: int = 1) -> list[str]:
    """Proponent and expert messages of the last ``turns`` earlier turns, oldest first.

    Earlier turns are found through ``history_ids``; an id missing from ``index`` raises,
    since a silently shorter history would change every feature built on it.
    """
    out: list[str] = []
    ids = pair.history_ids[-turns:] if turns > 0 else ()
    for pid in ids:
        if pid not in index:
            raise KeyError(f"pair {pair.pair_id!r}: earlier turn {pid!r} not in the index")
        out += [index[pid].query, index[pid].reply]
    return out


def dialogue_context(pair: MessagePair, index: Mapping[str, MessagePair] | None = None,
                     turns: int = 1) -> str:
    """The query preceded by the last ``turns`` exchanges (just the query without index)."""
    prev = previous_exchanges(pair, index, turns) if index is not None else []
    return " ".join([*prev, pair.query]).strip()



def previous_reply(pair: MessagePair, index: Mapping[str, MessagePair] | None) -> str:
    """The expert's reply of the previous turn ("" at the first turn or without index)."""
    if index is None or not pair.history_ids:
        return ""
    return previous_exchanges(pair, index, 1)[-1]






# --------------------------------------------------------------------------- evaluation

def scored_pairs(pairs: Sequence[MessagePair]) -> tuple[list[MessagePair], int]:
    """Pairs with at least one gold fact sentence, and how many were skipped."""
    kept = [p for p in pairs if p.fact_indexes]
    return kept, len(pairs) - len(kept)


def prediction_rows(pairs: Sequence[MessagePair], selected: Sequence[Sequence[int]], *,
                    fold: int, split: str, system: str, seed: int | None = None
                    ) -> list[dict[str, Any]]:
    """03's selection rows (:func:`saf_utils.artifacts.write_selections`), with Fact-F1 for
    pairs that have gold sentences."""
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
            "fold": fold, "split": split, "pair_id": p.pair_id, "system": system, "seed": seed,
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


# --------------------------------------------------------------------------- error analysis



def query_intents(queries: Sequence[str], intents: pd.DataFrame | None,
                  role: str = "Proponent") -> list[str]:
    """Dialogue intent of each query from ``intents.csv`` (sentence-level, by ``role``).

    The query's sentences are matched to intent rows by normalised text (lower-case, no
    punctuation or spaces). The query gets the first ``Ask_*`` tag among its sentences,
    else its first matched tag, else ``"unmatched"`` (``"no intents file"`` if absent).
    """
    if intents is None:
        return ["no intents file"] * len(queries)
    need = {"Role", "Sentence", "Tag"}
    if not need <= set(intents.columns):
        raise ValueError(f"intents table lacks column(s) {sorted(need - set(intents.columns))}")
    rows = intents[intents.Role == role]
    table: dict[str, str] = {}
    for s, tag in zip(rows.Sentence, rows.Tag, strict=True):
        table.setdefault(squash(str(s)), str(tag))
    out = []
    for q in queries:
        tags = [table[n] for n in (squash(s) for s in split_sentences(q)) if n in table]
        if not tags and squash(q) in table:
            tags = [table[squash(q)]]
        ask = [t for t in tags if t.startswith("Ask")]
        out.append(ask[0] if ask else tags[0] if tags else "unmatched")
    return out


def dialogue_properties(pairs: Sequence[MessagePair]) -> pd.DataFrame:
    """Per pair: turn, gold-fact count and the distance of gold to the last turn's facts.

    ``gold_dist_last_facts``: smallest |gold index - index of a fact of the latest earlier
    turn that had facts| (NaN without gold or without earlier facts).
    """
    rows = []
    for p in pairs:
        last = next((t for t in reversed(p.history_fact_indexes) if t), ())
        dist = (min(abs(g - f) for g in p.fact_indexes for f in last)
                if p.fact_indexes and last else np.nan)
        rows.append({"pair_id": p.pair_id, "turn": p.turn, "n_gold": len(p.fact_indexes),
                     "n_sentences": len(p.content), "gold_dist_last_facts": dist,
                     "query": p.query, "reply": p.reply})
    return pd.DataFrame(rows)


def bucket(values: pd.Series, edges: Sequence[float], labels: Sequence[str]) -> pd.Series:
    """Right-closed bins with readable labels; NaN stays ``"n/a"``."""
    out = pd.cut(values, bins=list(edges), labels=list(labels), right=True)
    return out.astype(object).where(values.notna(), "n/a")


def selection_analysis_frame(preds: pd.DataFrame, pairs: Sequence[MessagePair],
                             intents: pd.DataFrame | None = None) -> pd.DataFrame:
    """03's scored test predictions joined with dialogue properties and query intents.

    One row per (fold, system, seed, pair) with a Fact-F1, plus ``turn_bucket``,
    ``n_gold``, ``dist_bucket`` and ``intent``. Pairs missing from ``pairs`` raise.
    """
    props = dialogue_properties(pairs).drop_duplicates("pair_id")
    props["intent"] = query_intents(list(props["query"]), intents)
    scored = preds[preds.fact_f1.notna()].copy()
    missing = sorted(set(scored.pair_id) - set(props.pair_id))
    if missing:
        raise ValueError(f"{len(missing)} predicted pair(s) not in the given pairs, "
                         f"e.g. {missing[0]!r}")
    out = scored.merge(props, on="pair_id", how="left", validate="many_to_one")
    out["turn_bucket"] = bucket(out.turn.astype(float), [-1, 0, 1, 2, 4, 100],
                                ["0", "1", "2", "3-4", "5+"])
    out["dist_bucket"] = bucket(out.gold_dist_last_facts, [-1, 0, 1, 3, 10, 1000],
                                ["0 (same)", "1", "2-3", "4-10", ">10"])
    out["fact_f1"] = out.fact_f1.astype(float)
    return out


def grouped_fact_f1(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean Fact-F1 and query count per system and group (averaged over folds and seeds)."""
    return grouped_mean(frame, by, "fact_f1")


def grouped_mean(frame: pd.DataFrame, by: str, value: str) -> pd.DataFrame:
    """Mean ``value`` and row count per system and group (over folds' and seeds' rows)."""
    for col in (by, value):
        if col not in frame.columns:
            raise KeyError(f"no column {col!r}; have {list(frame.columns)}")
    g = frame.groupby(["system", by], observed=True)[value]
    return g.agg(**{value: "mean", "n": "size"}).reset_index()


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(tokens, tokens[1:], strict=False)}


def generation_error_frame(gens: pd.DataFrame, pairs: Sequence[MessagePair],
                           train_replies: Mapping[int, Sequence[str]],
                           items: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per generated test reply with the properties that show generation errors.

    ``out_words`` / ``gold_words`` / ``length_ratio`` / ``length_bucket`` (whitespace
    words; "empty" for an empty output); ``generic``: the same output was given to another
    test query of the fold (same system and seed); ``train_copy``: the output is a training
    reply of the fold verbatim; ``paper_bigram_share``: share of the output's (lower-cased
    word) bigrams found in the paper's sentences, i.e. how much is copied from the paper.
    With ``items`` (04's ``items.jsonl``) each row also gets its scores, one column per
    metric, joined on (system, fold, seed, pair); nothing is recomputed.
    """
    from saf_utils.text import word_tokens

    test = gens[gens.split == "test"].copy()
    content = {p.pair_id: p.content for p in pairs}
    missing = sorted(set(test.pair_id) - set(content))
    if missing:
        raise ValueError(f"{len(missing)} generated pair(s) not in the given pairs, "
                         f"e.g. {missing[0]!r}")
    paper_bigrams = {pid: _bigrams(word_tokens(" ".join(c))) for pid, c in content.items()}
    train_sets = {int(f): set(r) for f, r in train_replies.items()}
    test["out_words"] = [len(o.split()) for o in test.output]
    test["gold_words"] = [len(g.split()) for g in test.gold]
    test["length_ratio"] = test.out_words / test.gold_words.clip(lower=1)
    test["length_bucket"] = bucket(test.length_ratio.where(test.out_words > 0),
                                   [-1, 0.5, 2.0, 1e9], ["<0.5x gold", "0.5-2x gold",
                                                         ">2x gold"]).replace("n/a", "empty")
    seed_key = test.seed.map(lambda x: -1 if x is None or pd.isna(x) else int(x))
    counts = test.groupby([test.system, test.fold, seed_key, test.output]).pair_id.transform(
        "size")
    test["generic"] = counts > 1
    test["train_copy"] = [o in train_sets.get(int(f), set()) and bool(o.strip())
                          for o, f in zip(test.output, test.fold, strict=True)]
    shares = []
    for o, pid in zip(test.output, test.pair_id, strict=True):
        bg = _bigrams(word_tokens(o))
        shares.append(len(bg & paper_bigrams[pid]) / len(bg) if bg else 0.0)
    test["paper_bigram_share"] = shares
    if items is not None and not items.empty:
        it = items[items.split == "test"].copy()
        it["seed_key"] = it.seed.map(lambda x: -1 if x is None or pd.isna(x) else int(x))
        wide = it.pivot_table(index=["system", "fold", "seed_key", "item"], columns="metric",
                              values="value", aggfunc="mean").reset_index()
        wide = wide.rename(columns={"item": "pair_id"})
        test["seed_key"] = seed_key
        test = test.merge(wide, on=["system", "fold", "seed_key", "pair_id"], how="left",
                          validate="many_to_one").drop(columns="seed_key")
    return test.reset_index(drop=True)


def generation_error_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per system: mean output and gold words, and the shares of empty, too short (<0.5x),
    too long (>2x), generic, training-copy outputs and the mean paper-bigram share."""
    g = frame.assign(empty=frame.out_words == 0,
                     too_short=frame.length_bucket == "<0.5x gold",
                     too_long=frame.length_bucket == ">2x gold").groupby("system", sort=False)
    return g.agg(outputs=("output", "size"), out_words=("out_words", "mean"),
                 gold_words=("gold_words", "mean"), empty_share=("empty", "mean"),
                 too_short_share=("too_short", "mean"), too_long_share=("too_long", "mean"),
                 generic_share=("generic", "mean"), train_copy_share=("train_copy", "mean"),
                 paper_bigram_share=("paper_bigram_share", "mean"))



def slug(text: str) -> str:
    """lower_snake_case name part for metric names ("3-4" -> "3_4", "Ask_Info" -> "ask_info")."""
    out = re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")
    return out or "none"
