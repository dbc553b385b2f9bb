"""The parts both example pages (:mod:`saf_utils.reporting.examples`) are made of: anchors,
the list with its search box, per-item scores of each system's first seed, the order of
systems by role, and where a run keeps an artifact (:func:`artifact_folder`: pages find
their inputs by the file a notebook wrote, never by the notebook's name)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.reporting.sharing import esc


def artifact_folder(run_dir: Path, manifest: Mapping[str, Any], pattern: str) -> Path | None:
    """The output folder of the run's notebook that wrote a file named ``pattern`` (a glob
    of :mod:`saf_utils.artifacts`' file names); None when no notebook of the run did."""
    for n in manifest.get("notebooks") or []:
        folder = Path(run_dir) / str(n.get("name"))
        if folder.is_dir() and any(folder.glob(pattern)):
            return folder
    return None


def anchor(task: str, *keys: object) -> str:
    """The detail view's anchor of one example: ``saf-test_unseen_answers-17`` or
    ``argscichat-f0-<readable slug>-<hash>`` (ids with spaces or quotes get a slug and a
    short hash, so every anchor is a valid, unique fragment)."""
    import hashlib

    raw = "-".join(str(k) for k in keys)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-")[:60]
    if slug == raw:
        return f"{task}-{slug}"
    return f"{task}-{slug}-{hashlib.sha1(raw.encode()).hexdigest()[:8]}"


SEARCH_JS = """
const box=document.getElementById('ex-search'),rows=[...document.querySelectorAll(
  'table.ex-list tbody tr')],info=document.getElementById('ex-count');
function filter(){const t=box.value.trim().toLowerCase();let n=0;for(const r of rows){
  const hit=!t||r.textContent.toLowerCase().includes(t);r.hidden=!hit;n+=hit;}
  info.textContent=n+' of '+rows.length+' shown';}
box.addEventListener('input',filter);
const h=decodeURIComponent(location.hash.slice(1));
if(h&&!document.getElementById(h)){box.value=h;}
filter();
"""

def num(x: Any) -> str:
    """A number as the pages write it; blank for none or not finite."""
    from saf_utils.reporting.pages import fmt

    try:
        v = float(x)
    except (TypeError, ValueError):
        return ""
    return fmt(v) if math.isfinite(v) else ""


def first_seed(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Rows of each group's smallest seed (deterministic systems: seed None, kept)."""
    key = pd.to_numeric(df["seed"], errors="coerce").fillna(-1)
    return df[key == key.groupby([df[c] for c in by]).transform("min")]


def roles_of(records: Sequence[dict], task: str) -> dict[str, str]:
    """system -> role, from the first record of ``task`` that states one."""
    out: dict[str, str] = {}
    for r in records:
        if r.get("task") == task and r.get("role") and r.get("system") not in out:
            out[str(r["system"])] = str(r["role"])
    return out


def ordered(systems: Iterable[str], roles: Mapping[str, str]) -> list[str]:
    """Systems in role order (registry.ROLES), then by name."""
    from saf_utils.registry import ROLES

    rank = {r: i for i, r in enumerate(ROLES)}
    return sorted(set(systems), key=lambda s: (rank.get(roles.get(s, ""), len(rank)), s))


def scores_of(items: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, dict[str, float]]:
    """``{(*keys, system): {metric: value}}`` of the first seed of each system."""
    if items.empty:
        return {}
    first = first_seed(items, [*keys[:-1], "system", "metric"]) if "seed" in items else items
    out: dict[tuple, dict[str, float]] = {}
    for row in first.itertuples(index=False):
        k = tuple(str(getattr(row, c)) for c in keys) + (str(row.system),)
        out.setdefault(k, {})[str(row.metric)] = row.value
    return out


#: The most examples one example page holds (list rows and detail views): more examples make
#: more pages (``examples-saf.html``, ``examples-saf-2.html``, ...), so that no page grows
#: with the data (a page of every answer was 9.2 MB, 92 MB at ten times the data); each page
#: links the others with the first and last example they hold.
PER_PAGE = 100


def page_file(stem: str, k: int) -> str:
    """The file of page ``k`` (from 1) of the example pages ``stem`` (``examples-saf``)."""
    return f"{stem}.html" if k == 1 else f"{stem}-{k}.html"


def build_pages(title: str, stem: str, run_dir: Path, intro: str, list_head: Sequence[str],
                list_rows: list[list[str]], details: list[str], labels: list[str]
                ) -> list[tuple[str, str]]:
    """``[(file, text)]``: the examples in pages of at most :data:`PER_PAGE`, each with a
    pager (``labels``: how each example is named there)."""
    spans = [(a, min(a + PER_PAGE, len(list_rows)))
             for a in range(0, max(len(list_rows), 1), PER_PAGE)]
    out = []
    for k, (a, b) in enumerate(spans, 1):
        pager = "" if len(spans) == 1 else (
            f'<p class="pager">Page {k} of {len(spans)} ({PER_PAGE} examples a page; the '
            "search box searches this page): " + " · ".join(
                (f"<b>{j}</b>" if j == k else f'<a href="{page_file(stem, j)}">{j}</a>')
                + f" <small>{esc(labels[x])} … {esc(labels[y - 1])}</small>"
                for j, (x, y) in enumerate(spans, 1)) + "</p>")
        name = title if len(spans) == 1 else f"{title} (page {k} of {len(spans)})"
        out.append((page_file(stem, k), build_page(name, run_dir, intro + pager, list_head,
                                                   list_rows[a:b], details[a:b],
                                                   page_file(stem, k))))
    return out


def build_page(title: str, run_dir: Path, intro: str, list_head: Sequence[str],
               list_rows: list[list[str]], details: list[str], current: str) -> str:
    """An example page: title, intro, the detail views (one shown: ``:target``), the list."""
    from saf_utils.reporting.pages import page

    body = (f"<h1>{esc(title)}</h1>\n{intro}\n"  # the picked example (:target) above the list
            + "\n".join(details)
            + '<h2 id="ex-list">All examples</h2><p><input id="ex-search" type="search" '
            'size="40" placeholder="search the list (any text)"> <small id="ex-count"></small>'
            f"</p>{cells_table(list_head, list_rows, 'ex-list')}\n")
    return page(title, body, script=SEARCH_JS, run_dir=run_dir, current=current, wide=True)


def cells_table(head: Sequence[str], rows: list[list[str]], classes: str = "") -> str:
    """A static table of cells that are already HTML (data escaped by the caller)."""
    from saf_utils.reporting.tables import html

    return str(html(pd.DataFrame(rows, columns=list(head)), interactive=False,
                    html_columns=head, classes=classes))


def metric_column(metric: str) -> str:
    """A metric's column name with its direction and range ("accuracy ↑ 0–1")."""
    from saf_utils.metrics import scale_label

    return f"{metric} {scale_label(metric)}"


def seed_text(x: Any) -> str:
    """A seed as an integer; blank for a deterministic system's None."""
    try:
        return "" if x is None or math.isnan(float(x)) else str(int(float(x)))
    except (TypeError, ValueError):
        return str(x)


def natural(x: Any) -> tuple:
    """Numbers in ids sort as numbers (2 before 10)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t)
                 for t in re.findall(r"\d+|\D+", str(x)))


def intro(summary: str, guide: str, note: str = "") -> str:
    """A page's first paragraph: the link home, what it lists (``summary``), how to read it
    (``guide``), and a warning ``note`` if any (all but ``summary`` are the page's own text)."""
    return (f'<p><a href="index.html">headline page</a> · {summary}{guide}</p>'
            + (f'<p class="warn">{esc(note)}</p>' if note else ""))
