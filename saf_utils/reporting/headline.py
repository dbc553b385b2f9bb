"""The headline numbers of a task, as cells, tables and sentences: per (dataset, split) one
cell per system and metric (the headline record with its CI, or the mean over seeds and
folds), the val-chosen systems marked, oracles and probes set apart, systems that read gold
inputs marked (:func:`input_mark`), the paired differences against the chosen system, the
verdict on a gap in words (:func:`gap_html`: the test named, never against its interval)
and the lead sentence (:func:`lead_html`) that says what a reader may conclude; terms link
to the run's glossary (:func:`term`). :mod:`.index_page` and the sweep pages draw them."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from saf_utils.metrics import bounds, lower_is_better, scale_label
from saf_utils.metrics import metric as metric_spec
from saf_utils.reporting.pages import fmt, table
from saf_utils.reporting.sharing import esc

SET_APART = ("oracle", "probe")  # roles that are not comparable to systems



ROLE_ORDER = {"system": 0, "baseline": 1, None: 2, "oracle": 3, "probe": 4}

#: The glossary page of a run (``saf_utils/reporting/how_to_read.md``, rendered into every
#: run); :func:`term` links a word on a page to its entry there.
GLOSSARY = "how-to-read.html"


def term(text: str, anchor: str) -> str:
    """``text`` linked to its glossary entry ``#anchor`` (text is escaped)."""
    return f'<a class="term" href="{GLOSSARY}#{esc(anchor)}">{esc(text)}</a>'


def input_mark(entry: dict) -> str:
    """The mark of a system whose numbers are not a fair comparison: an oracle (sees gold),
    a probe (exploits a metric), or a system whose record note says it reads gold inputs
    (e.g. "reads earlier turns' gold facts"); "" for any other. The note comes from the
    records and is escaped."""
    note = str(entry.get("note") or "")
    if entry.get("role") == "oracle":
        what = "oracle: sees the gold answer"
    elif entry.get("role") == "probe":
        what = "probe: exploits the metric"
    elif "gold" in note.lower():
        what = note
    else:
        return ""
    return (f' <small class="warn gold">⚠ <a href="{GLOSSARY}#gold-inputs">'
            f"{esc(what)}</a></small>")



def record_kind(r: dict) -> str:
    return r.get("kind") or "result"



def clip_record(r: dict) -> dict:
    """A record whose interval stays inside its metric's range (a difference ``minus <ref>``
    inside the range of a difference): :func:`saf_utils.protocol.clip_interval`, so records
    of older runs, or written outside the protocol, read right too."""
    from saf_utils.protocol import clip_interval, diff_bounds

    if r.get("ci_low") is None or r.get("ci_high") is None:
        return r
    sub = str(r.get("subset") or "")
    if sub.startswith(("p vs ", "p_adj vs ", "primary p vs ")):
        return r
    metric = str(r.get("metric"))
    limits = diff_bounds(metric) if sub.startswith("minus ") else bounds(metric)
    return clip_interval(r, limits, point="value")



