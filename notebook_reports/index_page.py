"""``index.html``, the headline page of a run: first the answer per task and split
(:func:`glance_table`: the ★ system to report, its verdict against the runner-up, the published
numbers beside it), then the run (commit, times, notebooks), per task and split the lead
sentence and table of :mod:`.headline` with one figure per task, and the data files read."""

from __future__ import annotations

import base64
import math
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from notebook_reports import headline as H
from notebook_reports.manifest import write_text
from notebook_reports.pages import duration_text, page
from notebook_reports.published import published_html
from notebook_reports.sharing import esc
from saf_utils.metrics import bounds, scale_label


def dot_plot(tables: dict[tuple, dict[str, dict]], metrics: Sequence[str], title: str) -> str:
    """One PNG (base64 <img>): per metric a panel, systems on y, mean with 95% CI per split."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from saf_utils.figures import palette, png

    present = [m for m in metrics if any(m in e for t in tables.values() for e in t.values())]
    if not present:
        return ""
    systems = list(dict.fromkeys(s for t in tables.values()
                                 for s in H.system_order(t, present[0])))[::-1]
    fig = Figure(figsize=(3.4 * len(present) + 1.2, 0.32 * len(systems) + 1.3), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(present), sharey=True, squeeze=False)[0]
    keys = sorted(tables, key=str)
    colours, markers = palette(len(keys)), "osD^v<>"
    for ax, metric in zip(axes, present, strict=True):
        for k, key in enumerate(keys):
            for y, s in enumerate(systems):
                if not (cell := tables[key].get(s, {}).get(metric)):
                    continue
                err = None if cell["low"] is None else [[cell["mean"] - cell["low"]],
                                                        [cell["high"] - cell["mean"]]]
                ax.errorbar(cell["mean"], y + (k - (len(keys) - 1) / 2) * 0.18, xerr=err,
                            fmt=markers[k % len(markers)], color=colours[k], capsize=2, ms=4,
                            alpha=0.45 if tables[key][s]["role"] in H.SET_APART else 1.0)
        ax.set_title(f"{metric} ({scale_label(metric)})", fontsize=9)
        if (b := bounds(metric)) is not None:  # the axis stays inside the metric's range ...
            lo, hi = ax.get_xlim()
            pad = 0.02 * ((b[1] - b[0]) if math.isfinite(b[1]) else (hi - lo))
            means = [c["mean"] for t in tables.values() for e in t.values()
                     if isinstance(c := e.get(metric), dict)]
            # ... unless an estimate lies outside it: the declared range is then wrong, and
            # the figure shows the point rather than cut it off
            ax.set_xlim(max(lo, min([b[0], *means]) - pad), min(hi, max([b[1], *means]) + pad))
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(range(len(systems)))
    axes[0].set_yticklabels(systems, fontsize=8)
    if len(keys) > 1:  # one column right of the panels: never over points or titles
        fig.legend([Line2D([], [], marker=markers[k % len(markers)], color=colours[k], ls="")
                    for k in range(len(keys))],
                   [str(split) if len({d for d, _ in keys}) == 1 else f"{ds} {split}"
                    for ds, split in keys],
                   loc="upper left", bbox_to_anchor=(1, 0.95), ncol=1, fontsize=8,
                   frameon=False)
    fig.suptitle(f"{title}: mean with 95% CI (faded: ceilings and probes)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    alt = f"{title}: mean and 95% interval of {', '.join(present)} per system"
    return (f'<img alt="{esc(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(png(fig)).decode("ascii")}">')

def leaks(sources: Sequence[dict], t: dict) -> tuple[dict[str, int], list[str]]:
    """The nonzero ``leak_*`` anomaly counts of the split's data files and their names
    (ArgSciChat files are ``fold<k>/<split>``)."""
    ds, split = t["spec"].source.name if t["spec"] else str(t["task"]), str(t["split"])
    hits: dict[str, int] = defaultdict(int)
    files = set()
    for src in sources:
        of = str(src.get("split"))
        if str(src.get("dataset")) == ds and (of == split or of.endswith("/" + split)):
            for kind, n in (src.get("anomalies") or {}).items():
                if str(kind).startswith("leak_") and isinstance(n, int | float) and n > 0:
                    hits[str(kind)] += int(n)
                    files.add(Path(str(src.get("path"))).name)
    return dict(sorted(hits.items())), sorted(files)

def task_splits(records: list[dict]) -> Iterator[dict[str, Any]]:
    """Per task (registered specs first) and split in page order: title, metrics, the cells
    (:func:`.crossrun.headline_cells`), ★ systems, paired differences on the leading metric."""
    from notebook_reports.crossrun import frame, headline_cells, task_metrics
    from notebook_reports.tasks import spec, system_line

    df = frame({"": records})
    for task, title, metrics, splits in task_metrics(df):
        tables = headline_cells(df, task, metrics)
        chosen = H.chosen_by_split(records, task)
        diffs = H.paired_differences(records, task)
        sp = spec(task)
        order = {split: i for i, split in enumerate(splits)}
        for i, ((ds, split), systems) in enumerate(sorted(tables.items(), key=lambda kv: (
                order.get(kv[0][1], len(order)), str(kv[0])))):
            metric = next(m for m in metrics if any(m in e for e in systems.values()))
            yield {"task": task, "title": title, "metrics": metrics, "tables": tables,
                   "spec": sp, "first": i == 0, "last": i == len(tables) - 1,
                   "dataset": ds, "split": split, "systems": systems, "metric": metric,
                   "chosen": H.chosen_on(chosen, split),
                   "anchors": [a for a in (sp.published if sp else ()) if a.split == split],
                   "diffs": {(k[2], k[4]): v for k, v in diffs.items()
                             if k[0] == ds and k[1] == split and k[3] == metric},
                   "leak_free": leak_free_cells(records, task, ds, split),
                   "titles": {s: line for s in systems if (line := system_line(task, s))}}

#: The ``subset`` of a headline record on a split's answers not also in train (where the
#: task's notebook finds any).
LEAK_FREE = "leak-free answers"


def leak_free_cells(records: list[dict], task: str, dataset: Any, split: Any
                    ) -> dict[tuple[str, str], dict]:
    """``{(system, metric): {"mean", "low", "high", "what"}}`` of the split's leak-free
    headline records (subset "leak-free answers (k of n)")."""
    out = {}
    for r in records:
        sub = str(r.get("subset") or "")
        if (r.get("task") == task and str(r.get("dataset")) == str(dataset)
                and r.get("split") == split and sub.startswith(LEAK_FREE)
                and r.get("fold") is None and r.get("seed") is None):
            out[(str(r.get("system")), str(r.get("metric")))] = {
                "mean": r["value"], "low": r.get("ci_low"), "high": r.get("ci_high"),
                "what": sub}
    return out


def _glance(t: dict) -> dict | None:
    """What the first screen says of a split: the reportable system (★, chosen without the
    test data), a ceiling beside it (never in its place), the system its verdict compares it
    with (the runner-up, else the highest on test; ``top``: ★ is the highest), its primary
    comparison, and its value on the leak-free answers (the caveat that changes the reading)."""
    systems, metric = t["systems"], t["metric"]
    if (v := H.split_verdict(systems, metric)) is None:
        return None
    top, runner = v
    ranked = [s for s in H.system_order(systems, metric) if metric in systems[s]]
    g = {"t": t, "star": next((s for s in ranked if s in t["chosen"]), None)}
    if (star := g["star"]) is not None:
        other = runner if top == star else top
        per_fold = re.search(r"\(per fold: (.*)\)$", t["chosen"].get(star, ""))
        g.update(top=top == star, other=other, leak_free=t["leak_free"].get((star, metric)),
                 ceiling=next((s for s in ranked if systems[s]["role"] == "gold_input"), None),
                 per_fold=per_fold and per_fold.group(1),
                 primary=next((d for (s, _), d in t["diffs"].items()
                               if s == star and d["primary"] and d["ref"] != other), None))
    return g

def macros() -> Any:
    """The macros of ``run.html.j2`` with the functions they call (``H`` is :mod:`.headline`)."""
    from notebook_reports.chrome import macros

    return macros("run.html.j2", H=H, published_html=published_html,
                  duration_text=duration_text)

def glance_table(records: list[dict]) -> str:
    """"At a glance": per task and split the ★ system, its verdict, the published numbers."""
    return str(macros().glance([g for g in map(_glance, task_splits(records)) if g]))

def task_sections(records: list[dict], sources: Sequence[dict] = ()) -> list[str]:
    """Per task a section: per split the lead sentence, a leakage warning, the headline
    table, its design note, notes and published numbers; one dot plot."""
    sections, parts = [], []
    for t in task_splits(records):
        notes = [n for s, n in ((t["split"], t["spec"].headline_note), *t["spec"].split_notes)
                 if s == t["split"] and n] if t["spec"] else []
        parts.append(str(macros().split(t, notes, leaks(sources, t))))
        if t["last"]:
            try:
                parts.append(dot_plot(t["tables"], t["metrics"], t["title"]))
            except Exception as exc:  # noqa: BLE001 - a figure must not cost the page
                parts.append(f'<p class="warn">figure failed: {esc(exc)}</p>')
            sections.append("\n".join(parts))
            parts = []
    return sections

def project_name() -> str:
    """The project as its package metadata describes it (pyproject's ``description``)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        return metadata("saf_utils")["Summary"] or "saf_utils"
    except PackageNotFoundError:
        return "saf_utils"

def run_subject(records: list[dict]) -> tuple[str, str]:
    """What a run is about, from its result records: a short name (the first word of each
    task title: "SAF & ArgSciChat") and the tasks with the data they read ("SAF (short
    answer feedback) on saf_micro_job_german; …")."""
    short: dict[str, None] = {}
    data: dict[str, dict[str, None]] = defaultdict(dict)
    for t in task_splits(records):
        short[str(t["title"]).split()[0]] = None
        data[str(t["dataset"])][t["title"]] = None
    return (" & ".join(short),
            "; ".join(f"{', '.join(ts)} on {ds}" for ds, ts in data.items()))

def write_index(run_dir: Path, manifest: dict, records: list[dict]) -> Path:
    """``index.html`` of a run."""
    from notebook_reports import chrome

    git, notebooks = manifest.get("git") or {}, manifest.get("notebooks", [])
    latest, depends_on = {n["name"]: n for n in notebooks}, manifest.get("depends_on") or {}

    def stale(n: dict) -> list[str]:
        """The inputs of ``n`` rerun after it read them (a reused notebook: when it ran)."""
        read_at = (n.get("reused") or {}).get("at") or n.get("started")
        ran = {d: (m.get("reused") or {}).get("at") or m["finished"] for d in depends_on.get(
            n["name"], []) if (m := latest.get(d) or {}).get("finished")}
        return [d for d, at in ran.items() if read_at and at > read_at]

    short, tasks = run_subject(records)
    title = (f"{short} · " if short else "") + f"run {manifest.get('run', run_dir.name)}"
    files = []
    for s in manifest.get("data_sources") or []:
        found = {k: v for k, v in sorted((s.get("anomalies") or {}).items()) if v}
        files.append((s, Path(str(s.get("path"))).name, found,
                      any(str(k).startswith("leak_") for k in found)))
    body = macros().index(
        title, manifest, project_name(), tasks,
        (git.get("commit") or "unknown")[:12] + (" (dirty)" if git.get("dirty") else ""),
        glance_table(records), [(n, stale(n)) for n in notebooks],
        (run_dir / "compare.html").is_file(),
        task_sections(records, manifest.get("data_sources") or []),
        chrome.downloads_section(run_dir, records), files)
    return write_text(run_dir / "index.html",
                      page(title, str(body), run_dir=run_dir, current="index.html"))
