"""HTML pages of a run; none loads anything from the network.

- :func:`render_notebook`: an executed notebook as one page (nbconvert ``lab`` template
  without the require.js / MathJax / mermaid CDN scripts; figures embedded).
- :func:`write_index`: ``index.html``, the headline page: run, profile, commit, notebook
  status and times above the fold; then per task one table (systems x main metrics, mean
  [95% CI], role, val-chosen system marked, oracles and probes set apart) and one figure.
- :func:`write_results`: ``results.html``, every ``result`` record in one table that sorts
  and filters with a few lines of inline JavaScript.

Pages are meant to be shared (:mod:`saf_utils.reporting.sharing`): every value is escaped,
notebook outputs and page bodies are sanitised, and no absolute local path is shown.
"""

from __future__ import annotations

import base64
import io
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from saf_utils.metrics import bounds, lower_is_better, scale_label
from saf_utils.metrics import metric as metric_spec
from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.sharing import PathScrubber, clean_html, esc, md  # noqa: F401

BODY_WIDE = ' class="wide"'
SET_APART = ("oracle", "probe")  # roles that are not comparable to systems
ROLE_ORDER = {"system": 0, "baseline": 1, None: 2, "oracle": 3, "probe": 4}

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;
color:#222}
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
tr.apart td{color:#666;background:#fafafa}tr.sep td{background:#eee;font-style:italic}
.ok{color:#060}.failed,.interrupted,.killed,.write_error,.error{color:#b00;font-weight:bold}
.running,.pending,.skipped{color:#a60}.meta{color:#444}.best{font-weight:bold}
small,.note{color:#666}.warn{color:#a00}
img{max-width:100%}
body.wide{max-width:none;margin:1.5em 1.5em}
table.glance{width:100%}
p.lead small.stats{color:#555}small.scale{color:#555;font-weight:normal;
white-space:nowrap}
"""


# ------------------------------------------------------------------ helpers
def fmt(x: float | None, digits: int = 3) -> str:
    """``digits`` significant digits (0.852, 48.5, 1.23e-05); integers stay integers."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    x = float(x)
    if x.is_integer() and abs(x) >= 1:
        return str(int(x))
    return f"{x:.{digits}g}"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "",
          row_classes: Sequence[str] | None = None) -> str:
    """Cells are already HTML; header names are escaped unless they are a whole ``<th…>``
    element (:func:`metric_head`)."""
    th = "".join(h if h.startswith("<th") else f"<th>{esc(h)}</th>" for h in head)
    body = []
    for i, row in enumerate(rows):
        rc = row_classes[i] if row_classes else ""
        cells = "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row)
        body.append(f'<tr class="{rc}">{cells}</tr>' if rc else f"<tr>{cells}</tr>")
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str, script: str = "",
         run_dir: str | os.PathLike | None = None,
         itables: dict[str, dict] | None = None, current: str | None = None,
         wide: bool = False) -> str:
    """A whole page. The body is sanitised (:func:`clean_html`) and its absolute paths are
    rewritten (:class:`PathScrubber`, ``$RUN`` for ``run_dir``); ``script`` is the project's
    own trusted JavaScript and is added after sanitising, as are the interactive tables
    ``itables`` (``{placeholder id: tables.table_spec}``, :func:`tables.page_assets`) and,
    for a page ``current`` of the run folder ``run_dir``, the navigation bar
    (:func:`chrome.decorate`). ``wide``: no width cap (pages of wide tables)."""
    from saf_utils.reporting import chrome
    from saf_utils.reporting.tables import page_assets

    scrub = PathScrubber.for_run(run_dir)
    js = f"<script>{script}</script>" if script else ""
    js += page_assets(itables or {}, scrub)
    text = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(scrub(title))}</title><style>{CSS}</style></head>"
            f"<body{BODY_WIDE if wide else ''}>\n"
            f"{clean_html(scrub(body))}\n{js}</body></html>\n")
    if run_dir is not None and current:
        text = chrome.decorate(text, Path(run_dir), current)
    return text


_EXTERNAL = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>"
    r"|<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)


def strip_external(text: str) -> str:
    """Remove any ``<script src=http…>`` / ``<link href=http…>`` left in a page."""
    return _EXTERNAL.sub("", text)


def external_resources(text: str) -> list[str]:
    """External scripts, stylesheets, images or frames a page would load (for tests)."""
    pat = re.compile(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*\b(?:src|href)\s*="
                     r"\s*[\"']?((?:https?:)?//[^\"' >]+)", re.I)
    return pat.findall(text)


