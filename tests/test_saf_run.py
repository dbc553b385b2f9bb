"""Tests of the SAF system contract and runner: the registry (saf.systems), run_systems
(saf.run), the evaluation of notebook 02 (saf.evaluate) and its records (saf.record)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from fakes import bow_encoder

from notebook_reports.records import Recorder
from saf_utils.data import artifacts as AR
from saf_utils.saf import evaluation as CMP
from saf_utils.saf import experiments as R
from saf_utils.saf import formats as S
from saf_utils.saf import record as RC
from saf_utils.saf import scores as EV
from saf_utils.saf import seq2seq_jobs as SJ
from saf_utils.saf import systems as SY
from saf_utils.saf.context import EncoderChoice, load_data
from saf_utils.training import jobs as J

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = [str(FIXTURES / "saf_legal_jsonl"), str(FIXTURES / "saf_csv")]
#: the run's encoders without further ones (the sentence encoder is the fake bow_encoder)
BOW = EncoderChoice("en", "bow", (), "local:all-MiniLM-L6-v2", ())


def run(data, names, system_params=None, **kw):
    return R.run_systems(data, names, BOW, system_params, embed=bow_encoder, **kw)


def test_registry_roles_variants_and_parameters():
    roles = {n: SY.SYSTEMS[n].role for n in ("majority", "nearest_neighbour", "feature_clf",
                                             "label_oracle", "seq2seq:mbart-large-cc25")}
    assert roles == {"majority": "baseline", "nearest_neighbour": "baseline",
                     "feature_clf": "system", "label_oracle": "oracle",
                     "seq2seq:mbart-large-cc25": "system"}  # the prefix entry covers variants
    assert SY.SYSTEMS["feature_clf:transductive"].transductive
    assert not SY.SYSTEMS["feature_clf"].transductive
    assert SY.SYSTEMS["feature_clf"].fn is SY.feature_clf
    assert SY.SYSTEMS["seq2seq:x"].fn is SY.seq2seq_models
    # the built-in baselines in registration order (a recipe's system may follow them)
    assert SY.SYSTEMS.names(["baseline"])[:3] == ["majority", "nearest_neighbour",
                                                  "nearest_neighbour:"]
    with pytest.raises(KeyError, match="not registered"):
        SY.SYSTEMS["nope"]
    table = SY.SYSTEMS.table(["majority", "nearest_neighbour"])
    assert table.role.tolist() == ["baseline", "baseline"]
    assert table.params.tolist() == ["", "unseen_feedback='chosen'"]
    # every system declares a parameters dataclass: the one place of its defaults
    assert all(e.params_type is not None for e in SY.SYSTEMS.values())


def test_effective_params_are_the_defaults_updated_by_name():
    eff = R.effective_params({"feature_clf": {"Cs": [1.0]}, "seq2seq:": {"seeds": [1]}})
    assert eff["feature_clf"]["Cs"] == [1.0]
    assert eff["feature_clf"]["models"] == ("logreg", "hgb")  # the dataclass default
    assert eff["feature_clf:"]["Cs"] == (0.1, 1.0)  # the variants have their own entry
    assert eff["seq2seq:"]["seeds"] == [1] and eff["majority"] == {}
    with pytest.raises(ValueError, match="unknown parameter"):
        R.effective_params({"feature_clf": {"C": [1.0]}})
    with pytest.raises(ValueError, match="unknown SAF system"):
        R.effective_params({"feature_cfl": {}})


def test_dry_run_lines_show_each_systems_effective_parameters():
    from notebook_reports.tasks import system_params_lines

    lines = system_params_lines("02_baseline_finetuning",
                                {"system_params": {"feature_clf": {"Cs": [1.0]}}})
    assert "      system feature_clf: models=('logreg', 'hgb'), Cs=[1.0], " in [
        ln[:len("      system feature_clf: models=('logreg', 'hgb'), Cs=[1.0], ")]
        for ln in lines]
    assert "      system majority: (no parameters)" in lines
    assert lines[0].startswith("      runs ") and "majority, nearest_neighbour" in lines[0]
    cpu = system_params_lines("02_baseline_finetuning", {"systems": {"exclude": ["seq2seq:"]}})
    assert "seq2seq:" not in cpu[0] and "label_oracle" in cpu[0]  # a new system would run
    bad = system_params_lines("02_baseline_finetuning", {"system_params": {"majority": {"k": 1}}})
    assert len(bad) == 1 and "error: " in bad[0] and "unknown parameter" in bad[0]
    assert system_params_lines("01_data_exploration", {}) == []


def test_a_bad_parameter_stops_the_run_before_any_system_runs():
    with pytest.raises(ValueError, match="unknown parameter"):
        run(load_data(SOURCES[0]), ["majority", "feature_clf"], {"feature_clf": {"C": 1.0}})


def test_adding_a_system_is_one_dataclass_one_function_and_one_registration():
    @dataclass(frozen=True)
    class AlwaysParams:
        label: str = "Correct"

    @SY.SYSTEMS.register("always", "probe", params=AlwaysParams, family="probes")
    def always(data, params, ctx):
        """always the same label"""
        return pd.concat([S.prediction_table(df, "always", labels=[params.label] * len(df),
                                             scores=[1.0] * len(df), feedback=[""] * len(df))
                          for df in data.evals.values()], ignore_index=True)

    try:
        data = load_data(SOURCES[0])
        p = run(data, ["always"]).preds
        assert set(p.split) == set(data.evals) and (p.pred_label == "Correct").all()
        p = run(data, ["always"], {"always": {"label": "Incorrect"}}).preds
        assert (p.pred_label == "Incorrect").all()
        assert SY.SYSTEMS.table(["always"]).description.tolist() == ["always the same label"]
        with pytest.raises(ValueError, match="not run"):
            run(data, ["always"], {"majority": {}})
    finally:
        SY.SYSTEMS.unregister("always")


def test_a_system_that_reads_feature_clf_needs_it_first():
    with pytest.raises(ValueError, match="run feature_clf before it"):
        run(load_data(SOURCES[0]), ["feature_clf:transductive"])


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_run_evaluate_record_end_to_end_on_fixtures(source, tmp_path):
    data = load_data(source, language="en")
    assert data.words == S.prompt_words("en") and set(data.evals) == set(S.EVAL_SPLITS)
    names = ["majority", "nearest_neighbour", "feature_clf", "feature_clf:transductive",
             "label_oracle"]
    fc = {"models": ["logreg"], "Cs": [1.0], "feedback_strategies": ["most_frequent"],
          "generic_feature_sets": {"all": None, "cos": ["cos_ref"]}}
    out = run(data, names, {"feature_clf": fc}, seeds=[1, 2])
    assert set(out.preds.system) == set(names) and out.params["feature_clf"]["Cs"] == [1.0]
    tuning = out.state.feature_clf.tuning
    assert tuning.config["normalize_unseen"] is False  # the chosen config is inductive
    assert tuning.transductive_config["normalize_unseen"] is True
    clf = out.preds[out.preds.system.str.startswith("feature_clf")]
    assert clf.seed.isna().all()  # logistic regression: identical seeds collapse
    trans = clf[clf.system == "feature_clf:transductive"]
    assert set(trans.split) == {"test_unseen_questions"}
    inductive = clf[(clf.system == "feature_clf") & (clf.split == "test_unseen_questions")]
    assert len(inductive) == len(trans) and inductive.backoff.all()
    cv = out.unseen_cv
    assert {"majority", "nearest_neighbour", "feature_clf"} <= set(cv.system)

    ev = CMP.evaluate(out.preds, out.roles, embedding_metrics=False, n_resamples=100)
    assert ev.reference in ("majority", "nearest_neighbour")
    assert ev.roles()[ev.chosen] in ("baseline", "system")
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

    rec = Recorder("02_baseline_finetuning", tmp_path)
    n, sentences = RC.record_and_conclude(rec, ev, out, data.dataset)
    assert sentences[0].startswith("Chosen on validation by macro_f1")
    assert any(s.startswith("Unseen questions") for s in sentences)
    recs = pd.DataFrame([json.loads(x) for x in (tmp_path / "records.jsonl").open()])
    assert len(recs) == n
    head = recs[(recs.kind == "result") & recs.seed.isna()]
    assert head.ci_low.notna().all() and head.role.notna().all()
    assert head.estimand.notna().all() and head.method.notna().all()
    chosen = recs[(recs.kind == "tuning") & (recs.subset == "chosen")]
    assert chosen.split.tolist() == ["validation"] and chosen.system.tolist() == [ev.chosen]
    # unseen questions have their own choice (CV on train), which index.html stars there
    uq = recs[(recs.kind == "tuning") & (recs.subset == "chosen for test_unseen_questions")]
    assert uq.split.tolist() == ["train"] and uq.system.tolist() == [out.unseen_chosen]
    assert uq.metric.tolist() == ["accuracy"]  # the pre-declared metric of the one-SE rule
    t = out.unseen_choice.table
    assert t[t.chosen].value.iloc[0] >= t.bar.iloc[0] - 1e-9  # within one SE of the best
    assert set(out.unseen_regret.rule) == {"one_se", "best_mean"}
    assert (out.unseen_regret.regret >= -1e-12).all()
    assert (recs.metric == "regret_accuracy").sum() == 2
    assert not recs.metric.str.contains(r"_q\d|accuracy_").any()  # no groupings in names
    items = AR.read_items(tmp_path)
    assert set(items.cluster) <= set(out.preds.question) and items.value.notna().all()
    paths = AR.write_saf_predictions(ev.preds, tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"predictions_{s}.jsonl.gz" for s in data.evals)
    assert len(AR.read_saf_predictions(tmp_path)) == len(ev.preds)


def test_language_flows_to_prompt_words_jobs_and_bertscore(tmp_path):
    data = load_data(SOURCES[1], language="en", max_rows=2)
    jobs = SJ.seq2seq_jobs(data, {"model": "scratch", "max_steps": 2, "learning_rate": 0.01},
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
    assert EV.bertscore_settings("en")["lang"] == "en"
    assert EV.bertscore_settings("en", lang="de")["lang"] == "de"
    s = SJ.seq2seq_settings({"model": "scratch", "learning_rate": 0.1}, {"learning_rate": 0.2})
    assert s.learning_rate == 0.2 and s.model == "scratch"
    with pytest.raises(TypeError):
        SJ.seq2seq_settings({"learning_rat": 0.1})


def test_seq2seq_system_parses_outputs_in_example_order(monkeypatch, tmp_path):
    data = load_data(SOURCES[0], language="en")
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
    out = run(data, ["seq2seq:"], {"seq2seq:": {"settings": {"model": "scratch"},
                                                "seeds": [3]}},
              seeds=[1, 2], output_dir=tmp_path, launcher="torchrun:2")
    preds = out.preds
    assert calls["launcher"] == "torchrun:2" and (preds.seed == 3).all()
    assert set(preds.system) == {"seq2seq:scratch"} and out.state.seq2seq_logs is not None
    assert preds.parseable.all() and (preds.pred_label == "Correct").all()
    assert (preds.pred_feedback == "gut " + preds["id"].astype(str)).all()


def test_run_seq2seq_trains_in_process(tmp_path):
    data = load_data(SOURCES[0])
    tiny = {"model": "scratch", "max_steps": 2, "batch_size": 4, "max_source_length": 48,
            "max_target_length": 8, "scratch_vocab_size": 120, "scratch_d_model": 16,
            "scratch_layers": 1, "scratch_heads": 2, "scratch_ff": 32, "eval_batch_size": 8}
    preds, logs = SJ.run_seq2seq(data, tiny, None, [1], tmp_path)
    assert len(preds) == sum(len(df) for df in data.evals.values())
    assert logs.train_steps.tolist() == [2] and preds.raw_output.notna().all()


def test_each_system_gets_its_own_peak_memory_and_time() -> None:
    """peak_memory.measure resets the peak around a step: a later, smaller step does not inherit
    an earlier step's peak (Linux), and the cost table shows both figures."""
    import numpy as np

    from saf_utils.saf import browse
    from saf_utils.saf.context import RunState
    from saf_utils.training import peak_memory

    state = RunState(seconds={"big": 1.0, "small": 0.5})
    with peak_memory.measure(state.peak_mb, "big"):
        block = np.ones(60 * 2**20 // 8)  # 60 MiB, touched
        block[::512] += 1
    del block
    with peak_memory.measure(state.peak_mb, "small"):
        pass
    if peak_memory.reset_peak():
        assert state.peak_mb["big"] - state.peak_mb["small"] > 40
    table = browse.cost_table(state)
    assert list(table.columns) == ["system", "seconds", "peak memory (MiB)"]
    assert table.system.tolist() == ["big", "small"] and table.seconds.tolist() == [1.0, 0.5]
    family = browse.cost_table(RunState(seconds={"f:": 2.0, "f:use": 1.0}, peak_mb={"f:": 9.0}))
    assert family["peak memory (MiB)"].tolist() == [9.0, 9.0]  # a variant ran in its family
    assert family.system.tolist() == ["every f variant", "f:use"]  # no empty suffix
    assert browse.params_table({"f:": {"a": 1}}).system.tolist() == ["every f variant"]
