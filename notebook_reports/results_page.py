"""``results.html``: every record of a run in one interactive table (sort, search,
per-column filters, hideable columns); the default view shows the headline ``result``
records of the test splits, each once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from notebook_reports.crossrun import TESTS, clip_record, paired_test
from notebook_reports.manifest import write_text
from notebook_reports.pages import fmt, page
from saf_utils.metrics import scale_label

# What a reader needs first; the columns that repeat on every row come last (hideable).
RESULT_COLUMNS = ("system", "split", "metric", "scale", "what", "value", "CI", "p", "role",
                  "kind", "fold", "seed", "subset", "task", "dataset", "notebook",
                  "notebook_status", "ci_low", "ci_high")

HIDDEN_RESULT_COLUMNS = ("subset", "ci_low", "ci_high", "notebook_status")

NUMERIC_RESULT_COLUMNS = ("value", "p", "ci_low", "ci_high")

#: The default view: headline ``result`` records of test splits, each once (column filters,
#: shown in their boxes; the reader clears them to see every record).
DEFAULT_VIEW = {"kind": "result", "split": "test", "what": "headline"}

def record_what(r: dict) -> tuple[str, bool]:
    """What a record's number is, for a reader, and whether it is a p-value: ``headline``
    (fold and seed null), ``per fold 2``, ``difference vs B``, ``Holm-adjusted p vs B``,
    ``chosen``, or its subset."""
    if test := paired_test(r.get("subset")):
        return TESTS[test[0]][1].format(test[1]), test[0] != "minus "
    if r.get("subset"):
        return str(r["subset"]), False
    parts = [f"per {k} {r[k]}" for k in ("fold", "seed") if r.get(k) is not None]
    return (" ".join(parts) if parts else "headline"), False

def results_frame(records: list[dict]) -> Any:
    """Every record as one row of :data:`RESULT_COLUMNS`: what the number is (``what``), the
    metric's direction and range (``scale``), a p-value in ``p`` (never in ``value``), the
    interval as ``[low, high]`` text, clipped to the metric's range (:func:`clip_record`).
    Numbers are text of 4 significant digits, a missing one empty (not "NaN"); the table
    still sorts them as numbers (DataTables detects numeric columns)."""
    import pandas as pd

    rows = []
    for r in records:
        r = clip_record(r)
        what, is_p = record_what(r)
        lo, hi = r.get("ci_low"), r.get("ci_high")
        ci = f"[{fmt(lo, 4)}, {fmt(hi, 4)}]" if lo is not None and hi is not None else ""
        row = {c: r.get(c) for c in RESULT_COLUMNS}
        row.update(kind=r.get("kind") or "result", CI=ci, what=what,
                   scale=scale_label(str(r.get("metric"))),
                   value=None if is_p else r.get("value"), p=r.get("value") if is_p else None)
        rows.append({c: fmt(v, 4) if c in NUMERIC_RESULT_COLUMNS else "" if v is None else v
                     for c, v in row.items()})
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for c in ("fold", "seed"):
        frame[c] = frame[c].astype(str)
    return frame

def write_results(run_dir: Path, manifest: dict, records: list[dict]) -> Path:
    """``results.html`` of a run (see the module's docstring)."""
    from notebook_reports.chrome import macros
    from notebook_reports.tables import html

    frame = results_frame(records)
    cols = list(frame.columns)
    table = html(
        frame, "every record", page_length=25, table_id="results",
        columnDefs=[{"targets": [cols.index(c) for c in HIDDEN_RESULT_COLUMNS],
                     "visible": False},
                    {"targets": [cols.index(c) for c in NUMERIC_RESULT_COLUMNS],
                     "className": "dt-right"}],
        searchCols=[{"search": DEFAULT_VIEW[c]} if c in DEFAULT_VIEW else None for c in cols],
        order=[[cols.index("split"), "asc"], [cols.index("metric"), "asc"],
               [cols.index("value"), "desc"]])
    counts = sorted(Counter(r.get("kind") or "result" for r in records).items())
    run = manifest.get("run", run_dir.name)
    intro = str(macros("run.html.j2").results(run, len(frame), counts))
    return write_text(run_dir / "results.html", page(
        f"Results {run}", [intro, table], run_dir=run_dir, current="results.html", wide=True))
