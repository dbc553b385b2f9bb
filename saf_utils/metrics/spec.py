"""What a report needs to know about a metric: which direction is better and on what scale.

The one table of metric metadata: the index's "highest"/"lowest" sentence, its bold best cell,
the choice on validation and the dot plots all read the direction from here. A metric that is
not listed is taken as higher-is-better on an unknown scale (stated, not guessed, in pages).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """``scale``: "0-1", "0-100" (sacreBLEU, chrF), ">=0" (squared errors, losses), "count" or
    "any" (no fixed range); :func:`bounds` reads it."""

    name: str
    higher_is_better: bool = True
    scale: str = "0-1"
    description: str = ""


METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add a metric (a new one; the name must not be taken)."""
    if metric.name in METRICS and METRICS[metric.name] != metric:
        raise ValueError(f"metric {metric.name!r} is already registered differently")
    METRICS[metric.name] = metric
    return metric


def metric(name: str) -> Metric:
    """The metric's metadata; an unregistered name is higher-is-better on any scale."""
    return METRICS.get(name) or Metric(name, True, "any", "not registered")


def lower_is_better(name: str) -> bool:
    return not metric(name).higher_is_better


def bounds(name: str) -> tuple[float, float] | None:
    """The range a value of the metric lies in, from its scale ("0-1" -> (0, 1); ">=0" and
    "count" -> (0, inf)); None where the scale fixes none. Intervals are clipped to it."""
    scale = metric(name).scale
    if scale in (">=0", "count"):
        return (0.0, float("inf"))
    lo, sep, hi = scale.partition("-")
    try:
        return (float(lo), float(hi)) if sep else None
    except ValueError:
        return None


def scale_label(name: str) -> str:
    """Direction and range for a reader: "↑ 0–1", "↓ ≥ 0", "↑" (no fixed range)."""
    m = metric(name)
    arrow = "↑" if m.higher_is_better else "↓"
    b = bounds(name)
    if b is None:
        return arrow
    if b[1] == float("inf"):
        return f"{arrow} ≥ {b[0]:g}"
    return f"{arrow} {b[0]:g}–{b[1]:g}"


for _m in (
    Metric("accuracy", description="share of exact labels"),
    Metric("macro_f1", description="F1 per label, unweighted mean"),
    Metric("weighted_f1", description="F1 per label, weighted by support"),
    Metric("mse", False, ">=0", "squared error of the score"),
    Metric("mse_max_penalty", False, ">=0", "MSE with unparseable scores set to the worst"),
    Metric("unparseable_rate", False, description="share of outputs without a label"),
    Metric("sacrebleu", scale="0-100", description="corpus BLEU (sacreBLEU)"),
    Metric("chrf", scale="0-100", description="character n-gram F-score (sacreBLEU)"),
    Metric("feedback_chrf", scale="0-100", description="chrF of the feedback alone"),
    Metric("rouge2", description="ROUGE-2 F1"),
    Metric("meteor", description="METEOR (nltk)"),
    Metric("bertscore_f1", description="BERTScore F1"),
    Metric("moverscore", description="MoverScore"),
    Metric("fact_f1", description="F1 of selected against gold fact sentences"),
    Metric("message_f1", description="token F1 of the reply (ArgSciChat card)"),
    Metric("message_f1_squad", description="token F1 with SQuAD normalisation"),
    Metric("content_f1", description="F1 over content words (stop words out)"),
    Metric("distinct_2", description="distinct bigrams / bigrams"),
    Metric("train_loss", False, "any", "training loss at the end"),
):
    register_metric(_m)
