"""Interactive tables (itables / DataTables, bundled: no network) in notebooks and pages.

:func:`show` displays a frame as a sortable, filterable table. One display output carries
two forms of it:

- ``text/html``: itables' own output (offline bundle, loaded once per kernel), which
  JupyterLab runs in a trusted notebook;
- :data:`MIME`: the table as JSON (DataTables arguments: escaped header, escaped cells,
  options; no code), which :func:`saf_utils.reporting.pages.render_notebook` turns into a
  placeholder ``<div>`` that passes the sanitiser.

Pages never keep the notebook's scripts (the sanitiser drops them). The page gets the table
data and the project's own trusted script instead (:func:`page_assets`): the itables bundle
(base64, imported from a ``blob:`` URL), its CSS, and a fixed initialiser. Data reaches the
page only as JSON text inside an escaped hidden ``<div>`` (every cell HTML-escaped by itables,
then the whole JSON escaped again), and is never evaluated: ``keys_to_be_evaluated`` is
refused here and deleted in the initialiser.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from saf_utils.reporting.sharing import esc

MIME = "application/vnd.saf-utils.itable+json"
INIT_MIME = "application/vnd.saf-utils.itables-init+json"
#: Layout as in JupyterLab (itables' own table style, which the page's initialiser does not
#: get): columns sized to their content (``table-layout:auto``; texts on one line), the
#: ``wrap`` columns at the readable width :func:`wrap_width` gives them (texts wrapped, their
#: line breaks kept), and a horizontal scroll inside the table, never across the page.
WRAP_CSS = (".dataTable{table-layout:auto!important;width:auto!important;margin:0!important}"
            ".dt-layout-table>.dt-layout-cell{overflow-x:auto;max-width:100%}"
            ".dataTable thead th,.dataTable tbody td,.dataTable tfoot th{white-space:nowrap}"
            ".dataTable td.saf-wrap{white-space:pre-wrap!important;overflow-wrap:anywhere}"
            ".dataTable tbody td{vertical-align:top!important}"
            ".dataTable caption{text-align:left!important;font-weight:600}"
            ".dataTable tbody td:not(.dt-type-numeric),.dataTable thead th:not(.dt-type-numeric)"
            "{text-align:left!important}")
#: Line length (characters) of a wrapped column: at most this, fewer for shorter texts.
WRAP_CHARS = 48

_INITIALISED = False


def _prepare(df: Any) -> Any:
    """Floats rounded to 4 significant digits (numbers stay numbers: they sort as numbers)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype.kind == "f":
            out[col] = [None if x is None or not math.isfinite(x) else float(f"{x:.4g}")
                        for x in out[col]]
    return out


def _options(df: Any, caption: str | None, wrap: Iterable[str], filters: bool,
             hideable: bool, page_length: int, options: Mapping[str, Any]) -> dict[str, Any]:
    cols = list(map(str, df.columns))
    wrap_idx = [cols.index(c) for c in wrap if c in cols]
    opts: dict[str, Any] = {
        "caption": caption, "classes": "display compact cell-border", "maxBytes": 0,
        "maxColumns": 0, "showIndex": False, "format_floats_in_python": False,
        "pageLength": page_length, "lengthMenu": [5, 10, 25, 100, -1], "autoWidth": False,
        "css": WRAP_CSS, "allow_html": False,
        "layout": {"topStart": "pageLength", "topEnd": "search",
                   "bottomStart": "info", "bottomEnd": "paging"},
    }
    opts["layout"]["top2Start"] = {"buttons": (["colvis"] if hideable else [])
                                   + [csv_button(caption)]}
    if filters:  # below the table: the header keeps the column names (sorting, colvis menu)
        opts["column_filters"] = "footer"
    if wrap_idx:
        opts["columnDefs"] = [{"targets": [i], "className": "saf-wrap",
                               "width": wrap_width(df[df.columns[i]], cols[i])}
                              for i in wrap_idx]
    opts.update(options)
    return opts


def csv_button(caption: str | None) -> dict[str, Any]:
    """DataTables Buttons' CSV export (bundled with itables, no network): the rows the
    filters leave, every column, the file named after the caption."""
    name = re.sub(r"[^a-z0-9]+", "-", html.unescape(caption or "table").lower()).strip("-")
    return {"extend": "csvHtml5", "text": "Download CSV", "filename": name[:60] or "table",
            "titleAttr": "the rows shown by the filters, all columns", "footer": False}


def wrap_width(values: Iterable[Any], header: str, chars: int = WRAP_CHARS) -> str:
    """A wrapped column's width (CSS ``em``): its longest line or header, at most ``chars``
    characters (about 0.55 em each), so short texts are not stretched and long ones wrap at a
    readable line length."""
    longest = max((len(line) for v in values if isinstance(v, str) for line in v.splitlines()),
                  default=0)
    n = min(max(longest, len(header) + 2, 8), chars)
    return f"{n * 0.55 + 1:.1f}em"


