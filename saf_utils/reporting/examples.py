"""Example pages: every answer of 02's evaluation splits (``examples-saf.html``) and every
test message pair of 03/04 (``examples-argscichat.html``, texts from the data folder the run
read), each followed through every system (first seed). A detail view is an anchor
``#<task>-<split>-<id>`` opened by CSS ``:target``, so any page can link one example. Inputs
are found by the files the notebooks wrote (:mod:`saf_utils.artifacts`), never by notebook.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from saf_utils import artifacts as AR
from saf_utils.metrics import scale_label
from saf_utils.reporting import chrome
from saf_utils.reporting.headline import SET_APART  # roles not counted among the right
from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.pages import fmt, page
from saf_utils.reporting.sharing import PathScrubber, esc

SAF_PAGE, ARGSCICHAT_PAGE = "examples-saf.html", "examples-argscichat.html"
PAGES = ((SAF_PAGE, "SAF examples (one answer, every system)"),
         (ARGSCICHAT_PAGE, "ArgSciChat examples (one message pair, every system)"))
#: The most examples a page holds; more make more pages (``examples-saf-2.html``, ...), so
#: that no page grows with the data (one page of every answer was 9.2 MB, 92 MB at ten times).
PER_PAGE = 100
#: the page body and its search script (autoescape: every value is escaped)
BODY = jinja2.Environment(loader=jinja2.FileSystemLoader(chrome.TEMPLATES / "saf"),
                          autoescape=True).get_template("examples.html.j2")


def example_pages(run_dir: Path) -> list[tuple[str, str]]:
    """``(file name, link text)`` of the example pages present in the run folder."""
    return [(name, what) for name, what in PAGES if (Path(run_dir) / name).is_file()]


def write_example_pages(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                        ) -> list[Path]:
    """The example pages whose inputs the run has (02's predictions; 03's selections or 04's
    replies); a page that cannot be built says why on the page instead of costing the run's
    other pages. Written every time: 1,179 answers of 15 systems take a few seconds."""
    run_dir, out = Path(run_dir), []
    for name, build in ((SAF_PAGE, _saf), (ARGSCICHAT_PAGE, _argscichat)):
        try:
            built = build(run_dir, manifest, records)
        except Exception as exc:  # noqa: BLE001 - a damaged or empty artifact too
            why = str(exc).replace(f"{run_dir}/", "")  # named inside the run, no local path
            built = [(name, page(name, f"<h1>{esc(name)}</h1><p class=\"warn\">This page "
                                 f"could not be built: {esc(type(exc).__name__)}: {esc(why)}"
                                 "</p>", run_dir=run_dir, current=name))]
        if built is not None:
            for stale in run_dir.glob(f"{Path(name).stem}-*.html"):  # pages of fewer examples
                if stale.name not in dict(built) and stale.stem.rsplit("-", 1)[1].isdigit():
                    stale.unlink(missing_ok=True)
            out += [write_text(run_dir / file, text) for file, text in built]
    return out


def anchor(task: str, *keys: object) -> str:
    """The detail view's anchor of one example: ``saf-test_unseen_answers-17`` or
    ``argscichat-f0-<readable slug>-<hash>`` (ids with spaces or quotes get a slug and a
    short hash, so every anchor is a valid, unique fragment)."""
    raw = "-".join(str(k) for k in keys)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-")[:60]
    return f"{task}-{slug}" if slug == raw else \
        f"{task}-{slug}-{hashlib.sha1(raw.encode()).hexdigest()[:8]}"


def artifact_folder(run_dir: Path, manifest: Mapping[str, Any], pattern: str) -> Path | None:
    """The output folder of the run's notebook that wrote a file named ``pattern`` (a glob
    of :mod:`saf_utils.artifacts`' file names); None when no notebook of the run did."""
    for n in manifest.get("notebooks") or []:
        folder = Path(run_dir) / str(n.get("name"))
        if folder.is_dir() and any(folder.glob(pattern)):
            return folder
    return None


