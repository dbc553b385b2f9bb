"""The registered SAF systems: each one a parameters dataclass (its defaults live only there)
and ``fn(data, params, ctx) -> prediction table`` on every eval split, run by
:func:`saf_utils.saf.experiments.run_systems`. Registration order is run order: a system that reads
another's result (``feature_clf:transductive`` and ``feature_clf:stacked`` read
``feature_clf``'s tuning, ``feature_clf:stacked`` the cross-encoder's outputs) comes after
it. A name ending in ``:`` covers its variants (``seq2seq:<model>``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import metrics as M
from saf_utils.registry import NoParams, Registry
from saf_utils.saf import baselines as B
from saf_utils.saf import criteria as CR
from saf_utils.saf import feature_clf as FC
from saf_utils.saf import feedback_choice as FCH
from saf_utils.saf import scores as EV
from saf_utils.saf.baselines import UnseenFeedback
from saf_utils.saf.context import RunContext, SAFData, make_encoder
from saf_utils.saf.cross_encoder_jobs import CE_SYSTEM, CrossEncoderJobs, run_cross_encoder
from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.formats import PREDICTION_COLUMNS
from saf_utils.saf.seq2seq_jobs import Seq2SeqParams, run_seq2seq
from saf_utils.saf.unseen import (
    COLLAPSE_SHARE,
    STACKED,
    LabelStacker,
    nested_stacking,
    oof_labels,
    top_share,
)

STACKED_SYSTEM = "feature_clf:stacked"
#: The value of a system's ``unseen_feedback`` that means "the strategy chosen on train"
CHOSEN_FEEDBACK = "chosen"
TRANSDUCTIVE_SYSTEM = "feature_clf:transductive"

#: SAF systems; ``seq2seq:`` covers every ``seq2seq:<model>``.
SYSTEMS = Registry("SAF system", defaults={"family": None, "transductive": False},
                   variants=True)


def _every_split(data: SAFData, fn: Any) -> pd.DataFrame:
    return pd.concat([fn(df) for df in data.evals.values()], ignore_index=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=list(PREDICTION_COLUMNS))


def unseen_feedback(data: SAFData, ctx: RunContext, value: str = CHOSEN_FEEDBACK
                    ) -> UnseenFeedback:
    """The feedback strategy of unseen questions: ``value``, or for :data:`CHOSEN_FEEDBACK`
    the one chosen once per run on train (one choice, whichever system's labels are
    chosen); retrieval where no split has unseen questions or train has fewer than 3
    (a standard error needs at least 2 questions in each nested fold)."""
    if value != CHOSEN_FEEDBACK:
        return value
    seen = set(data.train.question)
    if len(seen) < 3 or all(df.question.isin(seen).all() for df in data.evals.values()):
        return "nearest_question"  # nothing to choose on, or no question needs it
    if ctx.state.unseen_feedback is None:
        ctx.state.unseen_feedback = FCH.choose_unseen_feedback(
            data.train, ctx.encoder, labels=_criteria_cv(data, ctx).oof_labels(data.train))
    return ctx.state.unseen_feedback.strategy


@dataclass(frozen=True)
class CriteriaParams:
    """Candidates of the criteria grader, chosen by leave-one-question-out on train."""

    units: tuple[str, ...] = ("sentence", "clause")  # content units of the reference
    scores: tuple[str, ...] = ("sem", "semlex", "covered")  # saf.criteria.SCORES
    taus: tuple[float, ...] = (0.5,)  # cosine bar of a covered unit (score "covered")


def _criteria_cv(data: SAFData, ctx: RunContext, params: CriteriaParams | None = None
                 ) -> CR.CriteriaCV:
    """The criteria grader's leave-one-question-out on train, once per run (the labels the
    unseen-question feedback is chosen for, and ``criteria``'s own choice)."""
    p = params or CriteriaParams()
    if ctx.state.criteria is None or ctx.state.criteria.params != p:
        cv = CR.loqo_criteria(data.train, ctx.encoder, CR.settings_grid(p.units, p.scores,
                                                                         p.taus))
        cv.params = p
        ctx.state.criteria = cv
    return ctx.state.criteria


