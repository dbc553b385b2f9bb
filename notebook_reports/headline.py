"""The pieces of the headline numbers of a task (``run.html.j2`` lays out the table): ★ on
the systems chosen without the test data, oracles and probes set apart, ⚠ on gold readers;
the verdicts in words (:func:`gap_html`, :func:`lead_html`: the test named, never read against
its interval); terms link to the run's glossary."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from notebook_reports.crossrun import TESTS, clip_record, paired_test
from notebook_reports.pages import fmt
from notebook_reports.sharing import esc
from saf_utils.metrics import bounds, lower_is_better, scale_label
from saf_utils.metrics import metric as metric_spec
from saf_utils.text import interval

#: roles that are not comparable to systems: ceilings (reading gold a user would not have,
#: seeing the gold answer) and probes (exploiting a metric)
SET_APART = ("gold_input", "oracle", "probe")
GLOSSARY = "how-to-read.html"
ALPHA = 0.05

def term(text: str, anchor: str) -> str:
    """``text`` linked to its glossary entry ``#anchor`` (text is escaped)."""
    return f'<a class="term" href="{GLOSSARY}#{esc(anchor)}">{esc(text)}</a>'

def input_mark(entry: dict) -> str:
    """The ⚠ of a system that is no fair comparison: by its role, or by its record note where
    that says it reads gold inputs."""
    note = str(entry.get("note") or "")
    what = {"gold_input": "ceiling: reads gold inputs a user would not have",
            "oracle": "oracle: sees the gold answer", "probe": "probe: exploits the metric"
            }.get(entry.get("role"), note if "gold" in note.lower() else "")
    return what and (f' <small class="warn gold">⚠ <a href="{GLOSSARY}#gold-inputs">'
                     f"{esc(what)}</a></small>")

def name_html(system: str, titles: dict[str, str] | None = None) -> str:
    """A system's name with its line from ``titles`` (:func:`.tasks.system_line`) on hover."""
    line = (titles or {}).get(system)
    return (f'<span class="sysname" title="{esc(line)}">{esc(system)}</span>' if line
            else esc(system))


def direction(metric: str) -> str:
    return f"{'lower' if lower_is_better(metric) else 'higher'} is better"

def metric_head(metric: str) -> str:
    b = bounds(metric)
    rng = "no fixed range" if b is None else f"range {b[0]:g} to {b[1]:g}".replace("inf", "∞")
    title = "; ".join(filter(None, (direction(metric), rng, metric_spec(metric).description)))
    return (f'<th class="metric" title="{esc(title)}">{esc(metric)} '
            f'<small class="scale">{esc(scale_label(metric))}</small></th>')

def value_html(cell: dict, mark: str = "") -> str:
    """"0.86 <small>[0.819, 0.897]</small>" of a cell."""
    mean, _, ci = interval(cell["mean"], cell.get("low"), cell.get("high"), fmt).partition(" ")
    return mean + (f" <small>{ci}{mark}</small>" if ci else "")

def _choice_words(r: dict, folded: bool = False) -> str:
    """How a tuning record's system was chosen: "chosen on validation by macro_f1"."""
    split = str(r.get("split") or "")
    how = (f"chosen on each fold's {split} split" if folded else f"chosen on {split}") \
        if split else "chosen"
    return how + (f" by {r['metric']}" if r.get("metric") else "") + (
        f" ({r['method']})" if r.get("method") else "")

