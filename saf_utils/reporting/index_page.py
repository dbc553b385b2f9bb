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

from saf_utils.metrics import bounds, scale_label
from saf_utils.reporting import headline as H
from saf_utils.reporting.headline import GLOSSARY, term
from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.pages import duration_text, page, table
from saf_utils.reporting.sharing import esc
from saf_utils.taskspec import Published


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

def leakage_note(sources: Sequence[dict], t: dict) -> str:
    """A warning naming the nonzero ``leak_*`` anomaly counts of the split's data files
    (ArgSciChat files are ``fold<k>/<split>``)."""
    ds, split = t["spec"].source.name if t["spec"] else str(t["task"]), t["split"]
    hits: dict[str, int] = defaultdict(int)
    files = set()
    for src in sources:
        split_of = str(src.get("split"))
        if str(src.get("dataset")) != ds or (split_of != str(split)
                                             and not split_of.endswith("/" + str(split))):
            continue
        for kind, n in (src.get("anomalies") or {}).items():
            if str(kind).startswith("leak_") and isinstance(n, int | float) and n > 0:
                hits[str(kind)] += int(n)
                files.add(Path(str(src.get("path"))).name)
    if not hits:
        return ""
    counts = ", ".join(f"{esc(k)} {v}" for k, v in sorted(hits.items()))
    return (f'<p class="warn leak">⚠ Leakage: the data of this split has content shared with '
            f"other data ({counts}; in {esc(', '.join(sorted(files)))}). These numbers may "
            "overstate how the systems do on new data.</p>")

def task_splits(records: list[dict]) -> Iterator[dict[str, Any]]:
    """Per task (registered specs first) and split in page order: title, metrics, the cells
    (:func:`.crossrun.headline_cells`), ★ systems, paired differences on the leading metric."""
    from saf_utils.all_tasks import spec, system_line
    from saf_utils.reporting.crossrun import frame, headline_cells, task_metrics

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

#: The ``subset`` of a headline record on a split's answers that are not also in train (the
#: task's notebook writes it where the leakage check finds any).
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


def published_value(p: Published, metric: str, value: float) -> str:
    """A cited value as the source prints it, with its scale ("81.0 %", "0.162 (0–1)"),
    converted to the metric's own scale only where the metric is the same here and the
    scales differ ("81.0 % = 0.810"); a metric computed differently here is said to be."""
    if p.scale == "percent" and bounds(metric) == (0.0, 100.0):  # SacreBLEU: its own scale
        txt = f"{value:.1f} <small>(0–100)</small>"
    elif p.scale == "percent":
        txt = f"{value:.1f} %"
        if metric in p.comparable and bounds(metric) == (0.0, 1.0):
            txt += f" <small>= {value / 100:.3f}</small>"
    else:
        txt = f"{value:.3f} <small>(0–1)</small>"
    if metric not in p.comparable:
        txt += " <small>(computed differently here)</small>"
    return txt

def reproduction(p: Published, metric: str, cell: dict | None) -> str:
    """The measured value of the published system (``p.measured``) beside the published one:
    "reproduced" where the measured mean, rounded as the source prints its numbers (3
    decimals on 0-1, 1 on percent), equals it; else the difference. "" where the metric is
    not computed the same way here or the system was not run."""
    value = dict(p.values).get(metric)
    if not p.measured or value is None or metric not in p.comparable or not cell:
        return ""
    mean = cell["mean"] * (100.0 if p.scale == "percent" and bounds(metric) == (0.0, 1.0)
                           else 1.0)
    digits = 1 if p.scale == "percent" else 3
    shown = f"{mean:.{digits}f}"
    if float(shown) == round(value, digits):
        verdict = (f'<b class="same" title="the measured mean rounded to the published '
                   f'{digits} decimals equals the published value">reproduced</b>')
    else:
        verdict = (f'<b class="warn">not reproduced</b>: measured minus published '
                   f"{mean - value:+.{digits}f}")
    return (f"{verdict} <small>(measured {esc(p.measured)} {H.value_html(cell)})"
            "</small>")


