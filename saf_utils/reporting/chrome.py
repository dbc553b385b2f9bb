"""What every page of a run shares around its content, as Jinja2 templates in
``templates/saf/``: ``index.html.j2`` (notebook pages, extending nbconvert's ``lab``
template) and ``page.html.j2`` (every other page) both use ``chrome.html.j2``'s navigation
bar, contents menu (the page's ``h1``–``h3`` with ids), code toggle and warnings box.

This module gives those templates their data: :func:`context` (the run's pages, for the
navigation bar), :func:`collect_warnings` (stderr outputs taken out of a notebook's cells),
:func:`link_metric_headers` (table headers that name a metric link to its card) and
:func:`downloads_section`. :func:`refresh` renders the bar of every page of a run again: a
page written before its siblings existed (a notebook page before the next notebook ran, any
page before a compare page) gets their links without rendering the notebook again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from saf_utils.reporting.sharing import esc

TEMPLATES = Path(__file__).parent / "templates"
CARDS_PAGE = "metric-cards.html"
HOW_TO_READ = "how-to-read.html"


@lru_cache(maxsize=1)
def environment() -> Any:
    """The Jinja2 environment of the run's pages (``templates/saf``); values are escaped in
    the templates (``| e``), bodies are HTML the callers built and sanitised."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / "saf"),
                              autoescape=False, keep_trailing_newline=True)


def _manifest(run_dir: Path) -> dict:
    try:
        data = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def context(run_dir: Path, current: str, code_toggle: bool = False) -> dict[str, Any]:
    """The navigation bar of page ``current`` (a file name in ``run_dir``): ``{"run",
    "groups": [(group label, [{"label", "href" (None: not rendered yet), "title",
    "here"}])], "code_toggle"}``. Notebooks come in the manifest's order, then any other
    numbered page; ``../runs.html`` is linked for a run of the runner (it writes the
    reports folder's overview after every run)."""
    manifest = _manifest(run_dir)
    here = re.sub(r"^(examples-.*)-\d+\.html$", r"\1.html", current)  # an example page's 1st

    def link(label: str, href: str | None, title: str = "") -> dict[str, Any]:
        return {"label": label, "href": href, "title": title, "here": href == here}

    notebooks, seen = [], set()
    for n in manifest.get("notebooks") or []:
        name = str(n.get("name"))
        file = f"{name}.html"
        seen.add(file)
        rendered = (run_dir / file).is_file() or file == current
        notebooks.append(link(name.split("_", 1)[0], file if rendered else None,
                              name + ("" if rendered else " (not rendered)")))
    notebooks += [link(p.stem.split("_", 1)[0], p.name, p.stem)
                  for p in sorted(run_dir.glob("[0-9]*.html")) if p.name not in seen]
    compare = [link(p.stem.removeprefix("compare").lstrip("-") or "baseline", p.name, p.stem)
               for p in sorted(run_dir.glob("compare*.html"))]
    examples = [link(p.stem.removeprefix("examples-"), p.name, "one example, every system")
                for p in sorted(run_dir.glob("examples-*.html"))
                if not re.search(r"-\d+\.html$", p.name)]  # first pages only
    groups = [("", [link("index", "index.html"), link("results", "results.html")]),
              ("notebooks", notebooks), ("compare", compare), ("examples", examples),
              ("", [link("metric cards", CARDS_PAGE, "definition, range, direction, "
                         "implementation and reference of every metric"),
                    link("how to read", HOW_TO_READ, "what the pages' numbers and terms mean")])]
    if manifest.get("invocations") or (run_dir.parent / "runs.html").is_file():
        groups.append(("", [link("all runs", "../runs.html", "the reports folder's runs")]))
    return {"run": manifest.get("run") or run_dir.name, "code_toggle": code_toggle,
            "groups": [(g, links) for g, links in groups if links]}


def nav_bar(run_dir: Path, current: str, code_toggle: bool = False) -> str:
    """The navigation bar of page ``current`` as HTML (``chrome.html.j2``'s ``nav``)."""
    macro = environment().get_template("chrome.html.j2").module.nav
    return str(macro(context(run_dir, current, code_toggle)))


#: the bar in a page: nbconvert's HTML exporter re-serialises pages (BeautifulSoup), which
#: may reorder the attributes, so the class is matched wherever it stands
_NAV = re.compile(r'<nav\b[^>]*\bclass="saf-nav"[^>]*>.*?</nav>', re.S)


def without_bar(text: str) -> str:
    """A page without its navigation bar: what stays the same while :func:`refresh` rewrites
    the bar as the run's pages appear (reuse verifies pages by this)."""
    return _NAV.sub("", text, count=1)


