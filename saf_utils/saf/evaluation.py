"""Evaluation of SAF prediction tables and the grouping helpers of the error analysis."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.formats import SAF_TARGETS

# --------------------------------------------------------------------------- evaluation


def _bertscore_pairs(pairs: Sequence[tuple[str, str]], **kw: Any) -> dict[tuple[str, str], float]:
    """BERTScore F1 of each distinct (hypothesis, reference) pair, in one call."""
    from saf_utils.metrics.embedding import bertscore

    unique = list(dict.fromkeys(pairs))
    res = bertscore([p[0] for p in unique], [p[1] for p in unique], **kw)
    return dict(zip(unique, res["f1_per_pair"], strict=True))


def _dedup_bertscore(hyps: Sequence[str], refs: Sequence[str], **kw: Any) -> float:
    """Mean BERTScore F1 over all pairs, each distinct (hyp, ref) pair scored once."""
    pairs = list(zip(hyps, refs, strict=True))
    f1 = _bertscore_pairs(pairs, **kw)
    return float(np.mean([f1[p] for p in pairs]))


def _texts(preds: pd.DataFrame) -> tuple[list[str], list[str]]:
    hyps = [str(h) if isinstance(h, str) else "" for h in preds.pred_feedback]
    return hyps, preds.gold_feedback.astype(str).tolist()


def moverscore_mean(hyps: Sequence[str], refs: Sequence[str], model: Any) -> float:
    """Mean MoverScore v2 with IDF weights from the *gold* feedback for both sides.

    moverscore_v2 computes hypothesis IDF over the system's own outputs, so a system that
    always writes the same text gets IDF 0 everywhere and a perfect 1.0; an empty output
    also scores 1.0. Here one IDF table from the references serves both sides (unseen
    word pieces get the maximal weight log(N+1)) and a hypothesis without any weighted
    token (e.g. empty) scores 0.
    """
    return _moverscore_tables([(list(hyps), list(refs))], model)[0]


def _moverscore_tables(items: Sequence[tuple[list[str], list[str]]], model: Any) -> list[float]:
    """:func:`moverscore_mean` of several (hyps, refs) lists; one call per reference list."""
    import torch

    from saf_utils.metrics.embedding import get_idf_dict, moverscore

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out: list[float] = [0.0] * len(items)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (_, refs) in enumerate(items):
        groups.setdefault(tuple(refs), []).append(i)
    for refs, members in groups.items():
        idf = get_idf_dict(refs, model, device=device)
        all_h = [h for i in members for h in items[i][0]]
        scores = moverscore(list(refs) * len(members), all_h, model=model, device=device,
                            idf_dict_ref=idf, idf_dict_hyp=idf, degenerate_score=0.0)
        for k, i in enumerate(members):
            out[i] = float(np.mean(scores[k * len(refs):(k + 1) * len(refs)]))
    return out


def evaluate_predictions(preds: pd.DataFrame, bertscore_kwargs: Mapping[str, Any] | None = None,
                         moverscore_model: Any = None, embedding_metrics: bool = True
                         ) -> dict[str, float]:
    """All SAF metrics of one prediction table (one system, seed and split).

    Label metrics count unparseable rows as wrong; ``mse`` is over rows with a score
    (``mse_max_penalty`` charges missing ones the worst error); feedback metrics compare
    parsed feedback (empty when unparseable) with gold. sacreBLEU/chrF are 0-100, the
    rest 0-1.
    """
    from saf_utils import metrics as M

    gold_l = preds.gold_label.tolist()
    pred_l = [p if isinstance(p, str) else None for p in preds.pred_label]
    out: dict[str, float] = {}
    lm = M.label_metrics(gold_l, pred_l, SAF_LABELS)
    out.update({k: float(lm[k]) for k in ("accuracy", "macro_f1", "weighted_f1")})
    out["n_unparseable"] = float(lm["n_unparseable"])
    out["unparseable_rate"] = lm["n_unparseable"] / max(len(preds), 1)
    sm = M.score_mse(preds.gold_score.tolist(),
                     [None if s is None or pd.isna(s) else float(s) for s in preds.pred_score])
    if not math.isnan(sm["mse"]):
        out["mse"] = sm["mse"]
    out["mse_max_penalty"] = sm["mse_max_penalty"]
    hyps, refs = _texts(preds)
    out["sacrebleu"] = M.bleu(hyps, refs)
    out["chrf"] = M.chrf(hyps, refs)
    out["rouge2"] = M.rouge(hyps, refs)["rouge2"]
    out["meteor"] = M.meteor(hyps, refs)
    if embedding_metrics:
        out["bertscore_f1"] = _dedup_bertscore(hyps, refs, **dict(bertscore_kwargs or {}))
        if moverscore_model is not None:
            out["moverscore"] = moverscore_mean(hyps, refs, moverscore_model)
    return out


def evaluate_tables(tables: Sequence[pd.DataFrame],
                    bertscore_kwargs: Mapping[str, Any] | None = None,
                    moverscore_model: Any = None, embedding_metrics: bool = True
                    ) -> list[dict[str, float]]:
    """:func:`evaluate_predictions` of many tables, embedding metrics batched across them.

    BERTScore runs once over the distinct pairs of all tables and MoverScore once per
    reference list (split): same numbers, far fewer model calls.
    """
    results = [evaluate_predictions(t, embedding_metrics=False) for t in tables]
    if not embedding_metrics or not tables:
        return results
    texts = [_texts(t) for t in tables]
    f1 = _bertscore_pairs([p for h, r in texts for p in zip(h, r, strict=True)],
                          **dict(bertscore_kwargs or {}))
    for res, (h, r) in zip(results, texts, strict=True):
        res["bertscore_f1"] = float(np.mean([f1[p] for p in zip(h, r, strict=True)]))
    if moverscore_model is not None:
        for res, ms in zip(results, _moverscore_tables(texts, moverscore_model), strict=True):
            res["moverscore"] = ms
    return results


def summarize_seeds(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof=1, 0 for one seed) over seeds per split/system/metric."""
    g = metrics.groupby(["split", "system", "metric"], sort=False)["value"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out.rename(columns={"count": "n_seeds"})


def best_vs_targets(summary: pd.DataFrame, targets: Mapping[str, Mapping[str, float]] = SAF_TARGETS
                    ) -> pd.DataFrame:
    """Per split and target metric: the best system's mean value next to the target."""
    rows = []
    for split, tmetrics in targets.items():
        sub = summary[summary.split == split]
        if sub.empty:
            continue
        acc = sub[sub.metric == "accuracy"].sort_values("mean", ascending=False)
        best = acc.system.iloc[0] if len(acc) else None
        for metric, target in tmetrics.items():
            m = sub[sub.metric == metric]
            if m.empty:
                continue
            top = m.sort_values("mean", ascending=False).iloc[0]
            of_best = m[m.system == best]["mean"]
            rows.append({"split": split, "metric": metric, "target": target,
                         "best_value": float(top["mean"]), "best_system": top.system,
                         "value_of_most_accurate": float(of_best.iloc[0])
                         if len(of_best) else np.nan, "most_accurate_system": best,
                         "met": bool(top["mean"] >= target)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- error analysis


def confusion_by_split(preds: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Confusion matrix (gold × predicted + unparseable) per (system, split)."""
    from saf_utils.metrics import confusion

    out = {}
    for (system, split), g in preds.groupby(["system", "split"], sort=False):
        pred = [p if isinstance(p, str) else None for p in g.pred_label]
        out[(system, split)] = confusion(g.gold_label.tolist(), pred, SAF_LABELS)
    return out


def _row_errors(preds: pd.DataFrame) -> pd.DataFrame:
    p = preds.copy()
    p["correct"] = p.pred_label == p.gold_label
    ps = pd.to_numeric(p.pred_score, errors="coerce")
    p["sq_error"] = np.where(ps.isna(), np.maximum(p.gold_score, 1 - p.gold_score) ** 2,
                             (ps - p.gold_score) ** 2)
    return p


def per_question_metrics(preds: pd.DataFrame) -> pd.DataFrame:
    """Accuracy, MSE (unparseable charged the worst error) and n per system/split/question."""
    p = _row_errors(preds)
    return (p.groupby(["system", "split", "question"], sort=False)
            .agg(n=("id", "size"), accuracy=("correct", "mean"), mse=("sq_error", "mean"))
            .reset_index())


def error_class_breakdown(preds: pd.DataFrame) -> pd.DataFrame | None:
    """Accuracy and miss rate per error class and system; None without ``error_class``."""
    if "error_class" not in preds.columns or preds.error_class.isna().all():
        return None
    p = _row_errors(preds)
    out = (p.groupby(["system", "split", "error_class"], sort=False)
           .agg(n=("id", "size"), accuracy=("correct", "mean")).reset_index())
    out["miss_rate"] = 1 - out.accuracy
    return out


def sentence_chrf(hyps: Sequence[str], refs: Sequence[str]) -> list[float]:
    """Per-pair chrF (0-100), for sorting and binning examples."""
    import sacrebleu

    return [float(sacrebleu.sentence_chrf(h or "", [r]).score)
            for h, r in zip(hyps, refs, strict=True)]


def worst_examples(preds: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Wrong labels with the largest score error, then the lowest feedback chrF."""
    p = _row_errors(preds)
    p["feedback_chrf"] = sentence_chrf(p.pred_feedback.fillna("").astype(str).tolist(),
                                       p.gold_feedback.astype(str).tolist())
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
    p["feedback_chrf"] = sentence_chrf(p.pred_feedback.fillna("").astype(str).tolist(),
                                       p.gold_feedback.astype(str).tolist())
    out = (p.groupby(["system", "split", "length_bin"], sort=True, observed=True)
           .agg(n=("id", "size"), accuracy=("correct", "mean"),
                feedback_chrf=("feedback_chrf", "mean")).reset_index())
    out["length_bin"] = out.length_bin.astype(str)  # rows stay in bin order
    return out


def seen_unseen_gap(summary: pd.DataFrame, metrics: Sequence[str] = (
        "accuracy", "macro_f1", "sacrebleu", "bertscore_f1")) -> pd.DataFrame:
    """Per system and metric: unseen answers − unseen questions (mean over seeds)."""
    s = summary[summary.metric.isin(metrics)]
    wide = s.pivot_table(index=["system", "metric"], columns="split", values="mean")
    need = {"test_unseen_answers", "test_unseen_questions"}
    if not need <= set(wide.columns):
        return pd.DataFrame(columns=["system", "metric", "test_unseen_answers",
                                     "test_unseen_questions", "gap"])
    wide = wide[["test_unseen_answers", "test_unseen_questions"]].copy()
    wide["gap"] = wide.test_unseen_answers - wide.test_unseen_questions
    return wide.reset_index()
