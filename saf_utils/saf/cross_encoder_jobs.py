"""The SAF cross-encoder (``cross_encoder``) as jobs: its examples, the validation grid,
one model per seed, out-of-fold outputs on train (stacking, unseen-question CV); fine-tunes
run through :func:`saf_utils.training.jobs.run_jobs`."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils import metrics as M
from saf_utils.metrics import lower_is_better
from saf_utils.saf import formats as S
from saf_utils.saf.baselines import (
    UnseenFeedback,
    per_question_accuracy,
    retrieved_feedback_table,
)
from saf_utils.saf.features import StackFeatures
from saf_utils.statistics import validation_choice
from saf_utils.text import listing
from saf_utils.training import jobs as J

TASK = "saf"
CE_ORDERS = ("answer_first", "reference_first")
CE_SYSTEM = "cross_encoder"


def cross_encoder_examples(df: pd.DataFrame, order: str = "answer_first",
                           include_question: bool = False, words: Mapping[str, str] | None = None,
                           mode: str = "verification") -> J.Examples:
    """Text pairs (answer, reference[ + question]) or the reverse order, and their targets
    (the label, or the score as text in score mode)."""
    if order not in CE_ORDERS:
        raise ValueError(f"order {order!r}: use one of {CE_ORDERS}")
    w = words or S.prompt_words()
    answers = [" ".join(str(a).split()) for a in df.provided_answer]
    refs = [" ".join(str(r).split()) for r in df.reference_answer]
    if include_question:
        refs = [f"{r} {w['question']}: {' '.join(str(q).split())}"
                for r, q in zip(refs, df.question, strict=True)]
    first, second = (answers, refs) if order == "answer_first" else (refs, answers)
    targets = (df.verification_feedback.tolist() if mode == "verification"
               else [S.format_score(x) for x in df.score])
    return J.Examples(df["id"].tolist(), first, targets, second)


@dataclass(frozen=True)
class CrossEncoderJobs:
    """What every cross-encoder job of one run shares: data, settings, where and how."""

    data: Any  # saf_utils.saf.experiments.SAFData
    settings: Mapping[str, Any]  # CrossEncoderSettings fields (model resolved)
    mode: str
    output_dir: str | Path
    launcher: str = "none"
    log: Callable[[str], None] = J.progress

    def job(self, system: str, train: pd.DataFrame, evals: Mapping[str, pd.DataFrame],
            order: str, include_question: bool, fold: int | None = None, **extra: Any
            ) -> J.TrainJob:
        """One fine-tune on ``train`` predicting ``evals``."""
        from saf_utils.training.cross_encoder import CrossEncoderSettings

        values = {**dict(self.settings), **extra,
                  "mode": "label" if self.mode == "verification" else "score"}
        if values["mode"] == "label":
            values.setdefault("labels", list(S.SAF_LABELS))
        values = dataclasses.asdict(CrossEncoderSettings(**values))  # checks the field names
        values.pop("seed")
        base = J.TrainJob(examples="", task=TASK, output_dir=str(self.output_dir),
                          kind="cross_encoder", settings=values, system=system, fold=fold,
                          save_model=False)

        def ex(df: pd.DataFrame) -> J.Examples:
            return cross_encoder_examples(df, order, include_question, self.data.words,
                                          self.mode)

        return J.with_examples(base, ex(train), {s: ex(df) for s, df in evals.items()})

    def run(self, jobs: Sequence[J.TrainJob]) -> Any:
        return J.run_jobs(list(jobs), launcher=self.launcher, log=self.log)

    def labels(self, outputs: Sequence[str]) -> list[str]:
        return (list(outputs) if self.mode == "verification"
                else [S.score_to_label(float(o)) for o in outputs])


def _vector(row: Mapping[str, Any]) -> list[float]:
    """Stacking features of one output row: class probabilities, or the score."""
    probs = row.get("probs")
    if isinstance(probs, Mapping):
        return [float(probs[lab]) for lab in S.SAF_LABELS]
    return [float(row["output"])]


def _label_scores(gold: Sequence[str], pred: Sequence[str]) -> dict[str, float]:
    return {"accuracy": M.metric("accuracy").score(gold, pred).value,
            "macro_f1": M.metric("macro_f1").score(gold, pred, labels=S.SAF_LABELS).value}


@dataclass
class CrossEncoderRun:
    """What :func:`run_cross_encoder` trained, chose and predicted."""

    preds: pd.DataFrame  # prediction table of ``cross_encoder``, every eval split and seed
    grid: pd.DataFrame  # validation grid (one row per setting and epoch count)
    config: dict[str, Any]  # chosen learning rate, epochs, order, include_question
    outputs: pd.DataFrame  # raw job rows of the seeds (split, id, seed, output, probs)
    oof: pd.DataFrame  # train rows: id, question, fold, output, probs (out of fold)
    grouped_cv: pd.DataFrame  # unseen-question path: accuracy / macro-F1 of the oof labels
    logs: pd.DataFrame  # one row per job: kind of job, seconds, steps, peak memory
    selection: str = "validation macro_f1"
    chosen_row: int = 0  # the row of ``grid`` chosen

    def stack_features(self, seed: int) -> StackFeatures:
        """Out-of-fold features for train, the ``seed`` model's features for eval splits."""
        table = {("train", r["id"]): _vector(r) for r in self.oof.to_dict("records")}
        mine = self.outputs[self.outputs.seed == seed]
        table.update({(r["split"], r["id"]): _vector(r) for r in mine.to_dict("records")})
        names = ([f"ce_p_{lab}" for lab in S.SAF_LABELS]
                 if isinstance(self.oof.probs.iloc[0], Mapping) else ["ce_score"])
        return StackFeatures(table, names)


