"""The runs overview: ``runs.html`` in the reports folder, every run on one page.

One row per run (profile, commit, status, duration, notebooks, and per task the headline
metric of the system chosen for the task's first split, else its best system), sortable by
any column, a link to each run's ``index.html``, and one chart of those headline metrics
over the runs. ``saf-run list --html`` writes it, and so does every run at its end.

Why not an experiment tracker (MLflow): the records already are the tracking store
(``metrics.json`` per run folder, the manifest for parameters and provenance), and the
pages are shared as files, offline; ``mlflow ui`` is a server with its own store that a
colleague cannot open from a copied folder, and MLflow would add a large dependency tree
to the locked environment for one table and one chart. This page reads the same run
folders as ``saf-run list`` and needs nothing but the browser.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saf_utils.reporting.sharing import esc

PAGE = "runs.html"

SORT_JS = """
for(const t of document.querySelectorAll('table.sortable')){
  const head=t.tHead.rows[0];
  [...head.cells].forEach((th,i)=>{th.style.cursor='pointer';th.title='click to sort';
    th.addEventListener('click',()=>{const asc=th.dataset.dir!=='asc';
      [...head.cells].forEach(c=>{delete c.dataset.dir;c.classList.remove('asc','desc');});
      th.dataset.dir=asc?'asc':'desc';th.classList.add(asc?'asc':'desc');
      const key=r=>{const c=r.cells[i];const v=c.dataset.v??c.textContent.trim();
        const n=parseFloat(v);return v!==''&&!isNaN(n)&&isFinite(v)?n:v.toLowerCase();};
      const rows=[...t.tBodies[0].rows].sort((a,b)=>{const x=key(a),y=key(b);
        if(x===''||y==='')return x===''?1:-1;
        return (x<y?-1:x>y?1:0)*(asc?1:-1);});
      t.tBodies[0].append(...rows);});});}
"""


def run_headlines(run_dir: Path, problems: list[str] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Per task: ``{"metric", "split", "system", "value", "chosen"}`` of a run: the system
    starred on the task's first split (the notebook's choice), else the best comparable
    one, on the task's first headline metric (``{}`` without readable records). Records
    that cannot be compared (a value that is no finite number, ...) are left out, with one
    line in ``problems`` naming the first."""
    from saf_utils.reporting.compare import _check_record
    from saf_utils.reporting.headline import split_verdict
    from saf_utils.reporting.index_page import task_splits

    try:
        records = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["records"]
        if not isinstance(records, list):
            raise TypeError("records is no list")
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    bad = [(i, why) for i, r in enumerate(records) if (why := _check_record(r))]
    if bad and problems is not None:
        problems.append(f"{run_dir.name}/metrics.json: {len(bad)} record(s) left out of its "
                        f"headline (records[{bad[0][0]}]: {bad[0][1]})")
    records = [r for i, r in enumerate(records) if i not in dict(bad)]
    out: dict[str, dict[str, Any]] = {}
    for t in task_splits(records):
        if t["task"] in out:
            continue
        systems, metric = t["systems"], t["metric"]
        chosen = [s for s in t["chosen"] if metric in systems.get(s, {})]
        v = split_verdict(systems, metric)
        system = chosen[0] if chosen else (v["top"] if v else None)
        if system is None:
            continue
        out[t["task"]] = {"metric": metric, "split": t["split"], "system": system,
                          "value": systems[system][metric]["mean"], "chosen": bool(chosen),
                          "title": t["title"]}
    return out


