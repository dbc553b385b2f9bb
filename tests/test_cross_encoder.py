"""The cross-encoder: job kind, SAF system, out-of-fold stacking (tiny from-config BERT)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
from fakes import bow_encoder

from notebook_reports.records import Recorder
from saf_utils.saf import cross_encoder_jobs as CJ
from saf_utils.saf import evaluation as CMP
from saf_utils.saf import experiments as R
from saf_utils.saf import formats as S
from saf_utils.saf import record as RC
from saf_utils.saf.context import load_data
from saf_utils.saf.features import StackFeatures
from saf_utils.training import cross_encoder as CE
from saf_utils.training import cross_encoder_modules as CM
from saf_utils.training import jobs as J

FIXTURES = Path(__file__).parent / "fixtures"
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "wenn", "die",
         "und", "der", "nie", "frage", "antwort", "lösung", "richtig", "falsch", ":", ".",
         ",", "##s", "##en"]
TINY = {"max_length": 32, "batch_size": 4, "eval_batch_size": 8, "learning_rate": 1e-3,
        "logging_steps": 1}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tiny_ce_bert")
    tok = transformers.BertTokenizer({w: i for i, w in enumerate(WORDS)}, do_lower_case=True)
    tok.save_pretrained(str(path))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=16,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=64)
    transformers.BertModel(config).save_pretrained(str(path))
    return str(path)


def pair_examples() -> tuple[J.Examples, dict[str, J.Examples]]:
    train = J.Examples([1, 2, 3, 4], ["a b", "c d", "a a", "d d"],
                       ["Correct", "Incorrect", "Correct", "Incorrect"], ["a b", "a b", "a", "a"])
    return train, {"val": J.Examples(["v"], ["a b"], ["Correct"], ["a b"]),
                   "test": J.Examples(["t1", "t2"], ["c", "a"], ["Incorrect", "Correct"],
                                      ["a", "a"])}


def test_pair_examples_roundtrip_and_settings_checked(tmp_path: Path) -> None:
    train, evals = pair_examples()
    back_train, back_evals = J.read_examples(J.write_examples(tmp_path / "e.jsonl", train,
                                                              evals))
    assert back_train == train and back_evals == evals
    with pytest.raises(ValueError, match="CrossEncoderSettings.*unknown parameter"):
        J.TrainJob(examples="e", output_dir="o", kind="cross_encoder", settings={"lr": 1})
    with pytest.raises(ValueError, match="job kind"):
        J.TrainJob(examples="e", output_dir="o", kind="bogus")
    with pytest.raises(ValueError, match="mode"):
        CE.CrossEncoderSettings(mode="ranking")
    plain = J.with_examples(J.TrainJob(examples="", output_dir=str(tmp_path), kind="cross_encoder",
                                       settings={}), J.Examples([1], ["a"], ["Correct"]), {})
    with pytest.raises(ValueError, match="'pair'"):
        J.run_job(plain)


@pytest.mark.parametrize("mode", ["label", "score"])
def test_cross_encoder_job_predicts_every_epoch_and_logs_cost(tiny_bert: str, tmp_path: Path,
                                                              mode: str) -> None:
    train, evals = pair_examples()
    if mode == "score":
        train.targets = ["1", "0", "0.5", "0"]
    settings = {**TINY, "model": tiny_bert, "mode": mode, "epochs": 2,
                "predict_every_epoch": True, "freeze_layers": 1}
    job = J.with_examples(J.TrainJob(examples="", output_dir=str(tmp_path), task="t",
                                     kind="cross_encoder", system="ce", settings=settings,
                                     save_model=False), train, evals)
    preds, logs = J.run_jobs(J.job_grid(job, [3]), log=lambda m: None)
    assert sorted(set(preds.epoch)) == [1, 2]
    last = preds[preds.epoch == 2]
    assert list(zip(last.split, last.id, strict=True)) == [("val", "v"), ("test", "t1"),
                                                           ("test", "t2")]
    if mode == "label":
        assert set(preds.output) <= {"Correct", "Incorrect"}
        assert all(abs(sum(p.values()) - 1) < 1e-6 for p in preds.probs)
    else:
        assert preds.probs.isna().all() and np.isfinite(preds.output.astype(float)).all()
    row = logs.iloc[0]
    assert row.seed == 3 and row.train_steps == 2 and row.peak_rss_mb > 0
    assert 0 < row.n_trainable < row.n_parameters  # the embeddings and layer 0 are frozen
    assert row.cached_frozen  # the frozen layer ran once per pair, the top was trained
    assert row.train_seconds >= 0 and row.seconds_total >= row.train_seconds
    key = (CE.resolve_model(tiny_bert), 32)
    assert ("a b", "a b") in CE._TOKENS[key]  # tokenised once, reused by later jobs
    back = J.load_result(row.output_dir)
    assert back.predictions.equals(preds)


def test_cross_encoder_examples_orders_and_question() -> None:
    df = pd.DataFrame({"id": [1], "provided_answer": ["ans"], "reference_answer": ["ref"],
                       "question": ["q?"], "verification_feedback": ["Correct"],
                       "score": [1.0]})
    words = S.prompt_words("en")
    ex = CJ.cross_encoder_examples(df, "answer_first", False, words)
    assert (ex.sources, ex.pairs, ex.targets) == (["ans"], ["ref"], ["Correct"])
    ex = CJ.cross_encoder_examples(df, "reference_first", True, words, mode="score")
    assert ex.sources == [f"ref {words['question']}: q?"] and ex.pairs == ["ans"]
    assert ex.targets == ["1"]
    with pytest.raises(ValueError, match="order"):
        CJ.cross_encoder_examples(df, "sideways")


@pytest.mark.slow
def test_cross_encoder_system_oof_stacking_end_to_end(tiny_bert: str, tmp_path: Path) -> None:
    data = load_data(str(FIXTURES / "saf_csv"), language="en")
    assert data.train.question.nunique() >= 2
    ce = {**TINY, "freeze_layers": 1}
    params = {"cross_encoder": {"model": tiny_bert, "settings": ce, "learning_rate": [1e-3],
                                "epochs": [1, 2], "order": ["answer_first"],
                                "include_question": [False, True], "folds": 2},
              "feature_clf": {"models": ["logreg"], "Cs": [1.0],
                              "feedback_strategies": ["most_frequent"]}}
    encoders = R.choose_encoders("en", "bow", (), params)
    assert encoders.cross_encoder == tiny_bert  # the model is the system's parameter
    out = R.run_systems(data, ["majority", "feature_clf", "cross_encoder",
                               "feature_clf:stacked"], encoders, params, seeds=[1, 2],
                        output_dir=tmp_path, log=lambda m: None, embed=bow_encoder)
    run = out.state.cross_encoder
    assert len(run.grid) == 4 and set(run.grid.epochs) == {1, 2}
    best = run.grid.sort_values("macro_f1", ascending=False, kind="stable").iloc[0]
    assert run.config["epochs"] == best.epochs
    p = run.preds
    assert set(p.system) == {"cross_encoder"} and set(p.seed) == {1, 2}
    assert set(p.split) == set(data.evals)
    for split, gold in data.evals.items():
        got = p[(p.split == split) & (p.seed == 1)]
        assert got.id.tolist() == gold.id.tolist()
    unseen = p[p.split == "test_unseen_questions"]
    assert unseen.backoff.all() and (unseen.pred_feedback != "").all()
    assert set(run.logs.job) == {"grid", "seed", "oof"} and run.logs.peak_rss_mb.notna().all()
    assert (run.logs[run.logs.job == "seed"].seed == 2).all()  # seed 1 is the grid's run
    # ... and the grid's run after the chosen epoch is the model a fresh run would give
    jobs = CJ.CrossEncoderJobs(data, {**ce, "model": tiny_bert}, "verification",
                               tmp_path / "fresh", log=lambda m: None)
    fresh = jobs.job("fresh", data.train, data.evals, run.config["order"],
                     run.config["include_question"], learning_rate=run.config["learning_rate"],
                     epochs=run.config["epochs"])
    again = J.run_jobs(J.job_grid(fresh, [1]), log=lambda m: None).predictions
    mine = run.outputs[run.outputs.seed == 1]
    assert again.output.tolist() == mine.output.tolist()
    assert np.allclose([CJ._vector(r) for r in again.to_dict("records")],
                       [CJ._vector(r) for r in mine.to_dict("records")], atol=1e-6)

    # Out of fold: no training answer's feature came from a model that saw it (nor its
    # question): read back what each fold's job trained on.
    oof = run.oof
    assert sorted(oof.id) == sorted(data.train.id) and oof.fold.nunique() == 2
    for r in oof.itertuples():
        trained, _ = J.read_examples(r.trained_on)
        seen_ids = set(trained.ids)
        assert r.id not in seen_ids
        seen_q = set(data.train.set_index("id").loc[list(seen_ids)].question)
        assert r.question not in seen_q
    feats = run.stack_features(1)
    train_vecs = feats(data.train)
    oof_vecs = pd.DataFrame([CJ._vector(r) for r in oof.set_index("id")
                             .loc[data.train.id].reset_index().to_dict("records")])
    assert np.allclose(train_vecs.to_numpy(), oof_vecs.to_numpy())
    seed2 = run.outputs[(run.outputs.seed == 2) & (run.outputs.split == "validation")]
    assert np.allclose(run.stack_features(2)(data.evals["validation"]).to_numpy(),
                       [CJ._vector(r) for r in seed2.to_dict("records")])

    stacked = out.preds[out.preds.system == "feature_clf:stacked"]
    assert set(stacked.split) == set(data.evals)
    cv = out.unseen_cv
    ce_row = cv[cv.system == "cross_encoder"].iloc[0]
    assert ce_row.protocol.startswith("grouped 2-fold") and ce_row.role == "system"
    assert (cv[cv.system == "majority"].protocol == "leave one question out").all()

    ev = CMP.evaluate(out.preds, out.roles, embedding_metrics=False, n_resamples=100)
    assert {"cross_encoder", "feature_clf:stacked"} <= set(ev.headline.system)
    choice = CJ.stacking_choice(ev.headline)
    assert choice.per_fold[None] in ("feature_clf", "feature_clf:stacked")
    rec = Recorder("02_baseline_finetuning", tmp_path / "records")
    n, sentences = RC.record_and_conclude(rec, ev, out, "fixture")
    assert any(s.startswith("Stacking chosen on validation") for s in sentences)
    assert any(s.startswith("cross_encoder: chosen on validation") for s in sentences)
    grid = [r for r in rec.records if r.system == "cross_encoder" and r.kind == "tuning"
            and r.subset.startswith("lr=")]
    assert len(grid) == 2 * len(run.grid)  # accuracy and macro-F1 per grid row


@pytest.mark.slow
def test_forked_processes_train_the_same_models(tiny_bert: str, tmp_path: Path) -> None:
    """``launcher="processes:2"`` runs the further seeds and the out-of-fold jobs side by
    side in forked copies of the kernel (which hold its cached frozen states): every
    output and probability is the one the in-kernel run gives."""
    data = load_data(str(FIXTURES / "saf_csv"), language="en")
    params = {"cross_encoder": {"model": tiny_bert, "settings": {**TINY, "freeze_layers": 1},
                                "learning_rate": [1e-3], "epochs": [1, 2],
                                "order": ["answer_first"], "include_question": [False],
                                "folds": 2}}
    encoders = R.choose_encoders("en", "bow", (), params)
    runs, lines = {}, []
    for launcher in ("none", "processes:2"):
        out = R.run_systems(data, ["cross_encoder"], encoders, params, seeds=[1, 2, 3],
                            output_dir=tmp_path / launcher.replace(":", "-"),
                            launcher=launcher, log=lines.append, embed=bow_encoder)
        runs[launcher] = out.state.cross_encoder
    a, b = runs["none"], runs["processes:2"]
    assert "[jobs] 4 jobs on 2 forked processes" in lines  # seeds 2, 3 and two folds
    for frame in ("outputs", "oof"):
        x, y = getattr(a, frame), getattr(b, frame)
        assert x.output.tolist() == y.output.tolist() and x.probs.tolist() == y.probs.tolist()
    assert a.logs.job.tolist() == b.logs.job.tolist() == ["grid", "seed", "seed", "oof", "oof"]
    assert sum("train loss" in line for line in lines) == 2 * 5  # children's lines come back


def test_a_failing_forked_job_names_itself(tmp_path: Path) -> None:
    from saf_utils.training import launchers

    with pytest.raises(ValueError, match="processes:N"):
        launchers.processes("processes:0")
    assert launchers.processes("none") is None and launchers.processes("processes:3") == 3
    bad = [J.TrainJob(examples=str(tmp_path / f"missing{i}.jsonl"), kind="cross_encoder",
                      output_dir=str(tmp_path / f"job{i}"), system=f"ce{i}") for i in (1, 2)]
    with pytest.raises(J.TrainJobError, match=r"2 of 2 job\(s\) failed; first: ce1 seed None"):
        J.run_jobs(bad, launcher="processes:2", log=lambda m: None)


def test_stack_features_refuse_missing_rows() -> None:
    feats = StackFeatures({("train", 1): [0.2]}, ["x"])
    df = pd.DataFrame({"id": [1, 2], "split": ["train", "train"]})
    with pytest.raises(KeyError, match="no stacked features"):
        feats(df)
    assert feats(df.iloc[:1]).x.tolist() == [0.2]


@pytest.mark.slow
def test_score_mode_system_and_job_config_file(tiny_bert: str, tmp_path: Path) -> None:
    data = load_data(str(FIXTURES / "saf_csv"), language="en")
    jobs = CJ.CrossEncoderJobs(data, {**TINY, "model": tiny_bert}, "score", tmp_path,
                               log=lambda m: None)
    grid = {"learning_rate": [5e-5], "epochs": [1], "order": ["answer_first"],
            "include_question": [False]}
    run = CJ.run_cross_encoder(jobs, grid, seeds=[0], folds=2)
    assert run.preds.pred_score.between(0, 1).all()
    assert run.preds.pred_label.isin(S.SAF_LABELS).all()
    assert run.stack_features(0).names == ["ce_score"]
    job = json.loads(json.dumps(J.job_grid(J.TrainJob(examples="e", output_dir="o",
                                                      kind="cross_encoder"), [1])[0].to_dict()))
    assert J.TrainJob.from_dict(job).kind_settings().seed == 1


def test_cached_frozen_states_give_the_full_models_logits(tiny_bert: str) -> None:
    settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                       eval_batch_size=2)
    model, tok = CE.build_cross_encoder(settings, ["Correct", "Incorrect"])
    model.eval()
    first, second = ["a b c", "d", "a a a a b"], ["a", "c d c", "b"]
    states = CE.frozen_states(model, tok, "tiny", first, second, settings)
    assert [len(s) for s in states] == [len(x) for x in tok(first, second)["input_ids"]]
    top = CM.top_layers(model, 1).eval()
    batch = CM.state_collator(states)([{"idx": i} for i in range(3)])
    with torch.no_grad():
        full = model(**tok(first, second, padding=True, return_tensors="pt")).logits
        got = top(**batch).logits
    assert torch.allclose(full, got, atol=1e-5)
    assert CE.frozen_states(model, tok, "tiny", first[:1], second[:1], settings)[0] is states[0]


@pytest.mark.slow
def test_cross_encoder_job_under_torchrun_two_processes(tiny_bert: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``launcher=torchrun:2`` (gloo, CPU): every eval row exactly once per epoch, in order,
    from 2 DDP replicas over cached frozen states."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TQDM_DISABLE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    train, evals = pair_examples()
    settings = {**TINY, "model": tiny_bert, "epochs": 2, "predict_every_epoch": True,
                "freeze_layers": 1, "batch_size": 2}
    job = J.with_examples(J.TrainJob(examples="", output_dir=str(tmp_path), task="t",
                                     kind="cross_encoder", system="ce", settings=settings,
                                     save_model=False, seed=5), train, evals)
    lines: list[str] = []
    res = J.run_job(job, launcher="torchrun:2", log=lines.append)
    assert any("2 process(es)" in line for line in lines)
    assert res.log["summary"]["world_size"] == 2
    p = res.predictions
    order = [("val", "v"), ("test", "t1"), ("test", "t2")]
    assert list(zip(p.epoch, p.split, p.id, strict=True)) == [(e, s, i) for e in (1, 2)
                                                              for s, i in order]
    assert all(abs(sum(x.values()) - 1) < 1e-6 for x in p.probs)


def test_train_layers_freezes_all_but_the_top_layers() -> None:
    s = CE.CrossEncoderSettings(train_layers=2, freeze_layers=0)
    assert s.for_depth(12).freeze_layers == 10 and s.for_depth(2).freeze_layers == 0
    assert CE.CrossEncoderSettings(freeze_layers=3).for_depth(12).freeze_layers == 3
    with pytest.raises(ValueError, match="has 1 layers"):
        s.for_depth(1)
    with pytest.raises(ValueError, match="train_layers"):
        CE.CrossEncoderSettings(train_layers=-1)


def test_train_layers_job_trains_what_freeze_layers_does(tiny_bert: str, tmp_path: Path) -> None:
    train, evals = pair_examples()
    rows = []
    for extra in ({"freeze_layers": 1}, {"train_layers": 1}):
        job = J.with_examples(J.TrainJob(examples="", output_dir=str(tmp_path / str(extra)),
                                         task="t", kind="cross_encoder", system="ce",
                                         settings={**TINY, "model": tiny_bert, "epochs": 1,
                                                   **extra}, save_model=False), train, evals)
        rows.append(J.run_jobs(J.job_grid(job, [3]), log=lambda m: None).logs.iloc[0])
    assert rows[0].n_trainable == rows[1].n_trainable and rows[1].cached_frozen


def test_mean_pooling_reads_the_token_mean_cached_or_not(tiny_bert: str) -> None:
    """pooling: mean (e5 and MiniLM carry no trained pooler): the cached top and the full
    model give the same logits, and they are the classifier over the masked token mean."""
    settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                       eval_batch_size=2, pooling="mean")
    model, tok = CE.build_cross_encoder(settings, ["Correct", "Incorrect"])
    model.eval()
    first, second = ["a b c", "d", "a a a a b"], ["a", "c d c", "b"]
    states = CE.frozen_states(model, tok, "tiny-mean", first, second, settings)
    top = CM.top_layers(model, 1, "mean").eval()
    batch = CM.state_collator(states)([{"idx": i} for i in range(3)])
    enc = tok(first, second, padding=True, return_tensors="pt")
    with torch.no_grad():
        full = CM.full_model(model).eval()(**enc).logits
        got = top(**batch).logits
        h = model.base_model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        by_hand = model.classifier((h * m).sum(1) / m.sum(1))
        cls = model(**enc).logits
    assert torch.allclose(full, got, atol=1e-5) and torch.allclose(full, by_hand, atol=1e-5)
    assert not torch.allclose(full, cls, atol=1e-3)
    with pytest.raises(ValueError, match="pooling 'max'"):
        CE.CrossEncoderSettings(pooling="max")


def test_balanced_class_weights_from_the_training_labels() -> None:
    plain = CE.CrossEncoderSettings()
    balanced = CE.CrossEncoderSettings(class_weight="balanced")
    labels = ["Correct", "Incorrect", "Partially correct"]
    y = [0, 0, 0, 1]  # 3 Correct, 1 Incorrect, no Partially correct
    assert CE.class_weights(plain, labels, y) is None
    assert CE.class_weights(balanced, labels, y) == pytest.approx([4 / 6, 2.0, 1.0])
    score = CE.CrossEncoderSettings(class_weight="balanced", mode="score")
    assert CE.class_weights(score, labels, [0.0, 1.0]) is None
    with pytest.raises(ValueError, match="class_weight"):
        CE.CrossEncoderSettings(class_weight="inverse")


@pytest.mark.parametrize("cached,pooling", [(True, "mean"), (False, "mean"), (False, "cls")])
def test_the_loss_is_class_weighted_on_every_path(tiny_bert: str, cached: bool,
                                                  pooling: str) -> None:
    """Cached top, mean-pooled and plain classifier: the loss the Trainer minimises is
    the weighted cross-entropy of the logits."""
    settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                       pooling=pooling, cache_frozen=cached,
                                       class_weight="balanced")
    labels = ["Correct", "Incorrect"]
    first, second, y = ["a b", "c d", "a a", "d"], ["a", "b", "a", "c"], [0, 0, 0, 1]
    model, tok = CE.build_cross_encoder(settings, labels)
    CM.freeze_lower(model, 1)
    fit, train_ds, _, collator, was_cached = CE._datasets(model, tok, settings, first, second,
                                                          y, {}, labels)
    assert was_cached == cached
    fit.eval()
    if cached:
        batch = collator([dict(r) for r in train_ds])
    else:
        batch = tok(first, second, padding=True, return_tensors="pt")
        batch["labels"] = torch.tensor(y)
    with torch.no_grad():
        out = fit(**batch)
    w = torch.tensor([4 / 6, 2.0])
    want = torch.nn.functional.cross_entropy(out.logits, torch.tensor(y), weight=w)
    plain = torch.nn.functional.cross_entropy(out.logits, torch.tensor(y))
    assert torch.allclose(out.loss, want, atol=1e-6)
    assert not torch.allclose(out.loss, plain, atol=1e-4)


@pytest.mark.slow  # a few hundred optimizer steps: about 5 s
def test_balanced_weights_stop_the_head_buying_its_loss_with_the_common_label(
        tiny_bert: str) -> None:
    """Inputs that say nothing about the label (the case of a question the model has not
    seen): unweighted, the head learns the training prior and gives the rare label a low
    probability; balanced, every label carries the same weight, so the rare label's
    probability rises towards an even share."""
    first, second = ["a b"] * 12, ["a b"] * 12
    targets = ["Correct"] * 10 + ["Incorrect"] * 2
    probs = {}
    for weight in (None, "balanced"):
        settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                           pooling="mean", class_weight=weight, epochs=15,
                                           learning_rate=1e-2, batch_size=12, seed=0,
                                           logging_steps=100)
        res, log = CE.train_and_predict(first, second, targets, {"t": (["a b"], ["a b"])},
                                        settings)
        probs[weight] = res[15]["t"][1][0]["Incorrect"]
        assert log["class_weights"] == (None if weight is None else [0.6, 3.0])
    assert probs[None] < 0.3  # near the prior 2/12
    assert probs["balanced"] > 0.4  # near an even share


def test_pair_pooling_compares_the_two_texts_cached_or_not(tiny_bert: str) -> None:
    """pooling: pair: the head reads |u - v| and u * v of the answer's and the reference's
    token means (a head twice the hidden size), so nothing in its input names the question;
    the cached top and the full model give the same logits."""
    settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                       eval_batch_size=2, pooling="pair")
    model, tok = CE.build_cross_encoder(settings, ["Correct", "Incorrect"])
    assert model.classifier.in_features == 2 * model.config.hidden_size
    model.eval()
    first, second = ["a b c", "d", "a a a a b"], ["a", "c d c", "b"]
    states = CE.frozen_states(model, tok, "tiny-pair", first, second, settings)
    enc = tok(first, second, padding=True, return_tensors="pt")
    mask = CM.first_segment(enc["input_ids"], tok.sep_token_id)
    assert mask.sum(1).tolist() == [4, 2, 6]  # [CLS] and the answer's tokens
    firsts = mask.sum(1).tolist()
    top = CM.top_layers(model, 1, "pair").eval()
    batch = CM.state_collator(states, firsts)([{"idx": i} for i in range(3)])
    assert torch.equal(batch["first_mask"], (mask & enc["attention_mask"].bool()).long())
    with torch.no_grad():
        full = CM.full_model(model, pooling="pair", sep_token_id=tok.sep_token_id).eval()(
            **enc).logits
        got = top(**batch).logits
        h = model.base_model(**enc).last_hidden_state
        a = enc["attention_mask"].unsqueeze(-1).float()
        f = mask.unsqueeze(-1).float() * a
        u, v = (h * f).sum(1) / f.sum(1), (h * (a - f)).sum(1) / (a - f).sum(1)
        by_hand = model.classifier(torch.cat([(u - v).abs(), u * v], -1))
    assert torch.allclose(full, got, atol=1e-5) and torch.allclose(full, by_hand, atol=1e-5)


def test_pair_pooling_trains_through_the_job_on_both_paths(tiny_bert: str) -> None:
    """Cached frozen states or the full model: the same training code, class-weighted."""
    out = {}
    for cached in (True, False):
        settings = CE.CrossEncoderSettings(model=tiny_bert, freeze_layers=1, max_length=16,
                                           pooling="pair", cache_frozen=cached, epochs=1,
                                           batch_size=2, class_weight="balanced", seed=0,
                                           logging_steps=100)
        res, log = CE.train_and_predict(["a b", "c", "a", "d d"], ["a", "b c", "a", "c"],
                                        ["Correct", "Incorrect", "Correct", "Correct"],
                                        {"t": (["a b", "c"], ["a", "b c"])}, settings)
        assert log["cached_frozen"] == cached and log["class_weights"] == [2 / 3, 2.0]
        out[cached] = [p["Correct"] for p in res[1]["t"][1]]
    assert np.allclose(out[True], out[False], atol=1e-2)


def test_end_to_end_setting_trains_every_layer_without_the_frozen_cache(
        tiny_bert: str, tmp_path: Path) -> None:
    """``train_layers: null`` with no ``freeze_layers`` (the defaults) fine-tunes the whole
    model end to end: every weight of the embeddings and of every layer moves, nothing is
    cached, and the pair pooling trains through the full model."""
    from safetensors.torch import load_file

    settings = CE.CrossEncoderSettings(model=tiny_bert, train_layers=None, max_length=16,
                                       pooling="pair", epochs=2, batch_size=2, seed=0,
                                       learning_rate=1e-2, logging_steps=100)
    before = transformers.BertModel.from_pretrained(tiny_bert).state_dict()
    _, log = CE.train_and_predict(["a b", "c", "a", "d d"], ["a", "b c", "a", "c"],
                                  ["Correct", "Incorrect", "Correct", "Correct"],
                                  {"t": (["a b"], ["a"])}, settings, str(tmp_path))
    assert not log["cached_frozen"] and log["settings"]["freeze_layers"] == 0
    assert log["n_trainable"] == log["n_parameters"]
    after = {k.split("bert.", 1)[1]: v for k, v in load_file(
        str(tmp_path / "model.safetensors")).items() if "bert." in k}
    moved = {k: not torch.allclose(before[k], after[k])
             for k in before if k.startswith(("embeddings.word", "encoder.layer"))
             and k.endswith("weight") and "LayerNorm" not in k}
    assert moved and all(moved.values()), [k for k, v in moved.items() if not v]
    assert {k.split(".")[2] for k in moved if k.startswith("encoder.layer")} == {"0", "1"}

