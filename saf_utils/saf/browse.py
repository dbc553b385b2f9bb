"""Tables for people: one row per SAF answer with its texts whole (for ``tables.show``), and
headline or comparison tables as ``value [low, high]`` strings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.registry import system_label
from saf_utils.saf.scores import TABLE_METRICS

#: Long-text columns: shown whole and wrapped by the interactive table.
WRAP = ("question", "reference_answer", "provided_answer", "feedback", "gold_feedback",
        "pred_feedback")


def _error_class(df: pd.DataFrame) -> pd.Series:
    if "error_class" not in df.columns:
        return pd.Series("(not annotated)", index=df.index)
    return df["error_class"].fillna("(none)").astype(str)


def answer_table(saf_df: pd.DataFrame) -> pd.DataFrame:
    """Every answer: split, question, reference, answer, label, score, feedback, error class."""
    return pd.DataFrame({
        "split": saf_df["split"], "question": saf_df["question"],
        "reference_answer": saf_df["reference_answer"],
        "provided_answer": saf_df["provided_answer"].fillna(""),
        "label": saf_df["verification_feedback"], "score": saf_df["score"].astype(float),
        "feedback": saf_df["answer_feedback"], "error_class": _error_class(saf_df),
        "id": saf_df["id"].astype(str),
    }).reset_index(drop=True)


def predictions_beside_gold(preds: pd.DataFrame, system: str) -> pd.DataFrame:
    """``system``'s predictions (one seed) beside the gold: ``verdict`` is correct, wrong or
    unparseable (the label could not be read from a generation)."""
    sub = preds[preds["system"] == system]
    parseable = sub["parseable"].fillna(True).astype(bool) if "parseable" in sub else True
    verdict = pd.Series("wrong", index=sub.index)
    verdict[sub["pred_label"] == sub["gold_label"]] = "correct"
    verdict[~parseable] = "unparseable"
    return pd.DataFrame({
        "split": sub["split"], "question": sub["question"], "verdict": verdict,
        "gold_label": sub["gold_label"], "pred_label": sub["pred_label"].fillna("(none)"),
        "provided_answer": sub["provided_answer"].fillna(""),
        "gold_feedback": sub["gold_feedback"], "pred_feedback": sub["pred_feedback"].fillna(""),
        "gold_score": sub["gold_score"].astype(float),
        "pred_score": pd.to_numeric(sub["pred_score"], errors="coerce"),
        "reference_answer": sub["reference_answer"], "error_class": _error_class(sub),
        "id": sub["id"].astype(str),
    }).reset_index(drop=True)


def wide_table(table: pd.DataFrame, split: str, value: str = "mean",
               metrics: Sequence[str] = TABLE_METRICS, digits: int = 3,
               systems: Sequence[str] | None = None) -> pd.DataFrame:
    """One split of a headline or paired table as system × metric ``value [low, high]``."""
    sub = table[table.split == split]
    cells = {}
    for r in sub.itertuples():
        d = 1 if r.metric in ("sacrebleu", "chrf") else digits
        text = f"{getattr(r, value):.{d}f} [{r.ci_low:.{d}f}, {r.ci_high:.{d}f}]"
        if value == "diff":
            text += f" p={r.p_value:.3f}"
            if "p_adj" in sub and pd.notna(getattr(r, "p_adj", np.nan)):
                text += f" (adj. {r.p_adj:.3f})"
        cells[(r.system, r.metric)] = text
    order = list(systems) if systems is not None else list(dict.fromkeys(sub.system))
    cols = [m for m in metrics if any(k[1] == m for k in cells)]
    rows = [s for s in order if any(k[0] == s for k in cells)]
    return pd.DataFrame([[cells.get((s, m), "") for m in cols] for s in rows], index=rows,
                        columns=cols)


def cost_table(state: Any) -> pd.DataFrame:
    """Wall time and peak resident memory of each system of a run (``RunState.seconds`` /
    ``peak_mb``; the memory the process held before a system ran is included)."""
    names = list(dict.fromkeys([*state.seconds, *state.peak_mb]))

    def peak(name: str) -> float | None:  # a variant (feature_clf:use) ran inside its family
        if name in state.peak_mb:
            return state.peak_mb[name]
        family = [k for k in state.peak_mb if k.endswith(":") and name.startswith(k)]
        return state.peak_mb[max(family, key=len)] if family else None

    return pd.DataFrame({"system": [system_label(n) for n in names],
                         "seconds": [round(state.seconds.get(n, np.nan), 1) for n in names],
                         "peak memory (MiB)": [peak(n) for n in names]})


def params_table(params: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per system: the parameters it runs with (``SAFRun.params``), as text."""
    from saf_utils.registry import params_text

    return pd.DataFrame({"system": [system_label(n) for n in params],
                         "parameters": [params_text(v) or "(none)" for v in params.values()]})




