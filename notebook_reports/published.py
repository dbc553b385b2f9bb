"""Published numbers (:class:`saf_utils.taskspec.Published`, cited from a task's spec) beside
the run's own: each value with its scale, and whether the run reproduces the published system."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from notebook_reports.headline import value_html
from notebook_reports.sharing import esc
from saf_utils.metrics import bounds
from saf_utils.taskspec import Published


def published_value(p: Published, metric: str, value: float) -> str:
    """A cited value as the source prints it, with its scale ("81.0 %", "0.162 (0–1)"),
    converted to the metric's own scale only where the metric is the same here and the
    scales differ ("81.0 % = 0.810"); a metric computed differently here is said to be."""
    if p.scale == "percent" and bounds(metric) == (0.0, 100.0):  # SacreBLEU: its own scale
        txt = f"{value:.1f} <small>(0–100)</small>"
    elif p.scale == "percent":
        txt = f"{value:.1f} %"
        if metric in p.comparable and bounds(metric) == (0.0, 1.0):
            txt += f" <small>= {value / 100:.3f}</small>"
    else:
        txt = f"{value:.3f} <small>(0–1)</small>"
    if metric not in p.comparable:
        txt += " <small>(computed differently here)</small>"
    return txt

def reproduction(p: Published, metric: str, cell: dict | None) -> str:
    """The measured value of the published system (``p.measured``) beside the published one:
    "reproduced" where the measured mean, rounded as the source prints its numbers (3
    decimals on 0-1, 1 on percent), equals it; else the difference. "" where the metric is
    not computed the same way here or the system was not run."""
    value = dict(p.values).get(metric)
    if not p.measured or value is None or metric not in p.comparable or not cell:
        return ""
    mean = cell["mean"] * (100.0 if p.scale == "percent" and bounds(metric) == (0.0, 1.0)
                           else 1.0)
    digits = 1 if p.scale == "percent" else 3
    shown = f"{mean:.{digits}f}"
    if float(shown) == round(value, digits):
        verdict = (f'<b class="same" title="the measured mean rounded to the published '
                   f'{digits} decimals equals the published value">reproduced</b>')
    else:
        verdict = (f'<b class="warn">not reproduced</b>: measured minus published '
                   f"{mean - value:+.{digits}f}")
    return (f"{verdict} <small>(measured {esc(p.measured)} {value_html(cell)})"
            "</small>")


def published_html(anchors: Sequence[Published], dataset: Any, metrics: Sequence[str],
                   names: bool = True, systems: dict[str, dict] | None = None) -> str:
    """The published numbers of one split (:class:`~saf_utils.taskspec.Published`) for
    ``metrics`` (``names``: say which metric each value is): per source, each system's
    values with their scale, beside the run's own value of the system that implements it
    (``systems``: the split's cells; :func:`reproduction`), whether the source's data is this
    run's (``dataset``), the link; values the source reports that could not be quoted are
    named with where they are published. "" without any."""
    groups: dict[tuple, list[Published]] = defaultdict(list)
    for a in anchors:
        groups[(a.source, a.url, a.dataset)].append(a)
    parts = []
    # the same data first: that is the number to set beside the run's
    for (source, url, ds), group in sorted(groups.items(),
                                           key=lambda kv: str(kv[0][2]) != str(dataset)):
        same = ('<b class="same">same data</b>' if str(ds) == str(dataset) else
                f'<b class="warn">different data</b> <small>({esc(ds)})</small>')
        values = []
        for a in group:
            got = dict(a.values)
            shown = [(f"{esc(m)} " if names else "") + published_value(a, m, got[m])
                     + (f" {rep}" if str(ds) == str(dataset) and (rep := reproduction(
                         a, m, (systems or {}).get(a.measured, {}).get(m))) else "")
                     for m in metrics if got.get(m) is not None]
            if shown:
                values.append(f"{esc(a.system)} " + ", ".join(shown))
            if unquoted := [m for m, v in a.values if v is None]:
                values.append(f"{esc(a.system)} {esc(', '.join(unquoted))}: "
                              + esc(a.unquoted or "published in the source; not quoted here"))
        if values:
            parts.append(f'{same}: {"; ".join(values)} <small>(<a href="{esc(url)}" '
                         f'title="{esc(source)}">source</a>)</small>')
    return "<br>".join(parts)
