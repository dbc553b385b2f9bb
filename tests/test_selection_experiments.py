"""Fact-selection experiments on tests/fixtures/argscichat (two folds, four papers): the
registry, every selector, the per-fold val protocol and the evaluation tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fakes import fake_embed
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import experiments as R
from saf_utils.argscichat import fact_selection as FS
from saf_utils.argscichat import record as REC
from saf_utils.argscichat import selection_evaluation as EV
from saf_utils.argscichat import selectors as X
from saf_utils.argscichat.data import load_argscichat
from saf_utils.argscichat.selection_fit import (
    SelectionConfig,
    SelectionContext,
    select_split,
)
from saf_utils.registry import NoParams
from saf_utils.statistics import protocol as P

FIX = Path(__file__).parent / "fixtures" / "argscichat"
#: small candidate sets, so that the fixture runs in seconds
TINY_GRID = [{"kind": "logreg", "C": 1.0}, {"kind": "logreg", "C": 0.1}]
TINY_SETS = {"two_logreg": ({"kind": "logreg", "C": 1.0}, {"kind": "logreg", "C": 0.1}),
             "one_hgb": ({"kind": "hgb", "max_iter": 5, "max_leaf_nodes": 3,
                          "min_samples_leaf": 2},)}
TINY = {"random": {"seeds": [0, 1]}, "ranker": {"grid": TINY_GRID},
        **{n: {"grid": TINY_GRID} for n in ("ranker_no_history", "ranker_own_history")},
        "ranker_ensemble": {"member_sets": list(TINY_SETS)},
        **{n: {"member_sets": list(TINY_SETS), "mix_weights": [0.0, 1.0]}
           for n in ("ensemble_bm25", "ensemble_bm25_no_history", "ensemble_bm25_own_history")}}


@pytest.fixture(autouse=True)
def one_openmp_thread():
    with threadpool_limits(1, user_api="openmp"):
        yield


@pytest.fixture(scope="module", autouse=True)
def tiny_member_sets():
    X.ENSEMBLE_MEMBER_SETS.update(TINY_SETS)
    yield
    for name in TINY_SETS:
        X.ENSEMBLE_MEMBER_SETS.pop(name)


@pytest.fixture(scope="module")
def ctx(tiny_member_sets):
    data = {f: load_argscichat(FIX, fold=f) for f in (0, 1)}
    pairs = R.split_pairs(data)
    index = A.pair_index(p for ps in pairs.values() for p in ps)
    return SelectionContext(pairs, index, fake_embed, SelectionConfig(k=2))


@pytest.fixture(scope="module")
def run(ctx):
    with threadpool_limits(1, user_api="openmp"):
        return R.combine(
            R.run_selectors(ctx, ["random", "first", "tfidf", "bm25", "sbert", "gold_k"], TINY),
            R.run_selectors(ctx, ["ranker", "ranker_ensemble", "ensemble_bm25"], TINY),
            R.run_selectors(ctx, ["ranker_no_history", "ranker_own_history",
                                  "ensemble_bm25_no_history", "ensemble_bm25_own_history"],
                            TINY))


def test_registry_roles_params_and_unknown_names(ctx):
    assert X.SELECTORS.roles(["tfidf", "ranker", "gold_k"]) == {
        "tfidf": "baseline", "ranker": "gold_input", "gold_k": "oracle"}
    # the selectors that read earlier turns' gold facts are ceilings, their ablations not
    assert X.SELECTORS.names(["gold_input"]) == ["ranker", "ranker_ensemble", "ensemble_bm25"]
    assert X.SELECTORS["ranker_no_history"].role == "system"
    assert X.SELECTORS["ranker_own_history"].ablation_of == "ranker"
    with pytest.raises(ValueError, match="unknown selector"):
        X.SELECTORS.check(["tfidf", "nope"])
    with pytest.raises(ValueError, match="registered twice"):
        X.SELECTORS.register("tfidf", "baseline")(lambda ctx, params: None)
    assert R.selector_groups({})["systems"] == ["ranker", "ranker_ensemble", "ensemble_bm25"]
    # every selector has a parameters dataclass; its defaults are the only ones
    assert all(e.params_type is not None for e in X.SELECTORS.values())
    assert X.SELECTORS.params("ensemble_bm25").mix_weights == (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
    assert X.SELECTORS.params("random", {"seeds": [3]}).seeds == [3]
    table = X.SELECTORS.table(["random", "ranker_ensemble"]).set_index("system")
    assert table.loc["random", "params"] == "seeds=(0, 1, 2, 3, 4)"
    with pytest.raises(ValueError, match="unknown parameter"):
        R.run_selectors(ctx, ["random"], {"random": {"sedes": [0]}})
    with pytest.raises(ValueError, match="unknown selector"):
        R.run_selectors(ctx, ["random"], {"randm": {"seeds": [0]}})
    with pytest.raises(ValueError, match="not run"):
        X.SELECTORS.check_params(["first"], {"random": {"seeds": [0]}})
    with pytest.raises(ValueError, match="unknown ensemble member set"):
        R.run_selectors(ctx, ["ranker_ensemble"], {"ranker_ensemble": {"member_sets": ["x"]}})


def test_adding_a_selector_is_one_function_and_one_registration(ctx):
    @X.SELECTORS.register("last_k_test", "baseline", params=NoParams)
    def last_k(ctx, params, **context):
        """The last k sentences."""
        return ctx.each_pair(lambda pair, rng: list(range(len(pair.content)))[-ctx.config.k:])

    try:
        out = R.run_selectors(ctx, ["last_k_test"])
        assert set(out.predictions.system) == {"last_k_test"}
        assert (out.predictions.role == "baseline").all()
        assert list(out.predictions.columns) == list(R.SELECTION_COLUMNS)
    finally:
        X.SELECTORS.unregister("last_k_test")


def test_prediction_rows_schema_and_counts(ctx, run):
    p = run.predictions
    assert list(p.columns) == list(R.SELECTION_COLUMNS)
    n_pairs = sum(len(ps) for ps in ctx.pairs.values())
    # random once per seed, every other system once (seed None)
    assert (p.system == "random").sum() == 2 * n_pairs
    assert (p.system == "tfidf").sum() == n_pairs and p[p.system == "tfidf"].seed.isna().all()
    own = p[p.system == "ranker_own_history"]  # turn-by-turn ablation: val and test only
    assert set(own.split) == {"val", "test"}
    assert len(own) == sum(len(ps) for (f, s), ps in ctx.pairs.items() if s != "train")
    assert set(p.seed[p.system == "random"]) == {0, 1}
    assert all(len(s) == 2 for s in p.selected)
    assert set(p.paper_id) == {"7", "8", "9", "10"}
    # queries without gold fact sentences carry no score (skipped, as the official script)
    unscored = p[p.fact_f1.isna()].pair_id.unique()
    assert set(unscored) == {"C_0", "D_2"}
    assert (p.loc[p.system == "gold_k", "fact_f1"].dropna() > 0.6).all()
    assert p.role[p.system == "gold_k"].eq("oracle").all()


def test_learned_choices_are_per_fold_on_val(ctx, run):
    t = run.tuning
    assert set(t.system) == {"ranker", "ranker_ensemble", "ensemble_bm25",
                             "ensemble_bm25_no_history"}
    for (fold, system, param), g in t.groupby(["fold", "system", "param"]):
        assert g.chosen.sum() == 1, (fold, system, param)
        finite = g[np.isfinite(g.val_fact_f1)]
        assert g[g.chosen].val_fact_f1.iloc[0] == finite.val_fact_f1.max()
    # val scores come from train-only fits: recompute one by hand for fold 0
    spec, _ = X.ranker_choice(ctx, 0, TINY_GRID)
    model = FS.make_ranker("logreg", C=spec.members[0]["C"]).fit(
        ctx.fit_table(0, "train")[0][list(FS.FEATURES)], ctx.fit_table(0, "train")[1])
    Xv, _, gv = ctx.table(0, "val")
    sel = FS.grouped_top_k(model.predict_proba(Xv[list(FS.FEATURES)])[:, 1], gv, 2)
    got = run.predictions.query("system == 'ranker' and fold == 0 and split == 'val'")
    assert [list(s) for s in got.selected] == [sel[i] for i in range(len(got))]


def test_mix_weight_zero_equals_the_ensemble(ctx):
    spec, _ = X.ensemble_choice(ctx, 0, tuple(TINY_SETS))
    zero = select_split(ctx, 0, "test", spec)
    assert zero == select_split(ctx, 0, "test", X.replace(spec, bm25_weight=0.0))


def test_own_history_replaces_gold_history(ctx):
    """Turn 0 has no history, so own and gold history agree there; later turns use the
    system's own earlier picks (here, forcing them changes the history features)."""
    spec, _ = X.ranker_choice(ctx, 0, TINY_GRID)
    gold = select_split(ctx, 0, "test", spec, history="gold")
    own = select_split(ctx, 0, "test", spec, history="own")
    pairs = ctx.pairs[(0, "test")]
    first_turns = [i for i, p in enumerate(pairs) if p.turn == 0]
    assert [gold[i] for i in first_turns] == [own[i] for i in first_turns]
    p = pairs[1]
    base = FS.feature_table([p], fake_embed, ctx.index, ctx.feature_cache)[0]
    swapped = FS.with_history(base, p, fake_embed, [(3,)])
    assert swapped.in_last_facts.tolist() == [0, 0, 0, 1]
    assert base.in_last_facts.tolist() == [0, 1, 0, 0]  # gold fact of D_0 is sentence 1
    with pytest.raises(ValueError, match="history"):
        select_split(ctx, 0, "test", spec, history="oracle")


