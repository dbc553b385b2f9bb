"""HTML pages of a run through the templates (:mod:`.chrome`): a page of the runner
(:func:`page`) or an executed notebook (:func:`render_notebook`), made to be shared
(:mod:`.sharing`): values escaped, bodies sanitised, no local paths, nothing from the network."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from notebook_reports.manifest import write_text
from notebook_reports.sharing import PathScrubber, clean_html, esc


def fmt(x: float | None, digits: int = 3) -> str:
    """``digits`` significant digits (0.852, 48.5, 1.23e-05); integers stay integers."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) >= 1 else f"{x:.{digits}g}"


def duration_text(seconds: float | None) -> str:
    """Seconds as a reader reads a duration: ``12.3 s``, ``4:05``, ``1:02:03``."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{seconds:.1f} s"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "",
          row_classes: Sequence[str] | None = None) -> str:
    """A static table of cells that are already HTML (or whole ``<td…>`` elements); header
    names are escaped unless they are whole ``<th…>`` elements."""
    th = "".join(h if h.startswith("<th") else f"<th>{esc(h)}</th>" for h in head)
    classes = row_classes or []
    trs = "".join((f'<tr class="{classes[i]}">' if i < len(classes) and classes[i] else "<tr>")
                  + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row) + "</tr>"
                  for i, row in enumerate(rows))
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def page(title: str, body: str | Sequence[str], run_dir: str | os.PathLike | None = None,
         current: str | None = None, wide: bool = False) -> str:
    """A whole page (``page.html.j2``). Each part of ``body`` is sanitised unless it is
    :class:`markupsafe.Markup` (the project's own, e.g. :func:`tables.html`); page ``current``
    of run folder ``run_dir`` gets the run's navigation bar; ``wide``: no width cap."""
    from markupsafe import Markup

    from notebook_reports import chrome, tables

    scrub = PathScrubber(run_dir)
    text = "\n".join(scrub(p, generic=False) if isinstance(p, Markup) else
                     chrome.link_metric_headers(clean_html(scrub(p)))
                     for p in ([body] if isinstance(body, str) else body))
    return chrome.environment().get_template("page.html.j2").render(
        title=scrub(title), body=text, wide=wide,
        saf=chrome.context(Path(run_dir), current) if run_dir is not None and current else None,
        tables_init=tables.init_html() if 'class="saf-itable"' in text else "")


def render_notebook(ipynb: Path, hide_code: bool = False) -> Path:
    """Render an executed notebook to one self-contained page next to it (``index.html.j2``:
    nbconvert's ``lab`` template without CDN scripts, with the run's chrome). Outputs are
    sanitised except :func:`tables.show`'s tables (their cells escaped), JavaScript dropped,
    paths scrubbed (``$RUN``; ``$<parameter>`` for the papermill parameters' data paths)."""
    import nbformat
    from nbconvert import HTMLExporter

    from notebook_reports import chrome, tables

    nb = nbformat.read(ipynb, as_version=4)
    params = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    scrub = PathScrubber(ipynb.parent.absolute(), {
        k: v for k, v in params.items() if k.endswith(("_source", "_path", "_dir"))})
    exporter = HTMLExporter(template_name="saf", extra_template_basedirs=[
        str(chrome.TEMPLATES)], embed_images=True, sanitize_html=True,
        exclude_input=hide_code, exclude_input_prompt=hide_code,
        filters={"clean_html": clean_html, "link_metrics": chrome.link_metric_headers})
    out = ipynb.with_suffix(".html")
    found = chrome.collect_warnings(scrub.notebook(nb))  # stderr: one folded box on top
    marked = any((o.get("metadata") or {}).get("saf_itables") == "table"
                 for c in nb.cells for o in c.get("outputs", []))
    saf = {**chrome.context(ipynb.parent, out.name, code_toggle=not hide_code),
           "warnings": found, "tables_init": tables.init_html() if marked else ""}
    body, _ = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": ipynb.stem}, "saf": saf})
    return write_text(out, scrub(body, generic=False))
