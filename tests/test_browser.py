"""The pages of a smoke run in a real browser (headless Chromium, network off): the
interactive tables render, sort and filter, and nothing is fetched from the network.

Skips where Chromium is missing (``apt-get install chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import csv
import json
import time

import pytest

from notebook_reports import results_page
from tests.browser import Browser, find_chromium

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine: install "
                       "Debian's chromium package (.ci/run does) to run the browser test"),
]
#: every interactive table of the page (itables' own output) is drawn by DataTables
READY = ("document.readyState === 'complete' && location.protocol === 'file:' && "
         "Array.from(document.querySelectorAll('.saf-itable table[id]'))"
         ".every(t => t.classList.contains('dataTable'))")
#: DataTables' API of a table: ``API('results')`` (itables' offline bundle, a module)
API = ("(await window[Object.keys(window).find(k => /^_itables_\\d/.test(k))])"
       ".jQuery('#' + {}).DataTable()")


def api(tid: str) -> str:
    return API.format(json.dumps(tid))


@pytest.fixture(scope="module")
def browser():
    b = Browser(CHROMIUM)
    yield b
    b.close()


def _tables(b: Browser) -> dict:
    return b.js("""({placeholders: document.querySelectorAll('div.saf-itable').length,
        rendered: document.querySelectorAll('.saf-itable table.dataTable').length,
        ids: Array.from(document.querySelectorAll('.saf-itable table.dataTable[id]'))
          .map(t => t.id)})""")


def _head(b: Browser, tid: str) -> list[str]:
    return b.js(f"""(async () => {api(tid)}.columns().titles().toArray())()""")


def _sort(b: Browser, tid: str, col: int) -> dict:
    """Click a column's sort control; the column's values in display order."""
    return b.js(f"""(async () => {{
        const t = {api(tid)}, th = t.column({col}).header();
        (th.querySelector('.dt-column-order') || th).click();
        await new Promise(r => setTimeout(r, 400));
        const shown = Array.from(document.querySelectorAll('#{tid} tbody tr')).map(
            tr => tr.children.length);
        return {{order: t.order(), rows: shown.length,
                 values: t.column({col}, {{search: 'applied', order: 'applied'}}).data()
                          .toArray().filter(v => typeof v === 'number')}};
    }})()""")


def _filter(b: Browser, tid: str, col: int, text: str) -> dict:
    """Type into a column's filter box; row counts before and after, the values left."""
    return b.js(f"""(async () => {{
        const t = {api(tid)}, total = t.rows({{search: 'applied'}}).count();
        const input = t.column({col}).footer().querySelector('input');
        input.value = {json.dumps(text)};
        input.dispatchEvent(new KeyboardEvent('keyup', {{bubbles: true}}));
        await new Promise(r => setTimeout(r, 400));
        return {{total, n: t.rows({{search: 'applied'}}).count(),
                 dom: document.querySelectorAll('#{tid} tbody tr').length,
                 values: t.column({col}, {{search: 'applied'}}).data().toArray().map(String)}};
    }})()""")


def _check_sort(res: dict, col: int) -> None:
    assert res["rows"] > 0 and res["order"][0][0] == col, res["order"]
    vals = res["values"]
    try:  # numbers (results.html keeps them as text) sort as numbers
        key = [float(v) if v else float("-inf") for v in vals]
    except ValueError:
        key = vals
    assert key == sorted(key, reverse=res["order"][0][1] == "desc"), vals[:10]


