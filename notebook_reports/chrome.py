"""What every page of a run shares around its content (``templates/saf/chrome.html.j2``:
navigation bar, contents menu, code toggle, warnings box) and the templates' environment."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from notebook_reports.sharing import esc

TEMPLATES = Path(__file__).parent / "templates"
CARDS_PAGE = "metric-cards.html"
HOW_TO_READ = "how-to-read.html"


@lru_cache(maxsize=1)
def environment() -> Any:
    """The templates escape values with :func:`.sharing.esc` (``| e``; None: empty); bodies
    are HTML the callers built and sanitised."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / "saf"),
                             autoescape=False, keep_trailing_newline=True)
    env.filters.update(e=esc, escape=esc)
    return env


def macros(template: str, **functions: Any) -> Any:
    """The macros of a template in ``templates/saf/``, ``functions`` among its names."""
    return environment().get_template(template).make_module(functions)


def context(run_dir: Path, current: str, code_toggle: bool = False) -> dict[str, Any]:
    """The navigation bar of page ``current``: ``{"run", "code_toggle", "groups": [(label,
    [{"label", "href" (None: not rendered yet), "title", "here"}])]}``."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        manifest = manifest if isinstance(manifest, dict) else {}
    except (OSError, ValueError):
        manifest = {}
    def link(label: str, href: str | None, title: str = "") -> dict[str, Any]:
        return {"label": label, "href": href, "title": title, "here": href == current}

    notebooks = []
    names = [str(n.get("name")) for n in manifest.get("notebooks") or []]
    for name in names:
        ok = (run_dir / f"{name}.html").is_file() or f"{name}.html" == current
        notebooks.append(link(name.split("_", 1)[0], f"{name}.html" if ok else None,
                              name + ("" if ok else " (not rendered)")))
    notebooks += [link(p.stem.split("_", 1)[0], p.name, p.stem)
                  for p in sorted(run_dir.glob("[0-9]*.html")) if p.stem not in names]
    compare = [link(p.stem.removeprefix("compare").lstrip("-") or "baseline", p.name, p.stem)
               for p in sorted(run_dir.glob("compare*.html"))]
    groups = [("", [link("index", "index.html"), link("results", "results.html")]),
              ("notebooks", notebooks), ("compare", compare),
              ("", [link("metric cards", CARDS_PAGE, "definition, range, direction, "
                         "implementation and reference of every metric"),
                    link("how to read", HOW_TO_READ, "what the pages' numbers and terms mean")])]
    return {"run": manifest.get("run") or run_dir.name, "code_toggle": code_toggle,
            "groups": [(g, links) for g, links in groups if links]}


#: the bar in a page; nbconvert re-serialises pages and may reorder the attributes
_NAV = re.compile(r'<nav\b[^>]*\bclass="saf-nav"[^>]*>.*?</nav>', re.S)


def without_bar(text: str) -> str:
    """A page without the bar :func:`refresh` rewrites (reuse verifies pages by this)."""
    return _NAV.sub("", text, count=1)


def refresh(run_dir: Path) -> None:
    """Render the bar of every page of ``run_dir`` again: a page written before its siblings
    (an early notebook, a reused page, any page before a compare page) then links them."""
    from notebook_reports.manifest import write_text

    nav = macros("chrome.html.j2").nav
    for p in sorted(run_dir.glob("*.html")):
        try:
            old = p.read_text(encoding="utf-8")
        except OSError:
            continue
        bar = str(nav(context(run_dir, p.name, 'id="saf-code-toggle"' in old)))
        if (new := _NAV.sub(lambda _, bar=bar: bar, old, count=1)) != old:
            write_text(p, new)


def link_metric_headers(text: str) -> str:
    """A ``<th>`` whose text starts with a registered metric name links it to its card."""
    from saf_utils.metrics import METRICS

    if not METRICS:
        return text
    names = "|".join(re.escape(n) for n in sorted(METRICS, key=len, reverse=True))
    return re.sub(rf"(<th\b[^>]*>\s*)({names})(?=[\s<(,]|$)", lambda m: (
        f'{m[1]}<a class="saf-metric" href="{CARDS_PAGE}#{esc(m[2])}" '
        f'title="{esc(METRICS[m[2]].description)}">{m[2]}</a>'), text)


def collect_warnings(nb: Any) -> list[dict[str, Any]]:
    """Take every stderr output out of the notebook's cells: ``[{"text", "count", "where"}]``,
    identical messages once; progress bars' redraws (``\\r``) reduced to their last state."""
    from notebook_reports.notebook_exec import section_starts

    starts, section, found = section_starts(nb), "", {}
    for i, cell in enumerate(nb.cells):
        section = starts.get(i, section)
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream" or out.get("name") != "stderr":
                keep.append(out)
                continue
            raw = out.get("text", "")
            text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw if isinstance(raw, str) else
                          "".join(raw))  # ANSI colours
            text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n")).strip()
            if text:
                entry = found.setdefault(text, {"text": text, "count": 0, "where": []})
                entry["count"] += 1
                where = f"{section or 'top'} (cell {cell.get('execution_count') or i})"
                if where not in entry["where"]:
                    entry["where"].append(where)
        cell["outputs"] = keep
    return list(found.values())


def downloads_section(run_dir: Path, records: Sequence[dict]) -> str:
    """Per task: links to its predictions and per-item scores (the JSON lines files of the
    notebooks that recorded its results), each with its size."""
    from saf_utils.data import artifacts as a

    by_task: dict[str, set[str]] = {}
    for r in records:
        if (r.get("kind") or "result") == "result" and r.get("task") and r.get("notebook") \
                and r.get("system") != "data":  # 01's data counts are no predictions
            by_task.setdefault(str(r["task"]), set()).add(str(r["notebook"]))
    globs = (a.SAF_PREDICTIONS_FILE.format(split="*"), a.SELECTIONS_FILE, a.GENERATIONS_FILE,
             a.ITEMS_FILE)
    rows = []
    for task in sorted(by_task):
        files = [(f"{nb}/{p.name}", p.stat().st_size) for nb in sorted(by_task[task]) for p in
                 sorted({p for g in globs for p in (run_dir / nb).glob(g) if p.is_file()})]
        items = [f for f in files if f[0].endswith("/" + a.ITEMS_FILE)]
        if files:
            rows.append((task, [f for f in files if f not in items], items))
    return str(macros("run.html.j2").downloads(rows))
