"""The runs overview: ``runs.html`` in the reports folder, every run on one page.

Runs are grouped by profile and dataset: per group an interactive table (itables, offline)
with a row per run (link, status, commit, duration, per task the headline metric of the
system chosen for the task's first split, else its best one) and the comparison with the
group's previous run (the page ``saf-run compare`` wrote, else the command that writes it:
a file cannot run Python); a group of 2+ runs gets a chart of those values. ``saf-run list
--html`` writes the page, and so does every run at its end.

Why not an experiment tracker (MLflow): the run folders already are the store
(``metrics.json``, the manifest), and pages are shared as files, offline; ``mlflow ui`` is
a server with its own store that a colleague cannot open from a copied folder, and a large
dependency tree for one table and one chart.
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
NO_DATA = "no result records"


def run_headlines(run_dir: Path, problems: list[str] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Per task ``{"metric", "dataset", "split", "system", "value", "lo", "hi", "chosen",
    "title"}``: the system chosen on the task's first split (else the best), on its first
    headline metric. Records that cannot be compared are left out, counted in ``problems``."""
    from saf_utils.reporting.compare import record_problem
    from saf_utils.reporting.crossrun import frame, headline_cells, task_metrics
    from saf_utils.reporting.headline import chosen_by_split, chosen_on, split_verdict

    try:
        records = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["records"]
        bad = {i: why for i, r in enumerate(records if isinstance(records, list) else 0)
               if (why := record_problem(r))}
    except (OSError, ValueError, KeyError, TypeError):  # no readable records: no headline
        return {}
    if bad and problems is not None:
        i = next(iter(bad))
        problems.append(f"{run_dir.name}/metrics.json: {len(bad)} record(s) left out of its "
                        f"headline (records[{i}]: {bad[i]})")
    records = [r for i, r in enumerate(records) if i not in bad]
    df = frame({run_dir.name: records})
    out: dict[str, dict[str, Any]] = {}
    for task, title, metrics, splits in task_metrics(df):
        tables = headline_cells(df, task, metrics)
        if not tables:
            continue
        order = {s: i for i, s in enumerate(splits)}
        (ds, split), systems = min(tables.items(), key=lambda kv: (
            order.get(kv[0][1], len(order)), str(kv[0])))
        metric = next(m for m in metrics if any(m in e for e in systems.values()))
        chosen = [s for s in chosen_on(chosen_by_split(records, task), split)
                  if metric in systems.get(s, {})]
        system = chosen[0] if chosen else (split_verdict(systems, metric) or {}).get("top")
        if system is None:
            continue
        cell = systems[system][metric]
        out[task] = {"metric": metric, "dataset": ds, "split": split, "system": system,
                     "value": cell["mean"], "lo": cell["low"], "hi": cell["high"],
                     "chosen": bool(chosen), "title": title}
    return out


