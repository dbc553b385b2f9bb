"""What every page of a run shares around its content: a navigation bar, a table of contents,
folded code, one folded box of warnings, and links from metric names to their cards.

- :func:`decorate` puts the bar at the top of a page (idempotent: the bar between
  :data:`START` and :data:`END` is replaced): the run, links to ``index.html``,
  ``results.html``, each notebook page, each compare page and the metric cards, a "Contents"
  menu of the page's ``h1``–``h3`` headings that have ids and, on notebook pages,
  a button that shows or folds all code. Table headers that name a registered metric link to
  its card (:mod:`saf_utils.reporting.metric_cards`).
- :func:`refresh` decorates every page of a run folder again (a notebook page written before
  its siblings or a compare page existed gets their links) and writes the metric cards page.
- notebook tables (pandas HTML) are laid out by their content, cells on one line (a
  difference with its interval and p-value reads in one line), scrolling inside the output;
- :data:`TEMPLATE_BLOCKS` folds each code cell of a notebook page into a ``<details>``
  (nbconvert's ``--hide-code`` still removes it); :func:`collect_warnings` takes the stderr
  outputs (library warnings, logging) out of the cells for :func:`warnings_box`.

All text here comes from file names, headings already on the page (escaped) and the
manifest, and is escaped again; the bar is added after sanitising, as the project's own
markup.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saf_utils.reporting.sharing import esc

START, END = "<!--saf-chrome-->", "<!--/saf-chrome-->"
CARDS_PAGE = "metric-cards.html"

CSS = """
.saf-nav{position:sticky;top:0;z-index:1000;display:flex;flex-wrap:wrap;align-items:center;
gap:.15em .8em;margin:0 0 .8em;padding:.35em .8em;background:#f6f7f9;
border-bottom:1px solid #d0d4da;font:14px/1.5 system-ui,sans-serif;color:#222}
.saf-nav a{color:#0645ad;text-decoration:none}.saf-nav a:hover{text-decoration:underline}
.saf-nav .here{font-weight:bold;color:#222}.saf-nav .run{font-weight:bold}
.saf-nav .group{color:#666}.saf-nav .pending{color:#999}
.saf-nav details{position:relative}.saf-nav summary{cursor:pointer;color:#0645ad}
.saf-nav details>ol{position:absolute;left:0;top:1.6em;margin:0;padding:.5em 1em .5em 2em;
background:#fff;border:1px solid #c8ccd2;box-shadow:0 2px 8px rgba(0,0,0,.15);
max-height:70vh;overflow:auto;min-width:22em;max-width:40em}
.saf-nav li.l1{font-weight:bold}.saf-nav li.l3{margin-left:1.2em;font-size:13px}
.saf-nav button{font:13px system-ui,sans-serif;cursor:pointer}
details.saf-code>summary{cursor:pointer;color:#666;font:12px system-ui,sans-serif;
padding:.1em .4em;list-style-position:inside}
details.saf-warnings{margin:.6em 0 1em;padding:.3em .8em;background:#fff8e6;
border:1px solid #e6c96a;font:13px system-ui,sans-serif}
details.saf-warnings>summary{cursor:pointer;font-weight:bold;color:#7a5b00}
details.saf-warnings pre{white-space:pre-wrap;font-size:12px;margin:.3em 0;color:#333}
details.saf-warnings .where{color:#666}
th a.saf-metric{color:inherit;text-decoration:underline dotted}
h1[id],h2[id],h3[id]{scroll-margin-top:3em}
.jp-RenderedHTMLCommon table:not(.dataTable){table-layout:auto}
.jp-RenderedHTMLCommon table:not(.dataTable) td{white-space:nowrap}
.jp-RenderedHTMLCommon:has(>table:not(.dataTable)){overflow-x:auto}
"""

JS = """
document.getElementById('saf-code-toggle')?.addEventListener('click', e => {
  const all = document.querySelectorAll('details.saf-code');
  const open = !Array.from(all).every(d => d.open);
  all.forEach(d => { d.open = open; });
  e.target.textContent = open ? 'fold all code' : 'show all code';
});
"""

#: nbconvert blocks (added to the page template): each code cell's input folded.
TEMPLATE_BLOCKS = """
{% block input_group -%}
<details class="saf-code"><summary>code</summary>
{{ super() }}
</details>
{%- endblock input_group %}
"""


# ------------------------------------------------------------------ what a run has
def run_pages(run_dir: Path) -> dict[str, list[tuple[str, str | None]]]:
    """``{"notebooks": [(label, file or None)], "compare": [(label, file)]}``: the notebook
    pages in the manifest's order (``None``: not rendered yet), then any other numbered
    page, and the compare pages."""
    manifest = _manifest(run_dir)
    notebooks: list[tuple[str, str | None]] = []
    seen = set()
    for n in manifest.get("notebooks") or []:
        name = str(n.get("name"))
        file = f"{name}.html"
        notebooks.append((name, file if (run_dir / file).is_file() else None))
        seen.add(file)
    for p in sorted(run_dir.glob("[0-9]*.html")):
        if p.name not in seen:
            notebooks.append((p.stem, p.name))
    compare = [(p.stem, p.name) for p in sorted(run_dir.glob("compare*.html"))]
    return {"notebooks": notebooks, "compare": compare}


def _manifest(run_dir: Path) -> dict:
    try:
        data = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ------------------------------------------------------------------ headings
_HEADING = re.compile(r"<h([1-3])(\s[^>]*)?>(.*?)</h\1>", re.S | re.I)
_ID = re.compile(r"""\sid=(["'])(.*?)\1""")


def _text(fragment: str) -> str:
    fragment = re.sub(r'<a class="anchor-link"[^>]*>.*?</a>', "", fragment, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def headings(text: str) -> list[tuple[int, str, str]]:
    """``[(level, id, plain text)]`` of the page's ``h1``–``h3`` that have an id (nbconvert
    gives every Markdown heading one; the runner's pages give their sections one)."""
    found = []
    for m in _HEADING.finditer(text):
        ident = _ID.search(m.group(2) or "")
        if ident:
            found.append((int(m.group(1)), html.unescape(ident.group(2)), _text(m.group(3))))
    return found


def toc(items: Sequence[tuple[int, str, str]]) -> str:
    """The "Contents" menu (empty for a page with fewer than two headings)."""
    if len(items) < 2:
        return ""
    lis = "".join(f'<li class="l{lvl}"><a href="#{esc(hid)}">{esc(title[:90])}</a></li>'
                  for lvl, hid, title in items if title)
    return f'<details class="saf-toc"><summary>Contents</summary><ol>{lis}</ol></details>'


# ------------------------------------------------------------------ the bar
def nav_bar(run_dir: Path, current: str, items: Sequence[tuple[int, str, str]] = (),
            code_toggle: bool = False) -> str:
    """The navigation bar of page ``current`` (a file name in ``run_dir``)."""
    run = _manifest(run_dir).get("run") or run_dir.name
    pages = run_pages(run_dir)
    here = re.sub(r"^(examples-.*)-\d+\.html$", r"\1.html", current)  # an example page's 1st

    def link(label: str, file: str | None, title: str = "") -> str:
        tip = f' title="{esc(title)}"' if title else ""
        if file is None:
            return f'<span class="pending"{tip}>{esc(label)}</span>'
        if file == here:
            return f'<span class="here"{tip}>{esc(label)}</span>'
        return f'<a href="{esc(file)}"{tip}>{esc(label)}</a>'

    parts = [f'<span class="run">Run {esc(run)}</span>', link("index", "index.html"),
             link("results", "results.html")]
    if pages["notebooks"]:
        parts.append('<span class="group">notebooks:</span> ' + " ".join(
            link(name.split("_", 1)[0], file, name + ("" if file else " (not rendered)"))
            for name, file in pages["notebooks"]))
    if pages["compare"]:
        parts.append('<span class="group">compare:</span> ' + " ".join(
            link(label.removeprefix("compare").lstrip("-") or "baseline", file, label)
            for label, file in pages["compare"]))
    examples = sorted(p.name for p in run_dir.glob("examples-*.html")  # first pages only
                      if not re.search(r"-\d+\.html$", p.name))
    if examples:  # one example through every system (reporting/examples.py)
        parts.append('<span class="group">examples:</span> ' + " ".join(
            link(f.removeprefix("examples-").removesuffix(".html"), f,
                 "one example, every system") for f in examples))
    parts.append(link("metric cards", CARDS_PAGE, "definition, range, direction, "
                      "implementation and reference of every metric"))
    menu = toc(items)
    if menu:
        parts.append(menu)
    if code_toggle:
        parts.append('<button type="button" id="saf-code-toggle">show all code</button>')
    return (f'{START}<nav class="saf-nav" aria-label="run">{" ".join(parts)}</nav>'
            f"<style>{CSS}</style><script>{JS}</script>{END}")


#: the bar and the line break :func:`decorate` puts before it (so that decorating a page
#: again gives the same page, not one more blank line each time)
_BLOCK = re.compile(r"\n?" + re.escape(START) + ".*?" + re.escape(END), re.S)
_BLOCK_SPACED = re.compile(r"\s*" + re.escape(START) + ".*?" + re.escape(END) + r"\s*", re.S)


def without_bar(text: str) -> str:
    """A page without its navigation bar: what stays the same while :func:`refresh` rewrites
    the bar as the run's pages appear (reuse verifies pages by this)."""
    return _BLOCK_SPACED.sub("", text, count=1)


_BODY = re.compile(r"<body\b[^>]*>", re.I)


def decorate(text: str, run_dir: Path, current: str) -> str:
    """``text`` (a whole page) with the run's navigation bar at the top of its body and
    metric names in table headers linked to their cards; calling it again replaces the bar."""
    text = _BLOCK.sub("", text, count=1)
    items = headings(text)
    text = link_metric_headers(text)
    bar = nav_bar(run_dir, current, items, code_toggle='class="saf-code"' in text)
    m = _BODY.search(text)
    if m is None:
        return bar + text
    return text[:m.end()] + "\n" + bar + text[m.end():]


def refresh(run_dir: Path) -> None:
    """Decorate every page of the run folder again (the metric cards page included: callers
    write it first with :func:`metric_cards.write_cards`, which renders through ``pages``)."""
    from saf_utils.reporting.manifest import write_text

    for p in sorted(run_dir.glob("*.html")):
        try:
            old = p.read_text(encoding="utf-8")
        except OSError:
            continue
        new = decorate(old, run_dir, p.name)
        if new != old:
            write_text(p, new)


# ------------------------------------------------------------------ metric links
def link_metric_headers(text: str) -> str:
    """A ``<th>`` whose text starts with a registered metric name links it to its card."""
    from saf_utils.metrics import METRICS

    if not METRICS:
        return text
    names = "|".join(re.escape(n) for n in sorted(METRICS, key=len, reverse=True))
    pat = re.compile(rf"(<th\b[^>]*>\s*)({names})(?=[\s<(,]|$)")

    def one(m: re.Match) -> str:
        name = m.group(2)
        tip = esc(METRICS[name].description)
        return (f'{m.group(1)}<a class="saf-metric" href="{CARDS_PAGE}#{esc(name)}" '
                f'title="{tip}">{name}</a>')

    return pat.sub(one, text)


# ------------------------------------------------------------------ warnings
def collect_warnings(nb: Any) -> list[dict[str, Any]]:
    """Take every stderr output out of the notebook's cells; ``[{"text", "count", "where"}]``
    (identical messages once, with the sections they came from)."""
    from saf_utils.reporting.notebook_exec import section_starts

    starts = section_starts(nb)
    section = ""
    found: dict[str, dict[str, Any]] = {}
    for i, cell in enumerate(nb.cells):
        section = starts.get(i, section)
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = _stream_text(out.get("text", ""))
                if text:
                    entry = found.setdefault(text, {"text": text, "count": 0, "where": []})
                    entry["count"] += 1
                    where = f"{section or 'top'} (cell {cell.get('execution_count') or i})"
                    if where not in entry["where"]:
                        entry["where"].append(where)
                continue
            keep.append(out)
        cell["outputs"] = keep
    return list(found.values())


def _stream_text(value: str | Sequence[str]) -> str:
    """A stream's text with carriage-return redraws (progress bars) reduced to their last
    state and ANSI colours removed."""
    text = value if isinstance(value, str) else "".join(value)
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(lines).strip()


def warnings_box(found: Sequence[dict[str, Any]]) -> str:
    """One folded box with the page's warnings (empty when there are none)."""
    if not found:
        return ""
    n = sum(w["count"] for w in found)
    items = []
    for w in found:
        where = "; ".join(w["where"][:4]) + (" …" if len(w["where"]) > 4 else "")
        times = f" ({w['count']}×)" if w["count"] > 1 else ""
        items.append(f'<li><span class="where">{esc(where + times)}</span>'
                     f'<pre>{esc(w["text"][:4000])}</pre></li>')
    return (f'<details class="saf-warnings"><summary>warnings ({n} message'
            f'{"s" if n != 1 else ""} on stderr, from libraries and checks)</summary>'
            f"<ul>{''.join(items)}</ul></details>")


# ------------------------------------------------------------------ downloads
def downloads_section(run_dir: Path, records: Sequence[dict]) -> str:
    """Per task: links to its predictions and per-item scores (the JSON lines files of the
    notebook that recorded its results; :mod:`saf_utils.artifacts` names them)."""
    from saf_utils.artifacts import (
        GENERATIONS_FILE,
        ITEMS_FILE,
        SAF_PREDICTIONS_FILE,
        SELECTIONS_FILE,
    )

    by_task: dict[str, set[str]] = {}
    for r in records:
        if (r.get("kind") or "result") == "result" and r.get("task") and r.get("notebook") \
                and r.get("system") != "data":  # 01's data counts are no predictions
            by_task.setdefault(str(r["task"]), set()).add(str(r["notebook"]))
    pred_globs = (SAF_PREDICTIONS_FILE.format(split="*"), SELECTIONS_FILE, GENERATIONS_FILE)
    rows = []
    for task in sorted(by_task):
        preds, items = [], []
        for nb in sorted(by_task[task]):
            folder = run_dir / nb
            found = sorted({p for g in pred_globs for p in folder.glob(g)})
            preds += [f"{nb}/{p.name}" for p in found]
            if (folder / ITEMS_FILE).is_file():
                items.append(f"{nb}/{ITEMS_FILE}")
        if not preds and not items:
            continue

        def links(files: list[str]) -> str:
            return ", ".join(f'<a href="{esc(f)}">{esc(f)}</a> <small>({_size(run_dir / f)})'
                             "</small>" for f in files) or "—"

        rows.append(f"<tr><td>{esc(task)}</td><td>{links(preds)}</td><td>{links(items)}</td>"
                    "</tr>")
    if not rows:
        return ""
    return ('<h2 id="downloads">Downloads: predictions and per-item scores</h2>'
            "<table><thead><tr><th>task</th><th>predictions</th><th>per-item scores "
            f"(every task of the notebook)</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            '</table><p class="note">gzip-compressed JSON lines, one object per line (zcat or '
            "pandas <code>read_json(path, lines=True)</code> read them). Every interactive table "
            "also has a <i>Download CSV</i> button (the rows its filters show).</p>")


def _size(path: Path) -> str:
    try:
        n = path.stat().st_size
    except OSError:
        return "?"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{max(n / 1e3, 0.1):.1f} kB"
