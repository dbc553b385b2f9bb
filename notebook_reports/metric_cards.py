"""``metric-cards.html``, generated from the registered metric objects
(:data:`saf_utils.metrics.METRICS`), and the glossary ``how-to-read.html``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from saf_utils.metrics import METRICS, Metric


def _macros() -> Any:
    from notebook_reports.chrome import macros

    return macros("cards.html.j2")


def card(m: Metric, used: bool = False) -> str:
    """One metric as a card, with its name as ``id`` (the target of table headers' links)."""
    return str(_macros().card(m, used))


def cards_body(used: set[str] = frozenset()) -> str:
    """Every registered metric, those recorded in the run first, then the rest, by name."""
    return str(_macros().body(sorted(METRICS.values(), key=lambda m: (m.name not in used, m.name)),
                              used))


def systems_markdown() -> str:
    """The glossary's systems section, generated from the registrations: per task, one line
    per registered system (its name, role and description; :func:`tasks.system_line`)."""
    from notebook_reports import tasks
    from notebook_reports.chrome import environment

    seen: set[int] = set()
    groups = []
    for sp in tasks.specs():
        regs = [r for r in tasks.registries(sp.name) if id(r) not in seen]
        seen.update(map(id, regs))
        groups += [(sp.title, [(n, tasks.system_line(sp.name, n)) for n in reg]) for reg in regs]
    return environment().get_template("systems.md.j2").render(
        groups=groups, composites=tasks.COMPOSITES)


def write_cards(path: Path, run_dir: Path | None = None) -> Path:
    """Write the cards page and, next to it, ``how-to-read.html`` (``how_to_read.md`` through
    mistune, nbconvert's Markdown renderer), with ``run_dir``'s navigation bar."""
    import mistune

    from notebook_reports.chrome import HOW_TO_READ
    from notebook_reports.manifest import write_text
    from notebook_reports.pages import page

    try:
        records = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["records"]
        used = {str(r.get("metric")) for r in records if isinstance(r, dict)}
    except (OSError, ValueError, KeyError, TypeError):  # no run_dir or no records (yet)
        used = set()
    text = (Path(__file__).parent / "how_to_read.md").read_text(encoding="utf-8") \
        + systems_markdown()
    # its anchor lines (<a id="term"></a>, the index's link targets) stay HTML; headings get
    # ids (contents menu); the page sanitises the body all the same
    body = re.sub(r"<h([1-3])>(.*?)</h\1>", lambda m: '<h{0} id="{1}">{2}</h{0}>'.format(
        m[1], re.sub(r"[^a-z0-9]+", "-", re.sub(r"<[^>]+>", "", m[2]).lower()).strip("-"),
        m[2]), mistune.create_markdown(escape=False, plugins=["table"])(text))
    write_text(path.parent / HOW_TO_READ, page("How to read the pages", body,
                                               run_dir=run_dir, current=HOW_TO_READ))
    return write_text(path, page("Metric cards", cards_body(used), run_dir=run_dir,
                                 current=path.name))