def published_html(anchors: Sequence[Published], dataset: Any, metrics: Sequence[str],
                   names: bool = True, systems: dict[str, dict] | None = None) -> str:
    """The published numbers of one split (:class:`~saf_utils.taskspec.Published`) for
    ``metrics`` (``names``: say which metric each value is): per source, each system's
    values with their scale, beside the run's own value of the system that implements it
    (``systems``: the split's cells; :func:`reproduction`), whether the source's data is this
    run's (``dataset``), the link; values the source reports that could not be quoted are
    named with where they are published. "" without any."""
    groups: dict[tuple, list[Published]] = defaultdict(list)
    for a in anchors:
        groups[(a.source, a.url, a.dataset)].append(a)
    parts = []
    # the same data first: that is the number to set beside the run's
    for (source, url, ds), group in sorted(groups.items(),
                                           key=lambda kv: str(kv[0][2]) != str(dataset)):
        same = ('<b class="same">same data</b>' if str(ds) == str(dataset) else
                f'<b class="warn">different data</b> <small>({esc(ds)})</small>')
        values = []
        for a in group:
            got = dict(a.values)
            shown = [(f"{esc(m)} " if names else "") + published_value(a, m, got[m])
                     + (f" {rep}" if str(ds) == str(dataset) and (rep := reproduction(
                         a, m, (systems or {}).get(a.measured, {}).get(m))) else "")
                     for m in metrics if got.get(m) is not None]
            if shown:
                values.append(f"{esc(a.system)} " + ", ".join(shown))
            if unquoted := [m for m, v in a.values if v is None]:
                values.append(f"{esc(a.system)} {esc(', '.join(unquoted))}: "
                              + esc(a.unquoted or "published in the source; not quoted here"))
        if values:
            parts.append(f'{same}: {"; ".join(values)} <small>(<a href="{esc(url)}" '
                         f'title="{esc(source)}">source</a>)</small>')
    return "<br>".join(parts)

def _glance_row(t: dict) -> list[str] | None:
    """The reportable system (★, chosen without the test data) of a split with its value,
    its verdict against the runner-up (or the highest on test), the published numbers."""
    systems, metric, titles = t["systems"], t["metric"], t["titles"]
    if (v := H.split_verdict(systems, metric)) is None:
        return None
    star = next((s for s in H.system_order(systems, metric)
                 if s in t["chosen"] and metric in systems[s]), None)
    link = f'<a href="#{esc(t["task"])}-{esc(t["split"])}">'
    where = f'{link}{esc(t["title"])}</a><br><small>{esc(t["split"])} · {esc(t["dataset"])}</small>'
    verdict = ""
    if star is None:
        rep = (f"<small>no system was chosen without the test data here; see the {link}section"
               "</a></small>")
    else:
        rep = (f'★ <b>{H.name_html(star, titles)}</b>{H.input_mark(systems[star])}<br>'
               f'{esc(metric)} '
               f'<small class="scale" title="{esc(H.direction(metric))}">'
               f"{esc(scale_label(metric))}</small> {H.value_html(systems[star][metric])}")
        if lf := t["leak_free"].get((star, metric)):  # the caveat that changes the reading
            rep += (f'<br><small class="warn leak">⚠ on the {esc(lf["what"])}: '
                    f'{H.value_html(lf)}</small> <small>(the full split above stays '
                    "comparable with published numbers)</small>")
        ceiling = [s for s in H.system_order(systems, metric)
                   if systems[s]["role"] == "gold_input" and metric in systems[s]]
        if ceiling:  # a ceiling stands beside the deployable ★, never in its place
            c = ceiling[0]
            rep += (f"<br><small>ceiling, not deployable: {H.name_html(c, titles)}"
                    f"{H.input_mark(systems[c])} "
                    f"{H.value_html(systems[c][metric])}</small>")
        if composite := re.search(r"\(per fold: (.*)\)$", t["chosen"].get(star, "")):
            rep += f"<br><small>per fold: {esc(composite.group(1))}</small>"  # fold's choice
        if t["spec"] is not None and t["spec"].headline_note:
            rep += f'<br><small>{esc(t["spec"].headline_note)} {link}All metrics below</a>.</small>'
        other = v["runner"] if v["top"] == star else v["top"]  # else the highest on test
        if other is None:
            verdict = "no other comparable system"
        else:
            who = (f"the runner-up <b>{H.name_html(other, titles)}</b>" if v["top"] == star
                   else f"the highest on test <b>{H.name_html(other, titles)}</b> "
                   f"{H.value_html(systems[other][metric])} <small>(for reference only)</small>")
            verdict = H.gap_html(H.oriented(t["diffs"], star, other),
                                 who + H.input_mark(systems[other]), metric)
            primary = next((d for (s, _ref), d in t["diffs"].items()
                            if s == star and d["primary"] and d["ref"] != other), None)
            if primary is not None:
                verdict += "<br>" + H.gap_html(primary, f"the reference <b>"
                                               f"{esc(primary['ref'])}</b>", metric)
            if v["top"] == star:
                verdict += "<br><small>★ is also the highest on test.</small>"
    return [where, rep, verdict, published_html(t["anchors"], t["dataset"], [metric],
                                                names=False, systems=systems)
            or "<small>none declared</small>"]

