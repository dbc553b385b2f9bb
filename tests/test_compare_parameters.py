"""``saf-run compare`` on parameters: a notebook that ran with its default value shows that
value, marked "(default)", and "(not run)" is kept for a notebook the run did not run; a
malformed run is refused in one line naming the file and the key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from notebook_reports.compare import compare_runs, load_run
from notebook_reports.compare_page import to_markdown, write_compare_html
from notebook_reports.profiles import RunnerError


def _run(root: Path, name: str, notebooks: dict[str, dict], copies: bool = True) -> Path:
    """A minimal run folder: manifest (with the parameters the runner set), empty metrics and,
    when ``copies``, each notebook's executed copy with its ``parameters`` cell."""
    run = root / name
    run.mkdir(parents=True)
    entries = []
    for nb_name, params in notebooks.items():
        entries.append({"name": nb_name, "status": "ok", "parameters": params})
        if copies:
            nb = nbformat.v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}
            cell = nbformat.v4.new_code_cell('launcher = "none"  # in the kernel\nseeds = [1, 2]')
            cell.metadata["tags"] = ["parameters"]
            nb.cells = [cell]
            nbformat.write(nb, run / f"{nb_name}.ipynb")
    (run / "manifest.json").write_text(json.dumps({"run": name, "notebooks": entries}))
    (run / "metrics.json").write_text(json.dumps({"records": []}))
    return run


def test_a_default_value_is_shown_as_the_default_not_as_not_run(tmp_path):
    a = _run(tmp_path, "a", {"02_baseline_finetuning": {"output_dir": "x"},
                              "04_generation": {"seeds": [1, 2]}})
    b = _run(tmp_path, "b", {"02_baseline_finetuning": {"launcher": "torchrun:2"},
                              "04_generation": {"launcher": "none"}})
    cmp = compare_runs(a, b, n_resamples=100)
    rows = {(p["notebook"], p["parameter"]): p for p in cmp["parameters"]}
    # 02 ran in A with its default launcher; 04's values are equal (explicit or default)
    assert list(rows) == [("02_baseline_finetuning", "launcher")]
    row = rows[("02_baseline_finetuning", "launcher")]
    assert (row["a"], row["a_note"], row["b"], row["b_note"]) == ("none", "default",
                                                                  "torchrun:2", "")
    md = to_markdown(cmp)
    assert "| 02_baseline_finetuning | launcher | none (default) | torchrun:2 |" in md
    assert "(not run)" not in md
    html = write_compare_html(cmp, tmp_path / "cmp.html").read_text()
    assert "none (default)" in html and "(not run)" not in html


def test_not_run_is_kept_for_a_notebook_the_run_did_not_run(tmp_path):
    a = _run(tmp_path, "a", {"01_data_exploration": {}})
    b = _run(tmp_path, "b", {"01_data_exploration": {},
                              "02_baseline_finetuning": {"launcher": "torchrun:2"}})
    rows = {(p["notebook"], p["parameter"]): p
            for p in compare_runs(a, b, n_resamples=100)["parameters"]}
    assert rows[("02_baseline_finetuning", "launcher")]["a_note"] == "not run"
    assert rows[("02_baseline_finetuning", "seeds")]["b_note"] == "default"


def test_without_the_run_copy_a_default_is_said_to_be_unrecorded(tmp_path):
    a = _run(tmp_path, "a", {"02_baseline_finetuning": {}}, copies=False)
    b = _run(tmp_path, "b", {"02_baseline_finetuning": {"launcher": "torchrun:2"}},
             copies=False)
    md = to_markdown(compare_runs(a, b, n_resamples=100))
    assert "| 02_baseline_finetuning | launcher | (default, not recorded) | torchrun:2 |" in md


def test_a_malformed_manifest_or_record_names_the_file_and_the_key(tmp_path):
    run = _run(tmp_path, "a", {"01_data_exploration": {}}, copies=False)
    manifest = json.loads((run / "manifest.json").read_text())
    nb = {"name": "01_data_exploration", "status": 3}
    for change, expected in (({"installed": ["x==1", 2]}, "installed[1] is int, not a string"),
                             ({"git": "abc"}, "git is str 'abc', not a mapping"),
                             ({"pid": True}, "pid is bool 'True', not a whole number"),
                             ({"notebooks": [nb]}, "notebooks[0].status is int '3', not a string"),
                             ({"notebooks": [{"name": "../x"}]}, "notebooks[0] name")):
        (run / "manifest.json").write_text(json.dumps({**manifest, **change}))
        with pytest.raises(RunnerError, match=re.escape(f"{run / 'manifest.json'}: {expected}")):
            load_run(run)
    (run / "manifest.json").write_text(json.dumps(manifest))
    for records, expected in (([{"system": ["s"], "value": 1}], "records[0]: system is list"),
                              ([{"value": 1}, {"value": float("nan")}],
                               "records[1]: value nan is not a finite number"),
                              ([[]], "records[0]: a JSON list, not an object")):
        (run / "metrics.json").write_text(json.dumps({"records": records}))
        with pytest.raises(RunnerError, match=re.escape(f"{run / 'metrics.json'}: {expected}")):
            load_run(run)
    (run / "metrics.json").write_text(json.dumps({"records": [{"kind": "info", "value": "x"}]}))
    assert load_run(run)[1] == [{"kind": "info", "value": "x"}]  # only results need numbers
