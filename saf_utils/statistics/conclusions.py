"""The sentences that state a notebook's conclusions from the tables of
:mod:`saf_utils.statistics.protocol` (the wording rules: docs/statistics.md), kept apart
from the statistics so that wording can change without touching a number."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import determinism
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

def cannot_reach(row: Mapping[str, Any], alpha: float = 0.05) -> bool:
    """Whether ``p_adj_min`` (:func:`saf_utils.statistics.protocol.adjust`) exceeds ``alpha``."""
    floor = row.get("p_adj_min")
    return floor is not None and isinstance(floor, float | int) and np.isfinite(floor) \
        and floor > alpha


def verdict(row: Mapping[str, Any], metric: str | None = None, lower_is_better: bool = False,
            alpha: float = 0.05, show_estimand: bool = True) -> str:
    """One sentence for one comparison row (``paired_table`` + ``adjust``), with the adjusted
    p where present; without a significant result "not distinguishable at this sample size"
    and the MDE (none where no p could reach ``alpha``: :func:`family_note` says so once)."""
    metric = metric or row.get("metric", "")
    p = row.get("p_adj", row["p_value"])
    p = row["p_value"] if p is None or (isinstance(p, float) and np.isnan(p)) else p
    adjusted = not row.get("primary", False) and "p_adj" in row
    label = "Holm-adjusted p" if adjusted else "p"
    d = row["diff"]
    diff = _gap(row, p, adjusted, alpha)
    est = f" (estimand: {row['estimand']})" if row.get("estimand") and show_estimand else ""
    a, b = row["system"], row["reference"]
    if p <= alpha:
        better = (d < 0) if lower_is_better else (d > 0)
        word = "better" if better else "worse"
        return (f"{a} is {word} than {b} on {metric}: {diff}, {label} {_p(p)}, "
                f"{row.get('method', '')}{est}.")
    mde = row.get("mde", np.nan)
    if cannot_reach(row, alpha) and adjusted:
        mde_txt = ""  # the notebook's family_note says it once
    elif cannot_reach(row, alpha) or not np.isfinite(mde):
        mde_txt = " (no p-value below alpha is possible with this few units)"
    else:
        mde_txt = f" (minimum detectable effect about {mde:.3g})"
    test = " by the Holm-adjusted test" if adjusted else ""
    return (f"{a} and {b} are not distinguishable on {metric}{test} at this sample size: "
            f"{diff}, {label} {_p(p)}{mde_txt}{est}.")


def family_note(comparisons: pd.DataFrame, alpha: float = 0.05) -> str | None:
    """Once per notebook: the Holm-adjusted comparisons that cannot reach ``alpha`` whatever
    the data, with their smallest attainable adjusted p; None where every comparison can."""
    if "p_adj_min" not in comparisons or comparisons.empty:
        return None
    rest = comparisons[~comparisons.primary.astype(bool)] if "primary" in comparisons \
        else comparisons
    stuck = rest[[cannot_reach(r, alpha) for r in rest.to_dict("records")]]
    if stuck.empty:
        return None
    units = sorted({int(u) for u in stuck.get("n_units", pd.Series(dtype=int)).dropna()})
    unit_txt = f" with {'/'.join(map(str, units))} sampled units" if units else ""
    which = (f"None of the {len(rest)} Holm-adjusted comparisons can reach" if len(stuck) ==
             len(rest) else f"{len(stuck)} of the {len(rest)} Holm-adjusted comparisons "
             "cannot reach")
    return (f"{which} p <= {alpha:g}{unit_txt}: the smallest adjusted p they could reach is "
            f"{float(stuck.p_adj_min.min()):.3f}. They are estimates with intervals, not "
            "tests that could find a difference, and no minimum detectable effect is given "
            "for them.")


def conclusions(comparisons: pd.DataFrame, shown: pd.DataFrame,
                leads: Mapping[tuple, tuple[str, str]] | None = None,
                lower_is_better: Sequence[str] = (), alpha: float = 0.05,
                split_prefix: bool = False) -> list[str]:
    """A notebook's conclusions: one verdict per comparison of ``shown`` (primary first),
    grouped by estimand, then :func:`family_note`; the leader-vs-runner-up comparison of each
    ``leads`` entry ((split, metric) -> (top, runner)) is marked as such, and a lead whose gap
    was not tested gets its own line."""
    keys = ["split", "metric", "system", "reference", "estimand"]
    rows = {tuple(r.get(k) for k in keys): dict(r) for r in
            shown.sort_values("primary", ascending=False, kind="stable").to_dict("records")} \
        if len(shown) else {}
    untested = []
    for (split, metric), (top, runner) in (leads or {}).items():
        hit = comparisons[(comparisons.split == split) & (comparisons.metric == metric)
                          & (comparisons.system == top) & (comparisons.reference == runner)] \
            if len(comparisons) else comparisons
        if hit.empty:
            untested.append(f"{split}: " * split_prefix + lead_sentence(top, runner, None,
                                                                        metric, alpha))
        for r in hit.to_dict("records"):
            rows.setdefault(tuple(r.get(k) for k in keys), dict(r))["lead"] = True
    out = []
    groups: dict[str, list[str]] = {}
    for r in rows.values():
        text = verdict(r, lower_is_better=r["metric"] in lower_is_better, alpha=alpha,
                       show_estimand=False)
        if r.get("primary"):
            text = "Primary comparison (pre-specified): " + text
        if r.get("lead"):
            text = text.removesuffix(".") + f"; the two highest on {r['metric']}."
        groups.setdefault(str(r.get("estimand") or "not stated"), []).append(
            f"{r['split']}: " * split_prefix + text)
    for estimand, lines in groups.items():
        out += [f"Estimand — {estimand}: {line}" for line in lines]
    return out + ([note] if (note := family_note(comparisons, alpha)) else []) + untested

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
        g = determinism.sort_best(g, "mean", metric in lower_is_better)
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