# ------------------------------------------------------------------ notebook pages
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block data_widget_view -%}{%- endblock data_widget_view -%}
{% block data_mermaid -%}
<pre>{{ output.data['text/vnd.mermaid'] | escape_html }}</pre>
{%- endblock data_mermaid %}
"""
from saf_utils.reporting.chrome import TEMPLATE_BLOCKS as _CHROME_BLOCKS  # noqa: E402

OFFLINE_TEMPLATE += _CHROME_BLOCKS  # each code cell folded (a click shows it)


def render_notebook(ipynb: Path, hide_code: bool = False) -> Path:
    """Render an executed notebook to one self-contained HTML page next to it.

    The ``lab`` template minus its CDN scripts (require.js, MathJax, mermaid, widgets):
    LaTeX in markdown stays as source text, which is how the notebooks read anyway.
    Safe to share: nbconvert's ``sanitize_html`` runs every HTML and Markdown output and
    Markdown cell through :func:`clean_html` (JavaScript outputs are dropped; PNG/JPEG
    outputs stay embedded), and the absolute paths in sources and outputs are rewritten
    (:class:`PathScrubber`: ``$RUN`` for the notebook's folder, ``$<parameter>`` for data
    paths among its papermill parameters). Interactive tables (:mod:`tables`) become
    placeholders; their escaped data and the bundled DataTables script are added after
    sanitising. The ``.ipynb`` itself is left as executed.
    """
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    from saf_utils.reporting import chrome
    from saf_utils.reporting.tables import extract as extract_tables
    from saf_utils.reporting.tables import page_assets

    nb = nbformat.read(ipynb, as_version=4)
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    scrub = PathScrubber.for_run(ipynb.parent.absolute(), {
        k: v for k, v in params.items() if k.endswith(("_source", "_path", "_dir"))})
    exporter = HTMLExporter(template_name="lab", embed_images=True, sanitize_html=True,
                            filters={"clean_html": clean_html},
                            extra_loaders=[jinja2.DictLoader({"offline.html.j2":
                                                              OFFLINE_TEMPLATE})],
                            template_file="offline.html.j2")
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    specs = extract_tables(nb)
    found = chrome.collect_warnings(scrub.notebook(nb))  # stderr: one folded box on top
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": ipynb.stem}})
    body = scrub(strip_external(body), generic=False)
    body = body.replace("<main>", "<main>" + chrome.warnings_box(found), 1)
    if specs:  # the project's own table script and the escaped table data, after sanitising
        head, tail = body.rsplit("</body>", 1)
        body = head + page_assets(specs, scrub) + "</body>" + tail
    out = ipynb.with_suffix(".html")
    return write_text(out, chrome.decorate(body, ipynb.parent, out.name))


# ------------------------------------------------------------------ headline tables
def _kind(r: dict) -> str:
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
        if (r.get("task") == task and _kind(r) == "result" and r.get("metric") in metrics
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


def _direction(metric: str) -> str:
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
    mine = [r for r in records if r.get("task") == task and _kind(r) == "tuning"
            and r.get("fold") is None]
    parts: dict[str, list] = defaultdict(list)  # per-fold choices: system -> folds
    for r in records:
        if r.get("task") == task and _kind(r) == "tuning" and r.get("subset") == "chosen" \
                and r.get("fold") is not None:
            parts[str(r.get("system"))].append(r["fold"])
    for r in mine:
        sub = str(r.get("subset") or "")
        if sub == "chosen":
            how = _choice_words(r, bool(parts))
            if parts and str(r.get("system")) not in parts:  # a composite: say what it is
                how += "; it is " + ", ".join(
                    f"{s} on fold{'s' if len(f) > 1 else ''} "
                    f"{', '.join(map(str, sorted(f)))}" for s, f in sorted(parts.items()))
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
    return f'<span class="chosen" title="{esc(how)}">★ {esc(_star_words(how))}</span>'


def _clipped(cell: dict) -> bool:
    from saf_utils.protocol import CLIPPED

    return CLIPPED in str(cell.get("method") or "")


def _cell_html(cell: dict | None, best: bool) -> str:
    if not cell:
        return '<td class="num"></td>'
    txt = fmt(cell["mean"])
    if cell["low"] is not None and cell["high"] is not None:
        mark = (' <span title="interval clipped to the metric\'s range">‡</span>'
                if _clipped(cell) else "")
        txt += f" <small>[{fmt(cell['low'])}, {fmt(cell['high'])}]{mark}</small>"
    elif not cell["headline"]:
        txt += f" <small>(mean of {cell['n']}*)</small>" if cell["n"] > 1 else " <small>*</small>"
    return f'<td class="num{" best" if best else ""}">{txt}</td>'


def _order(systems: dict[str, dict], metric: str) -> list[str]:
    sign = 1 if lower_is_better(metric) else -1

    def key(s: str):
        e = systems[s]
        apart = e["role"] in SET_APART
        m = e.get(metric)
        return (apart, ROLE_ORDER.get(e["role"], 2) if apart else 0,
                sign * m["mean"] if m else math.inf, s)

    return sorted(systems, key=key)


def headline_table(systems: dict[str, dict], metrics: Sequence[str],
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
    for s in _order(systems, present[0]):
        e = systems[s]
        if e["role"] in SET_APART and not separated:
            rows.append([f'<td colspan="{len(present) + 2}">oracles (see gold) and probes '
                         "(exploit a metric): not comparable, shown for reference</td>"])
            classes.append("sep")
            separated = True
        name = esc(s)
        if e.get("note"):
            name += f' <small class="note">({esc(e["note"])})</small>'
        if s in chosen:
            name += " " + _star(chosen[s])
        if e["failed"]:
            name += ' <span class="failed" title="from a notebook that did not finish">†</span>'
        cells = [name, esc(e["role"] or "")]
        cells += [_cell_html(e.get(m), best[m] is not None and e["role"] not in SET_APART
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
        if r.get("task") != task or _kind(r) != "analysis" or r.get("fold") is not None:
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
    if d["p"] is None:
        return ""
    if d["primary"]:
        return f", {p_text(d['p'])}, the primary comparison"
    if d["p_adj"] is not None:
        return f", {p_text(d['p'])}, Holm-adjusted {p_text(d['p_adj'])}"
    return f", {p_text(d['p'])}, unadjusted"


def _diff_text(d: dict | None) -> str:
    if not d:
        return ""
    txt = f"{d['diff']:+.3g}"
    if d["low"] is not None and d["high"] is not None:
        txt += f" [{d['low']:+.3g}, {d['high']:+.3g}]"
    return f"{txt} vs {esc(d['ref'])}{_p_text(d)}"


def _significant(d: dict, alpha: float = 0.05) -> bool:
    p = d["p"] if d["primary"] or d["p_adj"] is None else d["p_adj"]
    return p is not None and p <= alpha


def split_verdict(systems: dict[str, dict], metric: str,
                  diffs: dict[tuple, dict] | None = None) -> dict[str, Any] | None:
    """The leader on ``metric`` among comparable systems (oracles and probes excluded), the
    runner-up and what the test of their gap says: ``status`` is ``resolved``,
    ``not distinguishable``, ``not tested`` (no test of that pair) or ``alone``."""
    diffs = diffs or {}
    ranked = [s for s in _order(systems, metric)
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


def lead_sentence(systems: dict[str, dict], metric: str,
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
    txt = f"<b>{esc(top)}</b> is best: {word} {metric_words(metric)}"
    stats = [_value_text(systems, top, metric)]
    tie = runner is not None and systems[top][metric]["mean"] == systems[runner][metric]["mean"]
    if v["status"] == "alone":
        txt += " (no other comparable system)"
    elif tie:
        txt += f", tied with <b>{esc(runner)}</b> (the same estimate)"
        stats.append(f"difference {_diff_text(d)}" if d else _value_text(systems, runner, metric))
    elif v["status"] == "not tested":
        gap = abs(systems[top][metric]["mean"] - systems[runner][metric]["mean"])
        txt += (f"; it is {fmt(gap)} ahead of <b>{esc(runner)}</b> by the point estimate, "
                "a gap that was not tested")
        stats.append(_value_text(systems, runner, metric))
    elif v["status"] == "resolved":
        txt += f"; it is ahead of the runner-up <b>{esc(runner)}</b> beyond chance"
        stats.append(f"difference {_diff_text(d)}")
    else:
        txt += (f"; it is <b>not distinguishable</b> from the runner-up <b>{esc(runner)}</b> "
                "at this sample size")
        stats.append(f"difference {_diff_text(d)}")
    txt += "."
    for s in [s for s in _order(systems, metric) if s in chosen and metric in systems[s]]:
        how = chosen[s]
        if s == top:
            txt += f" It is also the system {esc(how)} (★)."
        else:
            txt += f" The system {esc(how)} (★) is <b>{esc(s)}</b>."
            stats.append(_value_text(systems, s, metric))
        mine = sorted((x for (system, _), x in diffs.items() if system == s),
                      key=lambda x: not x["primary"])
        if mine and mine[0] is not d:
            stats.append(f"{esc(s)}: {_diff_text(mine[0])}")
    return (f'<p class="lead">{txt}<br><small class="stats">{"; ".join(stats)}.</small></p>')


def dot_plot(tables: dict[tuple, dict[str, dict]], metrics: Sequence[str], title: str) -> str:
    """One PNG (base64 <img>): per metric a panel, systems on y, mean with 95% CI per split."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    present = [m for m in metrics if any(m in e for t in tables.values() for e in t.values())]
    if not present:
        return ""
    systems: list[str] = []
    for t in tables.values():
        for s in _order(t, present[0]):
            if s not in systems:
                systems.append(s)
    systems = systems[::-1]
    fig = Figure(figsize=(3.4 * len(present) + 1.2, 0.32 * len(systems) + 1.3), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(present), sharey=True, squeeze=False)[0]
    markers = "osD^v<>"
    n_keys = len(tables)
    from matplotlib.lines import Line2D

    keys = sorted(tables, key=str)
    for ax, metric in zip(axes, present, strict=True):
        for k, key in enumerate(keys):
            t = tables[key]
            for y, s in enumerate(systems):
                cell = t.get(s, {}).get(metric)
                if not cell:
                    continue
                off = (k - (n_keys - 1) / 2) * 0.18
                err = None
                if cell["low"] is not None:
                    err = [[cell["mean"] - cell["low"]], [cell["high"] - cell["mean"]]]
                apart = t[s]["role"] in SET_APART
                ax.errorbar(cell["mean"], y + off, xerr=err, fmt=markers[k % len(markers)],
                            color=f"C{k}", alpha=0.45 if apart else 1.0, capsize=2, ms=4)
        ax.set_title(f"{metric} ({scale_label(metric)})", fontsize=9)
        b = bounds(metric)
        if b is not None:  # the axis stays inside the metric's range (plus a margin)
            lo, hi = ax.get_xlim()
            pad = 0.02 * ((b[1] - b[0]) if math.isfinite(b[1]) else (hi - lo))
            ax.set_xlim(max(lo, b[0] - pad), min(hi, b[1] + pad))
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(range(len(systems)))
    axes[0].set_yticklabels(systems, fontsize=8)
    labels = [str(split) if len({d for d, _ in keys}) == 1 else f"{ds} {split}"
              for ds, split in keys]
    handles = [Line2D([], [], marker=markers[k % len(markers)], color=f"C{k}", ls="")
               for k in range(len(keys))]
    if len(labels) > 1:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
                   frameon=False)
    fig.suptitle(f"{title}: mean with 95% CI (faded: oracles and probes)", fontsize=9)
    fig.tight_layout(rect=(0, 0.06 if len(labels) > 1 else 0, 1, 0.95))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{esc(title)} dot plot" src="data:image/png;base64,{data}">'