def oof_label_shares(oof: pd.DataFrame) -> pd.DataFrame:
    """Per held-out training question: the share of each label among the out-of-fold
    predictions beside the gold shares, and the accuracy. A cross-encoder that collapses on
    questions it has not seen shows one predicted share near 1 whatever the gold shares."""
    pred = [o if isinstance(o, str) else S.score_to_label(float(o)) for o in oof.output]
    df = oof.assign(pred=pred)
    rows = []
    for q, g in df.groupby("question", sort=False):
        row = {"question": q, "fold": int(g.fold.iloc[0]), "n": len(g),
               "accuracy": float((g.pred == g.verification_feedback).mean())}
        for lab in S.SAF_LABELS:
            row[f"pred {lab}"] = float((g.pred == lab).mean())
            row[f"gold {lab}"] = float((g.verification_feedback == lab).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def oof_jobs(ce: CrossEncoderJobs, config: Mapping[str, Any], seed: int, folds: int = 3
             ) -> list[J.TrainJob]:
    """Out-of-fold cross-encoder jobs for every training answer: grouped k-fold over
    questions (balanced in questions), one fine-tune per fold on the other folds' answers:
    no output comes from a model that saw its question, so stacking never learns from
    in-sample probabilities, and the same outputs score the unseen-question path."""
    tr = ce.data.train
    questions = list(dict.fromkeys(tr.question))  # round robin in order of first appearance
    if len(questions) < 2:
        raise ValueError("grouped folds need at least two questions")
    f = tr.question.map({q: i % min(folds, len(questions)) for i, q in enumerate(questions)})
    jobs = []
    for k in sorted(set(f)):
        job = ce.job("cross_encoder-oof", tr[f != k], {"heldout": tr[f == k]},
                     config["order"], config["include_question"], fold=k,
                     learning_rate=config["learning_rate"], epochs=config["epochs"])
        jobs += J.job_grid(job, [seed])
    return jobs


def oof_rows(ce: CrossEncoderJobs, jobs: Sequence[J.TrainJob], predictions: pd.DataFrame
             ) -> pd.DataFrame:
    """The out-of-fold rows of :func:`oof_jobs` (``fold`` = the held-out fold,
    ``trained_on`` = that job's examples file), one per training answer."""
    tr = ce.data.train
    oof = predictions[predictions.system == "cross_encoder-oof"].copy()
    oof["trained_on"] = oof.fold.map({j.fold: j.examples for j in jobs})
    oof = oof.merge(tr[["id", "question", "verification_feedback"]], on="id", how="left")
    if len(oof) != len(tr) or oof.id.duplicated().any():
        raise ValueError(f"{len(oof)} out-of-fold rows for {len(tr)} training answers")
    return oof


def grid_search(ce: CrossEncoderJobs, grid: Mapping[str, Sequence[Any]], seed: int
                ) -> tuple[pd.DataFrame, Any]:
    """One fine-tune per setting (learning rate, order, question) at ``seed``, scored on
    validation after every listed epoch count (the learning rate is constant, so one run
    of the largest scores them all)."""
    epochs = sorted(int(e) for e in grid["epochs"])
    points = list(itertools.product(grid["learning_rate"], grid["order"],
                                    grid["include_question"]))
    jobs = []
    for i, (lr, order, question) in enumerate(points):
        job = ce.job(f"cross_encoder-grid{i}", ce.data.train, ce.data.evals, order, question,
                     learning_rate=lr, epochs=epochs[-1], predict_every_epoch=len(epochs) > 1)
        jobs += J.job_grid(job, [seed])
    res = ce.run(jobs)
    gold = ce.data.evals["validation"].set_index("id").verification_feedback
    p = res.predictions
    rows = []
    for i, (lr, order, question) in enumerate(points):
        for e in epochs:
            r = p[(p.system == f"cross_encoder-grid{i}") & (p.epoch == e)
                  & (p.split == "validation")]
            rows.append({"learning_rate": lr, "order": order, "include_question": question,
                         "epochs": e, **_label_scores(gold.loc[r.id].tolist(),
                                                      ce.labels(r.output.tolist())),
                         "system": f"cross_encoder-grid{i}"})
    return pd.DataFrame(rows), res


def _prediction_tables(ce: CrossEncoderJobs, outputs: pd.DataFrame, encoder: Any,
                       unseen_feedback: UnseenFeedback = "nearest_question") -> pd.DataFrame:
    """``cross_encoder``'s prediction table per (seed, split)."""
    out = []
    for (seed, split), r in outputs.groupby(["seed", "split"], sort=False):
        gold_df = ce.data.evals[split]
        r = r.set_index("id").loc[gold_df["id"]]
        scores = ([min(max(float(o), 0.0), 1.0) for o in r.output] if ce.mode == "score"
                  else None)
        out.append(retrieved_feedback_table(ce.data.train, gold_df, ce.labels(r.output.tolist()),
                                            CE_SYSTEM, encoder, scores, int(seed),
                                            raw=r.output.tolist(),
                                            unseen_feedback=unseen_feedback))
    return pd.concat(out, ignore_index=True)


def run_cross_encoder(ce: CrossEncoderJobs, grid: Mapping[str, Sequence[Any]],
                      seeds: Sequence[int], encoder: Any = None, folds: int = 3,
                      unseen_feedback: UnseenFeedback = "nearest_question") -> CrossEncoderRun:
    """Choose the settings on validation (:func:`grid_search`, macro-F1), train one model per
    further seed and the out-of-fold models (:func:`oof_jobs`) in one batch. The first
    seed's model is the chosen grid run after the chosen epoch (constant learning rate)."""
    if "validation" not in ce.data.evals:
        raise ValueError("run_cross_encoder needs a validation split")
    table, res = grid_search(ce, grid, seeds[0])
    i = validation_choice.choose_row(table, "macro_f1", "validation")
    best = table.iloc[i]
    config = {"learning_rate": float(best.learning_rate), "epochs": int(best.epochs),
              "order": best.order, "include_question": bool(best.include_question)}
    ce.log(f"[cross_encoder] chosen on validation: {listing(config)}")
    first = res.predictions[(res.predictions.system == best.system)
                            & (res.predictions.epoch == config["epochs"])]
    job = ce.job(CE_SYSTEM, ce.data.train, ce.data.evals, config["order"],
                 config["include_question"], learning_rate=config["learning_rate"],
                 epochs=config["epochs"])
    seed_jobs, folds_jobs = J.job_grid(job, seeds[1:]), oof_jobs(ce, config, seeds[0], folds)
    done = ce.run([*seed_jobs, *folds_jobs])  # one batch: side by side with processes:N
    p = done.predictions
    outputs = pd.concat([first.assign(system=CE_SYSTEM), p[p.system == CE_SYSTEM]],
                        ignore_index=True)
    oof = oof_rows(ce, folds_jobs, p)
    oof_labels = ce.labels(oof.output.tolist())
    cv = pd.DataFrame([{"system": CE_SYSTEM, **_label_scores(
        oof.verification_feedback.tolist(), oof_labels),
        "per_question": per_question_accuracy(oof.question, oof.verification_feedback,
                                              oof_labels),
        "protocol": f"grouped {oof.fold.nunique()}-fold over questions",
        "oof": dict(zip(oof["id"].astype(str), map(str, oof_labels), strict=True))}])
    kinds = ["seed"] * len(seed_jobs) + ["oof"] * len(folds_jobs)
    logs = pd.concat([res.logs.assign(job="grid"), done.logs.assign(job=kinds)],
                     ignore_index=True)
    return CrossEncoderRun(_prediction_tables(ce, outputs, encoder, unseen_feedback), table,
                           config, outputs, oof, cv, logs, chosen_row=i)


def stacking_choice(headline: pd.DataFrame, metric: str = "macro_f1",
                    stacked: str = "feature_clf:stacked") -> validation_choice.Choice:
    """Whether to stack, on validation: ``feature_clf`` against ``feature_clf:stacked``."""
    v = headline[(headline.split == "validation") & (headline.metric == metric)
                 & headline.system.isin(["feature_clf", stacked])]
    return validation_choice.choose_from(
        v.rename(columns={"mean": "value"})[["system", "value"]], metric,
        {"feature_clf": "system", stacked: "system"}, ("system",), "validation",
        lower_is_better(metric))
