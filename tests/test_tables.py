"""Interactive tables: escaped JSON in notebooks and pages, only the project's own script."""

from __future__ import annotations

import json
import shutil
import subprocess

import nbformat
import pandas as pd
import pytest

from notebook_reports import pages, tables
from notebook_reports.sharing import PathScrubber
from saf_utils.argscichat import browse as AB
from saf_utils.argscichat.data import MessagePair
from saf_utils.saf import browse as SB
from tests.page_helpers import external_resources, read_page_tables
from tests.test_sharing import PAYLOADS, unsafe_markup


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"answer": list(PAYLOADS), "score": [0.123456] * len(PAYLOADS)})


def test_interactive_table_escapes_cells_header_and_caption():
    df = _frame().rename(columns={"answer": "<b>answer</b>"})
    text = tables.html(df, caption=PAYLOADS[0], wrap=["<b>answer</b>"])
    assert not unsafe_markup(text) and "new ITable(" in text
    (spec,) = read_page_tables(text).values()
    assert spec["columns"] == ["<b>answer</b>", "score"]  # escaped in the page, text here
    assert spec["data"][0] == ["&lt;img src=x onerror=alert(1)&gt;", 0.1235]  # 4 digits
    assert '"column_filters": "footer"' in text and '"className": "saf-wrap"' in text
    assert "Download CSV" in text and not external_resources(text)
    # the pages' path scrubber leaves the table's own script as it is
    assert PathScrubber(None)(tables.CSV_FORMAT) == tables.CSV_FORMAT


def test_text_cells_keep_their_line_breaks_and_stay_escaped():
    """pandas' formatting (inside itables) writes a line break as the two characters \\n:
    06's numbered history showed '1. Hi\\n2. Hi!' on one line."""
    df = pd.DataFrame({"history": ["1. Hi\n2. <b>Hi!</b>", None], "n": [1.5, None]})
    (spec,) = read_page_tables(tables.html(df, wrap=["history"])).values()
    assert spec["data"][0] == ["1. Hi<br>2. &lt;b&gt;Hi!&lt;/b&gt;", 1.5]
    assert spec["data"][1][0] == ""


@pytest.mark.slow  # ~4 s: one nbconvert render of a page carrying the itables bundle
def test_notebook_table_is_kept_and_other_scripts_dropped_and_paths_hidden(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ipynb = run_dir / "07_x.ipynb"
    table = tables.html(_frame().assign(path=f"{run_dir}/x.jsonl"), "payloads")
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("tables.show(df)")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<script>alert(1)</script>"},
                               metadata={"saf_itables": "init"}),
        nbformat.v4.new_output("display_data", data={"text/html": str(table)},
                               metadata={"saf_itables": "table"}),
        nbformat.v4.new_output("display_data", data={  # not marked: sanitised
            "text/html": "<table id='x'></table><script>alert(2)</script>"})]
    nb.cells = [cell]
    nbformat.write(nb, ipynb)
    text = pages.render_notebook(ipynb).read_text(encoding="utf-8")
    assert not unsafe_markup(text) and "<script>alert(2)" not in text
    assert text.count("function injectCSS") == 1 and not external_resources(text)
    (spec,) = read_page_tables(text).values()
    cells = [c for r in spec["data"] for c in r if isinstance(c, str)]
    assert "$RUN/x.jsonl" in cells and str(run_dir) not in text


def test_saf_browsers_keep_texts_whole_and_mark_errors():
    long = "x " * 500
    saf = pd.DataFrame({"split": ["train"], "question": [long], "reference_answer": ["r"],
                        "provided_answer": [None], "verification_feedback": ["Correct"],
                        "score": [1], "answer_feedback": ["f"], "id": [1]})
    t = SB.answer_table(saf)
    assert t.question[0] == long and t.error_class[0] == "(not annotated)"
    preds = pd.DataFrame({
        "system": ["s", "s", "s", "t"], "split": ["test"] * 4, "question": ["q"] * 4,
        "gold_label": ["Correct"] * 4, "pred_label": ["Correct", "Incorrect", None, "x"],
        "parseable": [True, True, False, True], "provided_answer": ["a"] * 4,
        "gold_feedback": ["g"] * 4, "pred_feedback": ["p"] * 4, "gold_score": [1] * 4,
        "pred_score": [1, 0, None, 0], "reference_answer": ["r"] * 4, "id": list("abcd")})
    assert SB.predictions_beside_gold(preds, "s").verdict.tolist() == ["correct", "wrong",
                                                                "unparseable"]


def test_pair_browser_shows_history_facts_and_chosen_reply():
    pair = MessagePair(pair_id="p1", paper_id="P", title="T", content=("s0", "s1", "s2"),
                       dialogue_id="d", turn=1, query="why?", reply="because",
                       history=("hi", "hello"), history_ids=("a", "b"), facts=("s1",),
                       fact_indexes=(1,), history_fact_indexes=((),))
    sel = pd.DataFrame({"fold": [0, 0], "system": ["bm25", "bm25"], "split": ["test"] * 2,
                        "pair_id": ["p1", "p1"], "seed": [0.0, 1.0],
                        "selected": [[1, 2], [0]], "fact_f1": [0.667, 0.0]})
    gen = pd.DataFrame({"fold": [0], "system": ["copy"], "split": ["test"], "pair_id": ["p1"],
                        "seed": [None], "output": ["s1 s2"]})
    t = AB.pair_table([pair], sel, {0: "bm25"}, gen, {0: "copy"})
    row = t.iloc[0]
    assert row.history == "1. hi\n2. hello" and row.gold_facts == "[1] s1"
    assert row.selected_facts.startswith("[1] s1\n[2] s2") and row.reply == "s1 s2"


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run the page's script")
def test_csv_export_neutralises_every_formula_lead_but_keeps_numbers():
    """A CSV cell starting with = + - @ TAB or CR (also after blanks) gets a leading ';
    numbers, negative ones included, stay numbers."""
    cells = ["=1+1", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1,1)", "\t=1",
             "\r=1", "  =1", " +SUM(1,1)", "-0.25", "-3", "1e-5", "-1.5E+3", " 12 ", "text",
             "a=b", "", "-", "-inf", "- 1"]
    script = tables.CSV_CELL_JS + f"console.log(JSON.stringify({json.dumps(cells)}.map(csvCell)"
    script += ".concat([csvCell(-2), csvCell(null)])));"
    out = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    escaped = ["'" + c for c in cells[:8]]
    assert out[:8] == escaped
    assert out[8:15] == cells[8:15]  # numbers and plain text unchanged
    assert out[15:19] == ["", "'-", "'-inf", "'- 1"]
    assert out[19:] == [-2, None]
