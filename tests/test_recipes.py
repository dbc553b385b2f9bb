"""The "Add a system" recipe of docs/recipes.md, followed as written, reaches the records, the
index and its headline table (SAF and fact selection; reply systems: test_reply_experiments). The
"Add a task" and "Add a metric" recipes are followed in test_tasks.py, "Add a notebook" in
test_run.py (a toy notebook recorded through Recorder reaches metrics.json and index.html).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import bow_encoder, fake_embed
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import selection_evaluation as AEV
from saf_utils.argscichat import selection_experiments as X
from saf_utils.argscichat.data import load_argscichat
from saf_utils.artifacts import record_rows
from saf_utils.reporting import index_page, pages
from saf_utils.reporting.records import Recorder
from saf_utils.saf import experiments as E
from saf_utils.saf import formats as S

FIX = Path(__file__).parent / "fixtures"


def _headline(path: Path, system: str, split: str) -> tuple[list[dict], str]:
    """The system's headline records (kind result, no fold, no seed) on ``split`` and the
    index sections rendered from all records of the file."""
    rows = record_rows([path])
    mine = [r for r in rows if r["system"] == system and r["kind"] == "result"
            and r["fold"] is None and r["seed"] is None and r["split"] == split]
    return mine, "\n".join(index_page.task_sections(rows))


def _row(html: str, system: str) -> str:
    """The index table row of ``system`` (its name cell up to the end of the row)."""
    start = html.index(f"<td>{system}")
    return html[start:html.index("</tr>", start)]


@pytest.mark.slow
def test_a_registered_saf_system_reaches_records_and_the_index(tmp_path) -> None:
    @E.SYSTEMS.register("always_partial", "baseline")
    def always_partial(train, test, encoder):
        """Always 'Partially correct', no feedback."""
        n = len(test)
        return S.prediction_table(test, "always_partial", labels=["Partially correct"] * n,
                                  scores=[0.5] * n, feedback=[""] * n)

    try:
        data = E.load_data(str(FIX / "saf_legal_jsonl"))
        names = E.SYSTEMS.names(["baseline"], kind="plain")  # how 02 lists its baselines
        assert "always_partial" in names
        preds = E.run_systems(data, names, bow_encoder)
        ev = E.evaluate(preds, embedding_metrics=False, n_resamples=50)
        rec = Recorder("02_baseline_finetuning", tmp_path)
        E.record(rec, ev, "fixture")
        rec.close()
    finally:
        E.SYSTEMS.unregister("always_partial")
    mine, html = _headline(rec.path, "always_partial", "test_unseen_answers")
    assert {r["metric"] for r in mine} >= {"accuracy", "macro_f1", "sacrebleu"}
    assert all(r["role"] == "baseline" and r["ci_low"] is not None for r in mine)
    row = _row(html, "always_partial")
    acc = next(r for r in mine if r["metric"] == "accuracy")
    assert "baseline" in row and pages.fmt(acc["value"]) in row


@pytest.mark.slow
def test_a_registered_selector_reaches_records_and_the_index(tmp_path) -> None:
    @X.SELECTORS.register("last_k_recipe", "baseline", params=("k",))
    def last_k(pair, k, env):
        """The last k sentences."""
        return list(range(len(pair.content)))[-k:]

    try:
        data = {f: load_argscichat(FIX / "argscichat", fold=f) for f in (0, 1)}
        pairs = X.split_pairs(data)
        ctx = X.SelectionContext(pairs, A.pair_index(p for ps in pairs.values() for p in ps),
                                 fake_embed, X.SelectionConfig(k=2, random_seeds=(0,)))
        names = X.SELECTORS.names(["baseline"])  # how 03 lists them (systems=None: all)
        assert "last_k_recipe" in names
        with threadpool_limits(1, user_api="openmp"):
            run = X.run_selectors(ctx, names)
        items = AEV.fact_f1_items(run.predictions)
        an = AEV.analyse(items, X.SELECTORS.roles(names))
        rec = Recorder("03_fact_selection", tmp_path)
        AEV.record(rec, an)
        rec.close()
    finally:
        X.SELECTORS.unregister("last_k_recipe")
    head, html = _headline(rec.path, "last_k_recipe", "test")
    assert len(head) == 1 and head[0]["role"] == "baseline"  # one test paper per fold: no CI
    assert "ArgSciChat fact selection" in html
    assert pages.fmt(head[0]["value"]) in _row(html, "last_k_recipe")


@pytest.mark.parametrize("family", [E.SYSTEMS, X.SELECTORS])
def test_unregistering_leaves_the_registry_as_it_was(family) -> None:
    before = list(family.names())
    family.register("tmp_recipe", "baseline")(lambda *a: None)
    family.unregister("tmp_recipe")
    assert list(family.names()) == before
