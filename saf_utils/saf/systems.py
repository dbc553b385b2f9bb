"""The registered SAF systems: each one a parameters dataclass (its defaults live only there)
and ``fn(data, params, ctx) -> prediction table`` on every eval split, run by
:func:`saf_utils.saf.run.run_systems`. Registration order is run order: a system that reads
another's result (``feature_clf:transductive`` and ``feature_clf:stacked`` read
``feature_clf``'s tuning, ``feature_clf:stacked`` the cross-encoder's outputs) comes after
it. A name ending in ``:`` covers its variants (``seq2seq:<model>``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from saf_utils.registry import NoParams, Registry
from saf_utils.saf import baselines as B
from saf_utils.saf import feature_clf as FC
from saf_utils.saf import feedback_choice as FCH
from saf_utils.saf.baselines import UnseenFeedback
from saf_utils.saf.context import RunContext, SAFData, make_encoder
from saf_utils.saf.cross_encoder_jobs import CE_SYSTEM, CrossEncoderJobs, run_cross_encoder
from saf_utils.saf.features import QUESTION_AGNOSTIC
from saf_utils.saf.formats import PREDICTION_COLUMNS
from saf_utils.saf.reference import ALIGNMENT_FEATURES
from saf_utils.saf.seq2seq_jobs import run_seq2seq

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
        ctx.state.unseen_feedback = FCH.choose_unseen_feedback(data.train, ctx.encoder)
    return ctx.state.unseen_feedback.strategy


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


# --------------------------------------------------------------------------- feature classifier


@dataclass(frozen=True)
class FeatureClfParams:
    """Candidates of the feature classifier, chosen on validation (seen questions) and by
    leave-one-question-out CV on train (unseen questions)."""

    models: tuple[str, ...] = ("logreg", "hgb")  # seen-question classifier candidates
    Cs: tuple[float, ...] = (0.1, 1.0)  # regularisation candidates of the logistic regression
    feedback_strategies: tuple[str, ...] = ("most_frequent", "nearest")
    #: unseen-question feature sets (name -> feature names, None: all), CV candidates
    generic_feature_sets: dict = field(default_factory=lambda: {
        "all": None, "cos": ["cos_ref"],
        "core": ["cos_ref", "cos_ref_sent_max", "ref_recall", "log_len"],
        "core+alignment": ["cos_ref", "cos_ref_sent_max", "ref_recall", "log_len",
                           *ALIGNMENT_FEATURES],
        "all+alignment": list(QUESTION_AGNOSTIC)})
    generic_models: tuple[str, ...] = ("logreg",)  # unseen-question classifier candidates


@dataclass
class FeatureClfRun:
    """``feature_clf``'s choices and its fitted classifiers (one per seed)."""

    params: FeatureClfParams
    tuning: FC.FeatureClfTuning
    classifiers: list


def _tune(data: SAFData, params: FeatureClfParams, encoder: Any, transductive: bool
          ) -> FC.FeatureClfTuning:
    return FC.tune_feature_clf(data, encoder, params.models, params.Cs,
                               params.feedback_strategies, params.generic_feature_sets,
                               transductive, params.generic_models)


@SYSTEMS.register("feature_clf", "system", params=FeatureClfParams, family="feature_clf",
                  description="feature classifier + retrieved feedback (inductive)")
def feature_clf(data: SAFData, params: FeatureClfParams, ctx: RunContext) -> pd.DataFrame:
    tuning = _tune(data, params, ctx.encoder, transductive=True)
    classifiers = FC.fitted_per_seed(data, ctx.encoder, tuning.config, ctx.seeds,
                                     unseen_feedback=unseen_feedback(data, ctx))
    ctx.state.feature_clf = FeatureClfRun(params, tuning, classifiers)
    ctx.state.unseen_cv["feature_clf"] = FC.cv_row(tuning, "feature_clf")
    return FC.predict_all(data, classifiers)


def _feature_clf_run(ctx: RunContext, name: str) -> FeatureClfRun:
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
    from saf_utils.encoders import encoder_tag

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


@SYSTEMS.register("feature_clf:", "system", params=FeatureClfParams, family="feature_clf",
                  description="feature_clf on another sentence encoder, its settings chosen "
                  "on validation and by leave-one-question-out CV as feature_clf's "
                  "(feature_clf:<encoder>; inductive)")
def feature_clf_variants(data: SAFData, params: FeatureClfParams, ctx: RunContext
                         ) -> pd.DataFrame:
    def one(system: str, name: str, encoder: Any) -> pd.DataFrame:
        tuning = _tune(data, params, encoder, transductive=False)
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
    #: saf_utils.cross_encoder.CrossEncoderSettings fields over its defaults (not model,
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


@dataclass(frozen=True)
class Seq2SeqParams:
    """The seq2seq models: shared training settings, per-model overrides, seeds."""

    #: saf_utils.seq2seq.Seq2SeqSettings fields over its defaults, shared by all models
    settings: dict = field(default_factory=dict)
    #: model name (hub id, folder, scratch, bert2bert:ENCODER) -> its overrides;
    #: None: just settings["model"] (default scratch)
    models: dict | None = None
    seeds: tuple[int, ...] | None = None  # None: the run's seeds
    include_question: bool = True  # the question in the model input


@SYSTEMS.register("seq2seq:", "system", params=Seq2SeqParams, family="seq2seq",
                  description="text2text model writing '<label> Feedback: <text>'")
def seq2seq_models(data: SAFData, params: Seq2SeqParams, ctx: RunContext) -> pd.DataFrame:
    preds, logs = run_seq2seq(data, params.settings, params.models,
                              list(params.seeds or ctx.seeds), ctx.output_dir / "seq2seq",
                              ctx.mode, params.include_question, ctx.launcher, ctx.log)
    ctx.state.seq2seq_logs = logs
    return preds


# --------------------------------------------------------------------------- oracles


@SYSTEMS.register("label_oracle", "oracle", params=NoParams, family="oracles")
def label_oracle_system(data: SAFData, params: NoParams, ctx: RunContext) -> pd.DataFrame:
    """gold label and score, feedback retrieved for the gold label (sees gold)"""
    return _every_split(data, lambda df: B.label_oracle(data.train, df, ctx.encoder))