def _pages(run_dir: Path, stem: str, title: str, head: list[str], examples: list[dict],
           **intro: Any) -> list[tuple[str, str]]:
    """``[(file, text)]``: the examples (dicts: ``id`` (anchor), ``label`` (name in the
    pager), ``row`` (list cells), ``title``, ``texts`` ``[(term, text)]``, ``tables``
    ``[(caption, head, rows)]``) in pages of at most :data:`PER_PAGE`, each page linking the
    others with the first and last example it holds."""
    chunks = [examples[a:a + PER_PAGE] for a in range(0, max(len(examples), 1), PER_PAGE)]
    files = [f"{stem}.html" if k == 1 else f"{stem}-{k}.html" for k in range(1, len(chunks) + 1)]
    spans = [(f, c[0]["label"], c[-1]["label"]) for f, c in zip(files, chunks, strict=True)
             ] if files[1:] else []
    scrub, out = PathScrubber(run_dir), []
    for k, (file, chunk) in enumerate(zip(files, chunks, strict=True), 1):
        name = f"{title} (page {k} of {len(chunks)})" if spans else title
        body = BODY.render(title=name, examples=chunk, spans=spans, k=k, per_page=PER_PAGE,
                           head=head, **intro)  # own HTML, data escaped: no sanitiser pass
        out.append((file, page(name, Markup(chrome.link_metric_headers(scrub(body))), wide=True,
                               script=BODY.module.search_js(), run_dir=run_dir, current=file)))
    return out


def _saf(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
         ) -> list[tuple[str, str]] | None:
    """``examples-saf.html`` (and its further pages) from 02's predictions and per-item
    scores; None when no notebook of the run wrote predictions."""
    folder = artifact_folder(run_dir, manifest, AR.SAF_PREDICTIONS_FILE.format(split="*"))
    if folder is None:
        return None
    preds = _first_seed(AR.read_saf_predictions(folder), ["system", "split"])
    scores, metrics = _scores([folder], ["split", "item"])
    roles = _roles(records, "saf")
    by = _by(preds, lambda r: (str(r["split"]), str(r["id"])))
    examples = []
    for split, ex_id in sorted(by, key=lambda k: (not k[0].startswith("test"), k[0],
                                                  _natural(k[1]))):
        g, aid = by[(split, ex_id)], anchor("saf", split, ex_id)
        first = next(iter(g.values()))
        gold = first["gold_label"]
        fair = [s for s in g if roles.get(s) not in SET_APART]
        right = sum(str(g[s]["pred_label"]) == str(gold) for s in fair)
        cells = {s: [_num(r.get("seed")), _label(r, gold), _num(r.get("pred_score")),
                     _text(r.get("pred_feedback"))] for s, r in g.items()}
        examples.append({
            "id": aid, "label": f"{split} {ex_id}", "title": f"{split} · answer {ex_id}",
            "row": [split, _link(aid, ex_id), first["question"], first["provided_answer"], gold,
                    _num(first["gold_score"]), f"{right}/{len(fair)}"],
            "texts": [("Question", first["question"]),
                      ("Reference answer", first["reference_answer"]),
                      ("Answer", first["provided_answer"]),
                      ("Gold", Markup("label <b>{}</b> · score {} · feedback: {}").format(
                          gold, _num(first["gold_score"]), first["gold_feedback"]))],
            "tables": [_table("", ["system", "role", "seed", "label (✓ = gold)", "score",
                                   "feedback"], cells, roles, metrics.get("saf", []), scores,
                              (split, ex_id))]})
    return _pages(run_dir, "examples-saf", "SAF examples: one answer, every system",
                  ["split", "id", "question", "answer", "gold label", "gold score", "right"],
                  examples, task="saf",
                  summary=f"{len(examples)} answers of {preds.split.nunique()} splits, "
                          f"{preds.system.nunique()} systems (seeded systems: first seed).")


