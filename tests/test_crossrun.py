"""The cross-run table (reporting/crossrun.py) and the runs overview built on it
(reporting/overview.py): one tidy frame, runs.html grouped by profile and dataset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from saf_utils.reporting import cli, crossrun, index_page, overview
from saf_utils.reporting.tables import read_page_tables
from saf_utils.text import interval

TASK = "argscichat_fact_selection"


def _rec(value, system="sys", **kw):
    return {"notebook": "a", "task": TASK, "dataset": "d", "split": "test", "system": system,
            "metric": "fact_f1", "value": value, "role": "system", "kind": "result", **kw}


def test_interval_is_one_spelling_of_a_value_and_its_interval():
    assert interval(0.5, 0.25, 0.75) == "0.5 [0.25, 0.75]"
    assert interval(0.123456, 0.1, 0.2, ".3f") == "0.123 [0.100, 0.200]"
    assert interval(0.02, -0.01, 0.05, "+.3g") == "+0.02 [-0.01, +0.05]"
    assert interval(0.5, None, 0.7) == "0.5" and interval(0.5, float("nan"), 1) == "0.5"
    assert interval(None, 0, 1) == "" and interval(2.0, 1, 3, lambda x: f"<{x:g}>") == \
        "<2> [<1>, <3>]"


def test_the_frame_takes_the_headline_record_else_the_mean_of_seeds():
    records = {"r1": [_rec(0.5, ci_low=0.4, ci_high=1.2), _rec(0.1, seed=1),  # headline wins
                      _rec(0.2, system="b", seed=1), _rec(0.4, system="b", seed=2,
                                                          notebook_status="failed"),
                      _rec(0.9, kind="analysis"), _rec(0.3, subset="q1")],
               "r2": [_rec(0.75)]}
    df = crossrun.frame(records)
    rows = {(r["run"], r["system"], r["subset"]): r for r in crossrun.rows_of(df)}
    assert set(rows) == {("r1", "sys", None), ("r1", "b", None), ("r1", "sys", "q1"),
                         ("r2", "sys", None)}
    head = rows[("r1", "sys", None)]
    assert (head["value"], head["lo"], head["hi"], head["n"]) == (0.5, 0.4, 1.0, 1)  # clipped
    mean = rows[("r1", "b", None)]
    assert mean["value"] == pytest.approx(0.3) and mean["lo"] is None and mean["n"] == 2
    assert mean["failed"] and not head["failed"] and mean["role"] == "system"
    # the headline cells of one run: the headline record with its interval, else the mean
    # of the seeds (n, no interval); the index page draws these very cells
    cells = crossrun.headline_cells(df[df["run"] == "r1"], TASK, ["fact_f1"])
    assert list(cells) == [("d", "test")]
    sys, b = cells[("d", "test")]["sys"], cells[("d", "test")]["b"]
    assert {k: sys["fact_f1"][k] for k in ("mean", "low", "high", "n", "headline")} == {
        "mean": 0.5, "low": 0.4, "high": 1.0, "n": 1, "headline": True}
    assert b["fact_f1"] == {"mean": pytest.approx(0.3), "low": None, "high": None, "n": 2,
                            "headline": False}
    assert b["failed"] and not sys["failed"] and sys["role"] == "system"
    for run in ("r1", "r2"):
        (split,) = index_page.task_splits(records[run])
        assert split["tables"] == crossrun.headline_cells(df[df["run"] == run], TASK,
                                                          ["fact_f1"])


def _run(root: Path, name: str, profile: str, value: float, started: str,
         dataset: str = "d") -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "run": name, "profile": profile, "status": "ok", "started": started,
        "notebooks": [{"name": "a", "status": "ok"}]}))
    (run / "metrics.json").write_text(json.dumps({"records": [
        _rec(value, dataset=dataset, ci_low=value - 0.1, ci_high=value + 0.1)]}))
    (run / "index.html").write_text("<p>index</p>")
    return run


def _groups(text: str) -> dict[str, list[list]]:
    """Each group's heading -> the rows of its interactive table."""
    specs = read_page_tables(text)
    heads = re.findall(r'<h2 id="group-(\d+)">(.*?)</h2>', text)
    return {title: specs[f"runs-{n}"]["data"] for n, title in heads}


