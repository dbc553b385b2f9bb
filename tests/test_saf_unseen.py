"""Unseen questions: the reference's content units, grounded feedback, the feedback choice
on train and the one-standard-error rule with its nested regret (tiny hand-made frames)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from fakes import bow_encoder
from saf_frames import toy_frame

from saf_utils.saf import baselines as B
from saf_utils.saf import experiments as R
from saf_utils.saf import feedback_choice as FCH
from saf_utils.saf import grounded as G
from saf_utils.saf import reference as RF
from saf_utils.saf import systems as SY
from saf_utils.saf.context import EncoderChoice, RunContext, SAFData
from saf_utils.statistics import validation_choice as VC

REF = ("Es muss ein Foto der Sanitäranlagen von außen (0.5 P) angefertigt werden. "
       "Der Zustand muss in der Frage nach Begehbarkeit beantwortet (0.5 P) werden.")


# --------------------------------------------------------------------------- reference units


def test_content_units_split_at_annotations_and_keep_short_pieces_with_their_clause():
    assert RF.content_units(REF, "sentence") == [
        "Es muss ein Foto der Sanitäranlagen von außen angefertigt werden.",
        "Der Zustand muss in der Frage nach Begehbarkeit beantwortet werden."]
    two = RF.content_units("Tanken (0.25 P) und im Shop einkaufen (0.25 P), Budget 16 Euro "
                           "bleibt beim Jobber.", "clause")
    assert two == ["Tanken und im Shop einkaufen", "Budget 16 Euro bleibt beim Jobber."]
    # an abbreviation does not end a sentence
    assert RF.content_units("Achte z.B. auf die Begrüßung und Verabschiedung.", "sentence") \
        == ["Achte z.B. auf die Begrüßung und Verabschiedung."]
    with pytest.raises(ValueError, match="unknown content unit"):
        RF.content_units(REF, "word")


def test_coverage_matches_word_stems_and_numbers():
    assert RF.stems("Die Tankstelle 16 geöffnet") == {"tanks", "16", "geöff"}
    assert RF.coverage("die Tankstellen waren geöffnet", "Tankstelle geöffnet") == 1.0
    assert RF.coverage("nichts davon", "Tankstelle geöffnet") == 0.0
    assert RF.coverage("egal", "und es") == 1.0  # no content: nothing to miss


# --------------------------------------------------------------------------- grounded feedback


def _train() -> pd.DataFrame:
    return pd.DataFrame({
        "question": ["A", "A", "B", "B", "C"],
        "verification_feedback": ["Partially correct", "Partially correct",
                                  "Partially correct", "Incorrect", "Correct"],
        "answer_feedback": ["Wichtig ist, dass x.", "Bitte noch y.", "Wichtig ist, dass z.",
                            "Leider falsch.", "Korrekt!"]})


def test_lead_ins_prefer_openings_shared_by_questions():
    leads = G.lead_ins(_train(), 3)
    assert leads["Partially correct"] == "Wichtig ist, dass"  # in 2 questions, not 1
    assert leads["Incorrect"] == "Leider falsch." and G.lead_ins(_train(), 0) == {}


def test_grounded_feedback_names_what_the_answer_misses_behind_the_lead_in():
    g = G.GroundedFeedback(_train(), G.GroundedParams(unit="sentence", tau=0.5))
    text = g.write("ich mache ein Foto der Sanitäranlagen von außen", REF, "Partially correct")
    assert text == ("Wichtig ist, dass Der Zustand muss in der Frage nach Begehbarkeit "
                    "beantwortet werden.")
    # Incorrect with incorrect="all": the whole reference, even what the answer covers
    assert g.write("Foto der Sanitäranlagen von außen", REF, "Incorrect").count(".") == 3
    # nothing below tau: the least covered unit; max_units caps the list
    capped = G.GroundedFeedback(_train(), G.GroundedParams("sentence", 0.5, 1, 0, "missing"))
    assert capped.missing("", REF) == [RF.content_units(REF, "sentence")[0]]
    assert capped.write("", REF, "Incorrect") == RF.content_units(REF, "sentence")[0]
    assert "grounded:sentence,tau=0.5,max=1" in capped.params.name
    with pytest.raises(ValueError, match="incorrect"):
        G.GroundedFeedback(_train(), G.GroundedParams(incorrect="some"))


def test_feedback_bank_writes_grounded_feedback_and_praise_for_correct():
    bank = B.FeedbackBank(_train())
    assert bank.unseen("Q", REF, "Correct", "grounded", "egal") == "Korrekt!"
    grounded = bank.unseen("Q", REF, "Partially correct", G.GroundedParams(lead_words=0),
                           "Foto der Sanitäranlagen von außen angefertigt")
    assert grounded.startswith("Der Zustand") and "Foto" not in grounded
    assert bank.grounded(G.GroundedParams()) is bank.grounded(G.GroundedParams())  # cached


# --------------------------------------------------------------------------- feedback choice


def test_feedback_candidates_are_simplest_first():
    grid = FCH.FeedbackGrid(units=("sentence",), taus=(0.5,), max_units=(None,),
                            lead_words=(0, 3), incorrect=("all",))
    cands = grid.candidates()
    assert list(cands)[:3] == ["global", "nearest_question", "reference"]
    assert [c.lead_words for c in list(cands.values())[3:]] == [0, 3]


def test_feedback_choice_by_leave_one_question_out_on_train():
    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    grid = FCH.FeedbackGrid(units=("sentence",), taus=(0.5,), max_units=(None,),
                            lead_words=(0,), incorrect=("all",))
    cv = FCH.loqo_feedback_cv(train, grid.candidates(), bow_encoder)
    assert len(cv) == 3 * 4 and set(cv.fold) == {"Q1", "Q2", "Q3"} and (cv.n == 6).all()
    fc = FCH.choose_unseen_feedback(train, bow_encoder, grid)
    assert fc.name in grid.candidates() and fc.strategy == grid.candidates()[fc.name]
    assert len(fc.regret) == len(fc.regret_best_mean) == 3
    assert (fc.regret.regret >= -1e-9).all() and fc.choice.table.chosen.sum() == 1


# --------------------------------------------------------------------------- the one-SE rule


def _folds() -> pd.DataFrame:
    # "simple" is within one SE of "complex" (mean 0.60 vs 0.62, SE of complex 0.1)
    rows = {"simple": [0.5, 0.6, 0.7], "complex": [0.52, 0.72, 0.62 + 0.0],
            "bad": [0.1, 0.2, 0.3]}
    return pd.DataFrame([{"system": s, "fold": f"q{i}", "value": v}
                         for s, vals in rows.items() for i, v in enumerate(vals)])


def test_fold_summary_mean_se_and_order():
    t = VC.fold_summary(_folds(), ["bad", "simple", "complex"])
    assert t.system.tolist() == ["bad", "simple", "complex"]
    assert t.value.round(3).tolist() == [0.2, 0.6, 0.62] and (t.n_folds == 3).all()
    assert t.se.iloc[1] == pytest.approx(0.1 / np.sqrt(3))


def test_one_se_rule_prefers_the_simpler_system_within_the_noise():
    roles = {"simple": "baseline", "complex": "system", "bad": "system"}
    c = VC.choose_within_se(_folds(), "accuracy", roles)
    assert c.per_fold == {None: "simple"} and c.split == "train"
    assert c.table.chosen.tolist() == [True, False, False]
    assert VC.choose_within_se(_folds(), "accuracy", roles, n_se=0).per_fold[None] == "complex"
    # far better than its SE: the complex one
    far = _folds().assign(value=lambda d: np.where(d.system == "complex", d.value + 0.3,
                                                   d.value))
    assert VC.choose_within_se(far, "accuracy", roles).per_fold[None] == "complex"
    # lower is better: the same rule mirrored
    low = _folds().assign(value=lambda d: -d.value)
    assert VC.choose_within_se(low, "mse", roles, lower_is_better=True).per_fold[None] \
        == "simple"
    with pytest.raises(ValueError, match="no train"):
        VC.choose_within_se(_folds(), "accuracy", {"x": "oracle"})


def test_rule_regret_is_nested_over_folds():
    roles = {"simple": "baseline", "complex": "system", "bad": "system"}
    reg = VC.rule_regret(_folds(), lambda rows: VC.choose_within_se(
        rows, "accuracy", roles, n_se=0).per_fold[None])
    assert reg.fold.tolist() == ["q0", "q1", "q2"]
    assert (reg.regret >= 0).all()
    assert reg.best.tolist() == ["complex", "complex", "simple"]
    assert reg.regret.iloc[2] == pytest.approx(0.7 - 0.62)  # q2: complex chosen, simple best


# --------------------------------------------------------------------------- the SAF runner


def test_per_question_accuracy():
    acc = B.per_question_accuracy(["a", "a", "b"], ["C", "I", "C"], ["C", "C", "C"])
    assert acc == {"a": 0.5, "b": 1.0}


def _cv() -> pd.DataFrame:
    return pd.DataFrame([
        {"system": "feature_clf", "accuracy": 0.62, "macro_f1": 0.5, "role": "system",
         "transductive": False, "per_question": {"q0": 0.52, "q1": 0.72, "q2": 0.62}},
        {"system": "majority", "accuracy": 0.2, "macro_f1": 0.1, "role": "baseline",
         "transductive": False, "per_question": {"q0": 0.1, "q1": 0.2, "q2": 0.3}},
        {"system": "nearest_neighbour", "accuracy": 0.6, "macro_f1": 0.5, "role": "baseline",
         "transductive": False, "per_question": {"q0": 0.5, "q1": 0.6, "q2": 0.7}},
        {"system": "feature_clf:transductive", "accuracy": 0.9, "macro_f1": 0.9,
         "role": "system", "transductive": True, "per_question": {"q0": 0.9, "q1": 0.9,
                                                                   "q2": 0.9}}])


def test_unseen_choice_is_the_one_se_rule_simplest_family_first():
    folds, roles = R.unseen_folds(_cv())
    assert list(roles) == ["majority", "nearest_neighbour", "feature_clf"]  # no transductive
    assert len(folds) == 9
    assert R.choose_unseen_rule(_cv()).system == "nearest_neighbour"
    reg = R.choose_unseen_rule(_cv()).regret
    assert set(reg.rule) == {"one_se", "best_mean"} and len(reg) == 6


def test_unseen_feedback_is_chosen_once_per_run_where_questions_are_unseen():
    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    ctx = RunContext(EncoderChoice("de", "bow", (), "x", ()), embed=bow_encoder)
    seen_only = SAFData(train, {"test_unseen_answers": toy_frame("t", ("Q1",))}, "toy")
    assert SY.unseen_feedback(seen_only, ctx) == "nearest_question"
    assert ctx.state.unseen_feedback is None
    new = toy_frame("u", ("Q1",)).assign(question="Q9")
    data = SAFData(train, {"test_unseen_questions": new}, "toy")
    assert SY.unseen_feedback(data, ctx, "reference") == "reference"
    chosen = SY.unseen_feedback(data, ctx)
    assert ctx.state.unseen_feedback is not None
    assert chosen == ctx.state.unseen_feedback.strategy


def test_feedback_contrast_same_labels_old_feedback_and_the_majority(tmp_path):
    from notebook_reports.records import Recorder
    from saf_utils.saf import evaluation as CMP
    from saf_utils.saf import record as RC
    from saf_utils.saf import scores as EV

    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    new = toy_frame("test_unseen_questions", ("Q1",), seed=3).assign(question="Q9")
    data = SAFData(train, {"validation": toy_frame("validation", ("Q1", "Q2"), seed=1),
                           "test_unseen_questions": new}, "toy")
    bow = EncoderChoice("de", "bow", (), "x", ())
    out = R.run_systems(data, ["majority", "nearest_neighbour"], bow, embed=bow_encoder)
    design = EV.design_for(1, n_resamples=100).but(max_resamples=100)
    ev = SimpleNamespace(preds=EV.collapse_identical_seeds(out.preds),
                         designs={"test_unseen_questions": design})
    head, paired = CMP.feedback_contrast(ev, data.train, data.evals, "nearest_neighbour",
                                        "nn retrieval", encoder=bow_encoder)
    assert set(head.system) == {"nearest_neighbour", "nn retrieval", "majority"}
    acc = head[head.metric == "accuracy"].set_index("system")["mean"]
    assert acc["nearest_neighbour"] == acc["nn retrieval"]  # same labels
    twin = paired[paired.reference == "nn retrieval"]
    assert set(twin.metric) == set(CMP.FEEDBACK_METRICS)
    assert (twin.system == "nearest_neighbour").all()
    assert "accuracy" in set(paired[paired.reference == "majority"].metric)
    assert (head.ci_low <= head["mean"] + 1e-9).all()
    rec = Recorder("02_baseline_finetuning", tmp_path)
    assert RC.record_contrast(rec, "toy", head, paired) == len(head) + 2 * len(paired)
    text = RC.contrast_sentence(head, paired, "nearest_neighbour")
    assert text.startswith("`nearest_neighbour` on test_unseen_questions: accuracy ")
    assert "minus `nn retrieval`: sacrebleu" in text and "minus `majority`: accuracy" in text


def test_alignment_features_read_only_the_answer_and_the_reference():
    a = RF.alignment("Foto der Sanitäranlagen von außen angefertigt", REF, "sentence")
    assert set(a) == set(RF.ALIGNMENT_FEATURES)
    assert a["unit_covered"] == 0.5 and 0.25 <= a["unit_cov_mean"] < 0.5
    assert 0.0 < a["stem_recall"] < 1.0 and a["negation_mismatch"] == 0.0
    assert RF.alignment("das muss man nicht", REF)["negation_mismatch"] == 1.0
    assert RF.negated("you can't") and RF.negated("kein Foto") and not RF.negated("ein Foto")


def test_oof_label_shares_show_a_collapse_per_held_out_question():
    from saf_utils.saf.cross_encoder_jobs import oof_label_shares

    oof = pd.DataFrame({"question": ["a", "a", "b", "b"], "fold": [0, 0, 1, 1],
                        "output": ["Partially correct"] * 3 + [1.0],
                        "verification_feedback": ["Correct", "Partially correct",
                                                  "Incorrect", "Correct"]})
    t = oof_label_shares(oof).set_index("question")
    assert t.loc["a", "pred Partially correct"] == 1.0 and t.loc["a", "accuracy"] == 0.5
    assert t.loc["b", "pred Correct"] == 0.5 and t.loc["b", "gold Incorrect"] == 0.5
    assert t.loc["b", "n"] == 2 and t.loc["b", "fold"] == 1


# --------------------------------------------------------------------------- criteria grader


def test_criteria_share_is_high_for_the_reference_and_low_for_an_unrelated_answer():
    from saf_utils.saf import criteria as CR

    df = toy_frame("train", ("Q1", "Q2", "Q3"))
    s = CR.CriteriaSetting("clause", "semlex")
    share = CR.covered_share(CR.unit_scores(df, bow_encoder, "clause"), s)
    kinds = df.verification_feedback.to_numpy()
    assert share[kinds == "Correct"].min() > share[kinds == "Incorrect"].max()
    with pytest.raises(ValueError, match="criteria score"):
        CR.CriteriaSetting("clause", "nope")


def test_criteria_cv_holds_each_question_out_and_labels_every_answer():
    from saf_utils.saf import criteria as CR

    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    grid = CR.settings_grid(("clause",), ("sem", "covered"), (0.5, 0.7))
    assert [g.name for g in grid] == ["clause/sem", "clause/covered@0.5", "clause/covered@0.7"]
    cv = CR.loqo_criteria(train, bow_encoder, grid)
    assert len(cv.table) == 3 and cv.setting == grid[cv.chosen]
    assert set(cv.table.per_question.iloc[0]) == {"Q1", "Q2", "Q3"}
    labels = cv.oof_labels(train)
    assert len(labels) == len(train) and set(labels) <= set(B.SAF_LABELS)
    # the chosen setting has the best macro-F1 (ties: the first listed)
    assert cv.table.macro_f1.iloc[cv.chosen] == cv.table.macro_f1.max()


def test_reference_thresholds_fit_all_cut_points_at_once_as_one_at_a_time():
    rng = np.random.default_rng(1)
    x = np.round(rng.random(90), 3)
    y = rng.choice(list(B.SAF_LABELS), 90)
    grid = np.unique(np.quantile(x, np.linspace(0.02, 0.98, 49)))
    pairs = [(lo, hi) for i, lo in enumerate(grid) for hi in grid[i:]]
    slow = [B._macro_f1(y, np.asarray(B.ReferenceThresholds(lo, hi).predict(x)))
            for lo, hi in pairs]
    assert np.allclose(B._macro_f1_of_cuts(x, y, pairs), slow, atol=1e-12)


# --------------------------------------------------------------------------- the rule's rule


def _rule_folds(stacked: list[float]) -> pd.DataFrame:
    values = {"simple": [0.5, 0.6, 0.7, 0.6], "complex": [0.55, 0.5, 0.75, 0.7],
              "unseen_stacked": stacked}
    return pd.DataFrame([{"system": s, "fold": f"q{i}", "value": v}
                         for s, vs in values.items() for i, v in enumerate(vs)])


def test_the_rule_with_the_lowest_nested_regret_is_kept():
    from saf_utils.saf import unseen as U

    roles = {"simple": "baseline", "complex": "system"}
    good = U.choose_rule(_rule_folds([0.8, 0.8, 0.8, 0.8]), "accuracy", roles)
    assert good.rule == "stacking" and good.system == "unseen_stacked"
    assert set(good.regret.rule) == set(U.RULES) and len(good.regret) == 12
    assert good.rules.set_index("rule").loc["stacking", "mean"] == 0.0
    bad = U.choose_rule(_rule_folds([0.1, 0.1, 0.1, 0.1]), "accuracy", roles)
    assert bad.rule in ("one_se", "best_mean") and bad.system in roles
    assert bad.rules.kept.sum() == 1
    # without stacking's values only the two single-candidate rules compete
    only = U.choose_rule(_rule_folds([0.1] * 4).query("system != 'unseen_stacked'"),
                         "accuracy", roles)
    assert set(only.rules.rule) == {"one_se", "best_mean"}


def test_stacking_learns_from_out_of_fold_labels_across_questions():
    from saf_utils.saf import unseen as U

    y = np.array(["Correct", "Incorrect", "Partially correct"] * 6)
    qs = np.repeat(["a", "b", "c"], 6)
    labels = pd.DataFrame({"right": y, "noise": np.roll(y, 1)})
    pred = U.nested_stacking(labels, y, qs)
    assert (pred == y).all()  # it trusts the path that was right on the other questions
    assert U.top_share(["a", "a", "b", "a"]) == 0.75
    assert U.top_share({"x": "C"}) == 1.0


def test_a_path_that_collapsed_out_of_fold_is_no_candidate():
    cv = _cv().assign(collapsed=[False, True, False, False])
    folds, roles = R.unseen_folds(cv)
    assert "majority" not in roles and "majority" not in set(folds.system)


def test_label_distribution_flags_one_label_for_over_90_percent():
    from saf_utils.saf import browse

    gold = ["Correct", "Incorrect"] * 10
    preds = pd.DataFrame({"id": [str(i) for i in range(20)] * 2, "split": "test_unseen_questions",
                          "system": ["one"] * 20 + ["two"] * 20, "gold_label": gold * 2,
                          "pred_label": ["Correct"] * 19 + ["Incorrect"] + gold})
    t = browse.label_distribution(preds).set_index("system")
    assert t.loc["gold", "Correct"] == 0.5 and not t.loc["gold", "collapsed"]
    assert t.loc["one", "top_share"] == 0.95 and t.loc["one", "collapsed"]
    assert not t.loc["two", "collapsed"] and (t.answers == 20).all()


def test_unseen_feedback_is_chosen_for_the_labels_it_is_given():
    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    cands = {"nearest_question": "nearest_question"}
    gold = FCH.loqo_feedback_cv(train, cands, bow_encoder)
    wrong = FCH.loqo_feedback_cv(train, cands, bow_encoder, labels=["Correct"] * len(train))
    assert (wrong.value < gold.value).all()  # praise for every answer: further from gold
    with pytest.raises(ValueError, match="labels for"):
        FCH.loqo_feedback_cv(train, cands, bow_encoder, labels=["Correct"])


def test_a_cross_encoder_that_gives_one_label_out_of_fold_is_flagged_and_no_candidate():
    """The grouped out-of-fold labels a cross-encoder leaves: one label for over 90 % of the
    training answers marks it ``collapsed`` and the unseen-question choice drops it; a
    path whose labels follow the answers stays a candidate."""
    train = toy_frame("train", ("Q1", "Q2", "Q3"))
    ctx = RunContext(EncoderChoice("de", "bow", (), "x", ()), embed=bow_encoder)
    data = SAFData(train, {}, "toy")
    ids = train["id"].astype(str).tolist()
    gold = train.verification_feedback.astype(str).tolist()
    for oof in ({i: "Correct" for i in ids}, dict(zip(ids, gold, strict=True))):
        ctx.state.unseen_cv["cross_encoder"] = pd.DataFrame([{
            "system": "cross_encoder", "accuracy": 0.5, "macro_f1": 0.3, "oof": oof,
            "per_question": {"Q1": 0.5, "Q2": 0.5, "Q3": 0.5},
            "protocol": "grouped 2-fold over questions"}])
        cv = SY.unseen_cv_table(data, ctx).set_index("system")
        one_label = len(set(oof.values())) == 1
        assert bool(cv.loc["cross_encoder", "collapsed"]) == one_label
        folds, roles = R.unseen_folds(cv.reset_index())
        assert ("cross_encoder" in roles) == (not one_label)
