"""ArgSciChat error analysis (notebook 06): selections and replies joined with dialogue
properties (turn, number of gold facts, distance to the previous turn's facts) and the
proponent's query intents, grouped means, and where generated replies come from (copies
of training replies, paper bigrams, length)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from saf_utils.argscichat.data import MessagePair
from saf_utils.text import split_sentences, squash


def query_intents(queries: Sequence[str], intents: pd.DataFrame | None,
                  role: str = "Proponent") -> list[str]:
    """Dialogue intent of each query from ``intents.csv``, sentences matched by normalised
    text: the first ``Ask_*`` tag, else the first matched tag, else ``"unmatched"``."""
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
    """Per pair: turn, gold-fact count and ``gold_dist_last_facts``, the smallest |gold
    index - index of a fact of the latest earlier turn that had facts| (else NaN)."""
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
    """03's scored test predictions joined with dialogue properties and query intents;
    pairs missing from ``pairs`` raise."""
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

    Lengths in whitespace words; ``generic``: the same output went to another test query of
    the fold; ``train_copy``: a training reply verbatim; ``paper_bigram_share``: how much is
    copied from the paper. With ``items`` (04's ``items.jsonl.gz``) each row also gets its
    scores, one column per metric (nothing is recomputed).
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
    def seed_key(seeds: pd.Series) -> pd.Series:
        return seeds.map(lambda x: -1 if x is None or pd.isna(x) else int(x))

    test["seed_key"] = seed_key(test.seed)
    counts = test.groupby(["system", "fold", "seed_key", "output"]).pair_id.transform("size")
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
        it["seed_key"] = seed_key(it.seed)
        wide = it.pivot_table(index=["system", "fold", "seed_key", "item"], columns="metric",
                              values="value", aggfunc="mean").reset_index()
        wide = wide.rename(columns={"item": "pair_id"})
        test = test.merge(wide, on=["system", "fold", "seed_key", "pair_id"], how="left",
                          validate="many_to_one")
    return test.drop(columns="seed_key").reset_index(drop=True)


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