def _source_matches(source: dict, task: Any, split: Any) -> bool:
    """A data file of this task's data source and split (ArgSciChat files are
    ``fold<k>/<split>``)."""
    from saf_utils.tasks import spec

    sp = spec(str(task))
    ds = sp.source.name if sp else str(task)
    split_of = str(source.get("split"))
    return str(source.get("dataset")) == ds \
        and (split_of == str(split) or split_of.endswith("/" + str(split)))


def leakage_note(sources: Sequence[dict], task: Any, split: Any) -> str:
    """A warning naming the nonzero ``leak_*`` anomaly counts of the split's data files."""
    hits: dict[str, int] = defaultdict(int)
    files = set()
    for src in sources:
        if not _source_matches(src, task, split):
            continue
        for kind, n in (src.get("anomalies") or {}).items():
            if str(kind).startswith("leak_") and isinstance(n, int | float) and n > 0:
                hits[str(kind)] += int(n)
                files.add(Path(str(src.get("path"))).name)
    if not hits:
        return ""
    counts = ", ".join(f"{esc(k)} {v}" for k, v in sorted(hits.items()))
    return (f'<p class="warn leak">⚠ Leakage: the data of this split has content shared with '
            f"other data ({counts}; in {esc(', '.join(sorted(files)))}). These numbers may "
            "overstate how the systems do on new data.</p>")