def chosen_by_split(records: list[dict], task: str) -> dict[Any, dict[str, str]]:
    """``{split or None: {system: how it was chosen}}``: ``None`` holds the fold-less
    ``chosen`` record (with folds, the composite of each fold's choice); a ``chosen for
    <split>`` record (:func:`saf_utils.statistics.protocol.chosen_for`) replaces it there."""
    mine = [r for r in records if r.get("task") == task and r.get("kind") == "tuning"]
    parts: dict[str, list] = defaultdict(list)  # per-fold choices: system -> folds
    for r in mine:
        if r.get("subset") == "chosen" and r.get("fold") is not None:
            parts[str(r.get("system"))].append(r["fold"])
    out: dict[Any, dict[str, str]] = {}
    for r in (r for r in mine if r.get("fold") is None):
        sub, system = str(r.get("subset") or ""), str(r.get("system"))
        if sub == "chosen":
            how = _choice_words(r, bool(parts))
            if parts and system not in parts:  # a composite: say what it is
                how += " (per fold: " + "; ".join(
                    f"{s} on fold{'s' if len(f) > 1 else ''} "
                    f"{', '.join(map(str, sorted(f)))}" for s, f in sorted(parts.items())) + ")"
            out.setdefault(None, {})[system] = how
        elif sub.startswith("chosen for "):
            out.setdefault(sub[len("chosen for "):], {})[system] = _choice_words(r)
    return out

def chosen_on(chosen: dict[Any, dict[str, str]], split: Any) -> dict[str, str]:
    """The systems starred on ``split``: its own choice, else the general one."""
    return chosen.get(split, chosen.get(None, {}))

def cell_html(cell: dict | None, best: bool) -> str:
    from saf_utils.statistics.protocol import CLIPPED

    if not cell:
        return '<td class="num"></td>'
    txt = value_html(cell, ' <span title="interval clipped to the metric\'s range">‡</span>'
                     if CLIPPED in str(cell.get("method") or "") else "")
    if not cell["headline"]:
        txt += f" <small>(mean of {cell['n']}*)</small>" if cell["n"] > 1 else " <small>*</small>"
    return f'<td class="num{" best" if best else ""}">{txt}</td>'

def system_order(systems: dict[str, dict], metric: str) -> list[str]:
    sign = 1 if lower_is_better(metric) else -1

    def key(s: str) -> tuple:  # comparable systems first, then SET_APART's order
        e = systems[s]
        return (SET_APART.index(e["role"]) + 1 if e["role"] in SET_APART else 0,
                sign * e[metric]["mean"] if e.get(metric) else math.inf, s)

    return sorted(systems, key=key)

def best_values(systems: dict[str, dict], metrics: Sequence[str]) -> dict[str, float | None]:
    """Per metric with a value (in ``metrics`` order) the best mean of a comparable system."""
    comparable = [e for e in systems.values() if e["role"] not in SET_APART]
    return {m: (min if lower_is_better(m) else max)(
        (e[m]["mean"] for e in comparable if m in e), default=None)
        for m in metrics if any(m in e for e in systems.values())}

def chosen_words(how: str) -> str:
    """The ★'s words: "val-chosen", else those of ``how`` before any "(…)" or "; …"."""
    return "val-chosen" if how.startswith((
        "chosen on validation", "chosen on val ", "chosen on each fold's val")) \
        else how.split(" (")[0].split("; ")[0]

def design_html(systems: dict[str, dict]) -> str:
    """The note under a table: "estimand: …; method: …" of its cells (t-interval df collapsed
    to their range), and what ‡ means where an interval is clipped."""
    from saf_utils.statistics.protocol import CLIPPED

    cells = [c for e in systems.values() for c in e.values()
             if isinstance(c, dict) and c.get("estimand")]
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        method = str(c.get("method") or "").split(f"; {CLIPPED}")[0]
        m = re.match(r"(.*)\(([\d.]+) df\)$", method)
        groups[(c["estimand"], (m.group(1).strip() + " (df {})") if m else method)].extend(
            [float(m.group(2))] if m else [])
    parts = []
    for (estimand, method), dfs in sorted(groups.items()):
        if dfs:
            lo, hi = min(dfs), max(dfs)
            method = method.format(f"{lo:.3g}" if lo == hi else f"{lo:.3g}–{hi:.3g}")
        parts.append(f"estimand: {estimand}; method: {method}")
    clip = (f" {term('‡', 'clipped')}: the interval reached past the metric's range and is "
            "clipped to it." if any(CLIPPED in str(c.get("method") or "") for c in cells) else "")
    if not parts:
        return ""
    return (f'<p class="note">{term("95 % intervals", "interval")}; {esc("; ".join(parts))}.'
            f"{clip}</p>")

