"""HTML pages of a run; none loads anything from the network. This module holds what every
page is made of (:func:`page`, :func:`table`, :func:`fmt`) and the notebook pages:

- :func:`render_notebook`: an executed notebook as one page (nbconvert ``lab`` template
  without the require.js / MathJax / mermaid CDN scripts; figures embedded);
- ``index.html``, the headline page: :mod:`.index_page` (its tables and sentences:
  :mod:`.headline`);
- ``results.html``, every record in one table: :mod:`.results_page`.

Pages are meant to be shared (:mod:`saf_utils.reporting.sharing`): every value is escaped,
notebook outputs and page bodies are sanitised, and no absolute local path is shown.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.sharing import PathScrubber, clean_html, esc, md  # noqa: F401

BODY_WIDE = ' class="wide"'

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
@media (max-width:700px){table.glance thead{display:none}table.glance,table.glance tbody,
table.glance tr,table.glance td{display:block}table.glance td{border-width:0 1px}
table.glance tr{border-top:2px solid #999}}
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


def duration_text(seconds: float | None) -> str:
    """Seconds as a reader reads a duration: ``12.3 s``, ``4:05``, ``1:02:03``."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{seconds:.1f} s"