def test_results_page_default_view_sort_filter_and_columns(smoke_run, browser):
    run, code = smoke_run
    assert code == 0
    browser.open(run / "results.html", READY)
    assert _tables(browser)["rendered"] == 1
    records = json.loads((run / "metrics.json").read_text())["records"]
    head = _head(browser, "results")
    assert head[:8] == ["system", "split", "metric", "scale", "what", "value", "CI", "p"]
    default = sum(r.get("kind", "result") == "result" and str(r["split"]).startswith("test")
                  and results_page.record_what(r)[0] == "headline" for r in records)
    shown = browser.js(f"(async () => {api('results')}.rows({{search: 'applied'}}).count())()")
    assert shown == default > 0  # the default view: each headline of the test splits once
    boxes = browser.js("""Array.from(document.querySelectorAll('#results tfoot input'))
        .map(i => [i.placeholder, i.value]).filter(p => p[1])""")
    assert sorted(boxes) == [["kind", "result"], ["split", "test"], ["what", "headline"]]
    _check_sort(_sort(browser, "results", head.index("value")), head.index("value"))
    metric = next(r["metric"] for r in records if r.get("kind") == "result"
                  and str(r["split"]).startswith("test"))
    res = _filter(browser, "results", head.index("metric"), metric)
    assert 0 < res["n"] < res["total"] and res["dom"] > 0
    assert all(metric in v for v in res["values"])
    # hideable columns: ci_low starts hidden, the column-visibility menu shows it
    ci_low = head.index("ci_low")
    visible = f"(async () => {api('results')}.column({ci_low}).visible())()"
    assert browser.js(visible) is False
    browser.js("document.querySelector('.buttons-colvis').click()")
    browser.wait("document.querySelector('.dt-button-collection')")
    browser.js("""Array.from(document.querySelectorAll('.dt-button-collection button'))
        .find(b => b.textContent.trim() === 'ci_low').click()""")
    assert browser.js(visible) is True
    assert not browser.exceptions and not browser.network(), (browser.exceptions,
                                                               browser.network())


def test_notebook_page_answer_browser_renders_sorts_and_filters(smoke_run, browser):
    run, code = smoke_run
    browser.open(run / "01_data_exploration.html", READY)
    tables = _tables(browser)
    assert tables["placeholders"] == tables["rendered"] >= 3
    tid = next(t for t in tables["ids"] if "label" in _head(browser, t))  # the answer browser
    head = _head(browser, tid)
    _check_sort(_sort(browser, tid, head.index("score")), head.index("score"))
    res = _filter(browser, tid, head.index("label"), "Incorrect")
    assert 0 < res["n"] < res["total"] and set(res["values"]) == {"Incorrect"}
    white = browser.js(f"""getComputedStyle(document.querySelector(
        '#{tid} tbody td.saf-wrap')).whiteSpace""")
    assert white in ("normal", "pre-wrap")  # long texts wrapped, not cut
    assert not browser.exceptions and not browser.network(), (browser.exceptions,
                                                               browser.network())


def test_index_page_loads_offline(smoke_run, browser):
    run, _ = smoke_run
    browser.open(run / "index.html")
    assert browser.js("document.querySelectorAll('table').length") >= 2
    assert browser.js("document.body.textContent.includes('SAF (short answer feedback)')")
    assert not browser.exceptions and not browser.network(), (browser.exceptions,
                                                               browser.network())


# ------------------------------------------------------------------ layout, chrome, downloads
WIDTH = 1400  # the window the layout is measured in
LAYOUT = """(async () => {
  const out = [], {jQuery} = await window[Object.keys(window).find(k => /^_itables_\\d/.test(k))];
  for (const table of document.querySelectorAll('.saf-itable table.dataTable[id]')) {
    const id = table.id, dt = jQuery(table).DataTable();
    dt.page.len(100).draw();
    await new Promise(r => setTimeout(r, 100));
    const heads = Array.from(table.querySelectorAll('thead th')).filter(c => c.offsetParent);
    const cells = heads.concat(Array.from(table.querySelectorAll('tbody td'))
      .filter(c => c.offsetParent && !c.classList.contains('dt-empty')));
    const w = c => c.getBoundingClientRect().width;
    const overlap = [];
    for (let i = 0; i + 1 < heads.length; i++) {
      const a = heads[i].getBoundingClientRect(), b = heads[i + 1].getBoundingClientRect();
      if (a.right > b.left + 0.5) overlap.push([heads[i].textContent, heads[i + 1].textContent]);
    }
    const literal = [];
    for (const row of dt.rows().data().toArray())
      for (const v of (Array.isArray(row) ? row : Object.values(row)))
        if (typeof v === 'string' && v.includes('\\\\n')) literal.push(v.slice(0, 60));
    out.push({id, columns: heads.length, cells: cells.length,
      narrow: cells.filter(c => w(c) < 40).map(c => [c.textContent.slice(0, 30),
                                                    Math.round(w(c))]),
      overflowing: heads.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent),
      overlap, literal: literal.slice(0, 3)});
  }
  return {tables: out, page_scroll: document.documentElement.scrollWidth - window.innerWidth};
})()"""