def _task_splits(records: list[dict]) -> Iterable[dict[str, Any]]:
    """Per task (registered specs first, then other tasks with result records) and per split
    in page order: title, headline metrics, the systems' cells, the starred systems and the
    paired differences on the leading metric."""
    from saf_utils.tasks import specs

    known = {s.name: s for s in specs()}
    tasks = list(known)
    for r in records:
        t = r.get("task")
        if _kind(r) == "result" and t not in tasks and r.get("system") != "data":
            tasks.append(t)
    for task in tasks:
        sp = known.get(task)
        title, metrics = (sp.title, sp.headline) if sp else (str(task), ())
        if not metrics:  # an unknown task: its first few result metrics
            metrics = tuple(dict.fromkeys(r["metric"] for r in records if r.get("task") == task
                                          and _kind(r) == "result"))[:4]
        tables = headline_cells(records, task, metrics)
        if not tables:
            continue
        chosen = chosen_by_split(records, task)
        diffs = paired_differences(records, task)
        page_order = {sp_: i for i, sp_ in enumerate(sp.splits if sp else ())}
        for i, ((ds, split), systems) in enumerate(sorted(tables.items(), key=lambda kv: (
                page_order.get(kv[0][1], len(page_order)), str(kv[0])))):
            metric = next(m for m in metrics if any(m in e for e in systems.values()))
            yield {"task": task, "title": title, "metrics": metrics, "tables": tables,
                   "first": i == 0, "last": i == len(tables) - 1, "dataset": ds,
                   "split": split, "systems": systems, "metric": metric,
                   "chosen": chosen_on(chosen, split),
                   "diffs": {(k[2], k[4]): v for k, v in diffs.items()
                             if k[0] == ds and k[1] == split and k[3] == metric}}


