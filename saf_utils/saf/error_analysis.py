"""Error analysis of SAF predictions (notebook 05): confusion matrices, per-question and
per-error-class accuracy, worst examples, feedback quality by answer length, and the gap
between unseen answers and unseen questions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from saf_utils import metrics as M
from saf_utils.saf.data import SAF_LABELS


def confusion_by_split(preds: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Confusion matrix (gold × predicted + unparseable) per (system, split)."""
    from saf_utils.metrics import confusion

    out = {}
    for (system, split), g in preds.groupby(["system", "split"], sort=False):
        pred = [p if isinstance(p, str) else None for p in g.pred_label]
        out[(system, split)] = confusion(g.gold_label.tolist(), pred, SAF_LABELS)
    return out


def confusion_grid(cms: dict[tuple[str, str], pd.DataFrame], systems: Sequence[str],
                   splits: Sequence[str]):
    """One figure: a confusion matrix per system (rows) and split (columns), counts written
    in the cells (blank where a system has no predictions for a split).

    Not ``seaborn.heatmap(annot=True)``: it draws the figure once per heatmap, so n
    matrices cost n² axis draws (36 matrices: 23 s, now under 2 s).
    """
    import matplotlib.pyplot as plt

    from saf_utils.figures import wrap_label

    fig, axes = plt.subplots(len(systems), len(splits), squeeze=False,
                             figsize=(4.2 * len(splits), 3.2 * len(systems)))
    for i, system in enumerate(systems):
        for j, split in enumerate(splits):
            cm, ax = cms.get((system, split)), axes[i][j]
            if cm is None:
                ax.axis("off")
                continue
            values = cm.to_numpy()
            ax.imshow(values, cmap="Blues", aspect="auto")
            high = values.max() / 2 if values.size else 0
            for (r, c), v in np.ndenumerate(values):
                ax.text(c, r, f"{int(v)}", ha="center", va="center",
                        color="white" if v > high else "black")
            # labels wrapped side by side, not rotated into each other
            ax.set_xticks(range(values.shape[1]), [wrap_label(str(c), 9) for c in cm.columns],
                          fontsize=8)
            ax.set_yticks(range(values.shape[0]), [wrap_label(str(c), 9) for c in cm.index],
                          fontsize=8)
            ax.grid(False)
            ax.set_title(f"{system}\n{split}", fontsize=9)
            ax.set_xlabel("predicted")
            ax.set_ylabel("gold")
    fig.tight_layout()
    return fig


def _row_errors(preds: pd.DataFrame) -> pd.DataFrame:
    p = preds.copy()
    p["correct"] = p.pred_label == p.gold_label
    ps = pd.to_numeric(p.pred_score, errors="coerce")
    p["sq_error"] = np.where(ps.isna(), np.maximum(p.gold_score, 1 - p.gold_score) ** 2,
                             (ps - p.gold_score) ** 2)
    return p


def error_class_breakdown(preds: pd.DataFrame) -> pd.DataFrame | None:
    """Accuracy and miss rate per error class and system; None without ``error_class``."""
    if "error_class" not in preds.columns or preds.error_class.isna().all():
        return None
    p = _row_errors(preds)
    out = (p.groupby(["system", "split", "error_class"], sort=False)
           .agg(n=("id", "size"), accuracy=("correct", "mean")).reset_index())
    out["miss_rate"] = 1 - out.accuracy
    return out


def _feedback_chrf(p: pd.DataFrame) -> list[float]:
    """Per-row chrF (0-100) of the predicted feedback against the gold feedback."""
    return M.metric("feedback_chrf").items(p.gold_feedback.astype(str).tolist(),
                                           p.pred_feedback.fillna("").astype(str).tolist())


def worst_examples(preds: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Wrong labels with the largest score error, then the lowest feedback chrF."""
    p = _row_errors(preds)
    p["feedback_chrf"] = _feedback_chrf(p)
    p = p.sort_values(["correct", "sq_error", "feedback_chrf"], ascending=[True, False, True],
                      kind="stable")
    cols = ["system", "split", "question", "provided_answer", "gold_label", "pred_label",
            "gold_score", "pred_score", "gold_feedback", "pred_feedback", "feedback_chrf"]
    return p[cols].head(n).reset_index(drop=True)


def feedback_by_answer_length(preds: pd.DataFrame, bins: Sequence[float] = (0, 5, 10, 20, 40,
                                                                              np.inf)
                              ) -> pd.DataFrame:
    """Accuracy and mean sentence chrF of the feedback per answer-length bin (words)."""
    p = _row_errors(preds)
    p["answer_words"] = p.provided_answer.astype(str).str.split().str.len()
    edges = list(bins)
    names = [f"{int(lo)}+" if math.isinf(hi) else f"{int(lo)}-{int(hi) - 1}"
             for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    p["length_bin"] = pd.cut(p.answer_words, bins=edges, right=False, labels=names)
    p["feedback_chrf"] = _feedback_chrf(p)
    out = (p.groupby(["system", "split", "length_bin"], sort=True, observed=True)
           .agg(n=("id", "size"), accuracy=("correct", "mean"),
                feedback_chrf=("feedback_chrf", "mean")).reset_index())
    out["length_bin"] = out.length_bin.astype(str)  # rows stay in bin order
    return out


def seen_unseen_gap(summary: pd.DataFrame, metrics: Sequence[str] = (
        "accuracy", "macro_f1", "sacrebleu", "bertscore_f1")) -> pd.DataFrame:
    """Per system and metric: unseen answers − unseen questions.

    ``summary`` has ``split, system, metric, mean`` (e.g. :func:`headline_per_split`, or the
    headline records of notebook 02).
    """
    s = summary[summary.metric.isin(metrics)]
    wide = s.pivot_table(index=["system", "metric"], columns="split", values="mean")
    need = {"test_unseen_answers", "test_unseen_questions"}
    if not need <= set(wide.columns):
        return pd.DataFrame(columns=["system", "metric", "test_unseen_answers",
                                     "test_unseen_questions", "gap"])
    wide = wide[["test_unseen_answers", "test_unseen_questions"]].copy()
    wide["gap"] = wide.test_unseen_answers - wide.test_unseen_questions
    return wide.reset_index()
