"""Choices on validation (per fold, one-SE rule, regret, composites), apart from inference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import determinism
from saf_utils.registry import ELIGIBLE  # roles that may be chosen or called "best"


@dataclass
class Choice:
    """A choice on validation: per fold (key None where there are no folds)."""

    metric: str
    split: str
    per_fold: dict[Any, str]
    table: pd.DataFrame = field(repr=False)  # fold, system, role, value, chosen

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(self.per_fold.values()))


def choose(items: pd.DataFrame, metric: str, roles: Mapping[str, str],
           allowed: Sequence[str] = ELIGIBLE, split: str = "val",
           lower_is_better: bool = False, fold: str = "fold") -> Choice:
    """Per fold, the system (role in ``allowed``) with the best mean ``metric`` on ``split``,
    reading only that fold's rows; values compared rounded to
    :data:`saf_utils.determinism.SCORE_DECIMALS`, ties to the first in ``roles``."""
    sub = items[(items.split == split) & (items.metric == metric)]
    folded = fold in sub and sub[fold].notna().any()
    f = sub[fold] if folded else pd.Series(None, index=sub.index, dtype=object)
    per_item = (sub.assign(fold=f).groupby(["fold", "system", "item"], sort=True, dropna=False)
                .value.mean())
    table = (per_item.groupby(level=["fold", "system"], dropna=False).mean().rename("value")
             .reset_index())
    return choose_from(table, metric, roles, allowed, split, lower_is_better)


def choose_from(table: pd.DataFrame, metric: str, roles: Mapping[str, str],
                allowed: Sequence[str] = ELIGIBLE, split: str = "val",
                lower_is_better: bool = False) -> Choice:
    """:func:`choose` on a ready table ``system, value`` (+ ``fold``): e.g. corpus metrics
    (macro F1) whose value is not a mean of items."""
    t = table.copy()
    if "fold" not in t:
        t["fold"] = None
    t = t[t.system.map(lambda s: roles.get(s) in set(allowed)) & np.isfinite(t.value)]
    if t.empty:
        raise ValueError(f"choose: no {split} {metric!r} values of roles {list(allowed)}")
    order = {s: i for i, s in enumerate(roles)}
    t["_f"] = t.fold.map(lambda x: -1 if x is None or pd.isna(x) else int(x))
    t["_o"] = t.system.map(order)
    t["_v"] = t.value.astype(float).round(determinism.SCORE_DECIMALS)  # float noise ties
    t = t.sort_values(["_f", "_v", "_o"], ascending=[True, lower_is_better, True],
                      kind="stable")
    t["chosen"] = ~t._f.duplicated()
    t["role"] = t.system.map(roles)
    t["fold"] = [None if x < 0 else x for x in t._f]
    per_fold = {r.fold: r.system for r in t[t.chosen].itertuples()}
    return Choice(metric, split, per_fold,
                  t[["fold", "system", "role", "value", "chosen"]].reset_index(drop=True))


def choose_value(scores: Mapping[Any, float], metric: str, lower_is_better: bool = False,
                 split: str = "val") -> Any:
    """The key of ``scores`` (candidate -> validation score) :func:`choose_from` picks; the
    first when no score is finite."""
    keys = list(scores)
    if not keys:
        raise ValueError(f"choose_value: no candidates for {metric!r}")
    labels = [str(i) for i in range(len(keys))]
    table = pd.DataFrame({"system": labels, "value": [float(scores[k]) for k in keys]})
    if not np.isfinite(table.value).any():
        return keys[0]
    choice = choose_from(table, metric, dict.fromkeys(labels, "system"), ("system",), split,
                         lower_is_better)
    return keys[int(choice.per_fold[None])]


def choose_row(table: pd.DataFrame, metric: str, split: str = "val",
               lower_is_better: bool = False) -> int:
    """Position of the best row of a grid ``table`` by its column ``metric`` (ties: the first)."""
    scores = dict(enumerate(table[metric].to_numpy(dtype=float)))
    return int(choose_value(scores, metric, lower_is_better, split))


def fold_summary(per_fold: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Per system (in ``order``) of ``per_fold`` (``system, fold, value``): mean over folds,
    standard error (sample std / sqrt(folds)) and the number of folds."""
    g = per_fold.groupby("system").value
    out = pd.DataFrame({"value": g.mean(), "se": g.std(ddof=1) / np.sqrt(g.size()),
                        "n_folds": g.size()}).reindex([s for s in order if s in set(
                            per_fold.system)])
    return out.rename_axis("system").reset_index()


