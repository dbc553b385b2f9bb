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

from saf_utils.metrics.spec import lower_is_better
from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.sharing import PathScrubber, clean_html, esc, md  # noqa: F401

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
.ok{color:#060}.failed,.interrupted{color:#b00;font-weight:bold}
.running,.pending,.skipped{color:#a60}.meta{color:#444}.best{font-weight:bold}
small,.note{color:#666}.warn{color:#a00}
img{max-width:100%}body.wide{max-width:none;margin:1.5em 1.5em}
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
    """Cells are already HTML; header names are escaped."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
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
    cls = ' class="wide"' if wide else ""
    text = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(scrub(title))}</title><style>{CSS}</style></head><body{cls}>\n"
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
            r = head[-1]
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


def chosen_systems(records: list[dict], task: str) -> set[str]:
    """The val-chosen system of a task: the fold-less ``chosen`` record (with folds, the
    composite whose fold f part was chosen on fold f's val)."""
    return {r.get("system") for r in records if r.get("task") == task
            and _kind(r) == "tuning" and r.get("subset") == "chosen" and r.get("fold") is None}


def _cell_html(cell: dict | None, best: bool) -> str:
    if not cell:
        return '<td class="num"></td>'
    txt = fmt(cell["mean"])
    if cell["low"] is not None and cell["high"] is not None:
        txt += f" <small>[{fmt(cell['low'])}, {fmt(cell['high'])}]</small>"
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


def headline_table(systems: dict[str, dict], metrics: Sequence[str], chosen: set[str]) -> str:
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
            name += ' <span title="chosen on validation">★ val-chosen</span>'
        if e["failed"]:
            name += ' <span class="failed" title="from a notebook that did not finish">†</span>'
        cells = [name, esc(e["role"] or "")]
        cells += [_cell_html(e.get(m), best[m] is not None and e["role"] not in SET_APART
                             and m in e and e[m]["mean"] == best[m]) for m in present]
        rows.append(cells)
        classes.append("apart" if e["role"] in SET_APART else "")
    return table(["system", "role", *present], rows, "headline", classes)


def design_note(cells: Sequence[dict]) -> str:
    """"estimand: …, method …" of a table's cells; t-interval df collapsed to their range."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        m = re.match(r"(.*)\(([\d.]+) df\)$", str(c.get("method") or ""))
        key = (c["estimand"], (m.group(1).strip() + " (df {})") if m else str(c.get("method")))
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
                ref = sub[len(prefix):]
                key = (r.get("dataset"), r.get("split"), r.get("system"), r.get("metric"), ref)
                d = out.setdefault(key, {"ref": ref, "diff": None, "low": None, "high": None,
                                         "p": None, "p_adj": None, "primary": False})
                d[field] = r["value"]
                if field == "diff":
                    d.update(low=r.get("ci_low"), high=r.get("ci_high"))
                d["primary"] |= prefix == "primary p vs "
    return {k: v for k, v in out.items() if v.get("diff") is not None}


def _p_text(d: dict) -> str:
    if d["p"] is None:
        return ""
    if d["primary"]:
        return f", p = {fmt(d['p'])}, the primary comparison"
    if d["p_adj"] is not None:
        return f", p = {fmt(d['p'])}, Holm-adjusted {fmt(d['p_adj'])}"
    return f", p = {fmt(d['p'])}, unadjusted"


def _diff_text(d: dict | None) -> str:
    if not d:
        return ""
    txt = f"{d['diff']:+.3g}"
    if d["low"] is not None and d["high"] is not None:
        txt += f" [{d['low']:+.3g}, {d['high']:+.3g}]"
    return f" ({txt} vs {esc(d['ref'])}{_p_text(d)})"


def _significant(d: dict, alpha: float = 0.05) -> bool:
    p = d["p"] if d["primary"] or d["p_adj"] is None else d["p_adj"]
    return p is not None and p <= alpha


def lead_sentence(systems: dict[str, dict], metric: str, chosen: set[str] = frozenset(),
                  diffs: dict[tuple, dict] | None = None) -> str:
    """Who leads on ``metric`` (oracles and probes excluded) and whether a test resolves the
    gap to the runner-up (``diffs`` keyed by (system, reference)); then the val-chosen system
    with its difference to its reference (the primary comparison first)."""
    diffs = diffs or {}
    ranked = [s for s in _order(systems, metric)
              if systems[s]["role"] not in SET_APART and metric in systems[s]]
    if not ranked:
        return ""

    def cell(s: str) -> str:
        c = systems[s][metric]
        ci = f" [{fmt(c['low'])}, {fmt(c['high'])}]" if c["low"] is not None else ""
        return f"<b>{esc(s)}</b> {fmt(c['mean'])}{ci}"

    word = "Lowest" if lower_is_better(metric) else "Highest"
    top = ranked[0]
    txt = f"{word} {esc(metric)} on this split: {cell(top)}"
    if len(ranked) > 1:
        runner = ranked[1]
        d = diffs.get((top, runner))
        if d is None:
            gap = abs(systems[top][metric]["mean"] - systems[runner][metric]["mean"])
            txt += (f", {fmt(gap)} ahead of {esc(runner)} by its point estimate (that gap was "
                    "not tested)")
        elif _significant(d):
            txt += f"; its lead over {esc(runner)} is resolved{_diff_text(d)}"
        else:
            txt += (f"; not distinguishable from {esc(runner)} at this sample size"
                    f"{_diff_text(d)}")
    txt += "."
    for s in [s for s in ranked if s in chosen]:
        mine = sorted((v for (system, _), v in diffs.items() if system == s),
                      key=lambda v: not v["primary"])
        txt += f" Chosen on validation: {cell(s)}{_diff_text(mine[0] if mine else None)}."
    return f"<p>{txt}</p>"


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
        ax.set_title(metric, fontsize=9)
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


def task_sections(records: list[dict], sources: Sequence[dict] = ()) -> list[str]:
    """One section per registered task spec (:mod:`saf_utils.tasks`), then one per other task
    with result records (its first few metrics)."""
    from saf_utils.tasks import specs

    known = {s.name: s for s in specs()}
    tasks = list(known)
    for r in records:
        t = r.get("task")
        if _kind(r) == "result" and t not in tasks and r.get("system") != "data":
            tasks.append(t)
    sections = []
    for task in tasks:
        sp = known.get(task)
        title, metrics = (sp.title, sp.headline) if sp else (str(task), ())
        if not metrics:  # an unknown task: its first few result metrics
            metrics = tuple(dict.fromkeys(r["metric"] for r in records if r.get("task") == task
                                          and _kind(r) == "result"))[:4]
        tables = headline_cells(records, task, metrics)
        if not tables:
            continue
        chosen = chosen_systems(records, task)
        diffs = paired_differences(records, task)
        parts = [f'<h2 id="{esc(task)}">{esc(title)}</h2>']
        page_order = {sp_: i for i, sp_ in enumerate(sp.splits if sp else ())}
        for (ds, split), systems in sorted(tables.items(), key=lambda kv: (
                page_order.get(kv[0][1], len(page_order)), str(kv[0]))):
            parts.append(f"<h3>{esc(split)} <small>({esc(ds)})</small></h3>")
            metric = next(m for m in metrics if any(m in e for e in systems.values()))
            split_diffs = {(k[2], k[4]): v for k, v in diffs.items()
                           if k[0] == ds and k[1] == split and k[3] == metric}
            parts.append(lead_sentence(systems, metric, chosen, split_diffs))
            parts.append(leakage_note(sources, task, split))
            parts.append(headline_table(systems, metrics, chosen))
            designs = design_note([c for e in systems.values() for c in e.values()
                                   if isinstance(c, dict) and c.get("estimand")])
            if designs:
                parts.append(f'<p class="note">95 % intervals; {esc(designs)}.</p>')
        try:
            parts.append(dot_plot(tables, metrics, title))
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


def write_index(run_dir: Path, manifest: dict, records: list[dict]) -> Path:
    """``index.html``: the headline page of a run (result records only)."""
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
    commit = esc((git.get("commit") or "unknown")[:12]) + (" (dirty)" if git.get("dirty") else "")
    sections = task_sections(records, manifest.get("data_sources") or [])
    body = f"""<h1>Run {esc(manifest.get('run', run_dir.name))}
<span class="{esc(status)}">{esc(status)}</span></h1>
<p class="meta">Profile <b>{esc(manifest.get('profile'))}</b> · commit <code>{commit}</code> ·
started {esc(manifest.get('started'))} · finished {esc(manifest.get('finished') or '—')}<br>
{esc(manifest.get('description') or '')}</p>
{table(['notebook', 'status', 'time', 'started', 'error'], nb_rows)}
{prev_html}{warn}
<p>{' · '.join(links)}</p>
{''.join(sections) or '<p>No result record yet.</p>'}
<p class="note">Cells: mean [95% cluster-bootstrap CI] of the headline record (fold and seed
null); * = no headline record, mean over the per-seed/per-fold records without CI. 3
significant digits. Bold: best baseline or system. Only <code>result</code> records are
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
RESULT_COLUMNS = ("system", "split", "metric", "value", "CI", "role", "subset", "fold", "seed",
                  "kind", "task", "dataset", "notebook", "notebook_status", "ci_low", "ci_high")
HIDDEN_RESULT_COLUMNS = ("ci_low", "ci_high", "notebook_status")
#: The default view: ``result`` records of test splits (column filters, shown in their boxes;
#: the reader clears them to see every record).
DEFAULT_VIEW = {"kind": "result", "split": "test"}


def results_frame(records: list[dict]) -> Any:
    """Every record as one row of :data:`RESULT_COLUMNS` (CI as ``[low, high]`` text)."""
    import pandas as pd

    rows = []
    for r in records:
        lo, hi = r.get("ci_low"), r.get("ci_high")
        ci = f"[{fmt(lo, 4)}, {fmt(hi, 4)}]" if lo is not None and hi is not None else ""
        row = {c: r.get(c) for c in RESULT_COLUMNS}
        row.update(kind=_kind(r), CI=ci,
                   **{c: (None if r.get(c) is None else float(r[c]))
                      for c in ("value", "ci_low", "ci_high")})
        rows.append({c: ("" if v is None else v) if c not in ("value", "ci_low", "ci_high")
                     else v for c, v in row.items()})
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
                    {"targets": [cols.index(c) for c in ("value", "ci_low", "ci_high")],
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
shows <code>result</code> records of test splits (the boxes of <code>kind</code> and
<code>split</code>): clear them to see the rest. Type in a column's box (below the table) to
filter it, click a header to sort,
<i>Column visibility</i> hides or shows columns (<code>ci_low</code>, <code>ci_high</code> and
<code>notebook_status</code> start hidden).</p>
{_tables_placeholder("results", spec)}"""
    return write_text(run_dir / "results.html",
                      page(f"Results {manifest.get('run', run_dir.name)}", body,
                           run_dir=run_dir, itables={"results": spec}, current="results.html",
                           wide=True))


def _tables_placeholder(table_id: str, spec: dict) -> str:
    from saf_utils.reporting.tables import placeholder

    return placeholder(table_id, spec)
