"""A run comparison (:func:`saf_utils.reporting.compare.compare_runs`) for people: Markdown
for the terminal (:func:`to_markdown`) and the HTML page ``compare.html`` /
``compare-<run>.html`` (:func:`write_compare_html`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.pages import esc, fmt, page, table


def _v(x: Any) -> str:
    if isinstance(x, float):
        return fmt(x, 4)
    if isinstance(x, str) and re.fullmatch(r"[0-9a-f]{40,64}", x):
        return x[:12]
    return json.dumps(x) if not isinstance(x, str) else x



def _where(c: dict) -> str:
    return " / ".join(str(c[k]) for k in ("task", "dataset", "split") if c.get(k) is not None)



def _test(c: dict) -> str:
    t = c.get("test")
    if not t:
        return "no items"
    if "error" in t:
        return f"n/a ({t['error'][:60]})"
    return (f"{'**significant** ' if t['significant'] else ''}p={fmt(t['p'], 2)} "
            f"(Holm {fmt(t['p_adj'], 2)}) [{fmt(t['low'])}, {fmt(t['high'])}] n={t['n_items']}")



def to_markdown(cmp: dict) -> str:
    def md(head: list[str], rows: list[list[str]]) -> list[str]:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
        return out + [""]

    lines = [f"# {cmp['b_name']} compared with {cmp['a_name']} (B - A)", "",
             f"A = {cmp['a']}", f"B = {cmp['b']}", ""]
    lines += ["## Setup", ""] + (md(["what", "A", "B"], [[s["what"], _v(s["a"]), _v(s["b"])]
                                                         for s in cmp["setup"]])
                                 if cmp["setup"] else ["same profile, commit and lock file", ""])
    if cmp.get("identical"):
        lines += ["Reused (one execution, identical outputs): " + ", ".join(cmp["identical"]),
                  ""]
    lines += ["## Parameters", ""] + (md(["notebook", "parameter", "A", "B"],
                                         [[p["notebook"], p["parameter"], _param_text(p, "a"),
                                           _param_text(p, "b")]
                                          for p in cmp["parameters"]])
                                      if cmp["parameters"] else ["no difference", ""])
    lines += ["## Data", ""] + (md(["dataset", "split", "file", "A sha256", "B sha256"],
                                   [[d["dataset"], d["split"], d["file"], _v(d["a"]), _v(d["b"])]
                                    for d in cmp["data"]])
                                if cmp["data"] else ["same data files (SHA-256)", ""])
    lines += ["## Packages", ""] + (md(["package", "A", "B"],
                                       [[p["package"], p["a"] or "-", p["b"] or "-"]
                                        for p in cmp["packages"]])
                                    if cmp["packages"] else ["same installed packages", ""])
    lines += [f"## Results that changed ({len(cmp['changed'])}; {cmp['unchanged']} unchanged)",
              ""]
    if cmp["changed"]:
        lines += md(["task / dataset / split", "system", "metric", "subset", "A", "B", "B - A",
                     f"paired test (alpha {cmp['alpha']})"],
                    [[_where(c), c["system"], c["metric"], c["subset"] or "", fmt(c["a"], 4),
                      fmt(c["b"], 4), fmt(c["diff"], 3), _test(c)] for c in cmp["changed"]])
    for title, side in (("Appeared (only in B)", "appeared"),
                        ("Disappeared (only in A)", "disappeared")):
        rows = cmp[side]
        lines += [f"## {title}: {len(rows)}", ""]
        if rows:
            val = "b" if side == "appeared" else "a"
            lines += md(["task / dataset / split", "system", "metric", "subset", "value"],
                        [[_where(r), r["system"], r["metric"], r["subset"] or "",
                          fmt(r[val], 4)] for r in rows])
    return "\n".join(lines)



def write_compare_html(cmp: dict, path: str | os.PathLike) -> Path:
    def sec(title: str, head: list[str], rows: list[list[str]], empty: str) -> str:
        return f"<h2>{esc(title)}</h2>" + (table(head, rows) if rows else f"<p>{esc(empty)}</p>")

    def t(c: dict) -> str:
        txt = esc(_test(c).replace("**", ""))
        sig = (c.get("test") or {}).get("significant")
        return f'<td class="{"failed" if sig else ""}">{txt}</td>'

    body = [f"<h1>{esc(cmp['b_name'])} compared with {esc(cmp['a_name'])}</h1>",
            f"<p class=meta>A = {esc(cmp['a'])}<br>B = {esc(cmp['b'])}<br>Differences are "
            f"B - A; a paired randomization test on the per-item scores of both runs flags "
            f"significant ones (Holm-adjusted over all changed records, p &lt; "
            f"{cmp['alpha']}).</p>",
            sec("Setup", ["what", "A", "B"],
                [[esc(s["what"]), esc(_v(s["a"])), esc(_v(s["b"]))] for s in cmp["setup"]],
                "Same profile, commit and lock file."),
            (f"<p>Reused (one execution, identical outputs): {esc(', '.join(cmp['identical']))}"
             "</p>" if cmp.get("identical") else ""),
            sec("Parameters", ["notebook", "parameter", "A", "B"],
                [[esc(p["notebook"]), f"<b>{esc(p['parameter'])}</b>", esc(_param_text(p, "a")),
                  esc(_param_text(p, "b"))] for p in cmp["parameters"]], "No parameter differs."),
            sec("Data", ["dataset", "split", "file", "A sha256", "B sha256"],
                [[esc(d["dataset"]), esc(d["split"]), esc(d["file"]), esc(_v(d["a"])),
                  esc(_v(d["b"]))] for d in cmp["data"]], "Same data files (SHA-256)."),
            sec("Packages", ["package", "A", "B"],
                [[esc(p["package"]), esc(p["a"] or "—"), esc(p["b"] or "—")]
                 for p in cmp["packages"]], "Same installed packages."),
            sec(f"Results that changed ({len(cmp['changed'])}; {cmp['unchanged']} unchanged)",
                ["task / dataset / split", "system", "metric", "subset", "A", "B", "B − A",
                 "paired test"],
                [[esc(_where(c)), esc(c["system"]), esc(c["metric"]), esc(c["subset"] or ""),
                  f'<td class="num">{fmt(c["a"], 4)}</td>',
                  f'<td class="num">{fmt(c["b"], 4)}</td>',
                  f'<td class="num">{fmt(c["diff"], 3)}</td>', t(c)] for c in cmp["changed"]],
                "No result record changed."),
            sec(f"Appeared (only in B): {len(cmp['appeared'])}",
                ["task / dataset / split", "system", "metric", "subset", "value"],
                [[esc(_where(r)), esc(r["system"]), esc(r["metric"]), esc(r["subset"] or ""),
                  f'<td class="num">{fmt(r["b"], 4)}</td>'] for r in cmp["appeared"]], "None."),
            sec(f"Disappeared (only in A): {len(cmp['disappeared'])}",
                ["task / dataset / split", "system", "metric", "subset", "value"],
                [[esc(_where(r)), esc(r["system"]), esc(r["metric"]), esc(r["subset"] or ""),
                  f'<td class="num">{fmt(r["a"], 4)}</td>'] for r in cmp["disappeared"]],
                "None.")]
    run_dir = Path(path).parent  # inside a run folder: the run's navigation bar
    inside = (run_dir / "manifest.json").is_file()
    text = page(f"Compare {cmp['a_name']} → {cmp['b_name']}", "\n".join(body),
                run_dir=run_dir if inside else None, current=Path(path).name)
    return _with_navigation(Path(path), text)



def _with_navigation(path: Path, text: str) -> Path:
    """Write the page; inside a run folder, with its navigation bar, and the run's other
    pages then link it (:mod:`saf_utils.reporting.chrome`)."""
    from saf_utils.reporting import chrome, metric_cards

    run_dir = path.parent
    if not (run_dir / "manifest.json").is_file():
        return write_text(path, text)
    out = write_text(path, text)
    metric_cards.write_cards(run_dir / chrome.CARDS_PAGE, run_dir)
    chrome.refresh(run_dir)
    return out


def _param_text(row: dict, side: str) -> str:
    """How the pages show one side of a parameter row (a default says so)."""
    note = row.get(f"{side}_note")
    if note == "default":
        return f"{_v(row[side])} (default)"
    return f"({note})" if note else _v(row[side])