def _pages_with_tables(run) -> list:
    return [p for p in sorted(run.glob("*.html")) if 'class="saf-itable"' in p.read_text()]


def test_every_interactive_table_reads_in_the_page(smoke_run, browser):
    """In 05 eight columns once were 11 px wide and overprinted, 01's header overlapped
    (``error_clas|id``), 06 showed literal ``\\n``. At 1,400 px, for every interactive table
    of the run: no header or body cell under 40 px, no header cells overlapping or
    overflowing, no literal ``\\n`` in any cell, and the page itself does not scroll sideways
    (only the table does)."""
    run, _ = smoke_run
    browser.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=1000,
                 deviceScaleFactor=1, mobile=False)
    pages = _pages_with_tables(run)
    assert {"results.html", "01_data_exploration.html", "05_saf_error_analysis.html",
            "06_argscichat_error_analysis.html"} <= {p.name for p in pages}
    n = 0
    for p in pages:
        browser.open(p, READY)
        res = browser.js(LAYOUT)
        for t in res["tables"]:
            n += 1
            where = f"{p.name} #{t['id']}"
            assert t["cells"] > t["columns"] > 0, where
            assert not t["narrow"], (where, t["narrow"][:5])
            assert not t["overlap"] and not t["overflowing"], (where, t["overlap"],
                                                               t["overflowing"])
            assert not t["literal"], (where, t["literal"])
        assert res["page_scroll"] <= 1, (p.name, res["page_scroll"])
        assert not browser.exceptions and not browser.network(), (p.name, browser.exceptions)
    assert n >= 6


#: Elements of the page whose content is wider than their box, where that does not show: not
#: a scroll box (content cut or spilling over), or one whose scrollbar takes no room (an
#: overlay scrollbar, invisible until the reader happens to scroll).
HIDDEN_OVERFLOW = """(() => {
  const bad = [];
  for (const el of document.querySelectorAll('main *')) {
    if (!el.checkVisibility() || el.scrollWidth <= el.clientWidth + 1) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'inline' || el.closest('svg')) continue;
    const bar = el.offsetHeight - el.clientHeight - parseFloat(cs.borderTopWidth)
      - parseFloat(cs.borderBottomWidth);
    if (!(['auto', 'scroll'].includes(cs.overflowX) && bar > 0))
      bad.push([el.tagName, String(el.className).slice(0, 40), el.scrollWidth, el.clientWidth,
                cs.overflowX]);
  }
  return bad;
})()"""


@pytest.mark.parametrize("width", [WIDTH, 390])
def test_no_table_overflows_its_box_invisibly(smoke_run, browser, width):
    """Tables wider than their column (02's headline and difference tables, 05's worst
    examples, 06's per-property tables were 1,700-4,300 px in 1,255) scroll in a box whose
    scrollbar shows, or wrap; nothing is cut or hidden behind an overlay scrollbar."""
    run, _ = smoke_run
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=1000,
                 deviceScaleFactor=1, mobile=width < 500)
    try:
        for p in sorted(run.glob("*.html")):
            browser.open(p, READY)
            assert not browser.js(HIDDEN_OVERFLOW), (p.name, width, browser.js(HIDDEN_OVERFLOW))
    finally:
        browser.send("Emulation.clearDeviceMetricsOverride")


def test_every_page_has_the_run_navigation_and_a_table_of_contents(smoke_run, browser):
    run, _ = smoke_run
    pages = sorted(run.glob("*.html"))
    notebooks = [p.name for p in pages if p.name[0].isdigit()]
    assert {"index.html", "results.html", "metric-cards.html"} <= {p.name for p in pages}
    for p in pages:
        browser.open(p)
        nav = browser.js("""(() => { const n = document.querySelector('nav.saf-nav');
            if (!n) return null;
            return {links: Array.from(n.querySelectorAll(':scope > a, :scope > span > a'))
                      .map(a => a.getAttribute('href')),
                    here: n.querySelector('.here')?.textContent,
                    toc: Array.from(n.querySelectorAll('.saf-toc a')).map(
                      a => a.getAttribute('href').slice(1)),
                    top: n.getBoundingClientRect().top}; })()""")
        assert nav is not None, p.name
        links = set(nav["links"]) | {p.name}
        assert {"index.html", "results.html", "metric-cards.html", *notebooks} <= links, (
            p.name, nav["links"])
        assert all((run / h).is_file() for h in nav["links"]), nav["links"]
        assert nav["here"], p.name  # the current page is marked, not linked
        assert browser.js("window.scrollTo(0, 3000), window.scrollY < 100 ? 0 : "
                          "document.querySelector('nav.saf-nav').getBoundingClientRect().top"
                          ) <= 1  # sticky: stays in view on a page long enough to scroll
        if p.name in ("index.html", *notebooks):
            assert len(nav["toc"]) >= 3, (p.name, nav["toc"])
        missing = [h for h in nav["toc"] if not browser.js(  # raw id, else percent-decoded
            f"!!(document.getElementById({json.dumps(h)}) || "
            f"document.getElementById(decodeURIComponent({json.dumps(h)})))")]
        assert not missing, (p.name, missing)
    compare = sorted(run.glob("compare*.html"))
    if compare:  # a compare page is linked from the index
        assert compare[0].name in (run / "index.html").read_text()