def headline_cells(records: list[dict], task: str, metrics: Sequence[str]) -> dict:
    """``{(dataset, split): {system: {metric: cell, "role":…, "failed": bool}}}`` for a task.

    A cell is the headline record (fold, seed and subset None, kind result) with its CI, or,
    when none exists, the mean over that system's per-seed/per-fold records (``n`` > 1, no CI).
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        if (r.get("task") == task and record_kind(r) == "result" and r.get("metric") in metrics
                and r.get("subset") is None):
            groups[(r.get("dataset"), r.get("split"), r.get("system"), r["metric"])].append(r)
    splits = {(k[0], k[1]) for k in groups}
    tests = {s for s in splits if str(s[1]).startswith("test")}
    keep = tests or splits
    out: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for (ds, split, system, metric), rows in groups.items():
        if (ds, split) not in keep:
            continue
        head = [r for r in rows if r.get("fold") is None and r.get("seed") is None]
        if head:
            r = clip_record(head[-1])
            cell = {"mean": r["value"], "low": r.get("ci_low"), "high": r.get("ci_high"),
                    "n": 1, "headline": True, "estimand": r.get("estimand"),
                    "method": r.get("method")}
        else:
            vals = [r["value"] for r in rows]
            cell = {"mean": sum(vals) / len(vals), "low": None, "high": None, "n": len(vals),
                    "headline": False}
        entry = out[(ds, split)].setdefault(system, {"role": None, "failed": False,
                                                     "note": None})
        entry[metric] = cell
        entry["note"] = entry["note"] or next((r.get("note") for r in rows if r.get("note")),
                                              None)
        entry["role"] = entry["role"] or next((r.get("role") for r in rows if r.get("role")),
                                              None)
        entry["failed"] |= any(r.get("notebook_status") not in (None, "ok") for r in rows)
    return dict(out)



def metric_head(metric: str) -> str:
    """A table header of a metric with its direction and range ("accuracy ↑ 0–1")."""
    m = metric_spec(metric)
    b = bounds(metric)
    rng = ("no fixed range" if b is None else f"range {b[0]:g} to "
           + ("∞" if math.isinf(b[1]) else f"{b[1]:g}"))
    title = f"{'higher' if m.higher_is_better else 'lower'} is better; {rng}" + (
        f"; {m.description}" if m.description else "")
    return (f'<th class="metric" title="{esc(title)}">{esc(metric)} '
            f'<small class="scale">{esc(scale_label(metric))}</small></th>')



def direction_words(metric: str) -> str:
    return f"{'lower' if lower_is_better(metric) else 'higher'} is better"



def metric_words(metric: str) -> str:
    """A metric for a sentence: "accuracy (higher is better, 0–1)"."""
    b = bounds(metric)
    rng = "" if b is None else (f", ≥ {b[0]:g}" if math.isinf(b[1]) else f", {b[0]:g}–{b[1]:g}")
    return (f"{esc(metric)} <small>({'lower' if lower_is_better(metric) else 'higher'} is "
            f"better{rng})</small>")



def _choice_words(r: dict, folded: bool = False) -> str:
    """How a tuning record's system was chosen: "chosen on validation by macro_f1"."""
    split = str(r.get("split") or "")
    how = (f"chosen on each fold's {split} split" if folded else f"chosen on {split}") \
        if split else "chosen"
    if r.get("metric"):
        how += f" by {r['metric']}"

    if r.get("method"):
        how += f" ({r['method']})"
    return how



def chosen_by_split(records: list[dict], task: str) -> dict[Any, dict[str, str]]:
    """``{split or None: {system: how it was chosen}}`` from a task's tuning records.

    ``None`` holds the fold-less ``chosen`` record (with folds, the composite whose fold f
    part was chosen on fold f's val), which applies to every split without a choice of its
    own; a record ``chosen for <split>`` (:func:`saf_utils.protocol.chosen_for`, e.g. SAF's
    unseen questions, chosen by CV on train) replaces it on that split."""
    out: dict[Any, dict[str, str]] = {}
    mine = [r for r in records if r.get("task") == task and record_kind(r) == "tuning"
            and r.get("fold") is None]
    parts: dict[str, list] = defaultdict(list)  # per-fold choices: system -> folds
    for r in records:
        if r.get("task") == task and record_kind(r) == "tuning" and r.get("subset") == "chosen" \
                and r.get("fold") is not None:
            parts[str(r.get("system"))].append(r["fold"])
    for r in mine:
        sub = str(r.get("subset") or "")
        if sub == "chosen":
            how = _choice_words(r, bool(parts))
            if parts and str(r.get("system")) not in parts:  # a composite: say what it is
                how += " (per fold: " + "; ".join(
                    f"{s} on fold{'s' if len(f) > 1 else ''} "
                    f"{', '.join(map(str, sorted(f)))}" for s, f in sorted(parts.items())) + ")"
            out.setdefault(None, {})[str(r.get("system"))] = how
        elif sub.startswith("chosen for "):
            out.setdefault(sub[len("chosen for "):], {})[str(r.get("system"))] = \
                _choice_words(r)
    return out



