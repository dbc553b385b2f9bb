"""Label and score metrics for SAF verification feedback (any label set).

Unparseable predictions are ``None``: they count as wrong but are never a class of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from saf_utils.metrics.checks import check_parallel

_UNPARSEABLE = "<unparseable>"


def _map_labels(
    gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
) -> tuple[list[str], list[str], int]:
    check_parallel(pred, gold, "gold/pred")
    allowed = set(labels)
    bad_gold = sorted({g for g in gold if g not in allowed}, key=str)
    if bad_gold:
        raise ValueError(f"gold labels outside {list(labels)}: {bad_gold}")
    bad_pred = sorted({p for p in pred if p is not None and p not in allowed}, key=str)
    if bad_pred:
        raise ValueError(
            f"predicted labels outside {list(labels)}: {bad_pred}; map unparseable outputs "
            "to None"
        )
    mapped = [_UNPARSEABLE if p is None else p for p in pred]
    return list(gold), mapped, sum(p is None for p in pred)


def label_metrics(
    gold: Sequence[str],
    pred: Sequence[str | None],
    labels: Sequence[str],
) -> dict[str, float | int]:
    """Accuracy and macro/weighted F1 over SAF labels; ``None`` predictions = unparseable.

    Unparseable predictions count as wrong but are *not* a fourth class: macro F1
    averages over ``labels`` only (they lower recall of the gold class). Predictions that
    are neither a label nor None raise, so parsing bugs cannot pass silently.
    """
    from sklearn.metrics import f1_score

    g, p, n_bad = _map_labels(gold, pred, labels)
    kw = {"labels": list(labels), "zero_division": 0}
    return {
        "accuracy": float(np.mean([a == b for a, b in zip(g, p, strict=True)])),
        "macro_f1": float(f1_score(g, p, average="macro", **kw)),
        "weighted_f1": float(f1_score(g, p, average="weighted", **kw)),
        "n": len(g),
        "n_unparseable": n_bad,
    }


def score_mse(gold: Sequence[float], pred: Sequence[float | None]) -> dict[str, float | int]:
    """MSE of SAF scores in [0, 1]; ``None`` (or NaN) predictions are unparseable.

    ``mse`` is over parseable pairs only (NaN if there are none); ``mse_max_penalty`` is
    over all pairs, charging each unparseable one the largest possible squared error for
    its gold score, ``max(g, 1 - g) ** 2``, so a model cannot gain by failing to answer.
    """
    check_parallel(pred, gold, "gold/pred")
    g = np.asarray(gold, dtype=float)
    if np.any((g < 0) | (g > 1)) or np.any(np.isnan(g)):
        raise ValueError("score_mse: gold scores must lie in [0, 1]")
    p = np.array([np.nan if x is None else float(x) for x in pred], dtype=float)
    ok = ~np.isnan(p)
    sq = np.where(ok, (np.where(ok, p, 0.0) - g) ** 2, np.maximum(g, 1 - g) ** 2)
    return {
        "mse": float(sq[ok].mean()) if ok.any() else float("nan"),
        "mse_max_penalty": float(sq.mean()),
        "n": int(g.size),
        "n_unparseable": int((~ok).sum()),
    }


def confusion(
    gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
) -> pd.DataFrame:
    """Confusion counts: rows = gold label, columns = predicted label + ``"unparseable"``."""
    g, p, _ = _map_labels(gold, pred, labels)
    cols = [*labels, "unparseable"]
    table = pd.DataFrame(0, index=pd.Index(list(labels), name="gold"),
                         columns=pd.Index(cols, name="pred"), dtype=int)
    for a, b in zip(g, p, strict=True):
        table.loc[a, "unparseable" if b == _UNPARSEABLE else b] += 1
    return table


