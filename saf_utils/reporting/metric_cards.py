"""The metric cards page: every registered metric object (:data:`saf_utils.metrics.METRICS`)
with its definition, range, direction, level, resampling, implementation and reference,
generated from those objects (no hand-written HTML per metric). Table headers that name a
metric link to ``metric-cards.html#<name>``
(:func:`saf_utils.reporting.chrome.link_metric_headers`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from saf_utils.metrics import METRICS, Metric
from saf_utils.reporting.sharing import esc

FIELDS = ("definition", "range", "direction", "level", "resampling", "implementation",
          "reference")


def card(m: Metric, used: bool = False) -> str:
    """One metric as a card (an ``id`` of its name for links)."""
    rows = "".join(f"<tr><th>{esc(f)}</th><td>{esc(getattr(m, f) or '—')}</td></tr>"
                   for f in FIELDS)
    tag = ' <small class="note">(in this run)</small>' if used else ""
    return (f'<div class="card" id="{esc(m.name)}"><h3><code>{esc(m.name)}</code> '
            f"<small>{esc(m.description)}</small>{tag}</h3><table>{rows}</table></div>")


def cards_body(used: set[str] = frozenset()) -> str:
    """Every registered metric, those recorded in the run first, then the rest, by name."""
    order = sorted(METRICS.values(), key=lambda m: (m.name not in used, m.name))
    import pandas as pd

    from saf_utils.reporting.tables import html

    summary = html(pd.DataFrame(
        [[f'<a href="#{esc(m.name)}">{esc(m.name)}</a>', m.range, m.direction, m.level,
          m.description] for m in order],
        columns=["metric", "range", "direction", "level", "in short"]),
        interactive=False, html_columns=["metric"])
    return ("<h1>Metric cards</h1><p>Every metric the collection registers (one "
            "<code>Metric</code> object each in <code>saf_utils/metrics/</code>, which also "
            "gives the pages their direction and scale and the tasks their scorers). "
            "Metrics recorded in this run come first. A metric not listed here is shown as "
            "higher-is-better on no fixed range.</p>"
            f"<h2 id=\"summary\">Summary</h2>{summary}"
            "<h2 id=\"cards\">Cards</h2>" + "".join(card(m, m.name in used) for m in order))


def recorded_metrics(run_dir: Path | None) -> set[str]:
    """Metric names of the run's records (``metrics.json``; empty when absent)."""
    if run_dir is None:
        return set()
    try:
        records = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["records"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    return {str(r.get("metric")) for r in records if isinstance(r, dict)}


def write_cards(path: Path, run_dir: Path | None = None) -> Path:
    """Write the cards page (with the run's navigation bar when ``run_dir`` is given) and,
    next to it, the glossary ``how-to-read.html`` (:func:`write_how_to_read`)."""
    from saf_utils.reporting.manifest import write_text
    from saf_utils.reporting.pages import page

    css = ".card{margin:1em 0}.card table th{width:9em;background:#f6f6f6}" \
          ".card h3{margin-bottom:.2em}"
    write_how_to_read(path.parent, run_dir)
    return write_text(path, page("Metric cards", cards_body(recorded_metrics(run_dir)),
                                 run_dir=run_dir, current=path.name, css=css))


def write_how_to_read(folder: Path, run_dir: Path | None = None) -> Path:
    """``how-to-read.html``: the glossary ``how_to_read.md`` (the project's own text),
    rendered with mistune (nbconvert's Markdown renderer) in the run's layout."""
    import mistune

    from saf_utils.reporting.chrome import HOW_TO_READ
    from saf_utils.reporting.manifest import write_text
    from saf_utils.reporting.pages import page

    text = (Path(__file__).parent / "how_to_read.md").read_text(encoding="utf-8")
    # the project's own text: its anchor lines (<a id="term"></a>, the targets of the
    # index's links) stay HTML; the page sanitises the body all the same
    body = mistune.create_markdown(escape=False, plugins=["table"])(text)
    body = re.sub(r"<h([1-3])>(.*?)</h\1>",
                  lambda m: f'<h{m[1]} id="{_slug(m[2])}">{m[2]}</h{m[1]}>', body)
    return write_text(folder / HOW_TO_READ, page("How to read the pages", body,
                                                 run_dir=run_dir, current=HOW_TO_READ))


def _slug(heading: str) -> str:
    """A heading's id (for the contents menu and links): its words joined by ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"<[^>]+>", "", heading).lower()).strip("-")