def chosen_on(chosen: dict[Any, dict[str, str]], split: Any) -> dict[str, str]:
    """The systems starred on ``split``: its own choice, else the general one."""
    return chosen.get(split, chosen.get(None, {}))



def chosen_systems(records: list[dict], task: str) -> set[str]:
    """The val-chosen system(s) of a task (the fold-less ``chosen`` record)."""
    return set(chosen_by_split(records, task).get(None, {}))



def _star(how: str) -> str:
    return f'<span class="chosen" title="{esc(how)}">★ {esc(star_words(how))}</span>'



def clipped(cell: dict) -> bool:
    from saf_utils.protocol import CLIPPED

    return CLIPPED in str(cell.get("method") or "")



def cell_html(cell: dict | None, best: bool) -> str:
    if not cell:
        return '<td class="num"></td>'
    txt = fmt(cell["mean"])
    if cell["low"] is not None and cell["high"] is not None:
        mark = (' <span title="interval clipped to the metric\'s range">‡</span>'
                if clipped(cell) else "")
        txt += f" <small>[{fmt(cell['low'])}, {fmt(cell['high'])}]{mark}</small>"
    elif not cell["headline"]:
        txt += f" <small>(mean of {cell['n']}*)</small>" if cell["n"] > 1 else " <small>*</small>"
    return f'<td class="num{" best" if best else ""}">{txt}</td>'



def system_order(systems: dict[str, dict], metric: str) -> list[str]:
    sign = 1 if lower_is_better(metric) else -1

    def key(s: str):
        e = systems[s]
        apart = e["role"] in SET_APART
        m = e.get(metric)
        return (apart, ROLE_ORDER.get(e["role"], 2) if apart else 0,
                sign * m["mean"] if m else math.inf, s)

    return sorted(systems, key=key)



def headline_html(systems: dict[str, dict], metrics: Sequence[str],
                   chosen: dict[str, str] | set[str]) -> str:
    """Systems × metrics (mean [95 % interval]), best comparable value bold, the systems
    chosen for this split starred (``chosen``: system -> how it was chosen), oracles and
    probes after a separator; metric headers carry direction and range."""
    if not isinstance(chosen, dict):
        chosen = dict.fromkeys(chosen, "chosen on validation")
    present = [m for m in metrics if any(m in e for e in systems.values())]
    comparable = [s for s in systems if systems[s]["role"] not in SET_APART]
    best = {m: (min if lower_is_better(m) else max)(
        (systems[s][m]["mean"] for s in comparable if m in systems[s]), default=None)
        for m in present}
    rows, classes = [], []
    separated = False
    for s in system_order(systems, present[0]):
        e = systems[s]
        if e["role"] in SET_APART and not separated:
            rows.append([f'<td colspan="{len(present) + 2}">oracles (see gold) and probes '
                         "(exploit a metric): not comparable, shown for reference "
                         f'<a href="{GLOSSARY}#gold-inputs">⚠</a></td>'])
            classes.append("sep")
            separated = True
        name = esc(s)
        # oracles and probes: marked by their role and the separator row above them
        mark = input_mark(e) if e["role"] not in SET_APART else ""
        if e.get("note") and not mark:
            name += f' <small class="note">({esc(e["note"])})</small>'
        if s in chosen:
            name += " " + _star(chosen[s])
        if e["failed"]:
            name += ' <span class="failed" title="from a notebook that did not finish">†</span>'
        name += mark
        cells = [name, esc(e["role"] or "")]
        cells += [cell_html(e.get(m), best[m] is not None and e["role"] not in SET_APART
                             and m in e and e[m]["mean"] == best[m]) for m in present]
        rows.append(cells)
        classes.append("apart" if e["role"] in SET_APART else "")
    return table(["system", "role", *[metric_head(m) for m in present]], rows, "headline",
                 classes)