def paired_differences(records: list[dict], task: str) -> dict[tuple, dict]:
    """``{(dataset, split, system, metric, ref): {"ref", "diff", "low", "high", "p", "p_adj",
    "primary"}}`` from the analysis records ``minus/p vs/p_adj vs/primary p vs <ref>``."""
    out: dict[tuple, dict] = {}
    for r in records:
        test = paired_test(r.get("subset"))
        if test is None or r.get("task") != task or r.get("kind") != "analysis" \
                or r.get("fold") is not None:
            continue
        (prefix, ref), r = test, clip_record(r)
        d = out.setdefault((r.get("dataset"), r.get("split"), r.get("system"), r.get("metric"),
                            ref), {"ref": ref, "diff": None, "low": None, "high": None,
                                   "p": None, "p_adj": None, "primary": False})
        d[TESTS[prefix][0]] = r["value"]
        if prefix == "minus ":
            d.update(low=r.get("ci_low"), high=r.get("ci_high"))
        d["primary"] |= prefix == "primary p vs "
    return {k: v for k, v in out.items() if v.get("diff") is not None}

def oriented(diffs: dict[tuple, dict], a: str, b: str) -> dict | None:
    """The test of ``a`` minus ``b`` in ``diffs``, turned around if it was run the other way."""
    if (a, b) in diffs or (b, a) not in diffs:
        return diffs.get((a, b))
    d = diffs[(b, a)]
    neg = {k: None if d[k] is None else -d[k] for k in ("diff", "low", "high")}
    return {**d, "ref": b, "diff": neg["diff"], "low": neg["high"], "high": neg["low"]}

# ------------------------------------------------------------- the verdict on a gap, in words
def p_text(p: float | None) -> str:
    """"p = 0.31", "p = 0.004", "p < 0.001"."""
    if p is None or not math.isfinite(p):
        return ""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"

def _verdict_p(d: dict) -> float | None:
    """The p a verdict reads: the raw p of the primary comparison (recorded as ``primary p
    vs``, so it may sit in ``p_adj`` alone), else the Holm-adjusted p, else the raw one."""
    if d["primary"]:
        return d["p"] if d["p"] is not None else d["p_adj"]
    return d["p"] if d["p_adj"] is None else d["p_adj"]

def _significant(d: dict | None) -> bool:
    return d is not None and (p := _verdict_p(d)) is not None and p <= ALPHA

def _signed(x: float) -> str:
    """+0.0611; a float residue (|x| < 1e-9, e.g. an interval end of -1.4e-11) reads 0."""
    return "0" if abs(x) < 1e-9 else f"{x:+.3g}"

def _diff_text(d: dict, glossary: bool = False) -> str:
    """"+0.05 [-0.2, +0.3] vs B, p = 0.62, Holm-adjusted p = 1.00"; ``glossary``: as
    :func:`gap_html` words it. An interval that excludes 0 while the Holm-adjusted p does not
    reach alpha is flagged: the interval inverts the raw test, the verdict the adjusted one."""
    lo, hi = d["low"], d["high"]
    unadjusted = ("; the interval is not adjusted for the other comparisons and excludes 0, the "
                  f"Holm-adjusted test does not reach {ALPHA:g}") if (
        not d["primary"] and d["p_adj"] is not None and not _significant(d) and lo is not None
        and hi is not None and (lo > 0 or hi < 0)) else ""
    if glossary:
        test = (f"{p_text(_verdict_p(d))}, the {term('primary comparison', 'primary-comparison')}"
                " (not adjusted)" if d["primary"] else
                f"{term('Holm-adjusted', 'holm')} {p_text(d['p_adj'])}" if d["p_adj"] is not None
                else f"{p_text(d['p'])}, unadjusted")
        return f"{interval(d['diff'], lo, hi, _signed)}, {test}{unadjusted}"
    test = (f", {p_text(_verdict_p(d))}, the primary comparison" if d["primary"] else
            "" if d["p"] is None else f", {p_text(d['p'])}, Holm-adjusted {p_text(d['p_adj'])}"
            if d["p_adj"] is not None else f", {p_text(d['p'])}, unadjusted")
    return f"{interval(d['diff'], lo, hi, '+.3g')} vs {esc(d['ref'])}{test}{unadjusted}"

