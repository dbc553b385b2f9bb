"""Answer browsers: one row per SAF answer with its texts whole (for ``tables.show``)."""

from __future__ import annotations

import pandas as pd

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


def prediction_table(preds: pd.DataFrame, system: str) -> pd.DataFrame:
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
