"""``sweep.json`` and ``sweep.html`` of a sweep (:mod:`.sweep` runs it): per task and split a
table with a row per system and cell (headline metrics with their 95 % intervals, from
:func:`crossrun.frame` of the cells' records), one chart, and links to each cell's run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from saf_utils.reporting.manifest import write_json, write_text
from saf_utils.reporting.pages import duration_text, esc, page, table
from saf_utils.reporting.profiles import RunnerError

SWEEP_FILE = "sweep.json"  # a sweep folder's summary
SWEEP_PAGE = "sweep.html"


def shown_value(value: Any) -> str:
    """A value as a page shows it: a path by its last part, a list joined by ``+``."""
    if isinstance(value, list | tuple):
        return "+".join(shown_value(v) for v in value)
    if isinstance(value, str) and "/" in value:
        return Path(value.rstrip("/")).name or value
    return str(value)


def sweep_tables(cells: list[dict]) -> list[dict]:
    """Per task (registered specs first) and split: ``rows`` of the headline cells of every
    run (:func:`crossrun.headline_cells`), one per cell and system."""
    from saf_utils.reporting.compare import load_run
    from saf_utils.reporting.crossrun import frame, headline_cells, task_metrics

    records_of: dict[str, list[dict]] = {}
    for c in filter(lambda c: c.get("run_dir"), cells):
        try:
            records_of[c["name"]] = load_run(Path(c["run_dir"]))[1]
        except RunnerError as exc:
            c["error"] = c.get("error") or str(exc)
    df = frame(records_of)
    out = []
    for task, title, metrics, splits in task_metrics(df):
        by_split: dict[str, list[dict]] = {}
        for c in cells:
            tables = headline_cells(df[df["run"] == c["name"]], task, metrics)
            for (ds, split), systems in tables.items():
                by_split.setdefault(str(split), []).extend(
                    {"cell": c["name"], "dataset": ds, "system": system, "role": e["role"],
                     "failed": e["failed"], **{m: e[m] for m in metrics if m in e}}
                    for system, e in systems.items())
        order = {s: i for i, s in enumerate(splits)}
        out += [{"task": task, "title": title, "split": split,
                 "metrics": [m for m in metrics if any(m in r for r in by_split[split])],
                 "rows": by_split[split]}
                for split in sorted(by_split, key=lambda s: (order.get(s, len(order)), s))]
    return out


def _table_html(t: dict, cells: list[dict], keys: list[str]) -> str:
    """A row per system and cell: the cell's matrix values (the first links to its run's
    index), then the metrics; a system's rows together, in the cells' order."""
    from saf_utils.reporting.headline import SET_APART, cell_html, system_order

    by_name = {c["name"]: (i, c.get("values") or {}) for i, c in enumerate(cells)}
    systems = {}
    for r in t["rows"]:
        systems.setdefault(r["system"], r)
    many_ds = len({(r["cell"], r["dataset"]) for r in t["rows"]}) > len(
        {r["cell"] for r in t["rows"]})  # else the cell says which dataset
    rows, classes = [], []
    for system in system_order(systems, t["metrics"][0]):
        mine = sorted((r for r in t["rows"] if r["system"] == system),
                      key=lambda r: by_name.get(r["cell"], (0,))[0])
        for j, r in enumerate(mine):
            name = "" if j else esc(system) + (f' <small class="note">{esc(r["role"])}</small>'
                                               if r["role"] else "")
            shown = [esc(shown_value(by_name.get(r["cell"], (0, {}))[1].get(k))) for k in keys]
            shown[0] = f'<a href="{esc(r["cell"])}/index.html">{shown[0]}</a>' + (
                ' <span class="failed" title="from a notebook that did not finish">†</span>'
                if r.get("failed") else "")
            rows.append([name, *shown, *([esc(r["dataset"])] if many_ds else []),
                         *(cell_html(r.get(m), False) for m in t["metrics"])])
            classes.append(("apart " if r["role"] in SET_APART else "") + ("" if j else "first"))
    head = ["system", *(k.rsplit(".", 1)[-1] for k in keys), *(["dataset"] if many_ds else []),
            *t["metrics"]]
    return table(head, rows, "sweep", classes)


def _chart(t: dict, cells: list[dict]) -> str:
    """:func:`index_page.dot_plot` with one colour per cell (the legend: its values)."""
    from saf_utils.reporting.index_page import dot_plot

    label = {c["name"]: ", ".join(f"{k.rsplit('.', 1)[-1]}={shown_value(v)}"
                                  for k, v in c["values"].items()) for c in cells}
    tables: dict[tuple, dict[str, dict]] = {}
    for r in t["rows"]:
        tables.setdefault((label.get(r["cell"], r["cell"]), ""), {})[r["system"]] = {
            "role": r["role"], **{m: r[m] for m in t["metrics"] if m in r}}
    try:
        return dot_plot(tables, t["metrics"], f"{t['title']}, {t['split']}")
    except Exception as exc:  # noqa: BLE001 - a figure must not cost the page
        return f'<p class="warn">figure failed: {esc(exc)}</p>'


def write_sweep(sweep_dir: Path, summary: dict) -> Path:
    """``sweep.json`` (the summary and the tables) and ``sweep.html``."""
    cells, keys = summary["cells"], list(summary["matrix"])
    summary["tables"] = sweep_tables(cells)
    write_json(sweep_dir / SWEEP_FILE, summary)
    cell_rows = [[f'<a href="{esc(c["name"])}/index.html">{esc(c["name"])}</a>'
                  if c.get("run_dir") else esc(c["name"]),
                  *(esc(shown_value(c["values"][k])) for k in keys),
                  f'<span class="{esc(c["status"])}">{esc(c["status"])}</span>',
                  f'<td class="num">{duration_text(c.get("seconds"))}</td>',
                  esc((c.get("error") or "")[:300])] for c in cells]
    matrix_txt = "; ".join(f"<code>{esc(k)}</code> = " + ", ".join(esc(shown_value(v))
                                                                   for v in vs)
                           for k, vs in summary["matrix"].items())
    sections = []
    for i, t in enumerate(summary["tables"]):
        if i == 0 or t["task"] != summary["tables"][i - 1]["task"]:
            sections.append(f'<h2 id="{esc(t["task"])}">{esc(t["title"])}</h2>')
        sections += [f"<h3>{esc(t['split'])}</h3>", _table_html(t, cells, keys), _chart(t, cells)]
    git = summary.get("git") or {}
    commit = esc((git.get("commit") or "unknown")[:12]) + (" (dirty)" if git.get("dirty") else "")
    status = summary["status"]
    runs = "".join(f' · <a href="{href}">{what}</a>' for href, what in (
        ("runs.html", "the cells' runs"), ("../runs.html", "all runs"))
        if (sweep_dir / href).is_file())
    body = f"""<h1>Sweep {esc(summary['sweep'])} <span class="{esc(status)}">{esc(status)}</span>
</h1>
<p class="meta">Profile <b>{esc(summary['profile'])}</b> · commit <code>{commit}</code> ·
started {esc(summary['started'])} · finished {esc(summary.get('finished') or '—')} ·
{len(cells)} cell(s), each an ordinary run folder<br>Matrix: {matrix_txt}</p>
{table(['run', *keys, 'status', 'time', 'error'], cell_rows)}
<p><a href="{SWEEP_FILE}">{SWEEP_FILE}</a>{runs}</p>
{''.join(sections) or '<p>No result record yet.</p>'}
<p class="note">Per task and split, a row per system and cell: mean [95% interval] of that
run's headline record, as on the run's index page (follow the cell's link); * = no headline
record, mean over its per-seed/per-fold records. The charts show the same numbers, one colour
per cell. Cells differ in the matrix values only; differences between cells are not tested
here (<code>saf-run compare</code> two cells for paired tests on the same items).</p>"""
    css = "tr.first td{border-top:2px solid #999}table.sweep td:first-child{min-width:9em}"
    return write_text(sweep_dir / SWEEP_PAGE,
                      page(f"Sweep {summary['sweep']}", body, run_dir=sweep_dir, css=css))