def glance_table(records: list[dict]) -> str:
    rows = [r for r in map(_glance_row, task_splits(records)) if r]
    if not rows:
        return ""
    head = ["task · split · data",
            f"<th>{term('★ reportable', 'reportable')} system: value "
            f"[{term('95 % interval', 'interval')}]</th>",
            "<th>vs the runner-up (is the lead real?)</th>",
            f"<th>{term('published', 'published')} (cited) and our run of the same "
            "system</th>"]
    return ('<h2 id="at-a-glance">At a glance</h2>' + table(head, rows, "glance")
            + f'<p class="note">Cite the ★ system: it was chosen on validation (or, where '
            "validation cannot speak, by cross-validation on train), never on test, among "
            "the systems a user could deploy. Ceilings (systems that read "
            f"{term('gold inputs', 'gold-inputs')}, oracles) and probes never count; ⚠ marks "
            "them. Hover a system's name for what it is. Every term: "
            f'<a href="{GLOSSARY}">how to read these numbers</a>; every metric and interval '
            "is in the task sections below.</p>")

def task_sections(records: list[dict], sources: Sequence[dict] = ()) -> list[str]:
    """Per task a section: per split the lead sentence, a leakage warning, the headline
    table, its design note, notes and published numbers; one dot plot."""
    sections, parts = [], []
    for t in task_splits(records):
        task, split, systems = t["task"], t["split"], t["systems"]
        if t["first"]:
            parts = [f'<h2 id="{esc(task)}">{esc(t["title"])}</h2>']
        parts += [f'<h3 id="{esc(task)}-{esc(split)}">{esc(split)} '
                  f'<small>({esc(t["dataset"])})</small></h3>',
                  H.lead_html(systems, t["metric"], t["chosen"], t["diffs"]),
                  leakage_note(sources, t),
                  H.headline_html(systems, t["metrics"], t["chosen"], t["titles"]),
                  H.design_html(systems)]
        sp = t["spec"]
        if notes := [esc(n) for s, n in ((split, sp.headline_note), *sp.split_notes)
                     if s == split and n] if sp else []:
            parts.append(f'<p class="note">{" ".join(notes)}</p>')
        if cited := published_html(t["anchors"], t["dataset"], t["metrics"],
                                   systems=systems):
            parts.append(f'<p class="published">{term("Published", "published")} (cited, '
                         f"not measured here): {cited}</p>")
        if t["last"]:
            try:
                parts.append(dot_plot(t["tables"], t["metrics"], t["title"]))
            except Exception as exc:  # noqa: BLE001 - a figure must not cost the page
                parts.append(f'<p class="warn">figure failed: {esc(exc)}</p>')
            sections.append("\n".join(parts))
    return sections

def _notebook_row(n: dict, latest: dict[str, dict], depends_on: dict[str, list[str]]
                  ) -> list[str]:
    """One notebook's row: page link (stale when an input was rerun after it read it),
    status (reused: from where), time, start, error."""
    name = esc(n["name"])
    read_at = (n.get("reused") or {}).get("at") or n.get("started")
    newer = [d for d in depends_on.get(n["name"], [])
             if read_at and (latest.get(d) or {}).get("finished")
             and ((latest[d].get("reused") or {}).get("at") or latest[d]["finished"])
             > read_at]
    if newer:  # an input was rerun after this notebook read it
        name += f' <small class="warn">(stale: {esc(", ".join(newer))} rerun later)</small>'

    link = f'<a href="{esc(n["html"])}">{name}</a>' if n.get("html") else name
    err = esc((n.get("error") or "")[:300])
    state = f'<span class="{esc(n["status"])}">{esc(n["status"])}</span>'
    if n.get("reused"):
        orig = n["reused"].get("original") or {}
        state += (f' <small class="reused">reused from {esc(n["reused"].get("from"))}'
                  f' (executed {esc(orig.get("started"))} at commit '
                  f'<code>{esc(str(orig.get("commit") or "?")[:8])}</code>'
                  f'{" dirty" if orig.get("dirty") else ""})</small>')
    return [link, state, f'<td class="num">{duration_text(n.get("seconds"))}</td>',
            esc(n.get("started") or ""), err]