def label_distribution(preds: pd.DataFrame, splits: Sequence[str] | None = None,
                       systems: Sequence[str] | None = None,
                       labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Per split, the gold label shares and each system's predicted ones (seeds pooled),
    ``collapsed`` where the top share is over :data:`saf_utils.saf.unseen.COLLAPSE_SHARE`."""
    from saf_utils.saf.data import SAF_LABELS
    from saf_utils.saf.unseen import COLLAPSE_SHARE

    labels = list(labels or SAF_LABELS)
    sub = preds if splits is None else preds[preds.split.isin(list(splits))]
    order = list(systems) if systems is not None else list(dict.fromkeys(sub.system))
    rows = []
    for split, g in sub.groupby("split", sort=False):
        gold = g.drop_duplicates("id").gold_label
        blocks = [("gold", gold)] + [(s, g[g.system == s].pred_label.fillna("(none)"))
                                     for s in order if (g.system == s).any()]
        for who, values in blocks:
            share = values.value_counts(normalize=True)
            ids = g.id if who == "gold" else g[g.system == who].id
            row = {"split": split, "system": who, "answers": int(ids.nunique()),
                   **{lab: float(share.get(lab, 0.0)) for lab in labels}}
            if "(none)" in share:
                row["(none)"] = float(share["(none)"])
            row["top_share"] = float(share.max()) if len(share) else np.nan
            row["collapsed"] = who != "gold" and row["top_share"] > COLLAPSE_SHARE
            rows.append(row)
    out = pd.DataFrame(rows)
    return out.fillna({"(none)": 0.0}) if "(none)" in out else out


def _seed(x: Any) -> str:
    """A seed as text: blank for a system without one."""
    return "" if pd.isna(x) else str(int(x))


def _marked(preds: pd.DataFrame) -> pd.DataFrame:
    """``preds`` with ``shown``: the label as the browser shows it (``✓`` the gold label,
    ``✗`` another one, ``(unparseable)`` where none could be read from a generation)."""
    ok = preds["parseable"].fillna(True).astype(bool) if "parseable" in preds else \
        pd.Series(True, index=preds.index)
    hit = preds.pred_label.astype(str) == preds.gold_label.astype(str)
    shown = np.where(hit, "✓ ", "✗ ") + preds.pred_label.astype(str)
    shown = np.where(preds.pred_label.isna(), "(none)", shown)
    return preds.assign(shown=np.where(ok, shown, "(unparseable)"), hit=hit & ok)


def every_system(preds: pd.DataFrame, systems: Sequence[str],
                 counted: Sequence[str]) -> pd.DataFrame:
    """One row per evaluated answer, test splits first, with ``right`` (how many of the
    ``counted`` systems gave the gold label) and each system's label."""
    keys = ["split", "id"]
    sub = _marked(preds.assign(id=preds.id.astype(str)))
    wide = sub.pivot_table(index=keys, columns="system", values="shown", aggfunc="first")
    first = sub.drop_duplicates(keys).set_index(keys)
    n = len([s for s in counted if s in set(sub.system)])
    right = sub[sub.system.isin(list(counted))].groupby(keys).hit.sum()
    out = pd.DataFrame({
        "question": first.question, "provided_answer": first.provided_answer.fillna(""),
        "gold_label": first.gold_label, "gold_score": first.gold_score.astype(float),
        "right": right.reindex(first.index, fill_value=0).astype(int).astype(str) + f"/{n}"})
    out = out.join(wide[[s for s in systems if s in wide.columns]]).fillna("").reset_index()
    later = out.split.map(lambda s: not str(s).startswith("test"))
    return out.iloc[np.lexsort([out.split.astype(str), later])].reset_index(drop=True)


def one_answer(preds: pd.DataFrame, items: pd.DataFrame, systems: Sequence[str],
               roles: Any, example: str | None) -> tuple[str, dict[str, Any], pd.DataFrame]:
    """The answer ``example`` (``"<split>:<id>"``; None: the first row of
    :func:`every_system`) in full, with one row per system and its per-item scores."""
    keyed = _marked(preds.assign(key=preds.split.astype(str) + ":" + preds.id.astype(str)))
    if example is None:
        t = every_system(preds, systems, [])
        example = f"{t.split.iloc[0]}:{t.id.iloc[0]}"
    rows = keyed[keyed.key == str(example)]
    if rows.empty:
        raise ValueError(f"example {example!r}: no evaluated answer has this '<split>:<id>' "
                         f"(for instance {keyed.key.iloc[0]!r})")
    split, ex_id = str(example).split(":", 1)
    g = rows.iloc[0]
    texts = {"question": g.question, "reference answer": g.reference_answer,
             "answer": g.provided_answer, "gold label": g.gold_label,
             "gold score": g.gold_score, "gold feedback": g.gold_feedback}
    per = rows.set_index("system").loc[[s for s in systems if s in set(rows.system)]]
    out = pd.DataFrame({"role": [roles.get(s, "") for s in per.index],
                        "seed": per.seed.map(_seed), "label": per.shown,
                        "score": pd.to_numeric(per.pred_score, errors="coerce"),
                        "feedback": per.pred_feedback.fillna("")}).rename_axis("system")
    if len(items):  # an empty items file has no columns
        mine = items[(items.split.astype(str) == split) & (items["item"].astype(str) == ex_id)]
        same = mine[[s in per.index and (per.at[s, "seed"] == x or pd.isna(per.at[s, "seed"])
                                         and pd.isna(x))
                     for s, x in zip(mine.system, mine.seed, strict=True)]]
        out = out.join(same.pivot_table(index="system", columns="metric", values="value",
                                        sort=False))
    return str(example), texts, out.reset_index()