def test_runs_page_groups_by_profile_and_dataset_and_offers_a_comparison(tmp_path, capsys):
    root = tmp_path / "reports"
    _run(root, "smoke1", "smoke", 0.5, "2026-01-01T00:00:00+00:00")
    _run(root, "cpu1", "cpu", 0.86, "2026-01-02T00:00:00+00:00")
    _run(root, "smoke2", "smoke", 0.25, "2026-01-03T00:00:00+00:00")
    _run(root, "other", "smoke", 0.75, "2026-01-04T00:00:00+00:00", dataset="d2")
    run = _run(root, "smoke3", "smoke", 0.5, "2026-01-05T00:00:00+00:00")
    records = json.loads((run / "metrics.json").read_text())  # a task the others lack
    records["records"].append({**records["records"][0], "task": "t", "metric": "m"})
    (run / "metrics.json").write_text(json.dumps(records))
    assert cli.main(["list", "--reports-dir", str(root), "--html"]) == 0
    capsys.readouterr()
    text = (root / overview.PAGE).read_text()
    groups = _groups(text)
    assert list(groups) == ["cpu · d", "smoke · d", "smoke · d2"]  # no mixing of either
    assert [r[0] for r in groups["smoke · d"]] == [f'<a href="{r}/index.html">{r}</a>'
                                                   for r in ("smoke1", "smoke2", "smoke3")]
    first, second, third = groups["smoke · d"]
    assert len(first) == len(third) == 7 + 2 * 2  # each task two columns, in every row
    assert first[9:11] == ["", ""] and third[9] == "0.5"  # a number as text: blank if none
    assert first[7] == "0.5" and second[7] == "0.25" and "[0.15, 0.35]" in second[8]
    assert first[1] == "" and second[1] == (  # no page yet: the command that writes it
        "<code>saf-run compare smoke1 smoke2 --reports-dir &lt;this folder&gt;</code>")
    assert text.count("<img alt=\"headline metrics") == 1  # a chart: the group of 2+ runs
    # the bundled DataTables (itables), not a hand-written sort script
    assert "querySelectorAll('table.sortable')" not in text and "itables-2.9.1-ready" in text
    (root / "smoke2" / "compare-smoke1.html").write_text("<p>cmp</p>")
    (root / "cpu1" / "compare.html").write_text("<p>cmp</p>")  # saf-run --baseline's page
    groups = _groups(overview.write_overview(root).read_text())
    assert groups["smoke · d"][1][1] == '<a href="smoke2/compare-smoke1.html">vs smoke1</a>'
    assert groups["cpu · d"][0][1] == '<a href="cpu1/compare.html">vs its baseline</a>'


def test_runs_page_escapes_what_runs_say(tmp_path):
    root = tmp_path / "reports"
    evil = '<img src=x onerror="alert(1)">'
    _run(root, "r1", evil, 0.5, "2026-01-01T00:00:00+00:00", dataset=evil)
    run = _run(root, "r2", evil, 0.25, "2026-01-02T00:00:00+00:00", dataset=evil)
    records = json.loads((run / "metrics.json").read_text())
    records["records"][0]["system"] = "<script>alert(2)</script>"
    records["records"].append({**records["records"][0], "task": "<b>t", "metric": "<u>m"})
    (run / "metrics.json").write_text(json.dumps(records))
    text = overview.write_overview(root).read_text()
    assert "<img src=x" not in text and "<script>alert" not in text
    assert "<u>m" not in text and "<b>t" not in text  # headers: itables leaves them as given
    assert "&lt;b&gt;t: &lt;u&gt;m" in text  # the column name escaped in the table's header
    (rows,) = _groups(text).values()
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in rows[1][8]
    assert "&lt;img src=x" in re.search(r'<h2 id="group-1">(.*?)</h2>', text).group(1)


def test_a_comparison_written_by_saf_run_compare_is_linked_both_ways(tmp_path, capsys):
    root = tmp_path / "reports"
    _run(root, "r1", "p", 0.5, "2026-01-01T00:00:00+00:00")
    _run(root, "r2", "p", 0.25, "2026-01-02T00:00:00+00:00")
    overview.write_overview(root)
    assert cli.main(["compare", "r1", "r2", "--reports-dir", str(root),
                     "--resamples", "100"]) == 0
    assert "| sys | fact_f1 |  | 0.5 | 0.25 | -0.25 | no items |" in \
        capsys.readouterr().out
    assert 'href="../runs.html"' in (root / "r2" / "compare-r1.html").read_text()
    overview.write_overview(root)
    (rows,) = _groups((root / overview.PAGE).read_text()).values()
    assert rows[1][1] == '<a href="r2/compare-r1.html">vs r1</a>'


@pytest.mark.slow
def test_runs_page_tables_run_offline_and_sort_numbers_as_numbers(tmp_path):
    """In headless Chromium, network off: every group's table is built by the bundled
    DataTables, no request leaves the page, and a value column sorts 0.5 < 9.5 < 10.25."""
    from tests.browser import Browser, find_chromium
    from tests.test_browser import READY, api

    if find_chromium() is None:
        pytest.skip("no Chromium on this machine")
    root = tmp_path / "reports"
    for i, v in enumerate([9.5, 10.25, 0.5]):
        _run(root, f"r{i}", "p", v, f"2026-01-0{i + 1}T00:00:00+00:00")
    b = Browser(find_chromium())
    try:
        b.open(overview.write_overview(root))
        b.wait(READY, 30)
        b.js(f"(async () => {{ {api('runs-1')}.order([7, 'asc']).draw(); return 1; }})()")
        got = b.js(f"(async () => JSON.stringify({api('runs-1')}.column(7, "
                   "{order: 'applied'}).data().toArray()))()")
        assert json.loads(got) == ["0.5", "9.5", "10.25"]
        assert not b.exceptions and not b.network()
    finally:
        b.close()
