"""The cross-run table (notebook_reports/crossrun.py): one tidy frame; ``saf-run list``, the runs
grouped by profile and dataset; ``saf-run compare`` of two of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notebook_reports import cli, crossrun, index_page
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
    return run


def test_list_groups_runs_by_profile_and_dataset_and_gives_json_for_scripts(tmp_path, capsys):
    """``saf-run list`` is the overview of the reports folder: a heading per profile and
    dataset, its runs oldest first (a sweep's cells are runs with the sweep's prefix)."""
    root = tmp_path / "reports"
    _run(root, "smoke1", "smoke", 0.5, "2026-01-01T00:00:00+00:00")
    _run(root, "cpu1", "cpu", 0.86, "2026-01-02T00:00:00+00:00")
    _run(root, "sw-value-1", "smoke", 0.25, "2026-01-03T00:00:00+00:00")
    _run(root, "other", "smoke", 0.75, "2026-01-04T00:00:00+00:00", dataset="d2")
    (root / "broken").mkdir()
    (root / "broken" / "manifest.json").write_text("{not json")
    assert cli.main(["list", "--reports-dir", str(root)]) == 0
    out, err = capsys.readouterr()
    groups = {}
    for block in out.strip().split("\n\n"):
        head, _, *rows = block.splitlines()
        groups[head] = [r.split()[0] for r in rows]
    assert groups == {"cpu · d": ["cpu1"], "smoke · d": ["smoke1", "sw-value-1"],
                      "smoke · d2": ["other"]}
    assert "broken/manifest.json: unreadable" in err  # named, not dropped silently
    assert cli.main(["list", "--reports-dir", str(root), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["profile"], r["datasets"]) for r in runs][:2] == [
        ("smoke1", "smoke", ["d"]), ("cpu1", "cpu", ["d"])]


def test_two_listed_runs_are_compared_by_saf_run_compare(tmp_path, capsys):
    root = tmp_path / "reports"
    _run(root, "r1", "p", 0.5, "2026-01-01T00:00:00+00:00")
    _run(root, "r2", "p", 0.25, "2026-01-02T00:00:00+00:00")
    assert cli.main(["compare", "r1", "r2", "--reports-dir", str(root),
                     "--resamples", "100"]) == 0
    assert "| sys | fact_f1 |  | 0.5 | 0.25 | -0.25 | no items |" in \
        capsys.readouterr().out
    assert (root / "r2" / "compare-r1.html").is_file()