def test_notebook_pages_fold_code_and_collect_warnings(smoke_run, browser):
    run, _ = smoke_run
    browser.open(run / "01_data_exploration.html", READY)
    first = ("Array.from(document.querySelectorAll('details.saf-code'))"  # a cell with output
             ".find(d => d.checkVisibility())")
    state = browser.js(f"""(() => {{ const d = Array.from(document.querySelectorAll(
        'details.saf-code'));
        return {{n: d.length, open: d.filter(x => x.open).length,
                code: {first}.querySelector('.jp-InputArea').checkVisibility()}}; }})()""")
    assert state["n"] > 5 and state["open"] == 0 and state["code"] is False  # folded
    browser.js(f"{first}.querySelector('summary').click()")
    assert browser.js(f"{first}.querySelector('.jp-InputArea').checkVisibility()") is True
    browser.js("document.getElementById('saf-code-toggle').click()")
    assert browser.js("Array.from(document.querySelectorAll('details.saf-code'))"
                      ".every(d => d.open)")
    for p in sorted(run.glob("[0-9]*.html")):
        text = p.read_text()
        assert 'data-mime-type="application/vnd.jupyter.stderr"' not in text, p.name
        assert text.count('<details class="saf-warnings">') <= 1, p.name


def test_csv_download_of_an_interactive_table(smoke_run, browser, tmp_path):
    """The bundled DataTables Buttons CSV export: a real download, offline."""
    run, _ = smoke_run
    browser.open(run / "results.html", READY)
    browser.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(tmp_path))
    shown = browser.js(f"(async () => {api('results')}.rows({{search: 'applied'}}).count())()")
    browser.js("document.querySelector('#results_wrapper .buttons-csv').click()")
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob("*.csv")) and time.monotonic() < deadline:
        time.sleep(0.2)
    files = list(tmp_path.glob("*.csv"))
    assert files, "no CSV downloaded"
    rows = list(csv.reader(files[0].open(encoding="utf-8-sig")))
    assert rows[0][:3] == ["system", "split", "metric"] and "value" in rows[0]
    assert len(rows) - 1 == shown > 0 and "ci_low" in rows[0]  # filtered rows, all columns
    assert not browser.network()


def test_every_table_csv_download_of_a_run_carries_no_live_formula(smoke_run, browser,
                                                                     tmp_path):
    """Each interactive table of every page of the run, downloaded as CSV: no cell a
    spreadsheet would run (= + - @ TAB CR first, also after blanks), numbers kept."""
    run, _ = smoke_run
    browser.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(tmp_path))
    n = 0
    for p in _pages_with_tables(run):
        browser.open(p, READY)
        for tid in _tables(browser)["ids"]:
            rows = _download_csv(browser, f"#{tid}_wrapper .buttons-csv", tmp_path)
            live = [c for r in rows for c in r if c.lstrip().startswith(tuple("=+-@\t\r"))
                    and not _number(c)]
            assert not live, (p.name, tid, live[:5])
            n += 1
    assert n >= 6 and not browser.network()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lstrip("-")[:1].isdigit() or text.strip().startswith("-.")


