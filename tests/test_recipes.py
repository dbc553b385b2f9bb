"""The "Add a system" recipe of docs/recipes.md, followed as written, reaches the records, the
index and its headline table (SAF, fact selection, reply generation: the ArgSciChat recipes'
code blocks run as written, their module under the name their import line names). The
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
from saf_utils.argscichat.data import load_argscichat
from saf_utils.argscichat.systems import SELECTORS
from saf_utils.artifacts import record_rows
from saf_utils.reporting import index_page, pages
from saf_utils.reporting.records import Recorder
from saf_utils.saf import evaluate as SEV
from saf_utils.saf import record as SRC
from saf_utils.saf import run as SR
from saf_utils.saf.context import EncoderChoice, load_data
from saf_utils.saf.systems import SYSTEMS

FIX = Path(__file__).parent / "fixtures"
RECIPES = Path(__file__).parents[1] / "docs" / "recipes.md"


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


def _recipe(name: str) -> str:
    """The code block of docs/recipes.md after ``<!-- recipe: name -->``."""
    text = RECIPES.read_text(encoding="utf-8")
    start = text.index(f"<!-- recipe: {name} -->")
    block = text[text.index("```", start):]
    body = block[block.index("\n") + 1:]
    return body[:body.index("```")]


def _follow(tmp_path: Path, kind: str) -> tuple[str, dict]:
    """Follow an ArgSciChat recipe as written: its module (written under the name its import
    line names, from tmp_path: the worktree stays clean), its import line as systems.py
    would run it, and its profile entry; returns the module name and the notebook's
    ``system_params`` from that entry."""
    import importlib.util
    import sys

    import yaml

    line = _recipe(f"{kind} import").strip()
    module = line.split()[1]
    path = tmp_path / f"{module.rsplit('.', 1)[1]}.py"
    path.write_text(_recipe(f"{kind} module"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module, path)
    sys.modules[module] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[module])
    exec(line, {})  # the one import line of saf_utils/argscichat/systems.py
    (notebook, entry), = yaml.safe_load(_recipe(f"{kind} profile")).items()
    return module, entry["system_params"]


def _forget(module: str, registry, name: str) -> None:
    import sys

    registry.unregister(name)
    sys.modules.pop(module, None)


def test_the_argscichat_recipes_name_the_files_they_touch() -> None:
    text = RECIPES.read_text(encoding="utf-8")
    for title in ("## Add a fact selector (ArgSciChat)", "## Add a reply system (ArgSciChat)"):
        section = text[text.index(title):]
        files = section[:section.index("<!-- recipe:")]
        assert "Files touched: **the" in files and "**one import line**" in files
        assert "`saf_utils/argscichat/systems.py`" in files and "**one profile entry**" in files


@pytest.mark.slow
def test_the_selector_recipe_reaches_records_and_the_index(tmp_path) -> None:
    from saf_utils.argscichat import run as R
    from saf_utils.argscichat.selection_fit import SelectionConfig, SelectionContext
    from saf_utils.argscichat.systems import SELECTORS

    module, system_params = _follow(tmp_path, "selector")
    try:
        names = SELECTORS.names(["baseline"])  # how 03 lists them (baselines=None: all)
        assert "last_k" in names
        assert SELECTORS.table(["last_k"]).params.iloc[0] == "skip=0"  # the one default
        data = {f: load_argscichat(FIX / "argscichat", fold=f) for f in (0, 1)}
        pairs = R.split_pairs(data)
        ctx = SelectionContext(pairs, A.pair_index(p for ps in pairs.values() for p in ps),
                               fake_embed, SelectionConfig(k=2))
        R.check_system_params(SELECTORS, names, system_params)
        with threadpool_limits(1, user_api="openmp"):
            run = R.run_selectors(ctx, names, system_params)
        last = run.predictions[run.predictions.system == "last_k"]
        p0 = ctx.pairs[(last.fold.iloc[0], last.split.iloc[0])][0]
        n = len(p0.content)
        assert list(last.selected.iloc[0]) == [n - 3, n - 2]  # skip=1 from the profile
        items = AEV.fact_f1_table(run.predictions)
        an = AEV.analyse_selection(items, SELECTORS.roles(names))
        rec = Recorder("03_fact_selection", tmp_path)
        AEV.record_selection_results(rec, an)
        rec.close()
    finally:
        _forget(module, SELECTORS, "last_k")
    head, html = _headline(rec.path, "last_k", "test")
    assert len(head) == 1 and head[0]["role"] == "baseline"  # one test paper per fold: no CI
    assert "ArgSciChat fact selection" in html
    assert pages.fmt(head[0]["value"]) in _row(html, "last_k")


@pytest.mark.slow
def test_the_reply_recipe_reaches_records_and_the_index(tmp_path) -> None:
    from saf_utils import protocol as P
    from saf_utils.argscichat import replies as RS
    from saf_utils.argscichat import reply_evaluation as REV
    from saf_utils.argscichat import run as R
    from saf_utils.argscichat.systems import REPLY_SYSTEMS

    module, system_params = _follow(tmp_path, "reply")
    try:
        systems = list(REPLY_SYSTEMS)  # how 04 lists them (systems=None: all)
        assert "echo_query" in systems
        assert REPLY_SYSTEMS.table(["echo_query"]).params.iloc[0] == "words=12"
        data = {0: load_argscichat(FIX / "argscichat", 0)}
        selected = {(0, s, p.pair_id): [0] for s in A.SPLITS for p in data[0][s]}
        folds = R.reply_folds(data, selected, fact_system="first")
        names = ["constant_frequent", "echo_query"]
        run = R.run_reply_systems(folds, names, RS.ReplyConfig(log=lambda m: None),
                                  system_params)
        echo = run.predictions[run.predictions.system == "echo_query"]
        assert echo.output.tolist() == [" ".join(p.query.split()[:3])
                                        for p in folds[0].val + folds[0].test]
        items = REV.score_predictions(run.predictions, splits=("val", "test"))
        an = REV.analyse_replies(items, "content_f1")
        rec = Recorder("04_generation", tmp_path)
        P.record(rec, RS.TASK, RS.DATASET, headline=an.headline, comparisons=an.comparisons)
        rec.close()
    finally:
        _forget(module, REPLY_SYSTEMS, "echo_query")
    rows = record_rows([rec.path])
    mine = [r for r in rows if r["system"] == "echo_query" and r["metric"] == "content_f1"
            and r["fold"] is None and r["split"] == "test" and r["kind"] == "result"]
    assert len(mine) == 1 and mine[0]["role"] == "baseline"
    html = "\n".join(index_page.task_sections(rows))
    assert "ArgSciChat generation" in html and "echo_query" in html


@pytest.mark.parametrize("family", [SYSTEMS, SELECTORS])
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

    from saf_utils.reporting.parameters import notebook_parameters

    nb_path = Path(__file__).parents[1] / "notebooks" / "02_baseline_finetuning.ipynb"
    params = notebook_parameters(nb_path)
    assert params["system_params"]["default"] == "{}"
    per_system = {f.name for e in SYSTEMS.values() for f in dataclasses.fields(e.params_type)}
    assert not (per_system - {"seeds"}) & set(params), sorted(per_system & set(params))
    code = "\n".join("".join(c["source"]) for c in json.loads(nb_path.read_text())["cells"]
                     if c["cell_type"] == "code")
    assert "runner.planned_systems(" in code and "runner.run_systems(" in code
