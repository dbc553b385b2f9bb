"""Example pages: one SAF answer or one ArgSciChat message pair followed through every system.

- ``examples-saf.html``: every answer of 02's evaluation splits in one searchable list; its
  detail view shows question, reference answer, the answer, gold label / score / feedback
  and every system's prediction and feedback with its per-item scores.
- ``examples-argscichat.html``: every scored test message pair of 03/04; its detail view
  shows the history, the query, the gold reply, the gold facts, the facts each selector
  chose (with its Fact-F1) and every reply system's reply with its per-item metrics.

Written by the runner with the other pages (:func:`saf_utils.reporting.runs.write_reports`)
from the files notebooks hand to each other (:mod:`saf_utils.artifacts`: predictions,
selections, replies and ``items.jsonl``); ArgSciChat texts come from the data folder the run
read (its ``data_sources``). A detail view is an anchor ``#<task>-<split>-<id>`` (CSS
``:target``, no script), so any page can link one example; the list's search box is a few
lines of the project's own script. Seeded systems show their first seed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.reporting.sharing import esc

SAF_PAGE = "examples-saf.html"
ARGSCICHAT_PAGE = "examples-argscichat.html"
PAGES = ((SAF_PAGE, "SAF examples (one answer, every system)"),
         (ARGSCICHAT_PAGE, "ArgSciChat examples (one message pair, every system)"))


def example_pages(run_dir: Path) -> list[tuple[str, str]]:
    """``(file name, link text)`` of the example pages present in the run folder."""
    return [(name, what) for name, what in PAGES if (Path(run_dir) / name).is_file()]


# ------------------------------------------------------------------ shared
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

CSS = """
.example{display:none;border-top:2px solid #888;margin-top:1.5em}
.example:target{display:block}
table.ex-list td{max-width:32em;overflow-wrap:anywhere}.texts dt{font-weight:bold;margin-top:.5em}
.texts dd{margin:0 0 0 1em;white-space:pre-wrap;max-width:60em}
td.text{white-space:pre-wrap;min-width:14em;max-width:40em}
.scroll{overflow-x:auto}.gold{background:#eef7ee}.miss{color:#a00}.hit{color:#060}
"""


def _num(x: Any) -> str:
    from saf_utils.reporting.pages import fmt

    try:
        v = float(x)
    except (TypeError, ValueError):
        return ""
    return fmt(v) if math.isfinite(v) else ""


def _first_seed(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Rows of each group's smallest seed (deterministic systems: seed None, kept)."""
    key = pd.to_numeric(df["seed"], errors="coerce").fillna(-1)
    return df[key == key.groupby([df[c] for c in by]).transform("min")]


def _roles(records: Sequence[dict], task: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in records:
        if r.get("task") == task and r.get("role") and r.get("system") not in out:
            out[str(r["system"])] = str(r["role"])
    return out


def _ordered(systems: Iterable[str], roles: Mapping[str, str]) -> list[str]:
    from saf_utils.registry import ROLES

    rank = {r: i for i, r in enumerate(ROLES)}
    return sorted(set(systems), key=lambda s: (rank.get(roles.get(s, ""), len(rank)), s))


def _scores(items: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, dict[str, float]]:
    """``{(*keys, system): {metric: value}}`` of the first seed of each system."""
    if items.empty:
        return {}
    first = _first_seed(items, [*keys[:-1], "system", "metric"]) if "seed" in items else items
    out: dict[tuple, dict[str, float]] = {}
    for row in first.itertuples(index=False):
        k = tuple(str(getattr(row, c)) for c in keys) + (str(row.system),)
        out.setdefault(k, {})[str(row.metric)] = row.value
    return out


def _page(title: str, run_dir: Path, intro: str, list_head: Sequence[str],
          list_rows: list[list[str]], details: list[str]) -> str:
    from saf_utils.reporting.pages import page, table

    body = (f"<h1>{esc(title)}</h1>\n{intro}\n"  # the picked example (:target) above the list
            + "\n".join(details)
            + '<h2 id="ex-list">All examples</h2><p><input id="ex-search" type="search" '
            'size="40" placeholder="search the list (any text)"> <small id="ex-count"></small>'
            f"</p>{table(list_head, list_rows, 'ex-list')}\n")
    return page(title, body, script=SEARCH_JS, run_dir=run_dir, wide=True).replace(
        "</style>", CSS + "</style>", 1)


def _write(run_dir: Path, name: str, text: str) -> Path:
    from saf_utils.reporting.manifest import write_text

    return write_text(Path(run_dir) / name, text)


def write_examples(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                   ) -> list[Path]:
    """The example pages whose inputs the run has (02's predictions; 03's selections or 04's
    replies); a page that cannot be built says why on the page instead of costing the run's
    other pages."""
    from saf_utils import artifacts as AR

    run_dir = Path(run_dir)
    out = []
    inputs = {SAF_PAGE: (AR.SAF_NOTEBOOK,),
              ARGSCICHAT_PAGE: (AR.SELECTION_NOTEBOOK, AR.GENERATION_NOTEBOOK)}
    for name, build in ((SAF_PAGE, saf_page), (ARGSCICHAT_PAGE, argscichat_page)):
        sig = _signature(run_dir, inputs[name], manifest)
        if (run_dir / name).is_file() and _read_signature(run_dir).get(name) == sig:
            out.append(run_dir / name)  # its inputs did not change since it was written
            continue
        try:
            text = build(run_dir, manifest, records)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            from saf_utils.reporting.pages import page

            text = page(name, f"<h1>{esc(name)}</h1><p class=\"warn\">This page could not be "
                        f"built: {esc(type(exc).__name__)}: {esc(exc)}</p>", run_dir=run_dir)
        if text is not None:
            out.append(_write(run_dir, name, text))
            _write_signature(run_dir, name, sig)
    return out


SIGNATURE_FILE = ".examples.json"


def _signature(run_dir: Path, notebooks: Sequence[str], manifest: Mapping[str, Any]) -> str:
    """What a page is drawn from: its notebooks' files (size, time), the data folders the
    run read and this module; the runner rewrites the pages after every notebook, and an
    example page is rebuilt only when one of these changed."""
    import hashlib
    import json

    parts: list[Any] = [[s.get("dataset"), s.get("source")] for s in
                        manifest.get("data_sources") or []]
    for nb in notebooks:
        folder = run_dir / nb
        for f in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            st = f.stat()
            parts.append([f.name, nb, st.st_size, st.st_mtime_ns])
    st = Path(__file__).stat()
    parts.append([st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _read_signature(run_dir: Path) -> dict[str, str]:
    import json

    try:
        return dict(json.loads((run_dir / SIGNATURE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return {}


def _write_signature(run_dir: Path, name: str, sig: str) -> None:
    import json

    from saf_utils.reporting.manifest import write_text

    write_text(run_dir / SIGNATURE_FILE, json.dumps({**_read_signature(run_dir), name: sig}))


# ------------------------------------------------------------------ SAF
def _label_cell(pred: Any, gold: Any, parseable: Any) -> str:
    if parseable is False:
        return '<td class="miss" title="no label could be read from the output">' \
               "(unparseable)</td>"
    if pred is None or (isinstance(pred, float) and math.isnan(pred)):
        return "<td>(none)</td>"
    ok = str(pred) == str(gold)
    mark = "✓" if ok else "✗"
    return f'<td class="{"hit" if ok else "miss"}">{mark} {esc(pred)}</td>'


def saf_page(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
             ) -> str | None:
    """``examples-saf.html`` from 02's prediction files and per-item scores; None when 02
    wrote no predictions."""
    from saf_utils import artifacts as AR
    from saf_utils.reporting.pages import metric_head

    folder = run_dir / AR.SAF_NOTEBOOK
    if not any(folder.glob(AR.SAF_PREDICTIONS_FILE.format(split="*"))):
        return None
    preds = _first_seed(AR.read_saf_predictions(folder), ["system", "split"])
    items = AR.read_items(folder, AR.SAF_NOTEBOOK) if (folder / AR.ITEMS_FILE).is_file() \
        else pd.DataFrame()
    scores = _scores(items, ["split", "item"])
    metrics = list(dict.fromkeys(items.metric)) if len(items) else []
    roles = _roles(records, "saf")
    systems = _ordered(preds.system, roles)
    split_rank = {s: (not str(s).startswith("test"), str(s)) for s in set(preds.split)}
    rows, details = [], []
    by_example: dict[tuple, dict[str, dict]] = {}  # plain dicts: pandas per cell is slow
    for r in preds.to_dict("records"):
        by_example.setdefault((r["split"], r["id"]), {})[str(r["system"])] = r
    for split, ex_id in sorted(by_example, key=lambda k: (split_rank[k[0]], _natural(k[1]))):
        g = by_example[(split, ex_id)]
        first = pd.Series(next(iter(g.values())))
        aid = anchor("saf", split, ex_id)
        comparable = [s for s in systems if s in g and roles.get(s) not in ("oracle", "probe")]
        right = sum(str(g[s]["pred_label"]) == str(first.gold_label) for s in comparable)
        rows.append([esc(split), f'<a href="#{aid}">{esc(ex_id)}</a>', esc(first.question),
                     esc(first.provided_answer), esc(first.gold_label),
                     f'<td class="num">{_num(first.gold_score)}</td>',
                     f'<td class="num">{right}/{len(comparable)}</td>'])
        sys_rows = []
        for s in [s for s in systems if s in g]:
            r = g[s]
            sc = scores.get((str(split), str(ex_id), s), {})
            sys_rows.append([esc(s), esc(roles.get(s, "")), esc(_seed(r.get("seed"))),
                             _label_cell(r.get("pred_label"), first.gold_label,
                                         r.get("parseable")),
                             f'<td class="num">{_num(r.get("pred_score"))}</td>',
                             f'<td class="text">{esc(r.get("pred_feedback") or "")}</td>',
                             *[f'<td class="num">{_num(sc.get(m))}</td>' for m in metrics]])
        details.append(
            f'<div class="example" id="{aid}"><h2>{esc(split)} · answer {esc(ex_id)}</h2>'
            '<p><a href="#ex-list">back to the list</a></p><dl class="texts">'
            f"<dt>Question</dt><dd>{esc(first.question)}</dd>"
            f"<dt>Reference answer</dt><dd>{esc(first.reference_answer)}</dd>"
            f"<dt>Answer</dt><dd>{esc(first.provided_answer)}</dd>"
            f'<dt>Gold</dt><dd class="gold">label <b>{esc(first.gold_label)}</b> · score '
            f"{_num(first.gold_score)} · feedback: {esc(first.gold_feedback)}</dd></dl>"
            + _table(["system", "role", "seed", "label (✓ = gold)", "score", "feedback",
                      *[metric_head(m) for m in metrics]], sys_rows) + "</div>")
    intro = (f'<p><a href="index.html">headline page</a> · {len(rows)} answers of '
             f"{preds.split.nunique()} splits, {len(systems)} systems (seeded systems: first "
             "seed). Pick an answer (the search box filters the list; <i>right</i> counts the "
             "baselines and systems with the gold label) to see question, reference, answer, "
             "gold label, score and feedback, and every system's prediction and feedback with "
             "its per-item scores. Link one answer with <code>examples-saf.html#saf-&lt;split"
             "&gt;-&lt;id&gt;</code>.</p>")
    return _page("SAF examples: one answer, every system", run_dir, intro,
                 ["split", "id", "question", "answer", "gold label", "gold score", "right"],
                 rows, details)


def _table(head: Sequence[str], rows: list[list[str]]) -> str:
    from saf_utils.reporting.pages import table

    return f'<div class="scroll">{table(head, rows)}</div>'


def _seed(x: Any) -> str:
    try:
        return "" if x is None or math.isnan(float(x)) else str(int(float(x)))
    except (TypeError, ValueError):
        return str(x)


def _natural(x: Any) -> tuple:
    """Numbers in ids sort as numbers (2 before 10)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t)
                 for t in re.findall(r"\d+|\D+", str(x)))


# ------------------------------------------------------------------ ArgSciChat
def _argscichat_pairs(manifest: Mapping[str, Any], folds: Iterable[int]) -> tuple[dict, str]:
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


def argscichat_page(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                    ) -> str | None:
    """``examples-argscichat.html`` from 03's selections, 04's replies and both notebooks'
    per-item scores, with the pair texts from the run's data folder; None when neither 03
    nor 04 wrote its file."""
    from saf_utils import artifacts as AR
    from saf_utils.argscichat.spec import SPECS
    from saf_utils.reporting.pages import metric_head

    AR_SEL_TASK, AR_GEN_TASK = (s.name for s in SPECS)  # noqa: N806 - the two task names
    d03, d04 = run_dir / AR.SELECTION_NOTEBOOK, run_dir / AR.GENERATION_NOTEBOOK
    has03, has04 = (d03 / AR.SELECTIONS_FILE).is_file(), (d04 / AR.GENERATIONS_FILE).is_file()
    if not (has03 or has04):
        return None
    sel = AR.read_selections(d03) if has03 else pd.DataFrame(columns=["fold", "split"])
    gen = AR.read_generations(d04) if has04 else pd.DataFrame(columns=["fold", "split"])
    sel = _first_seed(sel[sel.split == "test"], ["fold", "system"]) if len(sel) else sel
    gen = _first_seed(gen[gen.split == "test"], ["fold", "system"]) if len(gen) else gen
    items = pd.concat([AR.read_items(d, "") for d in (d03, d04)
                       if (d / AR.ITEMS_FILE).is_file()], ignore_index=True)
    items = items[items.split == "test"] if len(items) else items
    scores = _scores(items, ["fold", "item"])
    sel_metrics = sorted(set(items[items.task == AR_SEL_TASK].metric)) if len(items) else []
    gen_metrics = list(dict.fromkeys(items[items.task == AR_GEN_TASK].metric)) \
        if len(items) else []
    sel_roles, gen_roles = _roles(records, AR_SEL_TASK), _roles(records, AR_GEN_TASK)
    chosen = {(r.get("task"), r.get("fold")): str(r.get("system")) for r in records
              if r.get("kind") == "tuning" and r.get("subset") == "chosen"
              and r.get("fold") is not None}
    keys = sorted({(int(f), str(p)) for f, p in zip(sel.get("fold", []), sel.get("pair_id", []),
                                                     strict=True)}
                  | {(int(f), str(p)) for f, p in zip(gen.get("fold", []),
                                                      gen.get("pair_id", []), strict=True)})
    pairs, note = _argscichat_pairs(manifest, sorted({k[0] for k in keys}))
    sel_by: dict[tuple, dict[str, dict]] = {}  # plain dicts: pandas per cell is slow
    for r in (sel.to_dict("records") if len(sel) else []):
        sel_by.setdefault((int(r["fold"]), str(r["pair_id"])), {})[str(r["system"])] = r
    gen_by: dict[tuple, dict[str, dict]] = {}
    for r in (gen.to_dict("records") if len(gen) else []):
        gen_by.setdefault((int(r["fold"]), str(r["pair_id"])), {})[str(r["system"])] = r
    rows, details = [], []
    for f, pid in keys:
        p = pairs.get((f, pid))
        s_rows, g_rows = sel_by.get((f, pid), {}), gen_by.get((f, pid), {})
        aid = anchor("argscichat", f"f{f}", pid)
        query = p.query if p else ""
        gold_reply = p.reply if p else next((r["gold"] for r in g_rows.values()), "")
        cs = chosen.get((AR_SEL_TASK, f))
        cs_f1 = scores.get((str(f), pid, cs), {}).get("fact_f1") if cs else None
        rows.append([f'<td class="num">{f}</td>', f'<a href="#{aid}">{esc(pid)}</a>',
                     esc(p.turn if p else ""), esc(query), esc(gold_reply),
                     f'{esc(cs or "")} <span class="num">{_num(cs_f1)}</span>'])
        gold = set(p.fact_indexes) if p else set()
        sel_html = []
        for s in _ordered(s_rows, sel_roles):
            r = s_rows[s]
            sc = scores.get((str(f), pid, s), {})
            facts = (_facts_list(p.content, r["selected"], gold) if p else
                     "<ul>" + "".join(f"<li>{esc(t)}</li>" for t in r["selected_sentences"])
                     + "</ul>")
            star = " ★" if chosen.get((AR_SEL_TASK, f)) == s else ""
            sel_html.append([esc(s) + star, esc(sel_roles.get(s, "")), f"<td>{facts}</td>",
                             *[f'<td class="num">{_num(sc.get(m))}</td>' for m in sel_metrics]])
        gen_html = []
        for s in _ordered(g_rows, gen_roles):
            r = g_rows[s]
            sc = scores.get((str(f), pid, s), {})
            star = " ★" if chosen.get((AR_GEN_TASK, f)) == s else ""
            gen_html.append([esc(s) + star, esc(gen_roles.get(s, "")),
                             f'<td class="text">{esc(r.get("output") or "")}</td>',
                             *[f'<td class="num">{_num(sc.get(m))}</td>' for m in gen_metrics]])
        texts = ""
        if p:
            hist = "".join(f"<li>{esc(t)}</li>" for t in p.history) or "<li><i>(first "\
                "message)</i></li>"
            texts = (f"<dt>Paper</dt><dd>{esc(p.title)}</dd><dt>History</dt><dd><ol>{hist}</ol>"
                     f"</dd><dt>Query (turn {p.turn})</dt><dd>{esc(p.query)}</dd>"
                     f'<dt>Gold facts</dt><dd class="gold">'
                     f"{_facts_list(p.content, p.fact_indexes, gold)}</dd>")
        details.append(
            f'<div class="example" id="{aid}"><h2>fold {f} · {esc(pid)}</h2>'
            '<p><a href="#ex-list">back to the list</a></p>'
            f'<dl class="texts">{texts}<dt>Gold reply</dt><dd class="gold">{esc(gold_reply)}'
            "</dd></dl>"
            + (("<h3>Selected facts per selector</h3>" + _table(
                ["selector", "role", "selected sentences (green: gold)",
                 *[metric_head(m) for m in sel_metrics]], sel_html)) if sel_html else "")
            + (("<h3>Replies per system</h3>" + _table(
                ["reply system", "role", "reply", *[metric_head(m) for m in gen_metrics]],
                gen_html)) if gen_html else "") + "</div>")
    intro = (f'<p><a href="index.html">headline page</a> · {len(rows)} test message pairs of '
             f"{len({k[0] for k in keys})} fold(s). Pick a pair (the search box filters the "
             "list) to see its history, the query, the gold reply and facts, the facts each "
             "selector chose and every reply system's reply, with per-item metrics (seeded "
             "systems: first seed). ★: the system chosen on that fold's validation split; "
             "the list shows that selector's Fact-F1.</p>"
             + (f'<p class="warn">{esc(note)}</p>' if note else ""))
    return _page("ArgSciChat examples: one message pair, every system", run_dir, intro,
                 ["fold", "pair", "turn", "query", "gold reply", "★ selector: Fact-F1"],
                 rows, details)