def design_note(cells: Sequence[dict]) -> str:
    """"estimand: …, method …" of a table's cells; t-interval df collapsed to their range."""
    from saf_utils.protocol import CLIPPED

    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        method = str(c.get("method") or "").split(f"; {CLIPPED}")[0]
        m = re.match(r"(.*)\(([\d.]+) df\)$", method)
        key = (c["estimand"], (m.group(1).strip() + " (df {})") if m else method)
        groups[key].extend([float(m.group(2))] if m else [])
    parts = []
    for (estimand, method), dfs in sorted(groups.items()):
        if dfs:
            lo, hi = min(dfs), max(dfs)
            method = method.format(f"{lo:.3g}" if lo == hi else f"{lo:.3g}–{hi:.3g}")
        parts.append(f"estimand: {estimand}; method: {method}")
    return "; ".join(parts)



def paired_differences(records: list[dict], task: str) -> dict[tuple, dict]:
    """``{(dataset, split, system, metric, reference): {"diff", "low", "high", "p", "p_adj",
    "primary"}}`` from a task's analysis records ``minus <ref>``, ``p vs <ref>`` and
    ``p_adj vs <ref>`` / ``primary p vs <ref>`` (:func:`saf_utils.protocol.record`)."""
    out: dict[tuple, dict] = {}
    for r in records:
        sub = str(r.get("subset") or "")
        if r.get("task") != task or record_kind(r) != "analysis" or r.get("fold") is not None:
            continue
        for prefix, field in (("minus ", "diff"), ("p vs ", "p"), ("p_adj vs ", "p_adj"),
                              ("primary p vs ", "p_adj")):
            if sub.startswith(prefix):
                r = clip_record(r)
                ref = sub[len(prefix):]
                key = (r.get("dataset"), r.get("split"), r.get("system"), r.get("metric"), ref)
                d = out.setdefault(key, {"ref": ref, "diff": None, "low": None, "high": None,
                                         "p": None, "p_adj": None, "primary": False})
                d[field] = r["value"]
                if field == "diff":
                    d.update(low=r.get("ci_low"), high=r.get("ci_high"))
                d["primary"] |= prefix == "primary p vs "
    return {k: v for k, v in out.items() if v.get("diff") is not None}



def p_text(p: float | None) -> str:
    """A p-value as a reader expects it: "p = 0.31", "p = 0.004", "p < 0.001"."""
    if p is None or not math.isfinite(p):
        return ""
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"



def _p_text(d: dict) -> str:
    if d["primary"]:
        return f", {p_text(_verdict_p(d))}, the primary comparison"
    if d["p"] is None:
        return ""
    if d["p_adj"] is not None:
        return f", {p_text(d['p'])}, Holm-adjusted {p_text(d['p_adj'])}"
    return f", {p_text(d['p'])}, unadjusted"



def _diff_text(d: dict | None) -> str:
    if not d:
        return ""
    txt = f"{d['diff']:+.3g}"
    if d["low"] is not None and d["high"] is not None:
        txt += f" [{d['low']:+.3g}, {d['high']:+.3g}]"
    return f"{txt} vs {esc(d['ref'])}{_p_text(d)}{_unadjusted_clause(d)}"


def _verdict_p(d: dict) -> float | None:
    """The p a verdict reads: the raw p of the primary comparison (recorded as ``primary p
    vs``, so it may sit in ``p_adj`` alone), else the Holm-adjusted p, else the raw one."""
    if d["primary"]:
        return d["p"] if d["p"] is not None else d["p_adj"]
    return d["p"] if d["p_adj"] is None else d["p_adj"]


def _significant(d: dict, alpha: float = 0.05) -> bool:
    p = _verdict_p(d)
    return p is not None and p <= alpha