def _distinguishable(v: dict) -> str:
    d = v["diff"]
    if v["status"] == "alone":
        return "—"
    if v["status"] == "not tested":
        return "not tested"
    p = d["p"] if d["primary"] or d["p_adj"] is None else d["p_adj"]
    which = "" if d["primary"] or d["p_adj"] is None else "Holm-adjusted "
    word = "<b>yes</b>" if v["status"] == "resolved" else "<b>no</b> (not at this sample size)"
    return f"{word} <small>{which}{p_text(p)}</small>"


def glance_table(records: list[dict]) -> str:
    """The first screen of the index: per task and split the best comparable system on the
    leading metric, the runner-up, whether their gap is distinguishable, and the system the
    notebook chose for that split (★). Empty without result records."""
    rows = []
    for t in _task_splits(records):
        systems, metric = t["systems"], t["metric"]
        v = split_verdict(systems, metric, t["diffs"])
        if v is None:
            continue
        cell = systems[v["top"]][metric]
        best = (f'<b>{esc(v["top"])}</b> <span class="num">{fmt(cell["mean"])}'
                + (f' <small>[{fmt(cell["low"])}, {fmt(cell["high"])}]</small>'
                   if cell["low"] is not None else "") + "</span>")
        star = "; ".join(
            f'{esc(s)} <span class="num">{fmt(systems[s][metric]["mean"])}</span> '
            f'<small title="{esc(h)}">({esc(_star_words(h))}'
            f'{"; " + esc(_composition(h)) if _composition(h) else ""})</small>'
            for s, h in t["chosen"].items() if s in systems and metric in systems[s]) or "—"
        split_id = f"{t['task']}-{t['split']}"
        rows.append([f'<a href="#{esc(split_id)}">{esc(t["title"])}<br>'
                     f'<small>{esc(t["split"])}</small></a>',
                     f'{esc(metric)} <small class="scale" title="{esc(_direction(metric))}">'
                     f"{esc(scale_label(metric))}</small>",
                     best, (f"{esc(v['runner'])}: " if v["runner"] else "")
                     + _distinguishable(v), star])
    if not rows:
        return ""
    return ('<h2 id="at-a-glance">At a glance</h2>' + table(
        ["task and split", "metric", "best system [95 % interval]",
         "runner-up: distinguishable from the best?", "★ chosen for this split"], rows,
        "glance")
        + '<p class="note">Best and runner-up among baselines and systems (oracles and '
        "probes excluded), by the point estimate of the task's first headline metric; "
        "whether their gap is distinguishable comes from the notebook's paired test of that "
        "pair (Holm-adjusted unless it is the primary comparison). Every metric and interval "
        "is in the task sections below.</p>")


def _star_words(how: str) -> str:
    return "val-chosen" if how.startswith(("chosen on validation", "chosen on val ",
                                           "chosen on each fold's val")) \
        else how.split(" (")[0].split("; ")[0]


