"""The chrome of a run's pages without a browser: navigation bar, table of contents, folded
code, the warnings box, metric cards and their header links, downloads."""

from __future__ import annotations

import json

import nbformat
import pytest

from notebook_reports import chrome, metric_cards, pages
from notebook_reports.sharing import listing
from saf_utils.metrics import METRICS
from tests.test_sharing import PAYLOADS, PNG, unsafe_markup


def _run(tmp_path, notebooks=("01_a", "02_b")):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(
        {"run": "r<1>", "notebooks": [{"name": n} for n in notebooks]}))
    return run


def test_bar_links_every_page_of_the_run_and_refresh_updates_it(tmp_path):
    run = _run(tmp_path)
    (run / "01_a.html").write_text("<html><body><h1 id='t'>T</h1></body></html>")
    text = pages.page("p", "<h1 id='t'>T</h1>", run_dir=run, current="01_a.html")
    assert text.count('<nav class="saf-nav"') == 1 and "Run r&lt;1&gt;" in text
    assert '<span class="here" title="01_a">01</span>' in text  # current page: not a link
    assert '<span class="pending" title="02_b (not rendered)">02</span>' in text
    assert '<a href="index.html">index</a>' in text and chrome.CARDS_PAGE in text
    assert 'href="how-to-read.html"' in text
    assert 'class="saf-toc"' in text  # filled from the page's headings in the browser
    (run / "01_a.html").write_text(text)
    (run / "02_b.html").write_text("<html><body></body></html>")
    (run / "compare-base.html").write_text("<html><body></body></html>")
    chrome.refresh(run)
    again = (run / "01_a.html").read_text()
    assert again.count("<nav") == 1 and chrome.without_bar(again) == chrome.without_bar(text)
    assert '<a href="02_b.html" title="02_b">02</a>' in again
    assert '<a href="compare-base.html" title="compare-base">base</a>' in again
    # nbconvert re-serialises notebook pages and may put aria-label before class: the bar of
    # such a page is found and rewritten all the same
    (run / "01_a.html").write_text(again.replace('<nav class="saf-nav" aria-label="run">',
                                                 '<nav aria-label="run" class="saf-nav">'))
    (run / "03_c.html").write_text("<html><body></body></html>")
    chrome.refresh(run)
    third = (run / "01_a.html").read_text()
    assert third.count("<nav") == 1 and '<a href="03_c.html" title="03_c">03</a>' in third


def test_refresh_updates_the_cards_page(tmp_path):
    run = _run(tmp_path)
    metric_cards.write_cards(run / chrome.CARDS_PAGE, run)
    (run / "02_b.html").write_text("<html><body></body></html>")
    chrome.refresh(run)
    cards = (run / chrome.CARDS_PAGE).read_text()
    assert all(f'id="{m}"' in cards for m in METRICS) and "Run r&lt;1&gt;" in cards
    assert 'href="02_b.html"' in cards and not unsafe_markup(cards)
    glossary = (run / chrome.HOW_TO_READ).read_text()
    assert '<nav class="saf-nav"' in glossary and "<h1" in glossary
    # the index links terms as how-to-read.html#<term>: the anchors are elements, not text
    assert '<a id="reportable"></a>' in glossary and "&lt;a id" not in glossary


def test_metric_cards_carry_every_field_from_the_spec():
    for m in METRICS.values():
        assert m.definition and m.implementation and m.reference, m.name
    body = metric_cards.cards_body({"fact_f1"})
    assert body.index('id="fact_f1"') < body.index('id="accuracy"')  # the run's metrics first
    card = metric_cards.card(METRICS["mse"])
    assert "lower is better" in card and "0 or more" in card and "mse_items" in card


