"""Every interactive table of a notebook or a page, through one function: :func:`html`
(itables' own output with its offline bundle, :func:`init_html`: DataTables, no network).
Text from data is escaped here; ``html_columns`` hold the project's own markup and are
sanitised instead. The result is :class:`markupsafe.Markup`, which ``pages.page`` keeps."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from notebook_reports.sharing import clean_html, esc
from saf_utils.text import shorten

#: A CSV cell starting, after blanks, with ``= + - @``, TAB or CR gets a leading ``'`` unless it
#: is a plain number (DataTables' own CSV escape leaves ``+`` and ``-`` live). No regular
#: expression literal: ``=/^…/`` reads as a path to :class:`PathScrubber`.
CSV_CELL_JS = r"""
const FORMULA=RegExp("^\\s*[=+\\-@\\t\\r]"),
  NUMBER=RegExp("^\\s*-?(\\d+\\.?\\d*|\\.\\d+)(e[-+]?\\d+)?\\s*$","i");
const csvCell=s=>typeof s==='string'&&FORMULA.test(s)&&!NUMBER.test(s)?"'"+s:s;
"""
#: The CSV export's cell format: the cell's text (tags removed, entities decoded), then above.
CSV_FORMAT = ("function(d){" + CSV_CELL_JS.replace("\n", "") + "if(typeof d!=='string')"
              "return d;const t=document.createElement('textarea');t.innerHTML=d.replace("
              "/<br\\s*\\/?>/gi,' ').replace(/<[^>]*>/g,'');return csvCell(t.value.trim());}")

#: The column filters show the search a table starts with (results.html's ``searchCols``).
FILL_FILTERS = ("function(settings){settings.oInstance.api().columns().every(function(){"
                "const q=this.search(),box=this.footer()&&this.footer().querySelector('input');"
                "if(q&&box)box.value=q;});}")

_shown = 0  # tables shown in this kernel: their ids (deterministic pages)


#: A text cell with an unbroken run longer than this (or longer than :data:`LONG_TEXT` in
#: all) shows its first :data:`SHORT_TEXT` characters, the rest on demand: a browser lays out
#: a 1 MB string without spaces in minutes (231 s measured; 0.7 s with spaces).
LONG_RUN, LONG_TEXT, SHORT_TEXT = 200, 20_000, 200


def text_cell(value: Any) -> str:
    """A text cell as HTML: escaped, line breaks kept; a long text (:data:`LONG_RUN`,
    :data:`LONG_TEXT`) cut to its start with "…" and its length, the full text on demand in
    the same cell, its unbroken runs breakable (``<wbr>``) so that opening it stays fast."""
    def plain(t: str) -> str:
        return esc(t).replace("\n", "<br>").replace("\t", "&#9;").replace("\r", "&#13;")

    text = str(value)
    if len(text) <= LONG_TEXT and not re.search(rf"\S{{{LONG_RUN + 1}}}", text):
        return plain(text)
    pieces = re.split(r"(\S{80})", text)  # every 80 characters of a run: a break point
    full = "<wbr>".join(plain(p) for p in pieces if p)
    return (f'<details class="saf-long"><summary>{plain(shorten(text, SHORT_TEXT))} '
            f"<small>({len(text):,} characters; the rest on demand)</small></summary>"
            f"{full}</details>")


def _cells(df: Any, html_columns: Iterable[str]) -> Any:
    """``df`` as HTML cells: floats to 4 significant digits (still numbers: they sort as
    numbers), text escaped with its line breaks kept, ``html_columns`` sanitised."""
    keep = set(map(str, html_columns))
    out = df.copy()
    for col in out.columns:
        kind = out[col].dtype.kind
        if kind == "f":
            out[col] = [None if not math.isfinite(x) else float(f"{x:.4g}") for x in out[col]]
        elif kind not in "biu":
            out[col] = [("" if v is None or (isinstance(v, float) and math.isnan(v)) else
                         clean_html(v) if str(col) in keep else text_cell(v))
                        for v in out[col]]
    out.columns = [esc(c) for c in out.columns]
    return out


def html(df: Any, caption: str | None = None, *, wrap: Iterable[str] = (),
         html_columns: Iterable[str] = (), filters: bool = True, page_length: int = 10,
         table_id: str | None = None, **options: Any) -> Markup:
    """``df`` as one interactive table: sort, search, per-column ``filters`` below it,
    hideable columns, Download CSV, every row. ``wrap`` columns give long texts a wider
    column; ``options`` go to DataTables (``columnDefs``, ``order``, ``searchCols``, ...)."""
    from itables import to_html_datatable
    from itables.typing import JavascriptFunction

    fmt = JavascriptFunction(CSV_FORMAT)
    name = re.sub(r"[^a-z0-9]+", "-", (caption or "table").lower()).strip("-")[:60]
    csv = {"extend": "csvHtml5", "text": "Download CSV", "filename": name or "table",
           "titleAttr": "the rows shown by the filters, all columns", "footer": False,
           "exportOptions": {"format": {"header": fmt, "body": fmt}}}
    cols = list(map(str, df.columns))
    defs = [{"targets": [cols.index(c) for c in wrap if c in cols], "className": "saf-wrap"}]
    opts: dict[str, Any] = {
        "classes": "display compact cell-border", "showIndex": False,
        "maxBytes": 0, "maxColumns": 0, "allow_html": True, "autoWidth": False,
        "format_floats_in_python": False, "display_logo_when_loading": False,
        "style": "table-layout:auto;width:auto;margin:0;caption-side:top",
        "pageLength": page_length, "lengthMenu": [5, 10, 25, 100, -1],
        "layout": {"topStart": "pageLength", "topEnd": "search", "bottomStart": "info",
                   "bottomEnd": "paging", "top2Start": {"buttons": ["colvis", csv]}},
        "columnDefs": [*options.pop("columnDefs", []), *(defs if defs[0]["targets"] else [])],
    }
    if filters:  # below the table: the header keeps the column names (sorting, colvis menu)
        opts.update(column_filters="footer", drawCallback=JavascriptFunction(FILL_FILTERS))
    opts.update(options)
    if table_id is None:
        global _shown
        _shown += 1
        key = f"{caption}|{cols}|{len(df)}|{_shown}"
        table_id = "t" + hashlib.sha1(key.encode()).hexdigest()[:10]
    text = to_html_datatable(_cells(df, html_columns), caption=esc(caption) if caption else None,
                             connected=False, table_id=table_id, **opts)
    # itables' pointers to its web site (help while loading, the static preview's note)
    text = re.sub(r"\s*\(need <a href=https://itables\.org[^>]*>help</a>\?\)|<sup><noscript>"
                  r".*?</sup>", "", text, flags=re.S)
    return Markup(f'<div class="saf-itable">{text}</div>')


@lru_cache(maxsize=1)
def init_html() -> str:
    """itables' offline bundle, once per page with a table, without its ``<noscript>`` note."""
    import itables
    from itables.javascript import generate_init_offline_itables_html

    text = generate_init_offline_itables_html(Path(itables.__file__).parent / "html"
                                              / "dt_bundle.js")
    return re.sub(r"<div[^>]*>\s*<noscript>.*?</noscript>\s*</div>", "", text, flags=re.S)


_INITIALISED = False


def show(df: Any, caption: str | None = None, wrap: Iterable[str] = (), **kwargs: Any) -> None:
    """Display ``df`` as an interactive table in a notebook (the first call in a kernel also
    the bundle); both outputs are marked (``saf_itables``) for the notebook page to keep."""
    global _INITIALISED
    from IPython.display import HTML, display

    if not _INITIALISED:
        display(HTML(init_html()), metadata={"saf_itables": "init"})
        _INITIALISED = True
    display(HTML(html(df, caption, wrap=wrap, **kwargs)), metadata={"saf_itables": "table"})