def _chart(runs: Sequence[dict], columns: Sequence[tuple[str, str]],
           titles: dict[str, str]) -> str:
    """One panel per task column: its headline value per run (x: runs oldest first)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from saf_utils.metrics import scale_label

    if not columns or not runs:
        return ""
    fig = Figure(figsize=(min(4.2 * len(columns), 14), 3.2), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    x = list(range(len(runs)))
    for ax, (task, metric) in zip(axes, columns, strict=True):
        ys = [(r["headlines"].get(task) or {}).get("value") for r in runs]
        pts = [(i, y) for i, y in zip(x, ys, strict=True) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        ax.set_title(f"{titles.get(task, task)}\n{metric} ({scale_label(metric)})",
                     fontsize=10)
        ax.set_xticks(x, [str(r["run"]) for r in runs], rotation=35, ha="right", fontsize=8)
        ax.tick_params(axis="y", labelsize=9)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="headline metrics over runs" src="data:image/png;base64,{data}">'


def write_overview(reports_dir: str | os.PathLike | None = None,
                   path: str | os.PathLike | None = None) -> Path:
    """``runs.html`` (or ``path``) over every run in the reports folder; runs that cannot be
    read are named under the table, not dropped silently."""
    from saf_utils.reporting.manifest import write_text
    from saf_utils.reporting.pages import duration_text, fmt, page, table
    from saf_utils.reporting.profiles import REPORTS_DIR
    from saf_utils.reporting.run_folder import list_runs, list_sweeps

    root = Path(reports_dir or REPORTS_DIR)
    problems: list[str] = []
    runs = list_runs(root, problems)
    for r in runs:  # r["run"] is the run's folder (never a name or path from its manifest)
        try:
            r["headlines"] = run_headlines(root / str(r["run"]), problems)
        except Exception as exc:  # noqa: BLE001 - one run's records never fail the page
            r["headlines"] = {}
            problems.append(f"{r['run']}: headline left out ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]})")
    sweeps = list_sweeps(root, problems)
    from saf_utils.tasks import specs

    rank = {sp.name: i for i, sp in enumerate(specs())}
    columns = sorted(dict.fromkeys((task, h["metric"]) for r in runs
                                   for task, h in r["headlines"].items()),
                     key=lambda c: (rank.get(c[0], len(rank)), c))
    titles = {task: h["title"] for r in runs for task, h in r["headlines"].items()}
    head = ["run", "profile", "commit", "status", "started", "duration", "notebooks",
            *[f"{titles[t]}: {m}" for t, m in columns]]
    rows = []
    for r in runs:
        name = str(r["run"])
        index = root / name / "index.html"
        link = f'<a href="{esc(name)}/index.html">{esc(name)}</a>' if index.is_file() \
            else esc(name)
        cells = [link, esc(r.get("profile") or ""), f"<code>{esc(r.get('commit'))}</code>",
                 f'<span class="{esc(str(r.get("status")).split()[0])}">'
                 f"{esc(r.get('status'))}</span>",
                 esc((r.get("started") or "").replace("+00:00", "Z")),
                 f'<td class="num" data-v="{r.get("seconds") or ""}">'
                 f"{duration_text(r.get('seconds'))}</td>", esc(r.get("notebooks"))]
        for task, metric in columns:
            h = r["headlines"].get(task)
            if not h or h["metric"] != metric:
                cells.append('<td class="num"></td>')
                continue
            star = " ★" if h["chosen"] else ""
            cells.append(f'<td class="num" data-v="{h["value"]}" title="{esc(h["system"])} on '
                         f'{esc(h["split"])}">{fmt(h["value"])} <small>{esc(h["system"])}'
                         f"{star}</small></td>")
        rows.append(cells)
    notes = "".join(f'<li class="warn">{esc(p)}</li>' for p in problems)
    sweep_rows = [[f'<a href="{esc(w["sweep"])}/sweep.html">{esc(w["sweep"])}</a>',
                   esc(w.get("profile") or ""),
                   f'<span class="{esc(w["status"].split()[0])}">{esc(w["status"])}</span>',
                   esc(str(w.get("started") or "").replace("+00:00", "Z")),
                   f"{sum(v == 'ok' for v in w['cells'].values())}/{len(w['cells'])} ok",
                   esc(", ".join(f"{k}: {v}" for k, v in w["cells"].items()))]
                  for w in sweeps]
    body = (f"<h1>Runs in {esc(root.name)}</h1>"
            f"<p>{len(runs)} run(s), oldest first; click a header to sort. Per task: the "
            "first headline metric on the task's first split, of the system the notebook "
            "chose for that split (★), else of its best baseline or system; the run's "
            "index.html has the intervals and tests.</p>"
            + table(head, rows, "sortable")
            + (f"<p>{len(problems)} note(s) on the runs (a run that cannot be read is left "
               f"out):</p><ul>{notes}</ul>" if notes else "")
            + ("<h2>Sweeps</h2>" + table(["sweep", "profile", "status", "started", "cells",
                                          "cell status"], sweep_rows, "sortable")
               if sweeps else "")
            + "<h2>Headline metrics over runs</h2>" + _chart(runs, columns, titles))
    out = Path(path) if path else root / PAGE
    return write_text(out, page(f"Runs in {root.name}", body, script=SORT_JS,
                                run_dir=root, wide=True))
