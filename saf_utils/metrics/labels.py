"""Label and score metrics (any label set): accuracy, macro/weighted F1, score MSE, confusion;
an unparseable prediction is ``None``: wrong, but never a class of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from saf_utils.metrics.base import register_metric
from saf_utils.metrics.checks import check_parallel

_UNPARSEABLE = "<unparseable>"


def _map_labels(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
                ) -> tuple[list[str], list[str]]:
    check_parallel(pred, gold, "gold/pred")
    allowed = set(labels)
    bad_gold = sorted({g for g in gold if g not in allowed}, key=str)
    if bad_gold:
        raise ValueError(f"gold labels outside {list(labels)}: {bad_gold}")
    bad_pred = sorted({p for p in pred if p is not None and p not in allowed}, key=str)
    if bad_pred:
        raise ValueError(f"predicted labels outside {list(labels)}: {bad_pred}; map unparseable "
                         "outputs to None")
    return list(gold), [_UNPARSEABLE if p is None else p for p in pred]


def _array(x: Sequence[str | None]) -> np.ndarray:
    """A 1-d array of labels: numpy string arrays as they are (fast comparisons), else
    objects (so ``None`` stays ``None``)."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "U":
        return x
    out = np.empty(len(x), dtype=object)
    out[:] = list(x)
    return out


def _is_none(a: np.ndarray) -> np.ndarray:
    return np.zeros(a.shape, bool) if a.dtype.kind == "U" else np.equal(a, None)


def label_counts(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
                 ) -> np.ndarray:
    """Per-item ``[tp_1..k, fp_1..k, fn_1..k]``: the sufficient statistics of macro and
    weighted F1; a ``None`` prediction is a false negative of the gold label."""
    check_parallel(pred, gold, "gold/pred")
    gold_a, pred_a = _array(gold), _array(pred)
    g = np.column_stack([gold_a == lab for lab in labels])
    p = np.column_stack([pred_a == lab for lab in labels])
    if not g.any(1).all() or not (p.any(1) | _is_none(pred_a)).all():
        _map_labels(gold, pred, labels)  # raises, naming the labels outside
    return np.hstack([g & p, p & ~g, g & ~p]).astype(float)


