"""Tests of saf_utils.saf.experiments: registry, experiment functions, evaluation, records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from fakes import bow_encoder

from saf_utils import artifacts as AR
from saf_utils import jobs as J
from saf_utils.reporting.records import Recorder
from saf_utils.saf import experiments as E
from saf_utils.saf import formats as S

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = [str(FIXTURES / "saf_legal_jsonl"), str(FIXTURES / "saf_csv")]


def test_registry_roles_and_variants():
    assert E.role_of("majority") == "baseline" and E.role_of("nearest_neighbour") == "baseline"
    assert E.role_of("feature_clf") == "system" and E.role_of("label_oracle") == "oracle"
    assert E.role_of("seq2seq:mbart-large-cc25") == "system"  # prefix entry
    assert E.SYSTEMS["feature_clf:transductive"].transductive
    assert not E.SYSTEMS["feature_clf"].transductive
    assert E.SYSTEMS["feature_clf"].fn is E.run_feature_clf
    assert E.SYSTEMS["seq2seq:x"].fn is E.run_seq2seq
    assert E.SYSTEMS.names(["baseline"], kind="plain") == ["majority", "nearest_neighbour"]
    with pytest.raises(KeyError, match="not registered"):
        E.role_of("nope")
    roles = E.roles_table(["majority", "label_oracle"])
    assert roles.role.tolist() == ["baseline", "oracle"]
    assert roles.params.tolist() == ["", "encoder"]


def test_adding_a_system_is_one_function_and_one_registration():
    @E.SYSTEMS.register("always_correct", "probe", family="probes")
    def always_correct(train, test, encoder):
        """always Correct"""
        return S.prediction_table(test, "always_correct", labels=["Correct"] * len(test),
                                  scores=[1.0] * len(test), feedback=[""] * len(test))

    try:
        data = E.load_data(SOURCES[0])
        p = E.run_systems(data, ["always_correct"], bow_encoder)
        assert set(p.split) == set(data.evals) and (p.pred_label == "Correct").all()
        assert E.roles_table(["always_correct"]).description.tolist() == ["always Correct"]
    finally:
        E.SYSTEMS.unregister("always_correct")
    with pytest.raises(ValueError, match="experiment function"):
        E.run_systems(E.load_data(SOURCES[0]), ["feature_clf"], bow_encoder)


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_experiments_end_to_end_on_fixtures(source, tmp_path):
    data = E.load_data(source, language="en")
    assert data.words == S.prompt_words("en") and set(data.evals) == set(S.EVAL_SPLITS)
    base = E.run_systems(data, ["majority", "nearest_neighbour", "label_oracle"], bow_encoder)
    assert set(base.system) == {"majority", "nearest_neighbour", "label_oracle"}
    tuning = E.tune_feature_clf(data, bow_encoder, ["logreg"], [1.0], ["most_frequent"],
                                {"all": None, "cos": ["cos_ref"]})
    assert tuning.config["normalize_unseen"] is False  # the chosen config is inductive
    assert tuning.transductive_config["normalize_unseen"] is True
    clf = E.run_feature_clf(data, bow_encoder, tuning, seeds=[1, 2])
    assert clf.seed.isna().all()  # logistic regression: identical seeds collapse
    trans = clf[clf.system == "feature_clf:transductive"]
    assert set(trans.split) == {"test_unseen_questions"}
    inductive = clf[(clf.system == "feature_clf") & (clf.split == "test_unseen_questions")]
    assert len(inductive) == len(trans) and inductive.backoff.all()
    cv = E.unseen_question_cv(data, bow_encoder, tuning)
    assert {"majority", "nearest_neighbour", "feature_clf"} <= set(cv.system)

    preds = pd.concat([base, clf], ignore_index=True)
    ev = E.evaluate(preds, embedding_metrics=False, n_resamples=100)
    assert ev.reference in ("majority", "nearest_neighbour")
    assert E.role_of(ev.chosen) in ("baseline", "system")
    assert "test_unseen_questions" in ev.few_question_splits and len(ev.per_question)
    assert "conditional" in ev.designs["test_unseen_questions"].estimand
    h = ev.headline
    assert {"accuracy", "macro_f1", "weighted_f1", "mse", "sacrebleu", "chrf", "rouge2",
            "meteor"} <= set(h.metric)
    assert (h.ci_low <= h["mean"] + 1e-9).all() and (h["mean"] <= h.ci_high + 1e-9).all()
    c = ev.comparisons
    assert set(c.split) <= {"test_unseen_answers", "test_unseen_questions"}
    vs_ref = c[c.reference == ev.reference]
    assert len(vs_ref) and ev.reference not in set(vs_ref.system)
    assert c.primary.sum() == (ev.chosen != ev.reference)
    assert (c.p_adj >= c.p_value - 1e-12).all()  # Holm never lowers a p
    assert E.conclusions(ev)

    rec = Recorder("02_baseline_finetuning", tmp_path)
    n = E.record(rec, ev, data.dataset, tuning, cv)
    recs = pd.DataFrame([json.loads(x) for x in (tmp_path / "records.jsonl").open()])
    assert len(recs) == n
    head = recs[(recs.kind == "result") & recs.seed.isna()]
    assert head.ci_low.notna().all() and head.role.notna().all()
    assert head.estimand.notna().all() and head.method.notna().all()
    chosen = recs[(recs.kind == "tuning") & (recs.subset == "chosen")]
    assert chosen.split.tolist() == ["validation"] and chosen.system.tolist() == [ev.chosen]
    # unseen questions have their own choice (CV on train), which index.html stars there
    uq = recs[(recs.kind == "tuning") & (recs.subset == "chosen for test_unseen_questions")]
    best_cv = cv[~cv.transductive].sort_values("macro_f1", ascending=False, kind="stable")
    assert uq.split.tolist() == ["train"] and uq.system.tolist() == [best_cv.system.iloc[0]]
    assert not recs.metric.str.contains(r"_q\d|accuracy_").any()  # no groupings in names
    items = pd.read_json(tmp_path / "items.jsonl", lines=True)
    assert set(items.cluster) <= set(preds.question) and items.value.notna().all()
    paths = AR.write_saf_predictions(ev.preds, tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"predictions_{s}.jsonl" for s in data.evals)
    assert len(AR.read_saf_predictions(tmp_path)) == len(ev.preds)


def test_language_flows_to_prompt_words_jobs_and_bertscore(tmp_path):
    data = E.load_data(SOURCES[1], language="en", max_rows=2)
    jobs = E.seq2seq_jobs(data, {"model": "scratch", "max_steps": 2, "learning_rate": 0.01},
                          {"scratch": {"scratch_d_model": 16}}, [1, 2], tmp_path)
    assert [j.seed for j in jobs] == [1, 2] and {j.system for j in jobs} == {"seq2seq:scratch"}
    job = jobs[0]
    assert jobs[1].examples == job.examples  # written once, read by every seed
    train, evals = J.read_examples(job.examples)
    words = S.prompt_words("en")
    assert train.sources == S.format_examples(data.train, words=words)[0]
    assert all(len(ex.ids) == 2 for ex in evals.values()) and list(evals) == list(data.evals)
    assert f"{words['feedback']}:" in train.targets[0]
    assert job.settings["scratch_d_model"] == 16 and job.settings["max_steps"] == 2
    assert E.bertscore_settings("en")["lang"] == "en"
    assert E.bertscore_settings("en", lang="de")["lang"] == "de"
    s = E.seq2seq_settings({"model": "scratch", "learning_rate": 0.1}, {"learning_rate": 0.2})
    assert s.learning_rate == 0.2 and s.model == "scratch"
    with pytest.raises(TypeError):
        E.seq2seq_settings({"learning_rat": 0.1})


def test_run_seq2seq_parses_outputs_in_example_order(monkeypatch, tmp_path):
    data = E.load_data(SOURCES[0], language="en")
    calls = {}

    def fake_run_jobs(jobs, launcher="none", log=print):
        """Echo the examples file each job reads (its rows in input order)."""
        calls["launcher"] = launcher
        rows = []
        for job in jobs:
            _, evals = J.read_examples(job.examples)
            assert list(evals) == list(data.evals)
            for split, ex in evals.items():
                rows += [{"task": "saf", "system": job.system, "seed": job.seed, "fold": None,
                          "split": split, "id": i, "source": s,
                          "output": f"Correct {data.words['feedback']}: gut {i}", "target": t}
                         for i, s, t in zip(ex.ids, ex.sources, ex.targets, strict=True)]
        return J.RunResults(pd.DataFrame(rows), pd.DataFrame([{"system": "x"}]))
    monkeypatch.setattr(J, "run_jobs", fake_run_jobs)
    preds, logs = E.run_seq2seq(data, {"model": "scratch"}, None, [3], tmp_path,
                                launcher="torchrun:2")
    assert calls["launcher"] == "torchrun:2" and (preds.seed == 3).all()
    assert preds.parseable.all() and (preds.pred_label == "Correct").all()
    assert (preds.pred_feedback == "gut " + preds["id"].astype(str)).all()


def test_run_seq2seq_trains_in_process(tmp_path):
    data = E.load_data(SOURCES[0])
    tiny = {"model": "scratch", "max_steps": 2, "batch_size": 4, "max_source_length": 48,
            "max_target_length": 8, "scratch_vocab_size": 120, "scratch_d_model": 16,
            "scratch_layers": 1, "scratch_heads": 2, "scratch_ff": 32, "eval_batch_size": 8}
    preds, logs = E.run_seq2seq(data, tiny, None, [1], tmp_path)
    assert len(preds) == sum(len(df) for df in data.evals.values())
    assert logs.train_steps.tolist() == [2] and preds.raw_output.notna().all()