def _composition(how: str) -> str:
    """What a composite chosen system is made of ("A on folds 0, 1, B on fold 2"), or ""."""
    return how.split("; it is ", 1)[1] if "; it is " in how else ""


def task_sections(records: list[dict], sources: Sequence[dict] = ()) -> list[str]:
    """One section per registered task spec (:mod:`saf_utils.tasks`), then one per other task
    with result records (its first few metrics): per split the plain-words lead sentence,
    the headline table and its design note; one dot plot per task."""
    sections, parts = [], []
    for t in _task_splits(records):
        task, split, systems = t["task"], t["split"], t["systems"]
        if t["first"]:
            parts = [f'<h2 id="{esc(task)}">{esc(t["title"])}</h2>']
        parts.append(f'<h3 id="{esc(task)}-{esc(split)}">{esc(split)} '
                     f'<small>({esc(t["dataset"])})</small></h3>')
        parts.append(lead_sentence(systems, t["metric"], t["chosen"], t["diffs"]))
        parts.append(leakage_note(sources, task, split))
        parts.append(headline_table(systems, t["metrics"], t["chosen"]))
        cells = [c for e in systems.values() for c in e.values()
                 if isinstance(c, dict) and c.get("estimand")]
        designs = design_note(cells)
        if designs:
            clip = (" ‡: the interval reached past the metric's range and is clipped to it."
                    if any(_clipped(c) for c in cells) else "")
            parts.append(f'<p class="note">95 % intervals; {esc(designs)}.{clip}</p>')
        if t["last"]:
            try:
                parts.append(dot_plot(t["tables"], t["metrics"], t["title"]))
            except Exception as exc:  # noqa: BLE001 - a figure must not cost the page
                parts.append(f'<p class="warn">figure failed: {esc(exc)}</p>')
            sections.append("\n".join(parts))
    return sections


# ------------------------------------------------------------------ index.html
def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{seconds:.1f} s"


def write_index(run_dir: Path, manifest: dict, records: list[dict],
                example_links: list[tuple[str, str]] = ()) -> Path:
    """``index.html``: the headline page of a run (result records only); ``example_links``:
    ``(file, what)`` of the run's example pages."""
    from saf_utils.reporting import chrome

    git = manifest.get("git") or {}
    status = manifest.get("status", "?")
    nb_rows = []
    latest = {n["name"]: n for n in manifest.get("notebooks", [])}
    for n in manifest.get("notebooks", []):
        name = esc(n["name"])
        read_at = (n.get("reused") or {}).get("at") or n.get("started")
        newer = [d for d in (manifest.get("depends_on") or {}).get(n["name"], [])
                 if read_at and (latest.get(d) or {}).get("finished")
                 and ((latest[d].get("reused") or {}).get("at") or latest[d]["finished"])
                 > read_at]
        if newer:  # an input was rerun after this notebook read it
            name += f' <small class="warn">(stale: {esc(", ".join(newer))} rerun later)</small>'

        link = f'<a href="{esc(n["html"])}">{name}</a>' if n.get("html") else name
        err = esc((n.get("error") or "")[:300])
        state = f'<span class="{esc(n["status"])}">{esc(n["status"])}</span>'
        if n.get("reused"):
            orig = n["reused"].get("original") or {}
            state += (f' <small class="reused">reused from {esc(n["reused"].get("from"))}'
                      f' (executed {esc(orig.get("started"))} at commit '
                      f'<code>{esc(str(orig.get("commit") or "?")[:8])}</code>'
                      f'{" dirty" if orig.get("dirty") else ""})</small>')
        nb_rows.append([link, state,
                        f'<td class="num">{_duration(n.get("seconds"))}</td>',
                        esc(n.get("started") or ""), err])
    prev = [e for e in manifest.get("executions", []) if e.get("archived_to")]
    prev_html = ""
    if prev:
        prev_html = "<p class=note>Earlier executions in this run folder: " + ", ".join(
            f'<a href="{esc(e["archived_to"])}/{esc(e["name"])}.html">{esc(e["name"])} '
            f'({esc(e["status"])}, {esc(e.get("started"))})</a>' for e in prev) + "</p>"
    skipped = (manifest.get("records") or {}).get("skipped_lines", 0)
    warn = (f'<p class="warn">{skipped} bad record line(s) skipped (listed in manifest.json '
            "under records.skipped).</p>") if skipped else ""
    failed_nb = [n["name"] for n in manifest.get("notebooks", [])
                 if n["status"] in ("failed", "interrupted")]
    if failed_nb:
        warn += ('<p class="warn">† marks numbers from a notebook that did not finish: '
                 f"{esc(', '.join(failed_nb))}.</p>")
    links = ['<a href="results.html">all result records</a>',
             '<a href="manifest.json">manifest.json</a>', '<a href="metrics.json">metrics.json</a>']
    if (run_dir / "compare.html").is_file():
        links.insert(1, '<a href="compare.html">comparison with the baseline run</a>')
    links[1:1] = [f'<a href="{esc(name)}">{esc(what)}</a>' for name, what in example_links]
    commit = esc((git.get("commit") or "unknown")[:12]) + (" (dirty)" if git.get("dirty") else "")
    sections = task_sections(records, manifest.get("data_sources") or [])
    body = f"""<h1>Run {esc(manifest.get('run', run_dir.name))}
<span class="{esc(status)}">{esc(status)}</span></h1>
<p class="meta">Profile <b>{esc(manifest.get('profile'))}</b> · commit <code>{commit}</code> ·
started {esc(manifest.get('started'))} · finished {esc(manifest.get('finished') or '—')}<br>
{esc(manifest.get('description') or '')}</p>
{glance_table(records)}
{table(['notebook', 'status', 'time', 'started', 'error'], nb_rows)}
{prev_html}{warn}
<p>{' · '.join(links)}</p>
{''.join(sections) or '<p>No result record yet.</p>'}
<p class="note">Cells: mean [95 % interval] of the headline record (fold and seed null);
the note under each table names the interval's method and estimand; ‡ marks an interval
clipped to the metric's range. * = no headline record, mean over the per-seed/per-fold
records without an interval. 3 significant digits. Beside each metric: ↑ higher or ↓ lower
is better, and its range. Bold: best baseline or system. ★: the system the notebook chose
for that split (hover for how). Only <code>result</code> records are
shown; analysis and tuning records are in metrics.json and the notebooks. Published numbers
are quoted inside the notebooks, never here.</p>"""
    return write_text(run_dir / "index.html", page(f"Run {manifest.get('run', run_dir.name)}",
                                                   body + chrome.downloads_section(
                                                       run_dir, records) + data_table(manifest),
                                                   run_dir=run_dir,
                                                   current="index.html"))