def choose_within_se(per_fold: pd.DataFrame, metric: str, roles: Mapping[str, str],
                     allowed: Sequence[str] = ELIGIBLE, split: str = "train",
                     lower_is_better: bool = False, n_se: float = 1.0) -> Choice:
    """The one-standard-error rule over CV folds (Breiman et al. 1984): the simplest candidate
    (``roles`` lists them simplest first) within ``n_se`` standard errors of the best mean (with
    few folds the best mean picks the luckiest); the table adds ``se``, ``n_folds``, ``bar``."""
    cand = per_fold[per_fold.system.map(lambda s: roles.get(s) in set(allowed))]
    t = fold_summary(cand[np.isfinite(cand.value.astype(float))], list(roles))
    if t.empty:
        raise ValueError(f"choose_within_se: no {split} {metric!r} values of roles "
                         f"{list(allowed)}")
    sign = -1.0 if lower_is_better else 1.0
    v = (sign * t.value).round(determinism.SCORE_DECIMALS)
    best = int(np.argmax(v.to_numpy()))  # ties: the simplest
    se = float(t.se.iloc[best]) if np.isfinite(t.se.iloc[best]) else 0.0
    bar = round(float(v.iloc[best]) - n_se * se, determinism.SCORE_DECIMALS)
    pick = int(np.flatnonzero(v.to_numpy() >= bar)[0])
    t["chosen"] = [i == pick for i in range(len(t))]
    t["role"] = t.system.map(roles)
    t["fold"] = None
    t["bar"] = sign * bar
    return Choice(metric, split, {None: t.system.iloc[pick]},
                  t[["fold", "system", "role", "value", "se", "n_folds", "bar", "chosen"]])


def rule_regret(per_fold: pd.DataFrame, rule: Any, lower_is_better: bool = False
                ) -> pd.DataFrame:
    """Regret of ``rule(rows) -> system`` per held-out fold of ``per_fold`` (``system, fold,
    value``): its pick from the other folds' rows against the held-out fold's best."""
    rows = []
    for f in dict.fromkeys(per_fold.fold):
        held = per_fold[per_fold.fold == f].set_index("system").value.astype(float)
        pick = rule(per_fold[per_fold.fold != f])
        best = held.idxmin() if lower_is_better else held.idxmax()
        sign = -1.0 if lower_is_better else 1.0
        rows.append({"fold": f, "chosen": pick, "best": best, "value_chosen": held[pick],
                     "value_best": held[best],
                     "regret": sign * (held[best] - held[pick])})
    return pd.DataFrame(rows)


def composite(items: pd.DataFrame, choice: Choice, name: str = "val_chosen",
              fold: str = "fold") -> pd.DataFrame:
    """Items of each fold's chosen system, renamed ``name`` (role: the chosen systems'
    common role, else ``system``)."""
    if list(choice.per_fold) == [None]:
        parts = [items[items.system == choice.per_fold[None]]]
    else:
        parts = [items[(items[fold] == f) & (items.system == s)]
                 for f, s in choice.per_fold.items()]
    out = pd.concat(parts, ignore_index=True)
    if out.empty:
        raise ValueError("composite: no items of the chosen systems")
    out = out.assign(system=name)
    if "role" in out:
        r = sorted(set(out.role.dropna()))
        out["role"] = r[0] if len(r) == 1 else "system"
    return out