def _chart(runs: Sequence[dict], columns: Sequence[tuple[str, str]], dataset: str) -> str:
    """One panel per task column: its headline value (with its 95 % interval) per run of
    one group, the x axis the runs oldest first; empty under two runs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from saf_utils.metrics import scale_label

    if not columns or len(runs) < 2:
        return ""
    fig = Figure(figsize=(min(4.2 * len(columns), 14), 3.2), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    x = list(range(len(runs)))
    for ax, (task, metric) in zip(axes, columns, strict=True):
        hs = [(i, r["headlines"][task]) for i, r in enumerate(runs)
              if (r["headlines"].get(task) or {}).get("dataset") == dataset]
        if hs:
            ys = [h["value"] for _, h in hs]  # the interval as a bar, where there is one
            err = [[h["value"] - (h["lo"] if h["lo"] is not None else h["value"]) for _, h in hs],
                   [(h["hi"] if h["hi"] is not None else h["value"]) - h["value"] for _, h in hs]]
            ax.errorbar([i for i, _ in hs], ys, yerr=err, marker="o", capsize=3, lw=1)
        ax.set_title(f"{hs[0][1]['title'] if hs else task}\n{metric} ({scale_label(metric)})",
                     fontsize=10)
        ax.set_xticks(x, [str(r["run"]) for r in runs], rotation=35, ha="right", fontsize=8)
        ax.tick_params(axis="y", labelsize=9)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<img alt="headline metrics over the runs of this group" '
            f'src="data:image/png;base64,{data}">')


def _compare_cell(root: Path, previous: str | None, run: str, command: str) -> str:
    """The comparison of a run with the group's previous run: its page when it exists, else
    the command that writes it; and the one with its ``--baseline`` run when it has one."""
    out = ([f'<a href="{esc(run)}/compare.html">vs its baseline</a>']
           if (root / run / "compare.html").is_file() else [])
    if previous is not None:
        page = f"compare-{previous}.html"
        out.append(f'<a href="{esc(run)}/{esc(page)}">vs {esc(previous)}</a>'
                   if (root / run / page).is_file() else
                   f"<code>{esc(f'saf-run compare {previous} {run}{command}')}</code>")
    return "<br>".join(out)


def group_table(root: Path, key: tuple[str, str], runs: list[dict], rank: dict[str, int],
                n: int, command: str) -> list[Any]:
    """One group's heading, interactive table and (2+ runs) chart. Numbers are given as
    text: DataTables sorts a column of numbers and blanks as numbers, and a missing value
    stays blank (a float column would show NaN)."""
    import pandas as pd

    from saf_utils.reporting.crossrun import interactive
    from saf_utils.reporting.pages import fmt
    from saf_utils.text import interval

    profile, dataset = key
    columns = sorted(dict.fromkeys((t, h["metric"]) for r in runs
                                   for t, h in r["headlines"].items()
                                   if h["dataset"] == dataset),
                     key=lambda c: (rank.get(c[0], len(rank)), c))
    titles = {t: h["title"] for r in runs for t, h in r["headlines"].items()}
    rows = []
    for previous, r in zip([None, *(str(r["run"]) for r in runs)], runs, strict=False):
        name = str(r["run"])
        row = {"run": (f'<a href="{esc(name)}/index.html">{esc(name)}</a>'
                       if (root / name / "index.html").is_file() else esc(name)),
               "compare": _compare_cell(root, previous, name, command),
               "started": esc((r.get("started") or "").replace("+00:00", "Z")),
               "status": f'<span class="{esc(str(r.get("status")).split()[0])}">'
                         f'{esc(r.get("status"))}</span>',
               "commit": f"<code>{esc(r.get('commit'))}</code>",
               "duration (s)": (f"{r['seconds']:.1f}" if r.get("seconds") is not None
                                else ""),
               "notebooks": esc(r.get("notebooks"))}
        for task, metric in columns:
            h = r["headlines"].get(task)
            ok = h and h["metric"] == metric and h["dataset"] == dataset
            row[f"{titles[task]}: {metric}"] = f"{h['value']:.4g}" if ok else ""
            row[f"{titles[task]}: {metric}, system and [95% CI]"] = (
                f"{esc(h['system'])}{' ★' if h['chosen'] else ''}: "
                f"{esc(interval(h['value'], h['lo'], h['hi'], fmt))} "
                f"<small>({esc(h['split'])})</small>" if ok else "")
        rows.append(row)
    short = {} if len(rows) > 10 else {"paging": False, "layout": {  # no pages of one page
        "topStart": None, "topEnd": "search" if len(rows) > 5 else None, "bottomStart": None,
        "bottomEnd": None}}
    return [f'<h2 id="group-{n}">{esc(profile or "no profile")} · {esc(dataset)}</h2>',
            interactive(f"runs-{n}", pd.DataFrame(rows), None, filters=False, order=[],
                        **short), _chart(runs, columns, dataset) if dataset != NO_DATA else ""]


def write_overview(reports_dir: str | os.PathLike | None = None,
                   path: str | os.PathLike | None = None) -> Path:
    """``runs.html`` (or ``path``) over every run in the reports folder; runs that cannot be
    read are named under the tables, not dropped silently."""
    from saf_utils.reporting.manifest import PROJECT_ROOT, write_text
    from saf_utils.reporting.pages import page, table
    from saf_utils.reporting.profiles import REPORTS_DIR
    from saf_utils.reporting.run_folder import list_runs, list_sweeps
    from saf_utils.tasks import specs

    root = Path(reports_dir or REPORTS_DIR)
    problems: list[str] = []
    runs = list_runs(root, problems)
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:  # r["run"] is the run's folder (never a name or path from its manifest)
        try:
            r["headlines"] = run_headlines(root / str(r["run"]), problems)
        except Exception as exc:  # noqa: BLE001 - one run's records never fail the page
            r["headlines"] = {}
            problems.append(f"{r['run']}: headline left out ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]})")
        for ds in dict.fromkeys(str(h["dataset"]) for h in r["headlines"].values()) \
                or [NO_DATA]:
            groups.setdefault((str(r.get("profile") or ""), ds), []).append(r)
    sweeps = list_sweeps(root, problems)
    rank = {sp.name: i for i, sp in enumerate(specs())}
    where = root.resolve()
    command = ("" if where == REPORTS_DIR.resolve() else " --reports-dir " + (
        where.relative_to(PROJECT_ROOT).as_posix() if where.is_relative_to(PROJECT_ROOT)
        else "<this folder>"))
    sections = [part for n, key in enumerate(sorted(
        groups, key=lambda k: (k[0], k[1] == NO_DATA, k[1])), start=1)
        for part in group_table(root, key, groups[key], rank, n, command)]
    notes = "".join(f'<li class="warn">{esc(p)}</li>' for p in problems)
    sweep_rows = [[f'<a href="{esc(w["sweep"])}/sweep.html">{esc(w["sweep"])}</a>',
                   esc(w.get("profile") or ""),
                   f'<span class="{esc(w["status"].split()[0])}">{esc(w["status"])}</span>',
                   esc(str(w.get("started") or "").replace("+00:00", "Z")),
                   f"{sum(v == 'ok' for v in w['cells'].values())}/{len(w['cells'])} ok",
                   esc(", ".join(f"{k}: {v}" for k, v in w["cells"].items()))]
                  for w in sweeps]
    head = (f"<h1>Runs in {esc(root.name)}</h1>"
            f"<p>{len(runs)} run(s), oldest first, in {len(groups)} group(s) of one profile "
            "and dataset (a run is in the group of each dataset it has results on). Per "
            "task: the first headline metric on the task's first split, of the system the "
            "notebook chose for that split (★), else of its best baseline or system, with "
            "its 95% interval; the run's index.html has the tests.</p><p><b>compare</b>: "
            "the comparison with the group's previous run where <code>saf-run compare</code>"
            " wrote it, else the command that writes it: this page is a file and cannot run "
            "it (afterwards <code>saf-run list --html</code> links the new page).</p>")
    tail = ((f"<p>{len(problems)} note(s) on the runs (a run that cannot be read is left "
               f"out):</p><ul>{notes}</ul>" if notes else "")
            + ("<h2>Sweeps</h2>" + table(["sweep", "profile", "status", "started", "cells",
                                          "cell status"], sweep_rows) if sweeps else ""))
    return write_text(Path(path or root / PAGE), page(f"Runs in {root.name}",
                                                      [head, *sections, tail], run_dir=root,
                                                      wide=True))