def data_table(manifest: dict) -> str:
    """The data files of the run by dataset, split, file name and SHA-256 (no paths)."""
    rows = []
    for s in manifest.get("data_sources") or []:
        anomalies = ", ".join(f"{k} {v}" for k, v in sorted((s.get("anomalies") or {}).items())
                              if v)
        sha = str(s.get("sha256") or "")
        cls = "warn" if any(k.startswith("leak_") and v for k, v in
                            (s.get("anomalies") or {}).items()) else ""
        rows.append([esc(s.get("dataset")), esc(s.get("split")),
                     esc(Path(str(s.get("path"))).name),
                     f'<td><code title="{esc(sha)}">{esc(sha[:16])}</code></td>',
                     f'<td class="num">{esc(s.get("rows", ""))}</td>',
                     f'<td class="{cls}">{esc(anomalies)}</td>'])
    if not rows:
        return ""
    return ('<h2 id="data">Data files</h2>' + table(
        ["dataset", "split", "file", "SHA-256", "rows", "content anomalies"], rows)
        + '<p class="note">Full SHA-256 on hover and in manifest.json.</p>')


# ------------------------------------------------------------------ results.html
# What a reader needs first; the columns that repeat on every row come last (hideable).
RESULT_COLUMNS = ("system", "split", "metric", "scale", "what", "value", "CI", "p", "role",
                  "kind", "fold", "seed", "subset", "task", "dataset", "notebook",
                  "notebook_status", "ci_low", "ci_high")
HIDDEN_RESULT_COLUMNS = ("subset", "ci_low", "ci_high", "notebook_status")
NUMERIC_RESULT_COLUMNS = ("value", "p", "ci_low", "ci_high")
#: The default view: headline ``result`` records of test splits, each once (column filters,
#: shown in their boxes; the reader clears them to see every record).
DEFAULT_VIEW = {"kind": "result", "split": "test", "what": "headline"}
_P_PREFIXES = (("primary p vs ", "p vs {} (primary comparison)"),
               ("p_adj vs ", "Holm-adjusted p vs {}"), ("p vs ", "p vs {} (unadjusted)"))