# --------------------------------------------------------------------------- baselines


@SYSTEMS.register("majority", "baseline", params=NoParams, family="baselines")
def majority(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    """per question: most frequent training label, score and feedback"""
    return _every_split(data, lambda df: B.majority_baseline(data.train, df))


@dataclass(frozen=True)
class NearestNeighbourParams:
    #: feedback of unseen questions: chosen (on train, as every system's) | nearest_question
    #: | reference | global | grounded
    unseen_feedback: str = CHOSEN_FEEDBACK


@SYSTEMS.register("nearest_neighbour", "baseline", params=NearestNeighbourParams,
                  family="baselines",
                  description="label, score and feedback of the most similar training answer "
                  "to the same question; unseen questions: answer-reference cosine thresholds")
def nearest_neighbour(data: SAFData, params: NearestNeighbourParams, ctx: RunContext
                      ) -> pd.DataFrame:
    fb = unseen_feedback(data, ctx, params.unseen_feedback)
    return _every_split(data, lambda df: B.nearest_neighbour_baseline(
        data.train, df, ctx.encoder, unseen_feedback=fb))


# --------------------------------------------------------------------------- criteria


@SYSTEMS.register("criteria", "system", params=CriteriaParams, family="criteria",
                  description="reference split into content units, each scored against the "
                  "answer (encoder cosine, word stems); label from the covered share with cut "
                  "points learned across questions; feedback retrieved for the label")
def criteria(data: SAFData, params: CriteriaParams, ctx: RunContext) -> pd.DataFrame:
    cv = _criteria_cv(data, ctx, params)
    row = cv.table.iloc[cv.chosen]
    ctx.state.unseen_cv["criteria"] = pd.DataFrame([{
        "system": "criteria", "accuracy": row.accuracy, "macro_f1": row.macro_f1,
        "per_question": row.per_question, "oof": row.oof}])
    grader = CR.CriteriaGrader(ctx.encoder, cv.setting).fit(data.train)
    fb = unseen_feedback(data, ctx)
    return _every_split(data, lambda df: B.retrieved_feedback_table(
        data.train, df, grader.predict(df), "criteria", ctx.encoder, unseen_feedback=fb))


# --------------------------------------------------------------------------- feature classifier


@SYSTEMS.register("feature_clf", "system", params=FC.FeatureClfParams, family="feature_clf",
                  description="feature classifier + retrieved feedback (inductive)")
def feature_clf(data: SAFData, params: FC.FeatureClfParams, ctx: RunContext) -> pd.DataFrame:
    tuning = params.tune(data, ctx.encoder, transductive=True)
    classifiers = FC.fitted_per_seed(data, ctx.encoder, tuning.config, ctx.seeds,
                                     unseen_feedback=unseen_feedback(data, ctx))
    ctx.state.feature_clf = FC.FeatureClfRun(params, tuning, classifiers)
    ctx.state.unseen_cv["feature_clf"] = FC.cv_row(tuning, "feature_clf")
    return FC.predict_all(data, classifiers)


def _feature_clf_run(ctx: RunContext, name: str) -> FC.FeatureClfRun:
    if ctx.state.feature_clf is None:
        raise ValueError(f"{name} uses feature_clf's choices: run feature_clf before it")
    return ctx.state.feature_clf


@SYSTEMS.register(TRANSDUCTIVE_SYSTEM, "system", params=NoParams, family="feature_clf",
                  transductive=True,
                  description="feature_clf whose unseen-question features are z-scored over "
                  "the test batch (transductive); unseen questions only")
def feature_clf_transductive(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    run = _feature_clf_run(ctx, TRANSDUCTIVE_SYSTEM)
    ctx.state.unseen_cv[TRANSDUCTIVE_SYSTEM] = FC.cv_row(run.tuning, TRANSDUCTIVE_SYSTEM, True)
    seen = set(data.train.question)
    if run.tuning.transductive_config is None or all(
            df.question.isin(seen).all() for df in data.evals.values()):
        return _empty()
    return FC.predict_all(data, [clf.with_generic(system=TRANSDUCTIVE_SYSTEM,
                                                  **run.tuning.transductive_config)
                                 for clf in run.classifiers], unseen_only=True)


# --------------------------------------------------------------------------- other encoders


def _per_encoder(ctx: RunContext, prefix: str, fn: Any) -> pd.DataFrame:
    """``fn(system, encoder name, encoder)`` for each further encoder of the run."""
    from saf_utils.encoders.sentence import encoder_tag

    out = []
    for name in ctx.encoders.extras:
        t0 = time.perf_counter()
        system = f"{prefix}:{encoder_tag(name)}"
        out.append(fn(system, name, make_encoder(name)))
        ctx.state.seconds[system] = time.perf_counter() - t0
    return pd.concat(out, ignore_index=True) if out else _empty()


@SYSTEMS.register("nearest_neighbour:", "baseline", params=NoParams, family="baselines",
                  description="nearest_neighbour on another sentence encoder "
                  "(nearest_neighbour:<encoder>)")
def nearest_neighbour_variants(data: SAFData, params: NoParams, ctx: RunContext
                               ) -> pd.DataFrame:
    def one(system: str, name: str, encoder: Any) -> pd.DataFrame:
        preds, loqo = FC.nearest_neighbour_variant(data, encoder, system,
                                                   unseen_feedback(data, ctx))
        ctx.state.unseen_cv[system] = loqo
        return preds

    return _per_encoder(ctx, "nearest_neighbour", one)


@SYSTEMS.register("feature_clf:", "system", params=FC.FeatureClfParams, family="feature_clf",
                  description="feature_clf on another sentence encoder, its settings chosen "
                  "on validation and by leave-one-question-out CV as feature_clf's "
                  "(feature_clf:<encoder>; inductive)")
def feature_clf_variants(data: SAFData, params: FC.FeatureClfParams, ctx: RunContext
                         ) -> pd.DataFrame:
    def one(system: str, name: str, encoder: Any) -> pd.DataFrame:
        tuning = params.tune(data, encoder, transductive=False)
        ctx.state.variant_tunings[name] = tuning
        ctx.state.unseen_cv[system] = FC.cv_row(tuning, system)
        return FC.predict_all(data, FC.fitted_per_seed(
            data, encoder, tuning.config, ctx.seeds, system,
            unseen_feedback=unseen_feedback(data, ctx)))

    return _per_encoder(ctx, "feature_clf", one)


# --------------------------------------------------------------------------- cross-encoder


@dataclass(frozen=True)
class CrossEncoderParams:
    """The cross-encoder: its training settings and the grid chosen on validation."""

    #: model fine-tuned; None: by the data's language (encoders.default_cross_encoder)
    model: str | None = None
    #: saf_utils.training.cross_encoder.CrossEncoderSettings fields over its defaults (not model,
    #: learning_rate, epochs: those are the grid's)
    settings: dict = field(default_factory=dict)
    learning_rate: tuple[float, ...] = (5e-5, 1e-4)  # grid, chosen on validation
    epochs: tuple[int, ...] = (1, 2, 3)  # all scored from one run of the largest
    order: tuple[str, ...] = ("answer_first", "reference_first")
    include_question: tuple[bool, ...] = (False, True)
    #: grouped folds over questions: out-of-fold outputs for stacking and unseen-question CV
    folds: int = 3

    def grid(self) -> dict[str, list]:
        return {k: list(getattr(self, k))
                for k in ("learning_rate", "epochs", "order", "include_question")}


@SYSTEMS.register(CE_SYSTEM, "system", params=CrossEncoderParams, family="cross_encoder",
                  description="pretrained encoder fine-tuned on (answer, reference[, "
                  "question]) pairs; feedback retrieved for the predicted label")
def cross_encoder(data: SAFData, params: CrossEncoderParams, ctx: RunContext) -> pd.DataFrame:
    jobs = CrossEncoderJobs(data, {**params.settings, "model": ctx.encoders.cross_encoder},
                            ctx.mode, ctx.output_dir / "cross_encoder", ctx.launcher, ctx.log)
    run = run_cross_encoder(jobs, params.grid(), ctx.seeds, ctx.encoder, params.folds,
                            unseen_feedback(data, ctx))
    ctx.state.cross_encoder = run
    ctx.state.unseen_cv[CE_SYSTEM] = run.grouped_cv
    return run.preds


@SYSTEMS.register(STACKED_SYSTEM, "system", params=NoParams, family="feature_clf",
                  description="feature_clf whose seen-question model also takes the "
                  "cross-encoder's class probabilities (out-of-fold on train)")
def feature_clf_stacked(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    """``feature_clf:stacked`` per cross-encoder seed: the chosen feature_clf settings, its
    seen-question model fitted with the cross-encoder's out-of-fold outputs on train and
    that seed's outputs on the eval splits (unseen questions: the unstacked generic model).
    """
    run, ce = _feature_clf_run(ctx, STACKED_SYSTEM), ctx.state.cross_encoder
    if ce is None:
        raise ValueError(f"{STACKED_SYSTEM} stacks the cross-encoder: run cross_encoder "
                         "before it")
    classifiers = [FC.FeatureClassifier(ctx.encoder, seed=int(seed), system=STACKED_SYSTEM,
                                        stack=ce.stack_features(seed),
                                        unseen_feedback=unseen_feedback(data, ctx),
                                        **run.tuning.config)
                   .fit(data.train) for seed in sorted(ce.outputs.seed.unique())]
    return FC.predict_all(data, classifiers)


# --------------------------------------------------------------------------- seq2seq


@SYSTEMS.register("seq2seq:", "system", params=Seq2SeqParams, family="seq2seq",
                  description="text2text model writing '<label> Feedback: <text>'")
def seq2seq_models(data: SAFData, params: Seq2SeqParams, ctx: RunContext) -> pd.DataFrame:
    preds, logs = run_seq2seq(data, params.settings, params.models,
                              list(params.seeds or ctx.seeds), ctx.output_dir / "seq2seq",
                              ctx.mode, params.include_question, ctx.launcher, ctx.log)
    ctx.state.seq2seq_logs = logs
    return preds


# --------------------------------------------------------------------------- unseen questions


def unseen_cv_table(data: SAFData, ctx: RunContext) -> pd.DataFrame:
    """Each system's unseen-question path scored on train so far (validation has no unseen
    questions): the baselines' leave-one-question-out rows, then every row a system left in
    ``ctx.state.unseen_cv``, with ``protocol``, ``role`` and ``transductive``."""
    from saf_utils.encoders.sentence import encoder_tag

    rows = ctx.state.unseen_cv
    tags = [encoder_tag(e) for e in ctx.encoders.extras]
    order = ["criteria", "cross_encoder", *[f"{p}:{t}" for t in tags
                                            for p in ("nearest_neighbour", "feature_clf")],
             "feature_clf", TRANSDUCTIVE_SYSTEM, STACKED]
    parts = [rows[s] for s in order if s in rows and len(rows[s])]
    out = pd.concat([B.loqo_baselines(data.train, ctx.encoder), *parts], ignore_index=True)
    out["protocol"] = (out["protocol"] if "protocol" in out else pd.Series(
        index=out.index, dtype=object)).fillna("leave one question out")
    out["role"] = out.system.map(lambda s: SYSTEMS[s].role)
    out["transductive"] = out.system.map(lambda s: SYSTEMS[s].transductive)
    oof = out["oof"] if "oof" in out else pd.Series(None, index=out.index, dtype=object)
    out["top_share"] = oof.map(lambda o: top_share(o) if isinstance(o, dict) else np.nan)
    out["collapsed"] = out.top_share > COLLAPSE_SHARE
    return out


def stacking_candidates(cv: pd.DataFrame) -> list[str]:
    """The question-agnostic paths stacking combines: inductive, chosen-eligible rows with
    out-of-fold labels (not stacking itself)."""
    from saf_utils.registry import ELIGIBLE

    ok = (~cv.transductive.astype(bool) & cv.role.isin(ELIGIBLE) & (cv.system != STACKED)
          & cv.get("oof", pd.Series(None, index=cv.index)).map(lambda o: isinstance(o, dict)))
    return list(dict.fromkeys(cv.system[ok]))


def _labels_of(preds: pd.DataFrame, seed: int) -> pd.Series:
    """id -> label of one system's predictions at ``seed`` (a system without that seed:
    its most frequent label over its seeds, ties to the first)."""
    mine = preds[preds.seed == seed] if (preds.seed == seed).any() else preds
    return (mine.assign(id=mine["id"].astype(str)).groupby("id", sort=False).pred_label
            .agg(lambda v: v.value_counts().index[0]))


@SYSTEMS.register(STACKED, "system", params=NoParams, family="stacking",
                  description="unseen questions: a logistic regression over the labels of "
                  "the question-agnostic paths, fitted on their out-of-fold labels on train")
def unseen_stacked(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    cv = unseen_cv_table(data, ctx)
    names = stacking_candidates(cv)
    seen = set(data.train.question)
    unseen_splits = {s: df[~df.question.isin(seen)] for s, df in data.evals.items()
                     if not df.question.isin(seen).all()}
    missing = [n for n in names if n not in ctx.state.preds]
    if len(names) < 2 or missing or not unseen_splits:
        return _empty()  # nothing to combine, or nothing to grade
    tr = data.train.reset_index(drop=True)
    labels = oof_labels(cv, tr, names)
    y, qs = tr.verification_feedback.astype(str), tr.question.astype(str)
    pred = nested_stacking(labels, y, qs)
    ids = tr["id"].astype(str).tolist()
    ctx.state.unseen_cv[STACKED] = pd.DataFrame([{
        "system": STACKED, "accuracy": float((pred == y.to_numpy()).mean()),
        "macro_f1": M.metric("macro_f1").score(y.tolist(), list(pred),
                                               labels=SAF_LABELS).value,
        "per_question": B.per_question_accuracy(qs, y, pred),
        "oof": dict(zip(ids, map(str, pred), strict=True)),
        "protocol": "leave one question out (stacker), over the candidates' out-of-fold labels"}])
    stacker = LabelStacker(names).fit(labels, y)
    fb = unseen_feedback(data, ctx)
    out = []
    for seed in ctx.seeds:
        for split, df in unseen_splits.items():
            cols = {n: _labels_of(ctx.state.preds[n][ctx.state.preds[n].split == split],
                                  seed).reindex(df["id"].astype(str)).to_numpy() for n in names}
            out.append(B.retrieved_feedback_table(
                data.train, df, stacker.predict(pd.DataFrame(cols)), STACKED, ctx.encoder,
                seed=int(seed), unseen_feedback=fb))
    return EV.collapse_identical_seeds(pd.concat(out, ignore_index=True))


# --------------------------------------------------------------------------- oracles


@SYSTEMS.register("label_oracle", "oracle", params=NoParams, family="oracles")
def label_oracle_system(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    """gold label and score, feedback retrieved for the gold label (sees gold)"""
    return _every_split(data, lambda df: B.label_oracle(data.train, df, ctx.encoder))

