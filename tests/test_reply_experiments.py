"""Reply systems and their evaluation (saf_utils.argscichat.replies, run, reply_evaluation)
on tests/fixtures/argscichat and on small hand-made folds."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import experiments as R
from saf_utils.argscichat import replies as RS
from saf_utils.argscichat import reply_evaluation as REV
from saf_utils.argscichat.data import MessagePair, load_argscichat
from saf_utils.data import artifacts as AR
from saf_utils.registry import NoParams

FIXTURES = Path(__file__).parent / "fixtures" / "argscichat"
CONTENT = ("We study parody detection in social media.",
           "Parody accounts imitate politicians on Twitter.",
           "We collect a data set of tweets from real and parody accounts.",
           "A BERT classifier reaches the best accuracy.")


@pytest.fixture(autouse=True)
def one_openmp_thread():
    with threadpool_limits(1, user_api="openmp"):
        yield


def fake_embed(texts):
    out = np.zeros((len(texts), 16))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, sum(map(ord, w)) % 16] += 1.0
        out[i, 0] += 1e-3
    return out


def pair(pid: str, query: str, reply: str, facts=(), paper="paper") -> MessagePair:
    return MessagePair(pair_id=pid, paper_id=paper, title="T", content=CONTENT, dialogue_id=pid,
                       turn=0, query=query, reply=reply, history=(), history_ids=(),
                       facts=tuple(CONTENT[i] for i in facts), fact_indexes=tuple(facts),
                       history_fact_indexes=())


def make_fold(f: int, train, val, test, sel=(2,)) -> RS.ReplyFold:
    selected = {(s, p.pair_id): list(sel) for s, ps in (("val", val), ("test", test))
                for p in ps}
    return RS.ReplyFold(f, list(train), list(val), list(test),
                        A.pair_index([*train, *val, *test]), selected, "first")


def outputs(system: str, folds, params=None, config=None) -> RS.ReplyData:
    """One system run directly (no runner): its frame and what it appended to the data."""
    data = RS.ReplyData(folds, config or CONFIG)
    frame = RS.REPLY_SYSTEMS[system].fn(data, RS.REPLY_SYSTEMS.params(system, params))
    return frame, data


TRAIN = [pair("t0", "What data?", "the data is the tweets ."),
         pair("t1", "Which model?", "the model is a BERT classifier .", facts=(3,)),
         pair("t2", "Why parody?", "the parody is the point .", facts=(1,))]
VAL = [pair("v0", "What do they collect?", "the tweets of parody accounts .", facts=(2,))]
TEST = [pair("x0", "Which classifier?", "BERT is the best .", facts=(3,), paper="p2"),
        pair("x1", "Hello", "Hi .", paper="p3")]
CONFIG = RS.ReplyConfig(embed=fake_embed, log=lambda m: None)
PARAMS = {"compressed_selected": {"model": "logreg", "prior_words": [0, 2]}}


# --------------------------------------------------------------------------- registry

def test_registry_roles_params_and_lookup() -> None:
    assert set(RS.REPLY_SYSTEMS) >= {"constant_frequent", "nearest_reply", "copy_selected",
                                     "trimmed_selected", "seq2seq", "copy_gold",
                                     "compressed_selected"}
    assert {s.role for s in RS.REPLY_SYSTEMS.values()} <= {"baseline", "system", "oracle",
                                                           "probe"}
    assert RS.REPLY_SYSTEMS["compressed_selected"].role == "probe"
    assert RS.REPLY_SYSTEMS["copy_gold"].role == "oracle"
    assert RS.REPLY_SYSTEMS["constant_frequent"].role == "baseline"
    assert RS.REPLY_SYSTEMS.by_role(["copy_gold", "seq2seq", "copy_selected"], "baseline",
                                    "system") == ["copy_selected", "seq2seq"]
    assert RS.REPLY_SYSTEMS.roles(["copy_gold"]) == {"copy_gold": "oracle"}
    assert all(e.params_type is not None for e in RS.REPLY_SYSTEMS.values())
    assert [f.name for f in fields(RS.REPLY_SYSTEMS["trimmed_selected"].params_type)] == [
        "lengths"]
    assert RS.REPLY_SYSTEMS.params("seq2seq").settings == RS.SCRATCH_SEQ2SEQ
    with pytest.raises(ValueError, match="unknown reply system"):
        R.run_reply_systems({}, ["gpt"])
    with pytest.raises(ValueError, match="unknown parameter"):
        R.run_reply_systems({}, ["trimmed_selected"], CONFIG,
                            {"trimmed_selected": {"length": [3]}})
    with pytest.raises(ValueError, match="should be"):
        RS.REPLY_SYSTEMS.params("compressed_selected", {"model": 3})


def test_adding_a_system_is_one_function_and_one_registration() -> None:
    @RS.REPLY_SYSTEMS.register("echo", "baseline", params=NoParams)
    def echo_query(data, params, **context):
        """The query itself."""
        return RS.each_fold(data, lambda fold: [RS.SystemOutput(
            {s: [p.query for p in fold[s]] for s in RS.EVAL_SPLITS})])

    try:
        run = R.run_reply_systems({0: make_fold(0, TRAIN, VAL, TEST)}, ["echo"], CONFIG)
        assert run.predictions.output.tolist() == [VAL[0].query, TEST[0].query, TEST[1].query]
        assert list(run.predictions.columns) == list(R.REPLY_COLUMNS)
    finally:
        RS.REPLY_SYSTEMS.unregister("echo")


# --------------------------------------------------------------------------- systems

def test_frequent_words_and_constant_floor_tuned_on_the_folds_val() -> None:
    assert RS.frequent_words(["a b", "a c", "a b"], 2) == "a b"
    assert RS.frequent_words(["x y", "y x"], 1) == "x"  # ties: alphabetical
    params = {"n_words": [1, 2, 3]}
    frame, data = outputs("constant_frequent", {0: make_fold(0, TRAIN, VAL, TEST)}, params)
    # ".", "is", "the" are in every training reply (ties alphabetical); against the val
    # reply "the tweets of parody accounts ." n=1 scores 2/7, n=2 1/4, n=3 4/9
    assert data.logs == [{"fold": 0, "seed": None, "n": 3}]
    assert frame[frame.split == "test"].output.tolist() == [". is the", ". is the"]
    assert [t["chosen"] for t in data.tuning] == [False, False, True]
    assert data.tuning[0]["value"] == pytest.approx(2 / 7)
    # test replies never influence the choice
    other = {0: make_fold(0, TRAIN, VAL, [pair("x0", "q", ".")])}
    assert outputs("constant_frequent", other, params)[1].logs[0]["n"] == 3


def test_each_fold_tunes_on_its_own_val() -> None:
    val_long = [pair("v1", "What?", " ".join(CONTENT[2].split()[:10]))]
    val_short = [pair("v2", "What?", " ".join(CONTENT[2].split()[:3]))]
    folds = {0: make_fold(0, TRAIN, val_long, TEST), 1: make_fold(1, TRAIN, val_short, TEST)}
    run = R.run_reply_systems(folds, ["trimmed_selected"], CONFIG,
                              {"trimmed_selected": {"lengths": [3, 10, None]}})
    chosen = run.tuning[run.tuning.chosen].set_index("fold").subset.to_dict()
    assert chosen == {0: "words=10", 1: "words=3"}
    test_out = run.predictions[run.predictions.split == "test"].groupby("fold").output.first()
    assert len(test_out[0].split()) == 10 and len(test_out[1].split()) == 3


def test_run_reply_systems_rows_on_fixtures(tmp_path) -> None:
    data = {0: load_argscichat(FIXTURES, 0)}
    rows = [r for s in A.SPLITS for r in A.prediction_rows(
        data[0][s], [[0, 1]] * len(data[0][s]), fold=0, split=s, system="first")]
    AR.write_selections(rows, tmp_path)
    folds = R.reply_folds(data, A.selection_lookup(AR.read_selections(tmp_path, "first")),
                          fact_system="first")
    systems = [s for s in RS.REPLY_SYSTEMS if s != "seq2seq"]
    run = R.run_reply_systems(folds, systems, CONFIG, PARAMS)
    p = run.predictions
    assert list(p.columns) == list(R.REPLY_COLUMNS)
    fold = folds[0]
    assert len(p) == len(systems) * (len(fold.val) + len(fold.test))
    assert p.seed.isna().all() and set(p.role) == {"baseline", "oracle", "probe"}
    gold = p[(p.system == "copy_gold") & (p.split == "test")]
    assert gold.output.tolist() == [" ".join(q.content[i] for i in q.fact_indexes)
                                    for q in fold.test]
    assert "" in gold.output.tolist()  # a query without gold facts: empty oracle reply
    sel = p[(p.system == "copy_selected") & (p.split == "test")].output.iloc[0]
    assert sel == " ".join(fold.test[0].content[:2])
    assert p[p.split == "test"].pair_id.tolist()[:len(fold.test)] == [
        q.pair_id for q in fold.test]
    assert set(run.tuning.system) == {"constant_frequent", "trimmed_selected",
                                      "compressed_selected"}
    assert (run.tuning.groupby(["fold", "system"]).chosen.sum() == 1).all()
    assert set(run.logs.system) == set(systems) and list(run.logs.columns[:3]) == [
        "fold", "system", "seed"]
    with pytest.raises(ValueError, match=r"lack \d+ val/test pair"):
        R.reply_folds(data, {})


def test_seq2seq_runs_through_the_training_entry_point(tmp_path) -> None:
    data = {0: load_argscichat(FIXTURES, 0)}
    rows = [r for s in A.SPLITS for r in A.prediction_rows(
        data[0][s], [[0]] * len(data[0][s]), fold=0, split=s, system="first")]
    AR.write_selections(rows, tmp_path)
    folds = R.reply_folds(data, A.selection_lookup(AR.read_selections(tmp_path)), None,
                          {0: "first"})
    settings = {"model": "scratch", "max_steps": 1, "batch_size": 2, "max_target_length": 4,
                "scratch_vocab_size": 60, "scratch_d_model": 16, "scratch_layers": 1,
                "scratch_heads": 2, "scratch_ff": 32}
    config = RS.ReplyConfig(seeds=(3,), work_dir=str(tmp_path / "jobs"), log=lambda m: None)
    run = R.run_reply_systems(folds, ["seq2seq"], config, {"seq2seq": {"settings": settings}})
    fold = folds[0]
    assert set(run.predictions.seed) == {3} and set(run.predictions.role) == {"system"}
    assert run.predictions.pair_id.tolist() == [q.pair_id for q in fold.val + fold.test]
    assert np.isfinite(run.logs.train_loss.iloc[0])
    with pytest.raises(TypeError):
        R.run_reply_systems(folds, ["seq2seq"], config, {"seq2seq": {"settings": {"lr": 1.0}}})


# --------------------------------------------------------------------------- scoring, choice

def predictions() -> pd.DataFrame:
    """Two folds, two papers each; 'good' copies the gold reply on every pair."""
    rows = []
    for f in (0, 1):
        for split in RS.EVAL_SPLITS:
            for i in range(4):
                gold = f"tweets parody accounts number {i} ."
                for system, role, out, seed in (
                        ("constant_frequent", "baseline", "the .", None),
                        ("copy_selected", "baseline", gold if i % 2 else "tweets", None),
                        ("seq2seq", "system", "" if i == 0 else "parody", 0),
                        ("seq2seq", "system", "parody", 1),
                        ("copy_gold", "oracle", gold, None)):
                    rows.append({"fold": f, "split": split, "pair_id": f"f{f}{split}{i}",
                                 "paper_id": f"paper{f}{i % 2}", "system": system,
                                 "role": role, "seed": seed, "output": out, "gold": gold})
    df = pd.DataFrame(rows)
    df["seed"] = RS.seed_column(df.seed)
    return df


def test_score_predictions_layout_and_empty_output() -> None:
    items = REV.score_predictions(predictions(), splits=("val", "test"))
    assert {"task", "dataset", "split", "system", "metric", "item", "cluster", "value",
            "seed", "fold", "role"} <= set(items.columns)
    assert set(items.metric) == set(REV.RG.OVERLAP_METRICS)
    empty = items[(items.system == "seq2seq") & (items.seed == 0) & (items.item == "f0test0")]
    assert (empty.value == 0.0).all()  # "" is scored as "", not "."
    assert items[items.system == "copy_gold"].value.eq(1.0).all()
    assert set(items[items.system == "seq2seq"].seed) == {0, 1}
    assert items[items.system == "copy_selected"].seed.isna().all()
    stats = REV.output_stat_table(predictions())
    row = stats[(stats.system == "constant_frequent") & (stats.fold == 0)].iloc[0]
    assert row.identical_outputs == 1.0 and row.seed is None


def test_choice_on_val_ignores_oracles_and_probes() -> None:
    items = REV.score_predictions(predictions(), splits=("val", "test"))
    an = REV.analyse_replies(items, "content_f1")
    assert set(an.choice.table.system) == {"constant_frequent", "copy_selected", "seq2seq"}
    assert an.choice.per_fold == {0: "copy_selected", 1: "copy_selected"}
    comp = an.test_items[an.test_items.system == REV.CHOSEN]
    assert set(comp.split) == {"test"} and comp.role.iloc[0] == "baseline"
    assert len(comp) == 2 * 4 * 3


def test_headline_and_difference_to_the_floor() -> None:
    items = REV.score_predictions(predictions(), splits=("val", "test"))
    an = REV.analyse_replies(items, "content_f1")
    head = an.headline
    row = head[(head.system == "copy_gold") & (head.metric == "content_f1")].iloc[0]
    assert row["mean"] == pytest.approx(1.0) and row.role == "oracle"
    s2s = head[(head.system == "seq2seq") & (head.metric == "message_f1")].iloc[0]
    # seeds averaged per item first: item 0 of each fold is (0 + F1("parody", gold)) / 2
    f1 = 2 * (1 / 1) * (1 / 6) / (1 + 1 / 6)
    assert s2s["mean"] == pytest.approx((f1 / 2 + 3 * f1) / 4)
    c = an.comparisons
    assert RS.FLOOR not in set(c.system) and RS.FLOOR in set(c.reference)
    lead = c[c.reference != RS.FLOOR]  # each test leader against its runner-up
    assert len(lead) and set(lead.reference) <= set(an.headline.system)
    primary = c[c.primary].iloc[0]
    assert (primary.system, primary.metric) == (REV.CHOSEN, "content_f1")
    # 4 test papers in 2 folds: an exact sign flip over 16 assignments, min p = 2/16
    copy = c[(c.system == "copy_selected") & (c.metric == "content_f1")].iloc[0]
    assert copy["diff"] > 0 and copy.p_value == pytest.approx(0.125)
    assert copy.method.startswith("exact randomization") and copy.n_units == 4
    assert copy.ci_low <= 0  # consistent with p > 0.05
    text = REV.reply_sentences(an)
    assert text[0].startswith(f"Estimand — {primary.estimand}: Primary comparison")
    assert "not distinguishable" in text[0]
    # 14 Holm-adjusted comparisons over 4 papers: none can reach 0.05 (14 x 2/16 > 1); the
    # page says so once and prints no minimum detectable effect for them
    assert sum("None of the 14 Holm-adjusted comparisons can reach" in t for t in text) == 1
    assert not any("minimum detectable" in t for t in text if "Holm-adjusted p" in t)
    pairs = [(t.split(": ", 1)[0], t.split(" are not")[0].split(" is ")[0]) for t in text]
    assert len(pairs) == len(set(pairs))  # one verdict per comparison
    # the notebook's two tables: a leader compared with the floor and with its runner-up
    # keeps one cell per (system, metric) in each
    metrics = ["content_f1", "message_f1"]
    vs_floor, leads = REV.comparison_tables(an, metrics)
    assert list(vs_floor.columns) == metrics and vs_floor.index.is_unique
    assert REV.CHOSEN in vs_floor.index.get_level_values("system")
    assert set(leads.index) <= set(metrics) and len(leads)
    assert (leads.reference != RS.FLOOR).all()