def _argscichat(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                ) -> list[tuple[str, str]] | None:
    """``examples-argscichat.html`` from 03's selections, 04's replies and their per-item
    scores, with the pair texts from the run's data folder; None when no notebook of the run
    wrote selections or replies."""
    from saf_utils.argscichat.spec import SPECS

    folders = [artifact_folder(run_dir, manifest, f)
               for f in (AR.SELECTIONS_FILE, AR.GENERATIONS_FILE)]
    if folders == [None, None]:
        return None
    scores, metrics = _scores([f for f in folders if f is not None], ["fold", "item"], "test")
    chosen = {(r.get("task"), r.get("fold")): str(r.get("system")) for r in records
              if r.get("kind") == "tuning" and r.get("subset") == "chosen"
              and r.get("fold") is not None}
    sel, gen = ({} if d is None else _by(_first_seed((df := read(d))[df.split == "test"],
                                                     ["fold", "system"]),
                                         lambda r: (int(r["fold"]), str(r["pair_id"])))
                for d, read in zip(folders, (AR.read_selections, AR.read_generations),
                                   strict=True))
    (sel_task, sel_roles), (gen_task, gen_roles) = [(s.name, _roles(records, s.name))
                                                    for s in SPECS]
    keys = sorted(set(sel) | set(gen))
    pairs, note = _pairs(manifest, sorted({f for f, _ in keys}))
    examples = []
    for f, pid in keys:
        p, aid, key = pairs.get((f, pid)), anchor("argscichat", f"f{f}", pid), (str(f), pid)
        gold = set(p.fact_indexes) if p else set()
        chose, replies = chosen.get((sel_task, f)), gen.get((f, pid), {})
        gold_reply = p.reply if p else next((r["gold"] for r in replies.values()), "")
        facts = {s: [_facts(p.content, r["selected"], gold) if p else _list(
            "ul", r["selected_sentences"])] for s, r in sel.get((f, pid), {}).items()}
        texts = [("Paper", p.title), ("History", _list("ol", p.history) if p.history else
                                      Markup("<ol><li><i>(first message)</i></li></ol>")),
                 (f"Query (turn {p.turn})", p.query),
                 ("Gold facts", _facts(p.content, p.fact_indexes, gold))] if p else []
        examples.append({
            "id": aid, "label": f"fold {f} {pid}", "title": f"fold {f} · {pid}",
            "row": [str(f), _link(aid, pid), p.turn if p else "", p.query if p else "",
                    gold_reply,
                    f'{chose or ""} {_num(scores.get((*key, chose), {}).get("fact_f1"))}'],
            "texts": [*texts, ("Gold reply", gold_reply)],
            "tables": [_table("Selected facts per selector", ["selector", "role",
                                                               "selected sentences (green: gold)"],
                              facts, sel_roles, metrics.get(sel_task, []), scores, key, chose),
                       _table("Replies per system", ["reply system", "role", "reply"],
                              {s: [_text(r.get("output"))] for s, r in replies.items()},
                              gen_roles, metrics.get(gen_task, []), scores, key,
                              chosen.get((gen_task, f)))]})
    return _pages(run_dir, "examples-argscichat",
                  "ArgSciChat examples: one message pair, every system",
                  ["fold", "pair", "turn", "query", "gold reply", "★ selector: Fact-F1"],
                  examples, task="argscichat", note=note,
                  summary=f"{len(examples)} test message pairs of {len({f for f, _ in keys})} "
                          "fold(s).")


def _pairs(manifest: Mapping[str, Any], folds: Iterable[int]) -> tuple[dict, str]:
    """``{(fold, pair_id): MessagePair}`` of the test pairs from the run's data folder, or a
    note that it is gone (the page then shows what the run's own files hold)."""
    from saf_utils.argscichat.data import load_argscichat

    root = next((str(s["source"]) for s in manifest.get("data_sources") or [] if s.get(
        "dataset") == "argscichat" and s.get("source") and Path(str(s["source"])).is_dir()), None)
    if root is None:
        return {}, ("The data folder this run read is not on this machine: history, query "
                    "and gold facts are not shown.")
    return {(int(f), p.pair_id): p for f in folds
            for p in load_argscichat(root, fold=int(f)).test}, ""


