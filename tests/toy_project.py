"""Toy notebook projects for the runner's tests (test_reporting_runner, test_dask_runner,
test_reuse): tiny notebooks that record one number, read an upstream folder, sleep or fail,
written into a temporary folder with a profile."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import yaml

RECORD = ("from notebook_reports.records import Recorder\n"
          "rec = Recorder(NAME, output_dir)\n"
          "rec.add('argscichat_fact_selection', 'd', 'test', 'sys', 'fact_f1', value,"
          " role='system')\nrec.close()\n")


def notebook(path: Path, params: str, *cells: str) -> None:
    """A notebook: a Markdown title, the ``parameters`` cell, then ``cells``."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# test $x^2$"), cell,
                *(nbformat.v4.new_code_cell(c) for c in cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def reads_a(nbs: Path) -> None:
    """``b_reads_a``: fails unless ``a_first``'s records are in its sibling folder."""
    notebook(nbs / "b_reads_a.ipynb", "output_dir = None\nvalue = 0.25",
             "from notebook_reports.records import sibling_dir\n"
             "assert (sibling_dir(output_dir, 'a_first') / 'records.jsonl').is_file()",
             RECORD.replace("NAME", "'b_reads_a'"))


def run_args(profile: Path, nbs: Path, reports: Path) -> list[str]:
    """``saf-run`` options that point at a toy project."""
    return ["--config", str(profile), "--notebooks-dir", str(nbs), "--reports-dir",
            str(reports)]


@pytest.fixture()
def project(tmp_path):
    """a_first -> b_reads_a (the profile's notebooks), c_sleeps, d_data (a data source)."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "a_first.ipynb",
             "value = 0.5\nlr = 0.001\nfolds = [0]\nname = 'x'\nflag = True\nn = 3\n"
             "output_dir = None", RECORD.replace("NAME", "'a_first'"))
    reads_a(nbs)
    notebook(nbs / "c_sleeps.ipynb", "output_dir = None",
             "import os, time\nfrom pathlib import Path\n"
             "Path(output_dir, 'kernel.pid').write_text(str(os.getpid()))\ntime.sleep(120)",
             "print('never runs')")
    notebook(nbs / "d_data.ipynb", "saf_source = None\noutput_dir = None", "pass")
    profile = tmp_path / "toy.yaml"
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({
        "notebooks": ["a_first", "b_reads_a"],
        "depends_on": {"b_reads_a": ["a_first"]},
        "parameters": {"value": 0.75}}))
    profile.write_text("extends: base\nnotebook_parameters:\n  a_first: {n: 4}\n")
    reports = tmp_path / "reports"
    return tmp_path, run_args(profile, nbs, reports), reports
