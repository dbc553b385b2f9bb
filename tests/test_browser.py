"""The pages of a smoke run in a real browser (headless Chromium, network off): the
interactive tables render, sort and filter, and nothing is fetched from the network.

Skips where Chromium is missing (``apt-get install chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import json

import pytest

from saf_utils.reporting import pages
from tests.browser import Browser, find_chromium

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine: install "
                       "Debian's chromium package (.ci/run does) to run the browser test"),
]
READY = "document.documentElement.dataset.safTables === 'ready'"


@pytest.fixture(scope="module")
def browser():
    b = Browser(CHROMIUM)
    yield b
    b.close()


def _tables(b: Browser) -> dict:
    return b.js("""({placeholders: document.querySelectorAll('.saf-itable').length,
        rendered: document.querySelectorAll('.saf-itable table.dataTable').length,
        ids: Object.keys(window.safTables)})""")


def _head(b: Browser, tid: str) -> list[str]:
    return b.js(f"""window.safTables['{tid}'].dt.columns().titles().toArray()""")


def _sort(b: Browser, tid: str, col: int) -> dict:
    """Click a column's sort control; the column's values in display order."""
    return b.js(f"""(async () => {{
        const t = window.safTables['{tid}'].dt, th = t.column({col}).header();
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
        const t = window.safTables['{tid}'].dt, total = t.rows({{search: 'applied'}}).count();
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
                  and pages.record_what(r)[0] == "headline" for r in records)
    shown = browser.js("window.safTables['results'].dt.rows({search: 'applied'}).count()")
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
    assert browser.js(f"window.safTables['results'].dt.column({ci_low}).visible()") is False
    browser.js("document.querySelector('.buttons-colvis').click()")
    browser.wait("document.querySelector('.dt-button-collection')")
    browser.js("""Array.from(document.querySelectorAll('.dt-button-collection button'))
        .find(b => b.textContent.trim() === 'ci_low').click()""")
    assert browser.js(f"window.safTables['results'].dt.column({ci_low}).visible()") is True
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
    assert white == "pre-wrap"  # long texts wrapped, not cut
    assert not browser.exceptions and not browser.network(), (browser.exceptions,
                                                               browser.network())


def test_index_page_loads_offline(smoke_run, browser):
    run, _ = smoke_run
    browser.open(run / "index.html")
    assert browser.js("document.querySelectorAll('table').length") >= 2
    assert browser.js("document.body.textContent.includes('SAF (short answer feedback)')")
    assert not browser.exceptions and not browser.network(), (browser.exceptions,
                                                               browser.network())
