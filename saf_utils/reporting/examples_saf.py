"""``examples-saf.html``: every answer of 02's evaluation splits in one searchable list; its
detail view shows question, reference answer, the answer, gold label / score / feedback and
every system's prediction and feedback with its per-item scores
(:mod:`saf_utils.reporting.examples` writes it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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
    natural,
    num,
    ordered,
    roles_of,
    scores_of,
    seed_text,
)
from saf_utils.reporting.sharing import esc

STEM = "examples-saf"
SET_APART = ("oracle", "probe")  # roles not counted among the systems that were right
LIST_HEAD = ["split", "id", "question", "answer", "gold label", "gold score", "right"]
GUIDE = (" Pick an answer (the search box filters the list; <i>right</i> counts the "
         "baselines and systems with the gold label) to see question, reference, answer, "
         "gold label, score and feedback, and every system's prediction and feedback with "
         "its per-item scores. Link one answer with <code>examples-saf.html#saf-&lt;split"
         "&gt;-&lt;id&gt;</code> (the page that holds it).")


def _label_cell(pred: Any, gold: Any, parseable: Any) -> str:
    if parseable is False:
        return '<span class="miss" title="no label could be read from the output">' \
               "(unparseable)</span>"
    if pred is None or (isinstance(pred, float) and math.isnan(pred)):
        return "(none)"
    ok = str(pred) == str(gold)
    mark = "✓" if ok else "✗"
    return f'<span class="{"hit" if ok else "miss"}">{mark} {esc(pred)}</span>'


def saf_page(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
             ) -> list[tuple[str, str]] | None:
    """``examples-saf.html`` (and its further pages: ``[(file, text)]``) from the SAF
    prediction files and per-item scores; None when no notebook of the run wrote
    predictions."""
    folder = artifact_folder(run_dir, manifest, AR.SAF_PREDICTIONS_FILE.format(split="*"))
    if folder is None:
        return None
    preds = first_seed(AR.read_saf_predictions(folder), ["system", "split"])
    items = AR.read_items(folder) if (folder / AR.ITEMS_FILE).is_file() else pd.DataFrame()
    roles = roles_of(records, "saf")
    view = _View(scores_of(items, ["split", "item"]),
                 list(dict.fromkeys(items.metric)) if len(items) else [], roles,
                 ordered(preds.system, roles))
    split_rank = {s: (not str(s).startswith("test"), str(s)) for s in set(preds.split)}
    by_example: dict[tuple, dict[str, dict]] = {}  # plain dicts: pandas per cell is slow
    for r in preds.to_dict("records"):
        by_example.setdefault((r["split"], r["id"]), {})[str(r["system"])] = r
    rows, details, labels = [], [], []
    for split, ex_id in sorted(by_example, key=lambda k: (split_rank[k[0]], natural(k[1]))):
        row, detail = view.example(split, ex_id, by_example[(split, ex_id)])
        rows.append(row)
        details.append(detail)
        labels.append(f"{split} {ex_id}")
    return build_pages("SAF examples: one answer, every system", STEM, run_dir,
                       intro(f"{len(rows)} answers of {preds.split.nunique()} splits, "
                             f"{len(view.systems)} systems (seeded systems: first seed).",
                             GUIDE), LIST_HEAD, rows, details, labels)


class _View:
    """What every answer's row and detail view share: scores, metrics, roles, systems."""

    def __init__(self, scores: dict, metrics: list[str], roles: dict[str, str],
                 systems: list[str]) -> None:
        self.scores, self.metrics, self.roles, self.systems = scores, metrics, roles, systems

    def example(self, split: Any, ex_id: Any, g: dict[str, dict]) -> tuple[list[str], str]:
        """One answer's list row and detail view (``g``: system -> its prediction row)."""
        first = pd.Series(next(iter(g.values())))
        aid = anchor("saf", split, ex_id)
        comparable = [s for s in self.systems if s in g and self.roles.get(s) not in SET_APART]
        right = sum(str(g[s]["pred_label"]) == str(first.gold_label) for s in comparable)
        row = [esc(split), f'<a href="#{aid}">{esc(ex_id)}</a>', esc(first.question),
               esc(first.provided_answer), esc(first.gold_label),
               num(first.gold_score), f"{right}/{len(comparable)}"]
        detail = (
            f'<div class="example" id="{aid}"><h2>{esc(split)} · answer {esc(ex_id)}</h2>'
            '<p><a href="#ex-list">back to the list</a></p><dl class="texts">'
            f"<dt>Question</dt><dd>{esc(first.question)}</dd>"
            f"<dt>Reference answer</dt><dd>{esc(first.reference_answer)}</dd>"
            f"<dt>Answer</dt><dd>{esc(first.provided_answer)}</dd>"
            f'<dt>Gold</dt><dd class="gold">label <b>{esc(first.gold_label)}</b> · score '
            f"{num(first.gold_score)} · feedback: {esc(first.gold_feedback)}</dd></dl>"
            + cells_table(["system", "role", "seed", "label (✓ = gold)", "score", "feedback",
                           *[metric_column(m) for m in self.metrics]],
                           self._system_rows(split, ex_id, g, first.gold_label)) + "</div>")
        return row, detail

    def _system_rows(self, split: Any, ex_id: Any, g: dict[str, dict], gold: Any
                     ) -> list[list[str]]:
        out = []
        for s in [s for s in self.systems if s in g]:
            r = g[s]
            sc = self.scores.get((str(split), str(ex_id), s), {})
            out.append([esc(s), esc(self.roles.get(s, "")), esc(seed_text(r.get("seed"))),
                        _label_cell(r.get("pred_label"), gold, r.get("parseable")),
                        num(r.get("pred_score")),
                        f'<span class="text">{esc(r.get("pred_feedback") or "")}</span>',
                        *[num(sc.get(m)) for m in self.metrics]])
        return out