def test_metric_cards_are_generated_and_linked_from_headers(smoke_run, browser):
    from saf_utils.metrics import METRICS

    run, _ = smoke_run
    browser.open(run / "metric-cards.html")
    ids = browser.js("Array.from(document.querySelectorAll('div.card')).map(s => s.id)")
    assert set(ids) == set(METRICS)
    fields = browser.js("Array.from(document.querySelectorAll('#fact_f1 th'))"
                        ".map(t => t.textContent)")
    assert fields == ["definition", "range", "direction", "level", "resampling",
                      "implementation", "reference"]
    assert all(METRICS[m].definition and METRICS[m].reference for m in METRICS)
    browser.open(run / "index.html")
    linked = browser.js("Array.from(document.querySelectorAll('th a.saf-metric'))"
                        ".map(a => a.getAttribute('href'))")
    assert "metric-cards.html#fact_f1" in linked
    assert all(h.split("#")[1] in ids for h in linked)


FORMULAS = ["=1+1", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1,1)", "\t=1",
            " +SUM(1,1)", "plain", "-0.25"]
SCORES = [-1.5, 2, -3, 0.25, 1, 2, 3, -4]


def _download_csv(b: Browser, button: str, folder) -> list[list[str]]:
    before = set(folder.glob("*.csv"))
    b.js(f"document.querySelector({json.dumps(button)}).click()")
    deadline = time.monotonic() + 20
    while not set(folder.glob("*.csv")) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    new = set(folder.glob("*.csv")) - before
    assert new, f"no CSV downloaded from {button}"
    time.sleep(0.3)  # the download is written in one go, but give it a moment
    return list(csv.reader(new.pop().open(encoding="utf-8-sig", newline="")))


def test_csv_downloads_carry_no_live_formula(browser, tmp_path):
    """Every table's Download CSV: a cell a spreadsheet would run (= + - @ TAB CR, also after
    blanks) starts with ', a number (negative too) stays a number."""
    import pandas as pd

    from notebook_reports import pages, tables

    frame = pd.DataFrame({"text": FORMULAS, "score": SCORES})
    specs = {"t1": tables.html(frame, caption="first", table_id="t1"),
             "t2": tables.html(frame.rename(columns={"text": "=HEAD()"}), caption="second",
                               table_id="t2")}
    page = tmp_path / "p.html"
    page.write_text(pages.page("csv", list(specs.values())), encoding="utf-8")
    browser.open(page, READY)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
    for tid in specs:
        rows = _download_csv(browser, f"#{tid}_wrapper .buttons-csv", downloads)
        leads = tuple("=+-@\t\r")
        assert not [c for r in rows for c in r if c.lstrip().startswith(leads)
                    and not c.lstrip("-").replace(".", "", 1).isdigit()], rows
        want = {("'" if c.strip()[0] in "=+-@" and c != "-0.25" else "") + c.strip(): v
                for c, v in zip(FORMULAS, SCORES, strict=True)}
        assert {r[0]: float(r[1]) for r in rows[1:]} == want, rows
    assert not browser.network() and not browser.exceptions


# ------------------------------------------------------------------ what a table hides, says so
#: Per interactive table whose scroll box is wider than its box (every row shown): its box's
#: height, whether its scrollbar takes room, and the window's height.
WIDE_BOXES = """(async () => {
  const {jQuery} = await window[Object.keys(window).find(k => /^_itables_\\d/.test(k))];
  const out = [];
  for (const table of document.querySelectorAll('.saf-itable table.dataTable[id]')) {
    jQuery(table).DataTable().page.len(-1).draw();
    await new Promise(r => setTimeout(r, 50));
    const box = table.closest('.dt-layout-cell');
    if (!box || box.scrollWidth <= box.clientWidth + 1) continue;
    out.push({id: table.id, height: Math.round(box.getBoundingClientRect().height),
              bar: box.offsetHeight - box.clientHeight, window: window.innerHeight});
  }
  return out;
})()"""


@pytest.mark.parametrize("width", [WIDTH, 390])
def test_a_table_wider_than_its_box_shows_its_scrollbar_at_its_edge(smoke_run, browser, width):
    """A reader who sees a table's first rows sees that it has more columns: an interactive
    table wider than its box is at most a window high (its header sticks), so its scrollbar,
    which takes room, is on screen at the box's edge while the table is; not 100 rows below.
    At 390 px some table is wider than its box (the check is not vacuous)."""
    run, _ = smoke_run
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=800,
                 deviceScaleFactor=1, mobile=width < 500)
    try:
        wide = []
        for p in _pages_with_tables(run):
            browser.open(p, READY)
            wide += [(p.name, b) for b in browser.js(WIDE_BOXES)]
        bad = [(name, b) for name, b in wide if b["height"] > b["window"] or b["bar"] <= 0]
        assert not bad, (width, bad[:5])
        assert wide or width == WIDTH
    finally:
        browser.send("Emulation.clearDeviceMetricsOverride")