def _warnings(manifest: dict) -> str:
    """Earlier executions in the run folder, skipped record lines, unfinished notebooks (their
    numbers carry †)."""
    prev = [f'<a href="{esc(e["archived_to"])}/{esc(e["name"])}.html">{esc(e["name"])} '
            f'({esc(e["status"])}, {esc(e.get("started"))})</a>'
            for e in manifest.get("executions", []) if e.get("archived_to")]
    skipped = (manifest.get("records") or {}).get("skipped_lines", 0)
    failed = [n["name"] for n in manifest.get("notebooks", [])
              if n["status"] in ("failed", "interrupted")]
    return ((f"<p class=note>Earlier executions in this run folder: {', '.join(prev)}</p>"
             if prev else "")
            + (f'<p class="warn">{skipped} bad record line(s) skipped (listed in manifest.json '
               "under records.skipped).</p>" if skipped else "")
            + ('<p class="warn">† marks numbers from a notebook that did not finish: '
               f"{esc(', '.join(failed))}.</p>" if failed else ""))

INDEX_NOTE = (
    f"""<p class="note">Cells: mean [95 % interval] of the headline record (fold and seed null);
the note under each table names the interval's method and {term('estimand', 'estimand')};
{term('‡', 'clipped')} marks an interval clipped to the metric's range.
{term('*', 'mean-star')} = no headline record, mean over the per-seed/per-fold records without
an interval. 3 significant digits. Beside each metric: ↑ higher or ↓ lower is better, and its
range. Bold: best baseline or system on test. {term('★', 'reportable')}: the system the
notebook chose for that split without the test data, the one to report (hover for how).
Only <code>result</code> records are shown; analysis and tuning records are in metrics.json
and the notebooks. Published numbers come from the task specs and are cited, never
measured here. Every term: <a href="{GLOSSARY}">how to read these numbers</a>.</p>""")

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
    from saf_utils.reporting import chrome

    git, status = manifest.get("git") or {}, manifest.get("status", "?")
    latest = {n["name"]: n for n in manifest.get("notebooks", [])}
    nb_rows = [_notebook_row(n, latest, manifest.get("depends_on") or {})
               for n in manifest.get("notebooks", [])]
    commit = esc((git.get("commit") or "unknown")[:12]) + (" (dirty)" if git.get("dirty") else "")
    short, tasks = run_subject(records)
    title = (f"{short} · " if short else "") + f"run {manifest.get('run', run_dir.name)}"
    links = ['<a href="results.html">all result records</a>',
             *(['<a href="compare.html">comparison with the baseline run</a>']
               if (run_dir / "compare.html").is_file() else []),
             '<a href="manifest.json">manifest.json</a>', '<a href="metrics.json">metrics.json</a>']
    sections = task_sections(records, manifest.get("data_sources") or [])
    body = f"""<h1>{esc(title)}
<span class="{esc(status)}">{esc(status)}</span></h1>
<p class="meta">{esc(project_name())}.{" Tasks: " + esc(tasks) + "." if tasks else ""}
Profile <b>{esc(manifest.get('profile'))}</b>: {esc(manifest.get('description') or '')}</p>
{glance_table(records)}
<p class="meta">Commit <code>{commit}</code> · started {esc(manifest.get('started'))} ·
finished {esc(manifest.get('finished') or '—')}</p>
{table(['notebook', 'status', 'time', 'started', 'error'], nb_rows)}
{_warnings(manifest)}
<p>{" · ".join(links)}</p>
{''.join(sections) or '<p>No result record yet.</p>'}
{INDEX_NOTE}{chrome.downloads_section(run_dir, records)}{data_table(manifest)}"""
    return write_text(run_dir / "index.html",
                      page(title, body, run_dir=run_dir, current="index.html"))

def data_table(manifest: dict) -> str:
    """The data files of the run by dataset, split, file name and SHA-256 (no paths)."""
    rows = []
    for s in manifest.get("data_sources") or []:
        found = {k: v for k, v in sorted((s.get("anomalies") or {}).items()) if v}
        sha = str(s.get("sha256") or "")
        leak = "warn" if any(str(k).startswith("leak_") for k in found) else ""
        rows.append([esc(s.get("dataset")), esc(s.get("split")),
                     esc(Path(str(s.get("path"))).name),
                     f'<td><code title="{esc(sha)}">{esc(sha[:16])}</code></td>',
                     f'<td class="num">{esc(s.get("rows", ""))}</td>',
                     f'<td class="{leak}">'
                     f'{esc(", ".join(f"{k} {v}" for k, v in found.items()))}</td>'])
    if not rows:
        return ""
    return ('<h2 id="data">Data files</h2>' + table(
        ["dataset", "split", "file", "SHA-256", "rows", "content anomalies"], rows)
        + '<p class="note">Full SHA-256 on hover and in manifest.json.</p>')
