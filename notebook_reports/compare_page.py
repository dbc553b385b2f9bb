"""A run comparison (:func:`.compare.compare_runs`) for people: Markdown for the terminal
(:func:`to_markdown`) and the page ``compare.html`` / ``compare-<run>.html``
(:func:`write_compare_html`), both from one list of :func:`sections`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from notebook_reports.manifest import write_text
from notebook_reports.pages import esc, fmt

WHERE = "task / dataset / split"
NUMBERS = {"A", "B", "B - A", "value"}  # right-aligned in the results' sections


def _v(x: Any) -> str:
    if isinstance(x, float):
        return fmt(x, 4)
    if isinstance(x, str) and re.fullmatch(r"[0-9a-f]{40,64}", x):
        return x[:12]
    return json.dumps(x) if not isinstance(x, str) else x


def _where(c: dict) -> str:
    return " / ".join(str(c[k]) for k in ("task", "dataset", "split") if c.get(k) is not None)


def _test(c: dict, unread: bool = False) -> str:
    t = c.get("test")
    if not t:
        return "no items (per-item files not read: see below)" if unread else "no items"
    if "error" in t:
        return f"n/a ({t['error'][:60]})"
    return (f"{'**significant** ' if t['significant'] else ''}p={fmt(t['p'], 2)} "
            f"(Holm {fmt(t['p_adj'], 2)}) [{fmt(t['low'])}, {fmt(t['high'])}] "
            f"n={t['n_items']}")


def _param_text(row: dict, side: str) -> str:
    """How the pages show one side of a parameter row (a default says so)."""
    note = row.get(f"{side}_note")
    if note == "default":
        return f"{_v(row[side])} (default)"
    return f"({note})" if note else _v(row[side])


def sections(cmp: dict) -> list[tuple[str, list[str], list[list[str]], str, list[str]]]:
    """(title, header, rows of plain text, text when there is no row, notes) per section."""
    def only(side: str, val: str) -> list[list[str]]:
        return [[_where(r), r["system"], r["metric"], r["subset"] or "", fmt(r[val], 4)]
                for r in cmp[side]]

    return [
        ("Setup", ["what", "A", "B"], [[s["what"], _v(s["a"]), _v(s["b"])]
                                        for s in cmp["setup"]],
         "Same profile, commit and lock file.",
         ["Reused (one execution, identical outputs): " + ", ".join(cmp["identical"])]
         if cmp.get("identical") else []),
        ("Parameters", ["notebook", "parameter", "A", "B"],
         [[p["notebook"], p["parameter"], _param_text(p, "a"), _param_text(p, "b")]
          for p in cmp["parameters"]], "No parameter differs.", []),
        ("Data", ["dataset", "split", "file", "A sha256", "B sha256"],
         [[d["dataset"], d["split"], d["file"], _v(d["a"]), _v(d["b"])] for d in cmp["data"]],
         "Same data files (SHA-256).", []),
        ("Packages", ["package", "A", "B"], [[p["package"], p["a"] or "-", p["b"] or "-"]
                                              for p in cmp["packages"]],
         "Same installed packages.", []),
        (f"Results that changed ({len(cmp['changed'])}; {cmp['unchanged']} unchanged)",
         [WHERE, "system", "metric", "subset", "A", "B", "B - A",
          f"paired test (alpha {cmp['alpha']})"],
         [[_where(c), c["system"], c["metric"], c["subset"] or "", fmt(c["a"], 4),
           fmt(c["b"], 4), fmt(c["diff"], 3), _test(c, bool(cmp.get("item_notes")))]
          for c in cmp["changed"]],
         "No result record changed.",
         [f"{len(notes)} per-item file(s) not read, so no paired test on their items: "
          + "; ".join(notes)] if (notes := cmp.get("item_notes")) else []),
        (f"Appeared (only in B): {len(cmp['appeared'])}",
         [WHERE, "system", "metric", "subset", "value"], only("appeared", "b"), "None.", []),
        (f"Disappeared (only in A): {len(cmp['disappeared'])}",
         [WHERE, "system", "metric", "subset", "value"], only("disappeared", "a"), "None.",
         [])]


def to_markdown(cmp: dict) -> str:
    lines = [f"# {cmp['b_name']} compared with {cmp['a_name']} (B - A)", "",
             f"A = {cmp['a']}", f"B = {cmp['b']}", ""]
    for title, head, rows, empty, notes in sections(cmp):
        table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                 *("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |"
                   for r in rows)]
        lines += [f"## {title}", "", *(table if rows else [empty]), ""]
        lines += [x for t in notes for x in (t, "")]
    return "\n".join(lines)


def write_compare_html(cmp: dict, path: str | os.PathLike) -> Path:
    """The comparison as a page; a significant change's test cell is marked (``failed``).
    Inside a run folder it has the run's navigation bar and the run's pages link it."""
    from notebook_reports import chrome, metric_cards
    from notebook_reports.pages import page, table

    path = Path(path)
    body = [f"<h1>{esc(cmp['b_name'])} compared with {esc(cmp['a_name'])}</h1>",
            f"<p class=meta>A = {esc(cmp['a'])}<br>B = {esc(cmp['b'])}<br>Differences are "
            f"B - A; a paired randomization test on the per-item scores of both runs flags "
            f"significant ones (Holm-adjusted over all changed records, p &lt; "
            f"{cmp['alpha']}).</p>"]

    def cell(name: str, text: str, r: int, numbers: bool) -> str:
        if numbers and name in NUMBERS:
            return f'<td class="num">{esc(text)}</td>'
        if name.startswith("paired test"):
            sig = (cmp["changed"][r].get("test") or {}).get("significant")
            return f'<td class="{"failed" if sig else ""}">{esc(text.replace("**", ""))}</td>'
        return f"<b>{esc(text)}</b>" if name == "parameter" else esc(text)

    for title, head, rows, empty, notes in sections(cmp):
        numbers = head[0] == WHERE  # the results' sections
        body.append(f"<h2>{esc(title)}</h2>" + (table(head, [
            [cell(head[j], t, r, numbers) for j, t in enumerate(row)]
            for r, row in enumerate(rows)]) if rows else f"<p>{esc(empty)}</p>"))
        body += [f"<p>{esc(t)}</p>" for t in notes]
    inside = (path.parent / "manifest.json").is_file()  # a run folder
    out = write_text(path, page(f"Compare {cmp['a_name']} → {cmp['b_name']}", "\n".join(body),
                                run_dir=path.parent if inside else None, current=path.name))
    if inside:
        metric_cards.write_cards(path.parent / chrome.CARDS_PAGE, path.parent)
        chrome.refresh(path.parent)
    return out
