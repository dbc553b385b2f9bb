"""HTML pages of a run; none loads anything from the network. This module holds what every
page is made of (:func:`page`, :func:`fmt`; tables: :func:`saf_utils.reporting.tables.html`)
and the notebook pages (:func:`render_notebook`), both through the templates in
``templates/saf/`` (:mod:`.chrome`):
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


def page(title: str, body: str | Sequence[str], script: str = "",
         run_dir: str | os.PathLike | None = None, current: str | None = None,
         wide: bool = False, css: str = "") -> str:
    """A whole page (``templates/saf/page.html.j2``). ``body``: HTML, or a list of parts;
    each part is sanitised (:func:`clean_html`) unless it is :class:`markupsafe.Markup`
    (the project's own HTML, e.g. :func:`tables.html`); absolute paths are rewritten
    (:class:`PathScrubber`, ``$RUN`` for ``run_dir``). ``script`` and ``css`` are the
    project's own; a page ``current`` of the run folder ``run_dir`` gets the run's
    navigation bar. ``wide``: no width cap (pages of wide tables)."""
    from markupsafe import Markup

    from saf_utils.reporting import chrome, tables

    scrub = PathScrubber.for_run(run_dir)
    parts = [body] if isinstance(body, str) else list(body)
    text = "\n".join(scrub(p, generic=False) if isinstance(p, Markup) else
                      chrome.link_metric_headers(clean_html(scrub(p))) for p in parts)
    nav = chrome.context(Path(run_dir), current) if run_dir is not None and current else None
    return chrome.environment().get_template("page.html.j2").render(
        title=scrub(title), body=text, saf=nav, wide=wide, css=css, page_script=script,
        tables_init=tables.init_html() if tables.uses_tables(text) else "")


def external_resources(text: str) -> list[str]:
    """External scripts, stylesheets, images or frames a page would load (for tests)."""
    pat = re.compile(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*\b(?:src|href)\s*="
                     r"\s*[\"']?((?:https?:)?//[^\"' >]+)", re.I)
    return pat.findall(text)


# ------------------------------------------------------------------ notebook pages
def render_notebook(ipynb: Path, hide_code: bool = False) -> Path:
    """Render an executed notebook to one self-contained HTML page next to it, through the
    project's nbconvert template (``templates/saf``: the ``lab`` template minus its CDN
    scripts, with the run's chrome; LaTeX in Markdown stays source text).

    Safe to share: every HTML and Markdown output and Markdown cell goes through
    :func:`clean_html` (nbconvert's ``sanitize_html``; JavaScript outputs are dropped, PNG
    and JPEG outputs stay embedded) except the interactive tables :func:`tables.show` marks,
    whose cells it escaped; absolute paths in sources and outputs are rewritten
    (:class:`PathScrubber`: ``$RUN`` for the notebook's folder, ``$<parameter>`` for data
    paths among its papermill parameters). The ``.ipynb`` itself is left as executed.
    """
    import nbformat
    from nbconvert import HTMLExporter

    from saf_utils.reporting import chrome, tables

    nb = nbformat.read(ipynb, as_version=4)
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    scrub = PathScrubber.for_run(ipynb.parent.absolute(), {
        k: v for k, v in params.items() if k.endswith(("_source", "_path", "_dir"))})
    exporter = HTMLExporter(template_name="saf", extra_template_basedirs=[
        str(chrome.TEMPLATES)], embed_images=True, sanitize_html=True,
        filters={"clean_html": clean_html, "link_metrics": chrome.link_metric_headers})
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    out = ipynb.with_suffix(".html")
    found = chrome.collect_warnings(scrub.notebook(nb))  # stderr: one folded box on top
    marked = any((o.get("metadata") or {}).get("saf_itables") == "table"
                 for c in nb.cells for o in c.get("outputs", []))
    saf = {**chrome.context(ipynb.parent, out.name, code_toggle=not hide_code),
           "warnings": found, "tables_init": tables.init_html() if marked else ""}
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": ipynb.stem},
                                                         "saf": saf})
    return write_text(out, scrub(body, generic=False))


def duration_text(seconds: float | None) -> str:
    """Seconds as a reader reads a duration: ``12.3 s``, ``4:05``, ``1:02:03``."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{seconds:.1f} s"