def refresh(run_dir: Path) -> None:
    """Render the navigation bar of every page of the run folder again (the run's pages as
    they are now)."""
    from saf_utils.reporting.manifest import write_text

    for p in sorted(run_dir.glob("*.html")):
        try:
            old = p.read_text(encoding="utf-8")
        except OSError:
            continue
        bar = nav_bar(run_dir, p.name, 'id="saf-code-toggle"' in old)
        new = _NAV.sub(lambda _, bar=bar: bar, old, count=1)
        if new != old:
            write_text(p, new)


# ------------------------------------------------------------------ metric links
def link_metric_headers(text: str) -> str:
    """A ``<th>`` whose text starts with a registered metric name links it to its card."""
    from saf_utils.metrics import METRICS

    if not METRICS:
        return text
    names = "|".join(re.escape(n) for n in sorted(METRICS, key=len, reverse=True))
    pat = re.compile(rf"(<th\b[^>]*>\s*)({names})(?=[\s<(,]|$)")

    def one(m: re.Match) -> str:
        name = m.group(2)
        tip = esc(METRICS[name].description)
        return (f'{m.group(1)}<a class="saf-metric" href="{CARDS_PAGE}#{esc(name)}" '
                f'title="{tip}">{name}</a>')

    return pat.sub(one, text)


# ------------------------------------------------------------------ warnings
def collect_warnings(nb: Any) -> list[dict[str, Any]]:
    """Take every stderr output out of the notebook's cells; ``[{"text", "count", "where"}]``
    (identical messages once, with the sections they came from)."""
    from saf_utils.reporting.notebook_exec import section_starts

    starts = section_starts(nb)
    section = ""
    found: dict[str, dict[str, Any]] = {}
    for i, cell in enumerate(nb.cells):
        section = starts.get(i, section)
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = _stream_text(out.get("text", ""))
                if text:
                    entry = found.setdefault(text, {"text": text, "count": 0, "where": []})
                    entry["count"] += 1
                    where = f"{section or 'top'} (cell {cell.get('execution_count') or i})"
                    if where not in entry["where"]:
                        entry["where"].append(where)
                continue
            keep.append(out)
        cell["outputs"] = keep
    return list(found.values())


def _stream_text(value: str | Sequence[str]) -> str:
    """A stream's text with carriage-return redraws (progress bars) reduced to their last
    state and ANSI colours removed."""
    text = value if isinstance(value, str) else "".join(value)
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(lines).strip()


# ------------------------------------------------------------------ downloads
def downloads_section(run_dir: Path, records: Sequence[dict]) -> str:
    """Per task: links to its predictions and per-item scores (the JSON lines files of the
    notebook that recorded its results; :mod:`saf_utils.artifacts` names them)."""
    import pandas as pd

    from saf_utils.artifacts import (
        GENERATIONS_FILE,
        ITEMS_FILE,
        SAF_PREDICTIONS_FILE,
        SELECTIONS_FILE,
    )
    from saf_utils.reporting.tables import html

    by_task: dict[str, set[str]] = {}
    for r in records:
        if (r.get("kind") or "result") == "result" and r.get("task") and r.get("notebook") \
                and r.get("system") != "data":  # 01's data counts are no predictions
            by_task.setdefault(str(r["task"]), set()).add(str(r["notebook"]))
    pred_globs = (SAF_PREDICTIONS_FILE.format(split="*"), SELECTIONS_FILE, GENERATIONS_FILE)

    def links(files: list[str]) -> str:
        return ", ".join(f'<a href="{esc(f)}">{esc(f)}</a> <small>({_size(run_dir / f)})'
                         "</small>" for f in files) or "—"

    rows = []
    for task in sorted(by_task):
        preds, items = [], []
        for nb in sorted(by_task[task]):
            folder = run_dir / nb
            preds += [f"{nb}/{p.name}" for p in
                      sorted({p for g in pred_globs for p in folder.glob(g)})]
            if (folder / ITEMS_FILE).is_file():
                items.append(f"{nb}/{ITEMS_FILE}")
        if preds or items:
            rows.append([task, links(preds), links(items)])
    if not rows:
        return ""
    cols = ["task", "predictions", "per-item scores (every task of the notebook)"]
    table = html(pd.DataFrame(rows, columns=cols), interactive=False, html_columns=cols[1:])
    return (f'<h2 id="downloads">Downloads: predictions and per-item scores</h2>{table}'
            '<p class="note">gzip-compressed JSON lines, one object per line (zcat or '
            "pandas <code>read_json(path, lines=True)</code> read them). Every interactive table "
            "also has a <i>Download CSV</i> button (the rows its filters show).</p>")


def _size(path: Path) -> str:
    try:
        n = path.stat().st_size
    except OSError:
        return "?"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{max(n / 1e3, 0.1):.1f} kB"