def _first_seed(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Rows of each group's smallest seed (deterministic systems: seed None, kept)."""
    key = pd.to_numeric(df["seed"], errors="coerce").fillna(-1)
    return df[key == key.groupby([df[c] for c in by]).transform("min")]


def _scores(folders: Sequence[Path], keys: Sequence[str], split: str | None = None
            ) -> tuple[dict[tuple, dict[str, float]], dict[str, list[str]]]:
    """The per-item scores the notebooks in ``folders`` wrote (of ``split``, if given):
    ``{(*keys, system): {metric: value}}`` (keys as strings; each system's first seed) and
    ``{task: its metrics}``."""
    frames = [f for d in folders if (d / AR.ITEMS_FILE).is_file()
              if not (f := AR.read_items(d)).empty]  # an empty file has no columns
    items = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["task", "split", "fold", "system", "metric", "item", "value", "seed"])
    items = items[items.split == split] if split else items
    scores: dict[tuple, dict[str, float]] = {}
    for r in _first_seed(items, [*keys[:-1], "system", "metric"]).to_dict("records"):
        scores.setdefault(tuple(str(r[c]) for c in [*keys, "system"]), {})[r["metric"]] = r["value"]
    return scores, {t: list(dict.fromkeys(g.metric)) for t, g in items.groupby("task", sort=False)}


def _by(df: pd.DataFrame, key: Any) -> dict[tuple, dict[str, dict]]:
    """``{key(row): {system: row}}`` (plain dicts: pandas per cell is slow)."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in df.to_dict("records"):
        out.setdefault(key(r), {})[str(r["system"])] = r
    return out


def _roles(records: Sequence[dict], task: str) -> dict[str, str]:
    """system -> role, from the first record of ``task`` that states one."""
    return {str(r["system"]): str(r["role"]) for r in reversed(records)
            if r.get("task") == task and r.get("role")}


def _table(caption: str, head: list[str], cells: Mapping[str, list], roles: Mapping[str, str],
           metrics: Sequence[str], scores: Mapping[tuple, dict], key: tuple,
           star: str | None = None) -> tuple[str, list[str], list[list]]:
    """``(caption, head, rows)``: one row per system, in role order (registry.ROLES) then by
    name: the system (★: the one chosen on val), its role, its ``cells`` and its per-item
    scores (columns with each metric's direction and range)."""
    from saf_utils.registry import ROLES

    order = sorted(cells, key=lambda s: (ROLES.index(roles[s]) if roles.get(s) in ROLES
                                         else len(ROLES), s))
    return caption, [*head, *[f"{m} {scale_label(m)}" for m in metrics]], [
        [s + (" ★" if s == star else ""), roles.get(s, ""), *cells[s],
         *[_num(scores.get((*key, s), {}).get(m)) for m in metrics]] for s in order]


def _label(r: Mapping[str, Any], gold: Any) -> Markup | str:
    """The predicted label, ✓ when it is the gold label, ✗ when not."""
    if r.get("parseable") is False:
        return Markup('<span class="miss" title="no label could be read from the output">'
                      "(unparseable)</span>")
    if pd.isna(r.get("pred_label")):
        return "(none)"
    ok = str(r["pred_label"]) == str(gold)
    return Markup('<span class="{}">{} {}</span>').format(
        "hit" if ok else "miss", "✓" if ok else "✗", r["pred_label"])


def _facts(content: Sequence[str], indexes: Iterable[int], gold: set[int]) -> Markup:
    """Sentences ``[i] text`` of a paper, green where gold."""
    lis = [Markup('<li class="{}" title="sentence {}{}">[{}] {}</li>').format(
        "hit" if i in gold else "other", i, " (gold)" if i in gold else "", i, content[i])
        for i in indexes if 0 <= i < len(content)]
    return Markup("<ul>{}</ul>").format(Markup("").join(lis)) if lis else Markup("<i>(none)</i>")


def _list(tag: str, values: Iterable[Any]) -> Markup:
    return Markup(f"<{tag}>{{}}</{tag}>").format(
        Markup("").join(Markup("<li>{}</li>").format(v) for v in values))


def _link(aid: str, text: Any) -> Markup:
    return Markup('<a href="#{}">{}</a>').format(aid, text)


def _text(x: Any) -> Markup:
    """A long text, its line breaks kept."""
    return Markup('<span class="text">{}</span>').format(x or "")


def _num(x: Any) -> str:
    """A number as the pages write it; blank for none or not finite."""
    try:
        return fmt(float(x))
    except (TypeError, ValueError):
        return ""


def _natural(x: Any) -> tuple:
    """Numbers in ids sort as numbers (2 before 10)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t)
                 for t in re.findall(r"\d+|\D+", str(x)))
