"""The "Add a system" recipe of docs/recipes.md, followed as written, reaches the records, the
index and its headline table (SAF and fact selection; reply systems: test_reply_experiments). The
"Add a task" and "Add a metric" recipes are followed in test_tasks.py, "Add a notebook" in
test_run.py (a toy notebook recorded through Recorder reaches metrics.json and index.html).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fakes import bow_encoder, fake_embed
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import selection_evaluation as AEV
from saf_utils.argscichat import selection_experiments as X
from saf_utils.argscichat.data import load_argscichat
from saf_utils.reporting import pages
from saf_utils.reporting.records import Recorder, read_records
from saf_utils.saf import evaluate as SEV
from saf_utils.saf import record as SRC
from saf_utils.saf import run as SR
from saf_utils.saf.context import EncoderChoice, load_data
from saf_utils.saf.systems import SYSTEMS

FIX = Path(__file__).parent / "fixtures"


def _headline(path: Path, system: str, split: str) -> tuple[list[dict], str]:
    """The system's headline records (kind result, no fold, no seed) on ``split`` and the
    index sections rendered from all records of the file."""
    rows = read_records([path])
    mine = [r for r in rows if r["system"] == system and r["kind"] == "result"
            and r["fold"] is None and r["seed"] is None and r["split"] == split]
    return mine, "\n".join(pages.task_sections(rows))


def _row(html: str, system: str) -> str:
    """The index table row of ``system`` (its name cell up to the end of the row)."""
    start = html.index(f"<td>{system}")
    return html[start:html.index("</tr>", start)]


#: The recipe's SAF system, as its own module (docs/recipes.md, "SAF").
SAF_MODULE = '''
from dataclasses import dataclass

import pandas as pd

from saf_utils.saf import formats as S
from saf_utils.saf.systems import SYSTEMS


@dataclass(frozen=True)
class AlwaysPartialParams:
    score: float = 0.5  # the score it predicts (its one hyperparameter)


@SYSTEMS.register("always_partial", "baseline", params=AlwaysPartialParams)
def always_partial(data, params, ctx):
    """Always 'Partially correct', no feedback."""
    return pd.concat([S.prediction_table(df, "always_partial",
                                         labels=["Partially correct"] * len(df),
                                         scores=[params.score] * len(df),
                                         feedback=[""] * len(df))
                      for df in data.evals.values()], ignore_index=True)
'''


@pytest.mark.slow
def test_a_registered_saf_system_reaches_records_and_the_index(tmp_path, monkeypatch) -> None:
    """Its module, one import line, one profile entry (a non-default value): nothing else."""
    (tmp_path / "my_saf_system.py").write_text(SAF_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import my_saf_system  # noqa: F401  (the one import line)

        profile_entry = {"always_partial": {"score": 0.25}}  # system_params of the profile
        data = load_data(str(FIX / "saf_legal_jsonl"))
        names = SYSTEMS.names(["baseline"])  # how 02 lists systems (all roles there)
        assert "always_partial" in names
        assert SR.effective_params(profile_entry)["always_partial"] == {"score": 0.25}
        encoders = EncoderChoice("de", "bow", (), "local:all-MiniLM-L6-v2", ())
        run = SR.run_systems(data, names, encoders, profile_entry, embed=bow_encoder)
        mine = run.preds[run.preds.system == "always_partial"]
        assert len(mine) and (mine.pred_score == 0.25).all()  # the profile's value
        ev = SEV.evaluate(run.preds, run.roles, embedding_metrics=False, n_resamples=50)
        rec = Recorder("02_baseline_finetuning", tmp_path)
        SRC.record_and_conclude(rec, ev, run, "fixture")
        rec.close()
    finally:
        SYSTEMS.unregister("always_partial")
        sys.modules.pop("my_saf_system", None)
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


@pytest.mark.parametrize("family", [SYSTEMS, X.SELECTORS])
def test_unregistering_leaves_the_registry_as_it_was(family) -> None:
    before = list(family.names())
    family.register("tmp_recipe", "baseline")(lambda *a: None)
    family.unregister("tmp_recipe")
    assert list(family.names()) == before


def test_notebook_02_needs_no_edit_for_a_new_saf_system() -> None:
    """02 runs every registered name and takes parameters by system name only: no
    parameter of one system in its parameters cell (``seeds`` is the run's)."""
    import dataclasses
    import json

    from saf_utils.reporting.profiles import notebook_parameters

    nb_path = Path(__file__).parents[1] / "notebooks" / "02_baseline_finetuning.ipynb"
    params = notebook_parameters(nb_path)
    assert params["system_params"]["default"] == "{}"
    per_system = {f.name for e in SYSTEMS.values() for f in dataclasses.fields(e.params_type)}
    assert not (per_system - {"seeds"}) & set(params), sorted(per_system & set(params))
    code = "\n".join("".join(c["source"]) for c in json.loads(nb_path.read_text())["cells"]
                     if c["cell_type"] == "code")
    assert "SYSTEMS.names()" in code and "runner.run_systems(" in code