def record_what(r: dict) -> tuple[str, bool]:
    """What a record's number is, for a reader, and whether it is a p-value: ``headline``
    (fold and seed null), ``per fold 2``, ``difference vs B``, ``Holm-adjusted p vs B``,
    ``chosen``, or its subset."""
    sub = str(r.get("subset") or "")
    for prefix, words in _P_PREFIXES:
        if sub.startswith(prefix):
            return words.format(sub[len(prefix):]), True
    if sub.startswith("minus "):
        return f"difference vs {sub[len('minus '):]}", False
    if sub:
        return sub, False
    parts = [f"per {k} {r[k]}" for k in ("fold", "seed") if r.get(k) is not None]
    return (" ".join(parts) if parts else "headline"), False


def results_frame(records: list[dict]) -> Any:
    """Every record as one row of :data:`RESULT_COLUMNS`: what the number is (``what``), the
    metric's direction and range (``scale``), a p-value in ``p`` (never in ``value``), the
    interval as ``[low, high]`` text, clipped to the metric's range (:func:`clip_record`).
    Numbers are text of 4 significant digits, a missing one empty (not "NaN"); the table
    still sorts them as numbers (DataTables detects numeric columns)."""
    import pandas as pd

    rows = []
    for r in records:
        r = clip_record(r)
        what, is_p = record_what(r)
        lo, hi = r.get("ci_low"), r.get("ci_high")
        ci = f"[{fmt(lo, 4)}, {fmt(hi, 4)}]" if lo is not None and hi is not None else ""
        value = None if r.get("value") is None else float(r["value"])
        row = {c: r.get(c) for c in RESULT_COLUMNS}
        row.update(kind=_kind(r), CI=ci, what=what, scale=scale_label(str(r.get("metric"))),
                   value=None if is_p else value, p=value if is_p else None,
                   **{c: (None if r.get(c) is None else float(r[c]))
                      for c in ("ci_low", "ci_high")})
        rows.append({c: fmt(v, 4) if c in NUMERIC_RESULT_COLUMNS else "" if v is None else v
                     for c, v in row.items()})
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for c in ("fold", "seed"):
        frame[c] = frame[c].astype(str)
    return frame


def write_results(run_dir: Path, manifest: dict, records: list[dict]) -> Path:
    """``results.html``: every record in one interactive table (sort, search, per-column
    filters, hideable columns); the default view shows ``result`` records of test splits."""
    from saf_utils.reporting.tables import table_spec

    frame = results_frame(records)
    cols = list(frame.columns)
    spec = table_spec(
        frame, filters=True, hideable=True, page_length=25,
        columnDefs=[{"targets": [cols.index(c) for c in HIDDEN_RESULT_COLUMNS],
                     "visible": False},
                    {"targets": [cols.index(c) for c in NUMERIC_RESULT_COLUMNS],
                     "className": "dt-right"}],
        searchCols=[{"search": DEFAULT_VIEW[c]} if c in DEFAULT_VIEW else None for c in cols],
        order=[[cols.index("split"), "asc"], [cols.index("metric"), "asc"],
               [cols.index("value"), "desc"]])
    kinds = defaultdict(int)
    for r in records:
        kinds[_kind(r)] += 1
    counts = ", ".join(f"{n} {esc(k)}" for k, n in sorted(kinds.items()))
    body = f"""<h1>Results of run {esc(manifest.get('run', run_dir.name))}</h1>
<p><a href="index.html">headline page</a> · {len(frame)} records ({counts}). The default view
shows each headline number of the test splits once (the boxes of <code>kind</code>,
<code>split</code> and <code>what</code>): clear them to see per-fold and per-seed values,
differences, p-values and tuning records. <code>what</code> says what a number is;
p-values are in the <code>p</code> column, never in <code>value</code>; <code>scale</code>
is the metric's direction (↑ higher or ↓ lower is better) and range. Type in a column's box
(below the table) to filter it, click a header to sort, <i>Column visibility</i> hides or
shows columns (<code>subset</code>, <code>ci_low</code>, <code>ci_high</code> and
<code>notebook_status</code> start hidden).</p>
{_tables_placeholder("results", spec)}"""
    return write_text(run_dir / "results.html",
                      page(f"Results {manifest.get('run', run_dir.name)}", body,
                           run_dir=run_dir, itables={"results": spec}, current="results.html",
                           wide=True))


def _tables_placeholder(table_id: str, spec: dict) -> str:
    from saf_utils.reporting.tables import placeholder

    return placeholder(table_id, spec)