def gap_html(d: dict | None, other: str, metric: str) -> str:
    """Whether a system is distinguishable from ``other`` by the test ``d`` of system minus
    other: words first, then the difference, its interval and the test."""
    if d is None:
        return f"vs {other}: {term('not tested', 'not-tested')}"
    if _significant(d):
        ahead = (d["diff"] < 0) if lower_is_better(metric) else (d["diff"] > 0)
        words = (f"<b>distinguishable</b> from {other}: {'ahead' if ahead else 'behind'} "
                 "beyond chance")
    else:
        words = (f"<b>{term('not distinguishable', 'not-distinguishable')}</b> from {other} "
                 "at this sample size")
    return (f"{words} <small>({term('difference', 'paired-difference')} "
            f"{_diff_text(d, glossary=True)})</small>")

def split_verdict(systems: dict[str, dict], metric: str) -> tuple[str, str | None] | None:
    """The leader on ``metric`` among comparable systems and the runner-up (None: alone)."""
    ranked = [s for s in system_order(systems, metric)
              if systems[s]["role"] not in SET_APART and metric in systems[s]]
    return (ranked[0], ranked[1] if len(ranked) > 1 else None) if ranked else None

def lead_html(systems: dict[str, dict], metric: str, chosen: dict[str, str],
              diffs: dict[tuple, dict]) -> str:
    """Plain words first (the best system on ``metric``, whether it is distinguishable from
    the runner-up, the system chosen for this split), then the statistics in small print."""
    if (v := split_verdict(systems, metric)) is None:
        return ""
    (top, runner), d = v, diffs.get(v)

    def value(s: str) -> str:
        c = systems[s][metric]
        return f"{esc(s)} {interval(c['mean'], c['low'], c['high'], fmt)}"

    rng = ", ".join(filter(None, (direction(metric), scale_label(metric)[2:])))
    txt = (f"On test, <b>{esc(top)}</b>{input_mark(systems[top])} is best: "
           f"{'lowest' if lower_is_better(metric) else 'highest'} {esc(metric)} "
           f"<small>({rng})</small>")
    stats = [value(top)]
    them = "" if runner is None else f"<b>{esc(runner)}</b>{input_mark(systems[runner])}"
    if runner is None:
        txt += " (no other comparable system)"
    elif systems[top][metric]["mean"] == systems[runner][metric]["mean"]:
        txt += f", tied with <b>{esc(runner)}</b> (the same estimate)"
        stats.append(f"difference {_diff_text(d)}" if d else value(runner))
    elif d is None:
        gap = abs(systems[top][metric]["mean"] - systems[runner][metric]["mean"])
        txt += (f"; it is {fmt(gap)} ahead of {them} by the point estimate, a gap that was "
                f"{term('not tested', 'not-tested')}")
        stats.append(value(runner))
    else:
        holm = "" if d["primary"] or d["p_adj"] is None else " by the Holm-adjusted test"
        txt += (f"; it is ahead of the runner-up {them} beyond chance" if _significant(d) else
                f"; it is <b>not distinguishable</b> from the runner-up {them}{holm} at this "
                "sample size")
        stats.append(f"difference {_diff_text(d)}")
    txt += "."
    for s in [s for s in system_order(systems, metric) if s in chosen and metric in systems[s]]:
        if s == top:
            txt += f" It is also the system {esc(chosen[s])} (★). It is the one to report."
        else:
            txt += (f" The system to report (★, chosen without the test data) is "
                    f"<b>{esc(s)}</b>{input_mark(systems[s])}, {esc(chosen[s])}.")
            stats.append(value(s))
        mine = sorted((x for (system, _), x in diffs.items() if system == s),
                      key=lambda x: not x["primary"])
        if mine and mine[0] is not d:
            stats.append(f"{esc(s)}: {_diff_text(mine[0])}")
    return f'<p class="lead">{txt}<br><small class="stats">{"; ".join(stats)}.</small></p>'
