"""``examples-argscichat.html``: every scored test message pair of the fact selection and
reply notebooks; its detail view shows the history, the query, the gold reply, the gold
facts, the facts each selector chose (with its Fact-F1) and every reply system's reply with
its per-item metrics (:mod:`saf_utils.reporting.examples` writes it). Pair texts come from
the data folder the run read (its ``data_sources``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils import artifacts as AR
from saf_utils.reporting.example_parts import (
    anchor,
    artifact_folder,
    build_pages,
    cells_table,
    first_seed,
    intro,
    metric_column,
    num,
    ordered,
    roles_of,
    scores_of,
)
from saf_utils.reporting.sharing import esc

STEM = "examples-argscichat"
LIST_HEAD = ["fold", "pair", "turn", "query", "gold reply", "★ selector: Fact-F1"]
GUIDE = (" Pick a pair (the search box filters the list) to see its history, the query, the "
         "gold reply and facts, the facts each selector chose and every reply system's reply, "
         "with per-item metrics (seeded systems: first seed). ★: the system chosen on that "
         "fold's validation split; the list shows that selector's Fact-F1.")


def _pairs(manifest: Mapping[str, Any], folds: Iterable[int]) -> tuple[dict, str]:
    """``{(fold, pair_id): MessagePair}`` of the test pairs, read from the data folder the run
    recorded in its data sources, and a note when it is gone (the page then shows what the
    run's own files hold: selected sentences, replies, gold replies)."""
    from saf_utils.argscichat.data import load_argscichat

    roots = [str(s.get("source")) for s in manifest.get("data_sources") or []
             if s.get("dataset") == "argscichat" and s.get("source")]
    root = next((r for r in roots if Path(r).is_dir()), None)
    if root is None:
        return {}, ("The data folder this run read is not on this machine: history, query "
                    "and gold facts are not shown.")
    out = {}
    for f in folds:
        for p in load_argscichat(root, fold=int(f)).test:
            out[(int(f), p.pair_id)] = p
    return out, ""


def _facts_list(content: Sequence[str], indexes: Iterable[int], gold: set[int]) -> str:
    lis = [f'<li class="{"hit" if i in gold else "other"}" title="sentence {i}'
           f'{" (gold)" if i in gold else ""}">[{i}] {esc(content[i])}</li>'
           for i in indexes if 0 <= i < len(content)]
    return f"<ul>{''.join(lis)}</ul>" if lis else "<i>(none)</i>"


def _test_rows(folder: Path | None, read: Any) -> pd.DataFrame:
    """The first seed's test rows of one artifact (none: an empty frame)."""
    if folder is None:
        return pd.DataFrame(columns=["fold", "split"])
    df = read(folder)
    return first_seed(df[df.split == "test"], ["fold", "system"]) if len(df) else df


def _by_pair(df: pd.DataFrame) -> dict[tuple, dict[str, dict]]:
    """``{(fold, pair_id): {system: row}}`` (plain dicts: pandas per cell is slow)."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in (df.to_dict("records") if len(df) else []):
        out.setdefault((int(r["fold"]), str(r["pair_id"])), {})[str(r["system"])] = r
    return out


def argscichat_page(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                    ) -> list[tuple[str, str]] | None:
    """``examples-argscichat.html`` from the selections, the replies and both notebooks'
    per-item scores, with the pair texts from the run's data folder (``[(file, text)]``: pages
    of at most ``example_parts.PER_PAGE`` pairs); None when no notebook of the run wrote
    selections or replies."""
    d_sel = artifact_folder(run_dir, manifest, AR.SELECTIONS_FILE)
    d_gen = artifact_folder(run_dir, manifest, AR.GENERATIONS_FILE)
    if d_sel is None and d_gen is None:
        return None
    sel, gen = _test_rows(d_sel, AR.read_selections), _test_rows(d_gen, AR.read_generations)
    items = pd.concat([AR.read_items(d) for d in (d_sel, d_gen)
                       if d is not None and (d / AR.ITEMS_FILE).is_file()], ignore_index=True)
    view = _View(items[items.split == "test"] if len(items) else items, records)
    sel_by, gen_by = _by_pair(sel), _by_pair(gen)
    keys = sorted(set(sel_by) | set(gen_by))
    pairs, note = _pairs(manifest, sorted({k[0] for k in keys}))
    rows, details = [], []
    for f, pid in keys:
        row, detail = view.example(f, pid, pairs.get((f, pid)), sel_by.get((f, pid), {}),
                                   gen_by.get((f, pid), {}))
        rows.append(row)
        details.append(detail)
    return build_pages("ArgSciChat examples: one message pair, every system", STEM, run_dir,
                       intro(f"{len(rows)} test message pairs of {len({k[0] for k in keys})} "
                             "fold(s).", GUIDE, note), LIST_HEAD, rows, details,
                       [f"fold {f} {pid}" for f, pid in keys])


class _View:
    """What every pair's row and detail view share: the two tasks' scores, metrics, roles
    and the val choices per fold."""

    def __init__(self, items: pd.DataFrame, records: Sequence[dict]) -> None:
        from saf_utils.argscichat.spec import SPECS

        self.sel_task, self.gen_task = (s.name for s in SPECS)
        self.scores = scores_of(items, ["fold", "item"])
        self.sel_metrics = sorted(set(items[items.task == self.sel_task].metric)) \
            if len(items) else []
        self.gen_metrics = list(dict.fromkeys(items[items.task == self.gen_task].metric)) \
            if len(items) else []
        self.sel_roles = roles_of(records, self.sel_task)
        self.gen_roles = roles_of(records, self.gen_task)
        self.chosen = {(r.get("task"), r.get("fold")): str(r.get("system")) for r in records
                       if r.get("kind") == "tuning" and r.get("subset") == "chosen"
                       and r.get("fold") is not None}

    def example(self, f: int, pid: str, p: Any, s_rows: dict[str, dict],
                g_rows: dict[str, dict]) -> tuple[list[str], str]:
        """One pair's list row and detail view (``p``: its MessagePair, None when the data
        folder is gone)."""
        aid = anchor("argscichat", f"f{f}", pid)
        gold_reply = p.reply if p else next((r["gold"] for r in g_rows.values()), "")
        cs = self.chosen.get((self.sel_task, f))
        cs_f1 = self.scores.get((str(f), pid, cs), {}).get("fact_f1") if cs else None
        row = [str(f), f'<a href="#{aid}">{esc(pid)}</a>',
               esc(p.turn if p else ""), esc(p.query if p else ""), esc(gold_reply),
               f'{esc(cs or "")} {num(cs_f1)}']
        detail = (f'<div class="example" id="{aid}"><h2>fold {f} · {esc(pid)}</h2>'
                  '<p><a href="#ex-list">back to the list</a></p>'
                  f'<dl class="texts">{_texts(p)}<dt>Gold reply</dt><dd class="gold">'
                  f"{esc(gold_reply)}</dd></dl>"
                  + self._selections(f, pid, p, s_rows) + self._replies(f, pid, g_rows)
                  + "</div>")
        return row, detail

    def _selections(self, f: int, pid: str, p: Any, s_rows: dict[str, dict]) -> str:
        gold = set(p.fact_indexes) if p else set()
        out = []
        for s in ordered(s_rows, self.sel_roles):
            r = s_rows[s]
            sc = self.scores.get((str(f), pid, s), {})
            facts = (_facts_list(p.content, r["selected"], gold) if p else
                     "<ul>" + "".join(f"<li>{esc(t)}</li>" for t in r["selected_sentences"])
                     + "</ul>")
            star = " ★" if self.chosen.get((self.sel_task, f)) == s else ""
            out.append([esc(s) + star, esc(self.sel_roles.get(s, "")), facts,
                        *[num(sc.get(m)) for m in self.sel_metrics]])
        return ("<h3>Selected facts per selector</h3>" + cells_table(
            ["selector", "role", "selected sentences (green: gold)",
             *[metric_column(m) for m in self.sel_metrics]], out)) if out else ""

    def _replies(self, f: int, pid: str, g_rows: dict[str, dict]) -> str:
        out = []
        for s in ordered(g_rows, self.gen_roles):
            r = g_rows[s]
            sc = self.scores.get((str(f), pid, s), {})
            star = " ★" if self.chosen.get((self.gen_task, f)) == s else ""
            out.append([esc(s) + star, esc(self.gen_roles.get(s, "")),
                        f'<span class="text">{esc(r.get("output") or "")}</span>',
                        *[num(sc.get(m)) for m in self.gen_metrics]])
        return ("<h3>Replies per system</h3>" + cells_table(
            ["reply system", "role", "reply", *[metric_column(m) for m in self.gen_metrics]],
            out)) if out else ""


def _texts(p: Any) -> str:
    """Paper, history, query and gold facts of a pair (empty without its data)."""
    if not p:
        return ""
    hist = "".join(f"<li>{esc(t)}</li>" for t in p.history) or "<li><i>(first message)</i></li>"
    gold = set(p.fact_indexes)
    return (f"<dt>Paper</dt><dd>{esc(p.title)}</dd><dt>History</dt><dd><ol>{hist}</ol>"
            f"</dd><dt>Query (turn {p.turn})</dt><dd>{esc(p.query)}</dd>"
            f'<dt>Gold facts</dt><dd class="gold">'
            f"{_facts_list(p.content, p.fact_indexes, gold)}</dd>")