def test_no_history_features_drop_exactly_the_gold_history():
    assert set(FS.FEATURES) - set(FS.NO_HISTORY_FEATURES) == set(FS.HISTORY_FEATURES)
    assert "sbert_prev_reply" in FS.NO_HISTORY_FEATURES


def test_evaluation_choices_tables_and_records(tmp_path, run, ctx):
    items = EV.fact_f1_table(run.predictions)
    assert set(items.split) == {"val", "test"} and items.value.notna().all()
    assert (items.cluster == run.predictions.set_index("pair_id").paper_id
            .groupby(level=0).first().reindex(items.item).to_numpy()).all()
    roles = X.SELECTORS.roles(dict.fromkeys(run.predictions.system))
    an = EV.analyse_selection(items, roles, {"ranker_no_history": "ranker"})
    # one choice per fold, each among baselines and systems; the reference among baselines
    assert set(an.chosen.per_fold) == {0, 1}
    assert all(roles[s] in ("baseline", "system") for s in an.chosen.per_fold.values())
    assert all(roles[s] == "baseline" for s in an.baseline.per_fold.values())
    for f, s in an.chosen.per_fold.items():
        val = items[(items.split == "val") & (items.fold == f)
                    & (items.system.map(roles) != "oracle")]
        per_sys = val.groupby(["system", "item"]).value.mean().groupby(level=0).mean()
        assert per_sys[s] == pytest.approx(per_sys.max())
    # a selector that reads earlier turns' gold facts is never a candidate of the ★ choice
    assert all(roles[s] in ("baseline", "system") for s in an.chosen.per_fold.values())
    assert set(an.chosen.table.system) & set(X.SELECTORS.names(["gold_input"])) == set()
    # the composite's fold f part is the system chosen on fold f
    comp = an.items[(an.items.system == EV.CHOSEN) & (an.items.split == "test")]
    for f, s in an.chosen.per_fold.items():
        src = items[(items.system == s) & (items.fold == f) & (items.split == "test")]
        assert sorted(comp[comp.fold == f].value) == sorted(src.value)
    table = EV.summary_table(an)
    assert {"test", "ci_low", "ci_high", "val", f"minus {EV.BASELINE}", "p", "p_adj",
            "inputs"} <= set(table.columns)
    assert table.loc["ranker", "inputs"] == EV.GOLD_HISTORY_NOTE
    # official aggregation: mean over folds of the per-fold mean (random: seeds first)
    fm = items[(items.system == "random") & (items.split == "test")]
    per_fold = fm.groupby(["fold", "item"]).value.mean().groupby(level=0).mean()
    assert table.loc["random", "test"] == pytest.approx(per_fold.mean())
    assert an.comparisons.primary.sum() == 1
    p = an.primary()
    assert (p.system, p.reference, p.split) == (EV.CHOSEN, EV.BASELINE, "test")
    abl = an.comparisons[an.comparisons.system == "ranker_no_history"]
    assert "ranker" in set(abl.reference)
    assert len(EV.selection_sentences(an)) >= 2

    class Rec:
        def __init__(self):
            self.rows, self.items = [], None

        def add(self, *args, **kw):
            self.rows.append((args, kw))

        def add_items(self, frame):
            self.items = frame

    rec = Rec()
    REC.record_selection(rec, R.data_overview(ctx.pairs), an, run.tuning)
    kinds = [kw.get("kind", "result") for _, kw in rec.rows]
    assert {"result", "analysis", "tuning"} <= set(kinds)
    headline = [(a, kw) for a, kw in rec.rows if kw.get("kind", "result") == "result"
                and kw.get("fold") is None]
    assert all(kw.get("seed") is None and kw["estimand"] for _, kw in headline)
    # deterministic systems once per fold (seed None); random once per fold and seed
    tfidf = [kw for a, kw in rec.rows if a[3] == "tfidf" and kw.get("fold") is not None
             and kw.get("kind", "result") == "result"]
    assert all(kw["seed"] is None for kw in tfidf) and len(tfidf) == 4  # 2 folds x val/test
    chosen_rec = {kw.get("fold"): a[3] for a, kw in rec.rows if kw.get("subset") == "chosen"}
    assert chosen_rec == {**an.chosen.per_fold, None: EV.CHOSEN}
    assert any(kw.get("subset", "").startswith("primary p vs") for _, kw in rec.rows)
    assert list(rec.items.columns) == list(EV.ITEM_COLUMNS)


