"""The sentences that state a notebook's conclusions from :mod:`saf_utils.protocol`'s tables.

"Better than ... (adjusted p)" only when the test says so, else "not distinguishable at this
sample size" with the minimum detectable effect (:func:`verdict`); "highest ...: the lead is
(not) resolved" from the leader-vs-runner-up comparison (:func:`leaders`,
:func:`lead_sentence`). Kept apart from the statistics so that wording can change without
touching a number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import numerics
from saf_utils.registry import ELIGIBLE
from saf_utils.text import interval


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"

#: Beside an interval that excludes 0 while the Holm-adjusted p does not reach alpha: the
#: interval inverts the raw test, the verdict reads the adjusted one.
UNADJUSTED = ("interval not adjusted for the notebook's other comparisons: it excludes 0, "
              "the Holm-adjusted test does not reach the level")

def _gap(row: Mapping[str, Any], p: float, adjusted: bool, alpha: float) -> str:
    """``diff [low, high]``, flagged when the raw interval and the adjusted p disagree."""
    lo, hi = row["ci_low"], row["ci_high"]
    text = interval(row["diff"], lo, hi, "+.3g")
    if adjusted and p > alpha and (lo > 0 or hi < 0):
        text += f" ({UNADJUSTED})"
    return text

def verdict(row: Mapping[str, Any], metric: str | None = None, lower_is_better: bool = False,
            alpha: float = 0.05) -> str:
    """One sentence for one comparison row (:func:`saf_utils.protocol.paired_table` +
    :func:`~saf_utils.protocol.adjust`).

    Uses the adjusted p (``p_adj``) when present; states the estimand; without a
    significant result says "not distinguishable at this sample size" and the MDE.
    """
    metric = metric or row.get("metric", "")
    p = row.get("p_adj", row["p_value"])
    p = row["p_value"] if p is None or (isinstance(p, float) and np.isnan(p)) else p
    adjusted = not row.get("primary", False) and "p_adj" in row
    label = "Holm-adjusted p" if adjusted else "p"
    d = row["diff"]
    diff = _gap(row, p, adjusted, alpha)
    est = f" (estimand: {row['estimand']})" if row.get("estimand") else ""
    a, b = row["system"], row["reference"]
    if p <= alpha:
        better = (d < 0) if lower_is_better else (d > 0)
        word = "better" if better else "worse"
        return (f"{a} is {word} than {b} on {metric}: {diff}, {label} {_p(p)}, "
                f"{row.get('method', '')}{est}.")
    mde = row.get("mde", np.nan)
    mde_txt = ("no p-value below alpha is possible with this few units" if not np.isfinite(mde)
               else f"minimum detectable effect about {mde:.3g}")
    test = " by the Holm-adjusted test" if adjusted else ""
    return (f"{a} and {b} are not distinguishable on {metric}{test} at this sample size: "
            f"{diff}, {label} {_p(p)} ({mde_txt}){est}.")

def leaders(headline: pd.DataFrame, roles: Mapping[str, str] | None = None,
            lower_is_better: Sequence[str] = ()) -> dict[tuple, tuple[str, str]]:
    """Per (split, metric): the top and runner-up system among eligible roles."""
    out = {}
    h = headline
    if roles is not None:
        h = h[h.system.map(lambda s: roles.get(s) in ELIGIBLE)]
    elif "role" in h:
        h = h[h.role.isin(ELIGIBLE)]
    for (split, metric), g in h.groupby(["split", "metric"], sort=True):
        g = numerics.sort_best(g, "mean", metric in lower_is_better)
        if len(g) >= 2:
            out[(split, metric)] = (g.system.iloc[0], g.system.iloc[1])
    return out

def lead_sentence(top: str, runner_up: str, cmp_row: Mapping[str, Any] | None, metric: str,
                  alpha: float = 0.05) -> str:
    """"Highest <metric>: A; the gap to B is (not) resolved" from the A-vs-B comparison."""
    if cmp_row is None:
        return f"Highest {metric}: {top}; the gap to {runner_up} was not tested."
    p = cmp_row.get("p_adj", cmp_row["p_value"])
    gap = _gap(cmp_row, p, "p_adj" in cmp_row, alpha)
    if p <= alpha:
        return (f"Highest {metric}: {top}, ahead of {runner_up} by {gap} "
                f"(adjusted p {_p(p)}): the lead is resolved.")
    test = " by the Holm-adjusted test" if "p_adj" in cmp_row else ""
    return (f"Highest {metric}: {top} by its point estimate, but not distinguishable from "
            f"{runner_up}{test} at this sample size ({gap}, adjusted p {_p(p)}).")