def _unadjusted_clause(d: dict, alpha: float = 0.05) -> str:
    """Beside a difference whose interval excludes 0 while its Holm-adjusted p does not reach
    ``alpha``: the interval inverts the raw test, the verdict reads the adjusted one."""
    lo, hi = d.get("low"), d.get("high")
    if d["primary"] or d["p_adj"] is None or _significant(d, alpha) or lo is None \
            or hi is None or not (lo > 0 or hi < 0):
        return ""
    return ("; the interval is not adjusted for the other comparisons and excludes 0, the "
            f"Holm-adjusted test does not reach {alpha:g}")


def oriented(diffs: dict[tuple, dict], a: str, b: str) -> dict | None:
    """The test of ``a`` minus ``b`` from ``diffs`` (keyed (system, reference)), whichever
    way the notebook ran it (a reversed test is turned around: the difference and its
    interval change sign, the p-values stay)."""
    if (a, b) in diffs:
        return diffs[(a, b)]
    d = diffs.get((b, a))
    if d is None:
        return None
    neg = {k: None if d[k] is None else -d[k] for k in ("diff", "low", "high")}
    return {**d, "ref": b, "diff": neg["diff"], "low": neg["high"], "high": neg["low"]}


def which_test(d: dict) -> str:
    """Which test a difference's p comes from, its p, and glossary links:
    "Holm-adjusted p = 0.41", "p = 0.003, the primary comparison (not adjusted)"."""
    if d["primary"]:
        return f"{p_text(_verdict_p(d))}, the " \
               f"{term('primary comparison', 'primary-comparison')} (not adjusted)"
    if d["p_adj"] is not None:
        return f"{term('Holm-adjusted', 'holm')} {p_text(d['p_adj'])}"
    return f"{p_text(d['p'])}, unadjusted"


def gap_html(d: dict | None, other: str, metric: str) -> str:
    """Whether a system is distinguishable from ``other`` (HTML naming it, e.g. "the
    runner-up <b>B</b>") by the test ``d`` of system minus other: words first, then the
    difference with its 95 % interval and the test; never a "not distinguishable" that reads
    against its interval."""
    if d is None:
        return f"vs {other}: not tested"
    if _significant(d):
        ahead = (d["diff"] < 0) if lower_is_better(metric) else (d["diff"] > 0)
        words = (f"<b>distinguishable</b> from {other}: {'ahead' if ahead else 'behind'} "
                 "beyond chance")
    else:
        words = (f"<b>{term('not distinguishable', 'not-distinguishable')}</b> from {other} "
                 "at this sample size")
    ci = (f" [{_signed(d['low'])}, {_signed(d['high'])}]" if d["low"] is not None
          and d["high"] is not None else "")
    return (f"{words} <small>({term('difference', 'paired-difference')} "
            f"{_signed(d['diff'])}{ci}, {which_test(d)}{_unadjusted_clause(d)})</small>")


def _signed(x: float) -> str:
    """A difference with its sign, 3 significant digits; a float residue (|x| < 1e-9, e.g.
    an interval end of -1.4e-11) reads as 0."""
    return "0" if abs(x) < 1e-9 else f"{x:+.3g}"


def split_verdict(systems: dict[str, dict], metric: str,
                  diffs: dict[tuple, dict] | None = None) -> dict[str, Any] | None:
    """The leader on ``metric`` among comparable systems (oracles and probes excluded), the
    runner-up and what the test of their gap says: ``status`` is ``resolved``,
    ``not distinguishable``, ``not tested`` (no test of that pair) or ``alone``."""
    diffs = diffs or {}
    ranked = [s for s in system_order(systems, metric)
              if systems[s]["role"] not in SET_APART and metric in systems[s]]
    if not ranked:
        return None
    out: dict[str, Any] = {"top": ranked[0], "runner": None, "diff": None, "status": "alone"}
    if len(ranked) > 1:
        out["runner"] = ranked[1]
        d = diffs.get((ranked[0], ranked[1]))
        out["diff"] = d
        out["status"] = ("not tested" if d is None else "resolved" if _significant(d)
                         else "not distinguishable")
    return out