def test_table_headers_that_name_a_metric_link_to_its_card():
    text = chrome.link_metric_headers("<th>fact_f1</th><th>fact_f1_x</th><th>system</th>"
                                      "<th>bertscore_f1 (0-1)</th><td>accuracy</td>")
    assert '<th><a class="saf-metric" href="metric-cards.html#fact_f1"' in text
    assert "<th>fact_f1_x</th>" in text and "<td>accuracy</td>" in text
    assert 'href="metric-cards.html#bertscore_f1"' in text


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    head = nbformat.v4.new_markdown_cell("# Title\n## Data")
    code = nbformat.v4.new_code_cell("x = 1\nprint(x)", execution_count=1)
    code.outputs = [nbformat.v4.new_output("stream", name="stderr",
                                           text=f"warn {PAYLOADS[0]} {path.parent}/f.py\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    code.outputs += [  # figures: the alt text IPython's Image(alt=...) writes, else neutral
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "f"},
                               metadata={"image/png": {"alt": "Label share per split <b>"}}),
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "f"})]
    again = nbformat.v4.new_code_cell("y = 2", execution_count=2)
    again.outputs = [nbformat.v4.new_output("stream", name="stderr",
                                            text=f"warn {PAYLOADS[0]} {path.parent}/f.py\n"),
                     nbformat.v4.new_output("stream", name="stderr", text="50%\r100%\n")]
    nb.cells = [head, code, again]
    nbformat.write(nb, path)


@pytest.mark.slow  # two nbconvert renders (~2-5 s)
def test_notebook_page_folds_code_and_collects_warnings_into_one_box(tmp_path):
    run = _run(tmp_path, ("01_a",))
    _notebook(run / "01_a.ipynb")
    text = pages.render_notebook(run / "01_a.ipynb").read_text()
    assert text.count('<details class="saf-code">') == 2 and "saf-code-toggle" in text
    assert text.count('<details class="saf-warnings">') == 1
    box = text.split('<details class="saf-warnings">')[1].split("</details>")[0]
    assert "warnings (3 messages" in box and "(2×)" in box and "Data (cell 1)" in box
    assert "100%" in box and "50%" not in box  # a progress bar: its last state
    assert "$RUN/f.py" in box and str(run) not in text and not unsafe_markup(text)
    assert 'data-mime-type="application/vnd.jupyter.stderr"' not in text  # none in the cells
    assert 'id="Title"' in text and 'class="saf-toc"' in text  # contents menu
    assert 'alt="Label share per split &lt;b&gt;"' in text and 'alt="figure"' in text
    assert "No description has been provided" not in text
    assert 'class="jp-Cell jp-CodeCell jp-Notebook-cell jp-mod-noOutputs' in text
    hidden = pages.render_notebook(run / "01_a.ipynb", hide_code=True).read_text()
    assert 'class="saf-code"' not in hidden and "print(x)" not in hidden


def test_downloads_link_each_tasks_predictions_and_item_scores(tmp_path):
    run = _run(tmp_path)
    (run / "02_b").mkdir()
    for f in ("predictions_test.jsonl.gz", "items.jsonl.gz", "records.jsonl"):
        (run / "02_b" / f).write_text("{}\n")
    (run / "01_a").mkdir()
    (run / "01_a" / "items.jsonl.gz").write_text("{}\n")
    records = [{"task": "saf", "notebook": "02_b", "kind": "result"},
               {"task": "other", "notebook": "01_a", "kind": "result"},
               {"task": "saf", "notebook": "01_a", "kind": "result", "system": "data"}]
    html = chrome.downloads_section(run, records)
    assert '<a href="02_b/predictions_test.jsonl.gz">' in html and "02_b/items.jsonl.gz" in html
    assert "records.jsonl" not in html
    saf_row = html.split("<td>saf</td>")[1].split("</tr>")[0]
    assert "01_a" not in saf_row  # 01's data counts are not the task's predictions
    assert "<td>other</td>" in html  # a task with per-item scores only


def test_listing_prints_collections_for_people():
    assert listing({"fold 0": "bm25", "n": 0.123456}) == "fold 0 bm25, n 0.123"
    assert listing(["a", "b"]) == "a, b" and listing([]) == "" and listing(None) == "none"
    assert listing({"names": ["x", "y"], "C": 1.0}) == "names [x, y], C 1"