def table_spec(df: Any, caption: str | None = None, wrap: Iterable[str] = (),
               filters: bool = True, hideable: bool = True, page_length: int = 10,
               **options: Any) -> dict[str, Any]:
    """The table as JSON: ``{"dt_args", "classes", "rows"}`` (no code; cells escaped)."""
    from itables.javascript import get_itables_extension_arguments

    opts = _options(df, caption, wrap, filters, hideable, page_length, options)
    df = _prepare(df)
    dt_args, other = get_itables_extension_arguments(df, **opts)
    dt_args["data_json"] = _keep_line_breaks(df, dt_args["data_json"])
    if dt_args.get("keys_to_be_evaluated"):
        raise ValueError("interactive tables carry no JavaScript code: "
                         f"{dt_args['keys_to_be_evaluated']}")
    if other.get("caption"):
        dt_args["caption"] = esc(other["caption"])
    return {"dt_args": dt_args, "classes": other["classes"], "rows": len(df)}


def _keep_line_breaks(df: Any, data_json: str) -> str:
    """itables formats text cells with pandas, which writes a line break as the two
    characters ``\\n``; text cells are put back as the escaped text itself (its line breaks
    show as lines in a wrapped column)."""
    rows = json.loads(data_json)
    for j, col in enumerate(df.columns):
        values = df[col].tolist()
        if df[col].dtype.kind != "O" or not any(isinstance(v, str) and ("\n" in v or "\t" in v
                                                                     or "\r" in v)
                                                 for v in values):
            continue
        for row, v in zip(rows, values, strict=True):
            if isinstance(v, str):
                row[j] = v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return json.dumps(rows, allow_nan=False)


@lru_cache(maxsize=1)
def _init_html() -> str:
    from itables.javascript import generate_init_offline_itables_html

    return generate_init_offline_itables_html(_bundle_path())


def _bundle_path() -> Path:
    import itables

    return Path(itables.__file__).parent / "html" / "dt_bundle.js"


def show(df: Any, caption: str | None = None, wrap: Iterable[str] = (), filters: bool = True,
         hideable: bool = True, page_length: int = 10, **options: Any) -> None:
    """Display ``df`` as an interactive table (sort, search, per-column filters, hideable
    columns, every row; ``wrap`` columns show long texts whole, wrapped)."""
    global _INITIALISED
    from IPython.display import display
    from itables import to_html_datatable

    if not _INITIALISED:  # the bundle for JupyterLab, once per kernel; pages drop it
        display({"text/html": _init_html(), "text/plain": "", INIT_MIME: {}}, raw=True)
        _INITIALISED = True
    spec = table_spec(df, caption, wrap, filters, hideable, page_length, **options)
    caption = esc(caption) if caption else None
    opts = _options(df, caption, wrap, filters, hideable, page_length, options)
    html = to_html_datatable(_prepare(df), connected=False, **opts)
    plain = f"<interactive table: {len(df)} rows x {len(df.columns)} columns>"
    display({"text/html": html, "text/plain": plain, MIME: spec}, raw=True)


# ------------------------------------------------------------------ pages
def placeholder(table_id: str, spec: Mapping[str, Any]) -> str:
    """What the sanitised page shows where a table goes (filled in by the initialiser)."""
    return (f'<div class="saf-itable" id="{esc(table_id)}"><p class="note">Interactive table '
            f'({int(spec.get("rows", 0))} rows); it needs JavaScript.</p></div>')


def extract(nb: Any) -> dict[str, dict]:
    """Replace the interactive outputs of a notebook node in place: tables become
    :func:`placeholder` HTML, the bundle output disappears. Returns ``{id: spec}``."""
    specs: dict[str, dict] = {}
    for cell in nb.cells:
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data") or {}
            if INIT_MIME in data:
                continue
            if MIME in data:
                table_id = f"saf-itable-{len(specs) + 1}"
                specs[table_id] = data[MIME]
                out["data"] = {"text/html": placeholder(table_id, data[MIME])}
            outputs.append(out)
        if "outputs" in cell:
            cell["outputs"] = outputs
    return specs