def _value_text(systems: dict[str, dict], s: str, metric: str) -> str:
    c = systems[s][metric]
    ci = f" [{fmt(c['low'])}, {fmt(c['high'])}]" if c["low"] is not None else ""
    return f"{esc(s)} {fmt(c['mean'])}{ci}"



def lead_html(systems: dict[str, dict], metric: str,
                  chosen: dict[str, str] | set[str] = frozenset(),
                  diffs: dict[tuple, dict] | None = None) -> str:
    """Plain words first: which system is best on ``metric`` and whether it is
    distinguishable from the runner-up (``diffs`` keyed by (system, reference)), and which
    system the notebook chose for this split; the statistics (estimates, intervals, the
    difference with its p) follow in a smaller line."""
    if not isinstance(chosen, dict):
        chosen = dict.fromkeys(chosen, "chosen on validation")
    diffs = diffs or {}
    v = split_verdict(systems, metric, diffs)
    if v is None:
        return ""
    top, runner, d = v["top"], v["runner"], v["diff"]
    word = "lowest" if lower_is_better(metric) else "highest"
    txt = f"On test, <b>{esc(top)}</b>{input_mark(systems[top])} is best: {word} " \
          f"{metric_words(metric)}"
    stats = [_value_text(systems, top, metric)]
    tie = runner is not None and systems[top][metric]["mean"] == systems[runner][metric]["mean"]
    if v["status"] == "alone":
        txt += " (no other comparable system)"
    elif tie:
        txt += f", tied with <b>{esc(runner)}</b> (the same estimate)"
        stats.append(f"difference {_diff_text(d)}" if d else _value_text(systems, runner, metric))
    elif v["status"] == "not tested":
        gap = abs(systems[top][metric]["mean"] - systems[runner][metric]["mean"])
        txt += (f"; it is {fmt(gap)} ahead of <b>{esc(runner)}</b>"
                f"{input_mark(systems[runner])} by the point estimate, a gap that was not "
                "tested")
        stats.append(_value_text(systems, runner, metric))
    elif v["status"] == "resolved":
        txt += (f"; it is ahead of the runner-up <b>{esc(runner)}</b>"
                f"{input_mark(systems[runner])} beyond chance")
        stats.append(f"difference {_diff_text(d)}")
    else:
        holm = "" if d["primary"] or d["p_adj"] is None else " by the Holm-adjusted test"
        txt += (f"; it is <b>not distinguishable</b> from the runner-up <b>{esc(runner)}</b>"
                f"{input_mark(systems[runner])}{holm} at this sample size")
        stats.append(f"difference {_diff_text(d)}")
    txt += "."
    for s in [s for s in system_order(systems, metric) if s in chosen and metric in systems[s]]:
        how = chosen[s]
        if s == top:
            txt += f" It is also the system {esc(how)} (★). It is the one to report."
        else:
            txt += (f" The system to report (★, chosen without the test data) is "
                    f"<b>{esc(s)}</b>{input_mark(systems[s])}, {esc(how)}.")
            stats.append(_value_text(systems, s, metric))
        mine = sorted((x for (system, _), x in diffs.items() if system == s),
                      key=lambda x: not x["primary"])
        if mine and mine[0] is not d:
            stats.append(f"{esc(s)}: {_diff_text(mine[0])}")
    return (f'<p class="lead">{txt}<br><small class="stats">{"; ".join(stats)}.</small></p>')


def star_words(how: str) -> str:
    return "val-chosen" if how.startswith(("chosen on validation", "chosen on val ",
                                           "chosen on each fold's val")) \
        else how.split(" (")[0].split("; ")[0]
