"""The executed notebooks of a smoke run print for people: no stray cell values
(``Out[10]: 5``), no dict or list printed as its repr, conclusions rendered as Markdown.
``SAF_SMOKE_RUN=<run folder>`` checks an existing run."""

from __future__ import annotations

import re

import nbformat
import pytest

from notebook_reports.notebook_exec import section_starts

pytestmark = pytest.mark.slow
REPR = re.compile(r"\{['\"][^'\"]*['\"]: |\{\d+: |\[['\"][^'\"]*['\"], ")


def _notebooks(run):
    paths = sorted(run.glob("[0-9]*.ipynb"))
    assert len(paths) == 6, paths
    return [(p.stem, nbformat.read(p, as_version=4)) for p in paths]


def test_no_stray_values_or_printed_reprs(smoke_run):
    run, code = smoke_run
    assert code == 0
    bad = []
    for name, nb in _notebooks(run):
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                data = out.get("data") or {}
                if out.get("output_type") == "execute_result" and set(data) <= {"text/plain"}:
                    bad.append((name, i, "value", str(data.get("text/plain"))[:60]))
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    for line in str(out.get("text", "")).splitlines():
                        if REPR.search(line):
                            bad.append((name, i, "repr", line[:100]))
    assert not bad, bad


def test_conclusions_are_markdown(smoke_run):
    run, _ = smoke_run
    seen = 0
    for name, nb in _notebooks(run):
        starts = section_starts(nb)
        cells = [i for i, title in starts.items() if title.startswith("Conclusions")]
        for i in cells:
            outs = nb.cells[i].get("outputs", [])
            assert any("text/markdown" in (o.get("data") or {}) for o in outs), name
            assert not any(o.get("output_type") == "stream" and o.get("name") == "stdout"
                           for o in outs), (name, "conclusions printed, not Markdown")
            seen += 1
    assert seen >= 4
