"""Per-query and per-reply diagnostics of notebook 06: each test query's properties (turn, gold
facts, distance of the gold facts to the latest earlier turn's, intent) and each generated
reply's (length against gold, generic, copied from train, paper bigram share, 04's item scores)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from saf_utils.text import split_sentences, squash, word_tokens


def bucket(values: pd.Series, edges: list[float], labels: list[str]) -> pd.Series:
    """Right-closed bins with readable labels; NaN stays "n/a"."""
    return pd.cut(values, bins=edges, labels=labels).astype(object).where(values.notna(), "n/a")


def query_properties(pairs: Iterable, intents: pd.DataFrame | None) -> pd.DataFrame:
    """One row per test pair. A query's intent: the first Ask_* tag of its sentences in the
    intents file (normalised text), else the first matched tag, else "unmatched"."""
    tag_of: dict[str, str] = {}
    for s, tag in (intents[intents.Role == "Proponent"][["Sentence", "Tag"]]
                   .itertuples(index=False) if intents is not None else ()):
        tag_of.setdefault(squash(str(s)), str(tag))

    def intent(query: str) -> str:
        if intents is None:
            return "no intents file"
        tags = [tag_of[n] for n in (squash(s) for s in split_sentences(query)) if n in tag_of]
        if not tags and squash(query) in tag_of:
            tags = [tag_of[squash(query)]]
        ask = [t for t in tags if t.startswith("Ask")]
        return ask[0] if ask else tags[0] if tags else "unmatched"

    rows = []
    for p in pairs:
        last = next((t for t in reversed(p.history_fact_indexes) if t), ())
        rows.append({"pair_id": p.pair_id, "turn": p.turn, "n_gold": len(p.fact_indexes),
                     "n_sentences": len(p.content), "query": p.query, "reply": p.reply,
                     "gold_dist_last_facts": (min(abs(g - f) for g in p.fact_indexes
                                                  for f in last)
                                              if p.fact_indexes and last else np.nan),
                     "intent": intent(p.query)})
    return pd.DataFrame(rows).drop_duplicates("pair_id")


def _bigrams(text: str) -> set[tuple[str, str]]:
    toks = word_tokens(text)
    return set(zip(toks, toks[1:], strict=False))


def _seed_key(seeds: pd.Series) -> pd.Series:  # comparable across frames: no seed as -1
    return seeds.map(lambda x: -1 if x is None or pd.isna(x) else int(x))


def reply_diagnostics(gen: pd.DataFrame, content: Mapping[str, Sequence[str]],
                      train_replies: Mapping[int, set[str]], items: pd.DataFrame
                      ) -> pd.DataFrame:
    """One row per test reply of ``gen`` (04's generations), with lengths in words, the
    length bucket, ``generic`` (the same reply to another test query of the fold),
    ``train_copy`` (a training reply), ``paper_bigram_share`` (share of the reply's word
    bigrams found in the paper) and 04's per-item scores (``items``), one column per metric."""
    gen = gen.copy()
    if missing := sorted(set(gen.pair_id) - set(content)):
        raise ValueError(f"{len(missing)} generated pair(s) not in the fold files, "
                         f"e.g. {missing[0]!r}")
    paper_bigrams = {pid: _bigrams(" ".join(c)) for pid, c in content.items()}
    gen["out_words"] = [len(o.split()) for o in gen.output]
    gen["gold_words"] = [len(g.split()) for g in gen.gold]
    gen["length_ratio"] = gen.out_words / gen.gold_words.clip(lower=1)
    gen["length_bucket"] = bucket(gen.length_ratio.where(gen.out_words > 0), [-1, 0.5, 2.0, 1e9],
                                  ["<0.5x gold", "0.5-2x gold", ">2x gold"]
                                  ).replace("n/a", "empty")
    gen["seed_key"] = _seed_key(gen.seed)
    gen["generic"] = (gen.groupby(["system", "fold", "seed_key", "output"]).pair_id
                      .transform("size") > 1)
    gen["train_copy"] = [o in train_replies.get(int(f), set()) and bool(o.strip())
                         for o, f in zip(gen.output, gen.fold, strict=True)]
    shares = []
    for o, pid in zip(gen.output, gen.pair_id, strict=True):
        b = _bigrams(o)
        shares.append(len(b & paper_bigrams[pid]) / len(b) if b else 0.0)
    gen["paper_bigram_share"] = shares
    if not items.empty:
        it = items[items.split == "test"]
        it = it.assign(seed_key=_seed_key(it.seed))
        wide = it.pivot_table(index=["system", "fold", "seed_key", "item"], columns="metric",
                              values="value", aggfunc="mean").reset_index()
        gen = gen.merge(wide.rename(columns={"item": "pair_id"}), how="left",
                        on=["system", "fold", "seed_key", "pair_id"], validate="many_to_one")
    return gen.drop(columns="seed_key").reset_index(drop=True)