@pytest.mark.slow
def test_a_fold_choice_ignores_other_folds_val(run):
    """Perturbing fold 1's val items never changes fold 0's choice (no pooled val)."""
    items = EV.fact_f1_table(run.predictions)
    roles = X.SELECTORS.roles(dict.fromkeys(run.predictions.system))
    before = EV.analyse_selection(items, roles).chosen.per_fold
    for system in set(items.system):
        bumped = items.copy()
        mask = (bumped.fold == 1) & (bumped.split == "val") & (bumped.system == system)
        bumped.loc[mask, "value"] = 1.0
        after = EV.analyse_selection(bumped, roles).chosen.per_fold
        assert after[0] == before[0]


def test_a_val_paper_of_two_folds_is_two_clusters():
    """Real folds reuse val papers; the design must not see one cluster in two strata."""
    rows = [{"split": "val", "system": s, "fold": f, "pair_id": f"{f}_{i}", "paper_id": "P",
             "seed": None, "fact_f1": v, "role": "baseline"}
            for s, v in (("a", 0.5), ("b", 0.25)) for f in (0, 1) for i in range(3)]
    items = EV.fact_f1_table(pd.DataFrame(rows), splits=("val",))
    head = P.headline_table(items, EV.DESIGN).set_index("system")
    assert head.loc["a", "mean"] == pytest.approx(0.5)
    assert head.loc["a", "n_units"] == 2  # "0:P" and "1:P"
    diff = P.paired_table(items, "b", EV.DESIGN).iloc[0]
    assert diff["diff"] == pytest.approx(0.25) and diff.n_units == 2


def test_data_overview_counts_skipped(ctx):
    ov = R.data_overview(ctx.pairs)
    row = ov[(ov.fold == 0) & (ov.split == "val")].iloc[0]
    assert (row.pairs, row.scored, row.skipped_no_gold, row.papers) == (3, 2, 1, 1)
    capped = R.split_pairs({0: load_argscichat(FIX, fold=0)}, max_rows=1)
    assert all(len(v) == 1 for v in capped.values())
    assert pd.Series([len(v) for v in capped.values()]).sum() == 3