@pytest.mark.parametrize("width", [WIDTH, 390])
def test_the_contents_menu_stays_inside_the_window(smoke_run, browser, width):
    """Opened, the Contents menu of every page lies inside the window: at 390 px it once
    started at the menu's left edge and ran off the right one. Its entries cut for length
    end in "…" (their full text on hover)."""
    run, _ = smoke_run
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=800,
                 deviceScaleFactor=1, mobile=width < 500)
    try:
        for p in sorted(run.glob("*.html")):
            browser.open(p)
            if not browser.js("!!document.querySelector('.saf-toc li')"):
                continue
            box = browser.js("""(async () => {
                const d = document.querySelector('.saf-toc'); d.open = true;
                await new Promise(r => setTimeout(r, 100));
                const r = d.querySelector('ol').getBoundingClientRect();
                const cut = Array.from(d.querySelectorAll('li a')).filter(
                    a => a.title && a.title !== a.textContent).map(a => a.textContent);
                return {left: r.left, right: r.right, width: document.documentElement.clientWidth,
                        cut}; })()""")
            assert 0 <= box["left"] and box["right"] <= box["width"], (p.name, width, box)
            assert all(t.endswith("…") for t in box["cut"]), (p.name, box["cut"])
    finally:
        browser.send("Emulation.clearDeviceMetricsOverride")


def test_text_cut_for_a_legend_ends_in_an_ellipsis(smoke_run, browser):
    """05's question legend gives each question id its text, cut for length: a cut text ends
    in "…" and starts as the question does; an uncut one is the whole question."""
    import gzip

    run, _ = smoke_run
    questions = {json.loads(line).get("cluster")  # SAF items' cluster: the question
                 for line in gzip.open(run / "02_baseline_finetuning" / "items.jsonl.gz", "rt",
                                       encoding="utf-8")}
    browser.open(run / "05_saf_error_analysis.html", READY)
    cells = browser.js("""Array.from(document.querySelectorAll('table')).filter(t =>
        Array.from(t.querySelectorAll('thead th')).at(-1)?.textContent.trim() === 'question')
        .flatMap(t => Array.from(t.querySelectorAll('tbody tr')).map(tr =>
          tr.lastElementChild.textContent.trim()))""")
    assert cells
    for text in cells:
        if text not in questions:
            assert text.endswith("…"), text
            assert any(q.startswith(text[:-1].rstrip()) for q in questions if q), text


def test_a_long_unbroken_text_cell_renders_fast_with_the_rest_on_demand(browser, tmp_path):
    """A 1 MB answer without spaces once took 231 s to lay out in a page's browser: a text
    cell with a long unbroken run shows its start with "…", the rest on demand, and the page
    with it (opened, too) renders in seconds."""
    import pandas as pd

    from notebook_reports import pages, tables

    frame = pd.DataFrame({"answer": ["x" * 1_000_000, "a short answer"], "score": [1, 2]})
    page = tmp_path / "long.html"
    page.write_text(pages.page("long", [tables.html(frame, caption="long", table_id="long",
                                                    wrap=["answer"])]), encoding="utf-8")
    t0 = time.monotonic()
    browser.open(page, READY)
    shown = browser.js("""(() => { const c = document.querySelector('#long tbody td');
        return {text: c.querySelector('summary')?.textContent ?? c.textContent.slice(0, 300),
                width: c.getBoundingClientRect().width}; })()""")
    assert "…" in shown["text"] and "1,000,000 characters" in shown["text"]
    browser.js("document.querySelector('#long details.saf-long').open = true, "
               "document.body.getBoundingClientRect().height")
    assert time.monotonic() - t0 < 20
    full = browser.js("document.querySelector('#long details.saf-long').textContent.length")
    assert full >= 1_000_000  # the whole text is there, on demand
    assert not browser.exceptions and not browser.network()