#: A CSV cell a spreadsheet would read as a formula: one that starts, after blanks, with
#: ``= + - @``, TAB or CR, unless it is a plain number (a negative number stays a number),
#: gets a leading ``'`` (DataTables' own escape leaves ``+`` and ``-`` live).
CSV_CELL_JS = r"""
const FORMULA=/^\s*[=+\-@\t\r]/,NUMBER=/^\s*-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i;
const csvCell=s=>typeof s==='string'&&FORMULA.test(s)&&!NUMBER.test(s)?"'"+s:s;
"""
INIT_JS = CSV_CELL_JS + """
const bytes=Uint8Array.from(atob(document.getElementById('saf-itables-src').textContent.trim()),
  c=>c.charCodeAt(0));
const url=URL.createObjectURL(new Blob([bytes],{type:'text/javascript'}));
const {ITable,jQuery}=await import(url);URL.revokeObjectURL(url);
const strip=jQuery.fn.dataTable.Buttons.stripData,
  how={stripHtml:true,stripNewlines:true,decodeEntities:true,trim:true},
  safe=d=>csvCell(strip(d,how)),csvFormat={header:safe,footer:safe,body:safe};
function csvSafe(layout){for(const v of Object.values(layout||{}))
  for(const b of (v&&v.buttons)||[])
    if(b&&b.extend==='csvHtml5')b.exportOptions={...b.exportOptions,format:csvFormat};}
const specs=JSON.parse(document.getElementById('saf-itables-data').textContent);
window.safTables={};
for(const [id,spec] of Object.entries(specs)){
  const host=document.getElementById(id);if(!host)continue;
  const table=document.createElement('table');table.className=spec.classes||'display';
  host.replaceChildren(table);const args=spec.dt_args;delete args.keys_to_be_evaluated;
  csvSafe(args.layout);
  const it=new ITable(table,args);window.safTables[id]=it;
  if(it.dt)it.dt.columns().every(function(){const q=this.search(),
    box=this.footer()&&this.footer().querySelector('input');if(q&&box)box.value=q;});}
document.documentElement.dataset.safTables='ready';
"""


def page_layout(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with the page's layout: no measured column widths (``autoWidth`` off) and each
    wrapped column at :func:`wrap_width` of its cells. Applied when a page is written, so a
    notebook executed by an older version renders with the current layout too."""
    args = dict(spec["dt_args"])
    rows = json.loads(args.get("data_json") or "[]")
    head = re.findall(r"<th[^>]*>(.*?)</th>", args.get("table_html", ""), re.S)
    defs = []
    for d in args.get("columnDefs") or []:
        if d.get("className") == "saf-wrap":
            for i in d.get("targets") or []:
                values = [html.unescape(r[i]) for r in rows if i < len(r) and isinstance(r[i], str)]
                name = html.unescape(re.sub("<[^>]+>", "", head[i])) if i < len(head) else ""
                defs.append({**d, "targets": [i], "className": f"saf-wrap saf-col{i}",
                             "width": wrap_width(values, name)})
        else:
            defs.append(d)
    if defs:
        args["columnDefs"] = defs
    args["autoWidth"] = False
    layout = dict(args.get("layout") or {})
    buttons = list((layout.get("top2Start") or {}).get("buttons") or [])
    if not any(isinstance(b, dict) and b.get("extend") == "csvHtml5" for b in buttons):
        caption = re.sub("<[^>]+>", "", str(args.get("caption") or ""))
        layout["top2Start"] = {"buttons": [*buttons, csv_button(caption)]}
        args["layout"] = layout
    return {**spec, "dt_args": args}


def _layout_css(table_id: str, spec: Mapping[str, Any]) -> str:
    """The wrapped columns' widths as CSS (``min-width`` on their cells: the table scrolls
    instead of squeezing them)."""
    out = []
    for d in spec["dt_args"].get("columnDefs") or []:
        m = re.fullmatch(r"saf-wrap saf-col(\d+)", str(d.get("className")))
        if m and re.fullmatch(r"\d+(\.\d+)?em", str(d.get("width"))):
            out.append(f"#{esc(table_id)} .saf-col{m.group(1)}{{min-width:{d['width']};"
                       f"width:{d['width']}}}")
    return "".join(out)


def page_assets(specs: Mapping[str, Mapping[str, Any]],
                scrub: Callable[[str], str] = lambda s: s) -> str:
    """The HTML appended to a page with interactive tables: the data (JSON, paths scrubbed,
    escaped into a hidden ``<div>``), the bundled DataTables (CSS and base64 JS) and the
    fixed initialiser. Empty when there is no table."""
    if not specs:
        return ""
    bundle = _bundle_path()
    src = base64.b64encode(bundle.read_bytes()).decode("ascii")
    css = bundle.with_suffix(".css").read_text(encoding="utf-8").replace("</", "<\\/")
    specs = {k: page_layout(v) for k, v in specs.items()}
    data = scrub(json.dumps(specs, ensure_ascii=False))
    widths = "".join(_layout_css(k, v) for k, v in specs.items())
    return (f'<div hidden id="saf-itables-data">{esc(data)}</div>'
            f'<div hidden id="saf-itables-src">{src}</div>'
            f"<style>{css}\n{WRAP_CSS}\n{widths}\n.saf-itable{{margin:.6em 0}}"
            ".dt-container .dt-search input{max-width:10em}"
            "tfoot input{width:100%;min-width:3em;box-sizing:border-box}</style>"
            f'<script type="module">{INIT_JS}</script>')


def read_page_tables(text: str) -> dict[str, dict]:
    """The table specs embedded in a page by :func:`page_assets` (``{}`` if none), with each
    table's rows decoded under ``"data"`` (for tests and tools)."""
    m = re.search(r'<div hidden id="saf-itables-data">(.*?)</div>', text, re.S)
    if not m:
        return {}
    specs = json.loads(html.unescape(m.group(1)))
    for spec in specs.values():
        spec["data"] = json.loads(spec["dt_args"].get("data_json") or "[]")
    return specs