def _f1_per_label(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """F1 and support per label from summed counts ``[B, 3k]`` (sklearn, zero_division=0)."""
    k = s.shape[1] // 3
    tp, fp, fn = s[:, :k], s[:, k:2 * k], s[:, 2 * k:]
    den = 2 * tp + fp + fn
    return np.divide(2 * tp, den, out=np.zeros_like(tp), where=den != 0), tp + fn


def macro_f1_of_counts(s: np.ndarray) -> np.ndarray:
    """Macro F1 of summed :func:`label_counts` rows, one value per row."""
    return _f1_per_label(s)[0].mean(1)


def weighted_f1_of_counts(s: np.ndarray) -> np.ndarray:
    """Support-weighted F1 of summed :func:`label_counts` rows, one value per row."""
    f1, support = _f1_per_label(s)
    tot = support.sum(1)
    return np.divide((f1 * support).sum(1), tot, out=np.zeros_like(tot), where=tot != 0)


_SKLEARN_F1 = ("scikit-learn f1_score, https://scikit-learn.org/stable/modules/generated/"
               "sklearn.metrics.f1_score.html")


@register_metric("accuracy", inputs="labels", description="share of exact labels",
                 definition="Share of answers whose predicted label equals the gold label; "
                 "an unparseable prediction counts as wrong.",
                 reference="scikit-learn accuracy_score")
def accuracy_items(gold: Sequence[str], pred: Sequence[str | None],
                   labels: Sequence[str] | None = None) -> list[float]:
    """1.0 where the predicted label is the gold one, else 0.0 (``None``: wrong)."""
    if labels is not None:
        _map_labels(gold, pred, labels)
    check_parallel(pred, gold, "gold/pred")
    return [float(p is not None and p == g) for g, p in zip(gold, pred, strict=True)]


@register_metric("macro_f1", level="corpus", inputs="labels",
                 description="F1 per label, unweighted mean",
                 definition="F1 of each label (SAF: Correct, Partially correct, Incorrect), "
                 "averaged without weights; unparseable predictions lower the gold label's "
                 "recall and are not a class of their own.", reference=_SKLEARN_F1)
def macro_f1_stats(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
                   ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per-item :func:`label_counts` and :func:`macro_f1_of_counts` (= sklearn's
    ``f1_score(average="macro", labels=labels, zero_division=0)``)."""
    return label_counts(gold, pred, labels), macro_f1_of_counts


@register_metric("weighted_f1", level="corpus", inputs="labels",
                 description="F1 per label, weighted by support",
                 definition="F1 of each label averaged with the number of gold items of the "
                 "label as weights.", reference=_SKLEARN_F1)
def weighted_f1_stats(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
                      ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per-item :func:`label_counts` and :func:`weighted_f1_of_counts`."""
    return label_counts(gold, pred, labels), weighted_f1_of_counts


def _squared_errors(gold: Sequence[float], pred: Sequence[float | None]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Squared error per item and its worst case ``max(g, 1 - g) ** 2`` for unparseable
    (``None``/NaN) predictions; NaN squared error where unparseable."""
    check_parallel(pred, gold, "gold/pred")
    g = np.asarray(gold, dtype=float)
    if np.any((g < 0) | (g > 1)) or np.any(np.isnan(g)):
        raise ValueError("mse: gold scores must lie in [0, 1]")
    p = np.array([np.nan if x is None else float(x) for x in pred], dtype=float)
    return (p - g) ** 2, np.maximum(g, 1 - g) ** 2


_SAF_PAPER = ("Filighera et al. (2022), Your Answer is Incorrect... Would you like to know "
              "why? Introducing a Bilingual Short Answer Feedback Dataset, ACL")


@register_metric("mse", higher_is_better=False, scale=">=0", inputs="scores",
                 description="squared error of the score",
                 definition="Mean squared error between predicted and gold scores (both 0-1), "
                 "over the answers with a parseable score only.", reference=_SAF_PAPER)
def mse_items(gold: Sequence[float], pred: Sequence[float | None]) -> list[float]:
    """Squared score error per item; NaN (not scored) where the prediction is unparseable."""
    return _squared_errors(gold, pred)[0].tolist()


@register_metric("mse_max_penalty", higher_is_better=False, scale=">=0", inputs="scores",
                 description="MSE with unparseable scores set to the worst",
                 definition="Mean squared error over all answers; an unparseable score is "
                 "charged the largest possible error for its gold score, max(g, 1-g)^2, so "
                 "failing to answer does not pay.",
                 reference="this collection (a stricter variant of the SAF paper's MSE)")
def mse_max_penalty_items(gold: Sequence[float], pred: Sequence[float | None]) -> list[float]:
    """Squared score error per item, the worst possible one where unparseable."""
    sq, worst = _squared_errors(gold, pred)
    return np.where(np.isnan(sq), worst, sq).tolist()


@register_metric("unparseable_rate", higher_is_better=False, inputs="outputs",
                 description="share of outputs without a label",
                 definition="Share of generated outputs from which no label (or score) could "
                 "be parsed; systems that generate no text have none.",
                 reference="this collection")
def unparseable_items(outputs: Sequence[str | None], parsed: Sequence[bool]) -> list[float]:
    """1.0 where a generated output could not be parsed, 0.0 where it could; NaN (not
    scored) where there is no output (``None``: the system does not generate text)."""
    check_parallel(parsed, outputs, "outputs/parsed")
    return [float("nan") if o is None else 1.0 - float(bool(ok))
            for o, ok in zip(outputs, parsed, strict=True)]


def confusion(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
              ) -> pd.DataFrame:
    """Confusion counts: rows = gold label, columns = predicted label + ``"unparseable"``."""
    g, p = _map_labels(gold, pred, labels)
    cols = [*labels, "unparseable"]
    table = pd.DataFrame(0, index=pd.Index(list(labels), name="gold"),
                         columns=pd.Index(cols, name="pred"), dtype=int)
    for a, b in zip(g, p, strict=True):
        table.loc[a, "unparseable" if b == _UNPARSEABLE else b] += 1
    return table


