"""SAF experiments: the registry of systems and the functions notebook 02 calls.

A system is an entry of :data:`SYSTEMS` (:class:`saf_utils.registry.Registry`): a name, a
*role* (:data:`saf_utils.registry.ROLES`), a family, its function and the parameters it
reads. Each experiment function runs one family over the evaluation splits (and seeds)
and returns a tidy prediction table (:func:`saf_utils.saf.formats.prediction_table` rows,
all splits and seeds stacked):

- :func:`run_systems`: ``kind="plain"`` systems, ``fn(train, test, encoder)`` (baselines,
  oracles);
- :func:`tune_feature_clf` + :func:`run_feature_clf`: the feature classifier, every choice
  made on validation (seen questions) or by leave-one-question-out CV on train (unseen
  questions), never on a test split;
- :func:`run_seq2seq`: seq2seq jobs over seeds through :mod:`saf_utils.jobs` (launcher
  ``"none"`` trains in the kernel; ``"torchrun:N"`` / ``"accelerate"`` scale out).

:func:`evaluate` turns the predictions into per-item scores, headline tables under each
split's design (:mod:`saf_utils.protocol`), the val-chosen system and the adjusted paired
comparisons to the strongest baseline (chosen on validation); :func:`conclusions` states
them and :func:`record` writes all of it with the Recorder conventions.

Adding a system: a function ``(train, test, encoder) -> prediction table`` decorated with
``@SYSTEMS.register(name, role, family=..., params=...)`` here (its logic in
:mod:`saf_utils.saf.systems`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import jobs as J
from saf_utils import metrics as M
from saf_utils import numerics
from saf_utils import protocol as P
from saf_utils.registry import Registry
from saf_utils.saf import evaluation as EV
from saf_utils.saf import formats as S
from saf_utils.saf import systems as SY
from saf_utils.saf.data import load_saf, saf_dataset_name
from saf_utils.text import listing

TASK = "saf"
#: Splits the experiment functions evaluate on (those present in the dataset).
EVAL_SPLITS = S.EVAL_SPLITS
UNSEEN_QUESTIONS = "test_unseen_questions"  # its system is chosen by CV on train, not on val

#: SAF systems. ``kind="plain"``: ``fn(train, test, encoder) -> prediction table``
#: (:func:`run_systems`); ``kind="experiment"``: ``fn`` is the family's experiment function,
#: which tunes or trains first. ``seq2seq:`` covers every ``seq2seq:<model>``.
SYSTEMS = Registry("SAF system", defaults={"family": None, "kind": "plain",
                                           "transductive": False}, variants=True)


@SYSTEMS.register("majority", "baseline", family="baselines")
def majority(train: pd.DataFrame, test: pd.DataFrame, encoder: Any) -> pd.DataFrame:
    """per question: most frequent training label, score and feedback"""
    return SY.majority_baseline(train, test)


@SYSTEMS.register("nearest_neighbour", "baseline", family="baselines", params=("encoder",),
                  description="label, score and feedback of the most similar training answer "
                  "to the same question; unseen questions: answer-reference cosine thresholds")
def nearest_neighbour(train: pd.DataFrame, test: pd.DataFrame, encoder: Any) -> pd.DataFrame:
    return SY.nearest_neighbour_baseline(train, test, encoder)


@SYSTEMS.register("label_oracle", "oracle", family="oracles", params=("encoder",))
def label_oracle(train: pd.DataFrame, test: pd.DataFrame, encoder: Any) -> pd.DataFrame:
    """gold label and score, feedback retrieved for the gold label (sees gold)"""
    return SY.label_oracle(train, test, encoder)


def role_of(name: str) -> str:
    return SYSTEMS[name].role


def roles_table(names: Sequence[str]) -> pd.DataFrame:
    """Role, family, parameters and description of systems, for the notebook's method table."""
    return SYSTEMS.table(names)


# --------------------------------------------------------------------------- data


@dataclass
class SAFData:
    """Training frame and evaluation frames of one SAF dataset, as the experiments use them."""

    train: pd.DataFrame
    evals: dict[str, pd.DataFrame]
    dataset: str
    source: str | None = None
    language: str = "de"
    words: dict[str, str] = field(default_factory=dict)
    max_rows: int | None = None
    max_train_rows: int | None = None

    def sizes(self) -> pd.DataFrame:
        seen = set(self.train.question)
        frames = {"train": self.train, **self.evals}
        return pd.DataFrame({
            "rows": {s: len(df) for s, df in frames.items()},
            "questions": {s: df.question.nunique() for s, df in frames.items()},
            "share of rows whose question is in train": {
                s: float(df.question.isin(seen).mean()) for s, df in frames.items()},
        })


def load_data(saf_source: str | None = None, language: str = "de",
              prompt_words: Mapping[str, str] | None = None, max_train_rows: int | None = None,
              max_rows: int | None = None) -> SAFData:
    """Load any SAF-format dataset (hub id, hub-layout folder, split files) for the experiments.

    ``max_rows`` / ``max_train_rows`` take fixed random samples.
    """
    saf = load_saf(saf_source)
    train = S.saf_frame(saf["train"], "train", max_train_rows)
    evals = {s: S.saf_frame(saf[s], s, max_rows) for s in EVAL_SPLITS if s in saf}
    return SAFData(train, evals, saf_dataset_name(saf_source), saf_source, language,
                   S.prompt_words(language, prompt_words), max_rows, max_train_rows)


def bertscore_settings(language: str, model: str | None = None, num_layers: int | None = None,
                       lang: str | None = None) -> dict[str, Any]:
    """BERTScore keyword arguments; the rescaling language defaults to the data's language."""
    return {"model_type": model, "num_layers": num_layers, "lang": lang or language}


def make_encoder(encoder: str) -> Callable[[Sequence[str]], np.ndarray]:
    """``texts -> L2-normalised vectors`` with the process-wide cache of saf_utils.encoders."""
    from saf_utils.encoders import encode

    return functools.partial(encode, model=encoder)


@dataclass(frozen=True)
class EncoderChoice:
    """The encoders of one run of notebook 02, after the language-aware defaults."""

    language: str
    sentence: str  # the baselines' and the classifier's sentence encoder
    extras: tuple[str, ...]  # reported beside: nearest_neighbour:<tag>, feature_clf:<tag>
    cross_encoder: str  # the model the cross-encoder fine-tunes
    defaulted: tuple[str, ...]  # which of the three came from the language default

    def describe(self) -> str:
        """One Markdown line per choice, for the page."""
        from saf_utils.encoders import encoder_tag

        how = {k: " (default for language " + repr(self.language) + ")"
               if k in self.defaulted else " (set by the run)"
               for k in ("sentence", "extras", "cross_encoder")}
        extras = ", ".join(f"`{e}` (systems `nearest_neighbour:{encoder_tag(e)}`, "
                           f"`feature_clf:{encoder_tag(e)}`)" for e in self.extras) or "none"
        return (f"- sentence encoder of the baselines and `feature_clf`: `{self.sentence}`"
                f"{how['sentence']}\n- further sentence encoders, reported beside: {extras}"
                f"{how['extras']}\n- model of `cross_encoder`: `{self.cross_encoder}`"
                f"{how['cross_encoder']}")


def choose_encoders(language: str, encoder: str | None = None,
                    extra_encoders: Sequence[str] | None = None,
                    cross_encoder: str | None = None) -> EncoderChoice:
    """Fill the encoders a run leaves at None from the data's language.

    ``encoder``: :func:`saf_utils.encoders.default_encoder` (multilingual-e5-small for a
    non-English release, MiniLM for English); ``extra_encoders``: every other offline
    encoder (:data:`saf_utils.encoders.OFFLINE_ENCODERS`), so English encoders stay
    available for any release and validation chooses among all systems;
    ``cross_encoder``: :func:`saf_utils.encoders.default_cross_encoder`.
    """
    from saf_utils.encoders import OFFLINE_ENCODERS, default_cross_encoder, default_encoder

    defaulted = tuple(k for k, v in (("sentence", encoder), ("extras", extra_encoders),
                                     ("cross_encoder", cross_encoder)) if v is None)
    sentence = encoder or default_encoder(language)
    extras = (tuple(e for e in OFFLINE_ENCODERS if e != sentence) if extra_encoders is None
              else tuple(dict.fromkeys(e for e in extra_encoders if e != sentence)))
    return EncoderChoice(language, sentence, extras,
                         cross_encoder or default_cross_encoder(language), defaulted)


# --------------------------------------------------------------------------- plain systems


def run_systems(data: SAFData, names: Sequence[str], encoder: Any) -> pd.DataFrame:
    """Registry systems with a ``run`` callable (baselines, oracles) over every eval split."""
    out = []
    for name in names:
        entry = SYSTEMS[name]
        if entry.kind != "plain":
            raise ValueError(f"{name!r} needs its family's experiment function "
                             f"({entry.family}), not run_systems")
        out += [entry.fn(data.train, df, encoder) for df in data.evals.values()]
    return pd.concat(out, ignore_index=True)


# --------------------------------------------------------------------------- feature classifier


@dataclass
class FeatureClfTuning:
    """Choices of :func:`tune_feature_clf` and the tables they were made on."""

    grid: pd.DataFrame  # validation grid of the seen-question model
    cv: pd.DataFrame  # leave-one-question-out CV on train of the unseen-question model
    config: dict[str, Any]  # chosen (inductive) FeatureClassifier settings
    transductive_config: dict[str, Any] | None  # best transductive unseen-question variant
    selection: str  # how the seen-question model was chosen


def tune_feature_clf(data: SAFData, encoder: Any, models: Sequence[str] = ("logreg", "hgb"),
                     Cs: Sequence[float] = (0.1, 1.0),
                     feedback_strategies: Sequence[str] = ("most_frequent", "nearest"),
                     generic_feature_sets: Mapping[str, Sequence[str] | None] | None = None,
                     transductive: bool = True, generic_models: Sequence[str] = ("logreg",)
                     ) -> FeatureClfTuning:
    """Choose the feature classifier's settings without looking at any test split.

    Seen-question model (classifier, C, feedback strategy): the grid is scored on
    **validation** (macro-F1 + BLEU/100, label and feedback quality together). The
    unseen-question model (classifier, features, C, class weight) is chosen by
    leave-one-question-out CV on **train** (validation holds only seen questions), and the
    deployed unseen-question model is the one that CV scored (``generic_models``: logistic
    regression by default; gradient boosting in that CV costs minutes on 2 cores and is
    prone to overfit six training questions). Per-question z-scoring of the
    unseen-question features is transductive: the chosen config is always inductive; with
    ``transductive=True`` the best z-scored variant is kept as ``transductive_config``.
    """
    if "validation" not in data.evals:
        raise ValueError("tune_feature_clf needs a validation split")
    val = data.evals["validation"]
    rows = []
    for model in models:
        for C in Cs if model == "logreg" else [1.0]:
            clf = SY.FeatureClassifier(encoder, model=model, C=C).fit(data.train)
            for fb in feedback_strategies:
                clf.feedback = fb
                m = EV.evaluate_predictions(clf.predict(val), embedding_metrics=False)
                rows.append({"model": model, "C": C, "feedback": fb,
                             **{k: m[k] for k in ("accuracy", "macro_f1", "sacrebleu")}})
    grid = pd.DataFrame(rows)
    grid["selection_score"] = grid.macro_f1 + grid.sacrebleu / 100
    best = numerics.sort_best(grid, "selection_score").iloc[0]  # ties: grid order
    cv = SY.grouped_cv_generic(data.train, encoder, Cs=Cs, feature_sets=generic_feature_sets,
                               normalize=(False, True) if transductive else (False,),
                               models=generic_models)
    cv = numerics.sort_best(cv, "macro_f1").reset_index(drop=True)

    def generic(row: pd.Series) -> dict[str, Any]:
        return {"generic_model": row.generic_model, "generic_C": float(row.generic_C),
                "generic_class_weight": row.generic_class_weight,
                "generic_feature_names": row.generic_feature_names,
                "normalize_unseen": bool(row.normalize_unseen)}

    seen = {"model": best.model, "C": float(best.C), "feedback": best.feedback}
    config = {**seen, **generic(cv[~cv.normalize_unseen].iloc[0])}
    trans = cv[cv.normalize_unseen]
    return FeatureClfTuning(grid, cv, config,
                            {**seen, **generic(trans.iloc[0])} if len(trans) else None,
                            "validation: macro_f1 + sacrebleu/100")


_CLF_PARAMS = ("encoder", "clf_models", "clf_Cs", "feedback_strategies",
               "generic_feature_sets", "seeds")


@SYSTEMS.register("feature_clf:transductive", "system", family="feature_clf",
                  kind="experiment", transductive=True, params=_CLF_PARAMS,
                  description="feature_clf whose unseen-question features are z-scored over "
                  "the test batch (transductive); unseen questions only")
@SYSTEMS.register("feature_clf", "system", family="feature_clf", kind="experiment",
                  params=_CLF_PARAMS,
                  description="feature classifier + retrieved feedback (inductive)")
def run_feature_clf(data: SAFData, encoder: Any, tuning: FeatureClfTuning,
                    seeds: Sequence[int] = (0,)) -> pd.DataFrame:
    """``feature_clf`` (inductive) on every eval split per seed, plus
    ``feature_clf:transductive`` on the splits with unseen questions; seeds that change
    nothing are collapsed to one deterministic table."""
    out = []
    for seed in seeds:
        clf = SY.FeatureClassifier(encoder, seed=seed, **tuning.config).fit(data.train)
        out += [clf.predict(df) for df in data.evals.values()]
        if tuning.transductive_config is not None:
            tclf = clf.with_generic(system="feature_clf:transductive",
                                    **tuning.transductive_config)
            out += [tclf.predict(df) for df in data.evals.values()
                    if not df.question.isin(set(data.train.question)).all()]
    return EV.collapse_identical_seeds(pd.concat(out, ignore_index=True))


def unseen_question_cv(data: SAFData, encoder: Any, tuning: FeatureClfTuning,
                       extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """Leave-one-question-out CV on train of every system's unseen-question path.

    The honest basis for choosing a system for unseen questions (validation has none).
    ``extra``: rows of systems scored by a cheaper stated protocol (column ``protocol``,
    e.g. the cross-encoder's grouped k-fold over questions).
    """
    base = SY.loqo_baselines(data.train, encoder)
    cv = tuning.cv
    rows = [base]
    if extra is not None and len(extra):
        rows.append(extra)
    for name, sub in (("feature_clf", cv[~cv.normalize_unseen]),
                      ("feature_clf:transductive", cv[cv.normalize_unseen])):
        if len(sub):
            rows.append(pd.DataFrame([{"system": name, "accuracy": sub.iloc[0].accuracy,
                                       "macro_f1": sub.iloc[0].macro_f1}]))
    out = pd.concat(rows, ignore_index=True)
    out["protocol"] = (out["protocol"] if "protocol" in out else pd.Series(
        index=out.index, dtype=object)).fillna("leave one question out")
    out["role"] = out.system.map(role_of)
    out["transductive"] = out.system.map(lambda s: SYSTEMS[s].transductive)
    return out


# --------------------------------------------------------------------------- other encoders


@dataclass
class EncoderVariants:
    """``nearest_neighbour:<tag>`` and ``feature_clf:<tag>`` for each further encoder."""

    preds: pd.DataFrame
    tunings: dict[str, FeatureClfTuning]  # encoder -> its feature_clf choices
    unseen_cv: pd.DataFrame  # leave-one-question-out rows of the unseen-question paths
    seconds: dict[str, float]  # encoder -> wall time (embedding, tuning, predicting)


@SYSTEMS.register("nearest_neighbour:", "baseline", family="baselines", kind="experiment",
                  params=("extra_encoders",),
                  description="nearest_neighbour on another sentence encoder "
                  "(nearest_neighbour:<encoder>)")
@SYSTEMS.register("feature_clf:", "system", family="feature_clf", kind="experiment",
                  params=("extra_encoders", *_CLF_PARAMS[1:]),
                  description="feature_clf on another sentence encoder, its settings chosen "
                  "on validation and by leave-one-question-out CV as feature_clf's "
                  "(feature_clf:<encoder>)")
def run_encoder_variants(data: SAFData, encoders: Sequence[str],
                         models: Sequence[str] = ("logreg", "hgb"),
                         Cs: Sequence[float] = (0.1, 1.0),
                         feedback_strategies: Sequence[str] = ("most_frequent", "nearest"),
                         generic_feature_sets: Mapping[str, Sequence[str] | None] | None = None,
                         seeds: Sequence[int] = (0,)) -> EncoderVariants:
    """The baseline and the classifier on each of ``encoders``, tuned as the primary ones
    (validation for seen questions, leave-one-question-out CV on train for unseen ones;
    inductive only), so that validation can choose among encoders too."""
    import time

    from saf_utils.encoders import encoder_tag

    preds, tunings, cv_rows, seconds = [], {}, [], {}
    for name in encoders:
        t0 = time.perf_counter()
        tag, enc = encoder_tag(name), make_encoder(name)
        nn_name, clf_name = f"nearest_neighbour:{tag}", f"feature_clf:{tag}"
        preds += [SY.nearest_neighbour_baseline(data.train, df, enc, system=nn_name)
                  for df in data.evals.values()]
        tuning = tune_feature_clf(data, enc, models, Cs, feedback_strategies,
                                  generic_feature_sets, transductive=False)
        tunings[name] = tuning
        for seed in seeds:
            clf = SY.FeatureClassifier(enc, seed=seed, system=clf_name,
                                       **tuning.config).fit(data.train)
            preds += [clf.predict(df) for df in data.evals.values()]
        loqo = SY.loqo_baselines(data.train, enc)
        loqo = loqo[loqo.system == "nearest_neighbour"].assign(system=nn_name)
        best = tuning.cv.iloc[0]
        cv_rows += [loqo, pd.DataFrame([{"system": clf_name, "accuracy": best.accuracy,
                                         "macro_f1": best.macro_f1}])]
        seconds[name] = time.perf_counter() - t0
    cv = (pd.concat(cv_rows, ignore_index=True).assign(protocol="leave one question out")
          if cv_rows else pd.DataFrame(columns=["system", "accuracy", "macro_f1", "protocol"]))
    out = (EV.collapse_identical_seeds(pd.concat(preds, ignore_index=True)) if preds
           else pd.DataFrame())
    return EncoderVariants(out, tunings, cv, seconds)


# --------------------------------------------------------------------------- seq2seq


def seq2seq_settings(seq2seq: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                     **extra: Any):
    """``Seq2SeqSettings(**{**seq2seq, **overrides, **extra})``: the one parameter shape."""
    from saf_utils.seq2seq import Seq2SeqSettings

    return Seq2SeqSettings(**{**dict(seq2seq), **dict(overrides or {}), **extra})


def seq2seq_jobs(data: SAFData, seq2seq: Mapping[str, Any],
                 seq2seq_models: Mapping[str, Mapping[str, Any]] | None, seeds: Sequence[int],
                 output_dir: str | Path, mode: str = "verification",
                 include_question: bool = True) -> list[J.TrainJob]:
    """One :class:`saf_utils.jobs.TrainJob` per (model, seed), reading the examples of
    ``data`` (written once per model, as :func:`saf_utils.saf.formats.format_examples` builds
    them).

    ``seq2seq`` holds the :class:`~saf_utils.seq2seq.Seq2SeqSettings` fields shared by all
    models; ``seq2seq_models`` maps model name (hub id, folder, ``scratch``,
    ``bert2bert:ENCODER``) to its overrides (None: just ``seq2seq["model"]``). System name:
    ``seq2seq:<last part of the model name>``.
    """
    def examples(df: pd.DataFrame) -> J.Examples:
        src, tgt = S.format_examples(df, mode, include_question, data.words)
        return J.Examples(df["id"].tolist(), src, tgt)

    train, evals = examples(data.train), {s: examples(df) for s, df in data.evals.items()}
    models = dict(seq2seq_models or {seq2seq.get("model", "scratch"): {}})
    jobs = []
    for model, overrides in models.items():
        settings = dataclasses.asdict(seq2seq_settings(seq2seq, overrides, model=model))
        settings.pop("seed")
        system = "seq2seq:" + model.rstrip("/").split("/")[-1]
        base = J.TrainJob(examples="", task=TASK, output_dir=str(output_dir),
                          settings=settings, system=system, save_model=False)
        jobs += J.job_grid(J.with_examples(base, train, evals), seeds)
    return jobs


@SYSTEMS.register("seq2seq:", "system", family="seq2seq", kind="experiment",
                  params=("seq2seq", "seq2seq_models", "seeds", "launcher", "mode",
                          "include_question"),
                  description="text2text model writing '<label> Feedback: <text>'")
def run_seq2seq(data: SAFData, seq2seq: Mapping[str, Any],
                seq2seq_models: Mapping[str, Mapping[str, Any]] | None, seeds: Sequence[int],
                output_dir: str | Path, mode: str = "verification", include_question: bool = True,
                launcher: str = "none", log: Callable[[str], None] = print
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and generate per (model, seed) via :func:`saf_utils.jobs.run_jobs`; parse outputs.

    Returns the prediction table (every output parsed; unparseable ones kept and scored as
    wrong) and one training-log row per job.
    """
    jobs = seq2seq_jobs(data, seq2seq, seq2seq_models, seeds, output_dir, mode,
                        include_question)
    res = J.run_jobs(jobs, launcher=launcher, log=log)
    out = []
    for (system, seed, split), rows in res.predictions.groupby(["system", "seed", "split"],
                                                               sort=False):
        gold = data.evals[split]
        if len(rows) != len(gold):  # rows follow the examples file, written from gold
            raise ValueError(f"{system} seed {seed} {split}: {len(rows)} outputs for "
                             f"{len(gold)} examples")
        out.append(S.parsed_prediction_table(gold, system, rows.output.tolist(), mode,
                                             data.words, int(seed)))
    return pd.concat(out, ignore_index=True), res.logs


# --------------------------------------------------------------------------- cross-encoder

CE_ORDERS = ("answer_first", "reference_first")
#: Grid of the cross-encoder, chosen on validation (``epochs``: the listed epoch counts are
#: all scored from one run of the largest, see :mod:`saf_utils.cross_encoder`).
CE_GRID = {"learning_rate": [5e-5], "epochs": [1, 2], "order": ["answer_first"],
           "include_question": [False, True]}
CE_SYSTEM = "cross_encoder"
STACKED_SYSTEM = "feature_clf:stacked"


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


def _ce_settings(cross_encoder: Mapping[str, Any], mode: str, **extra: Any) -> dict[str, Any]:
    from saf_utils.cross_encoder import CrossEncoderSettings

    values = {**dict(cross_encoder), **extra,
              "mode": "label" if mode == "verification" else "score"}
    if values["mode"] == "label":
        values.setdefault("labels", list(S.SAF_LABELS))
    values = dataclasses.asdict(CrossEncoderSettings(**values))  # checks the field names
    values.pop("seed")
    return values


def _ce_labels(outputs: Sequence[str], mode: str) -> list[str]:
    return (list(outputs) if mode == "verification"
            else [S.score_to_label(float(o)) for o in outputs])


def _ce_vector(row: Mapping[str, Any]) -> list[float]:
    """Stacking features of one output row: class probabilities, or the score."""
    probs = row.get("probs")
    if isinstance(probs, Mapping):
        return [float(probs[lab]) for lab in S.SAF_LABELS]
    return [float(row["output"])]


def _ce_job(data: SAFData, cross_encoder: Mapping[str, Any], mode: str, output_dir: str | Path,
            system: str, train: pd.DataFrame, evals: Mapping[str, pd.DataFrame], order: str,
            include_question: bool, fold: int | None = None, **extra: Any) -> J.TrainJob:
    base = J.TrainJob(examples="", task=TASK, output_dir=str(output_dir), kind="cross_encoder",
                      settings=_ce_settings(cross_encoder, mode, **extra), system=system,
                      fold=fold, save_model=False)

    def ex(df: pd.DataFrame) -> J.Examples:
        return cross_encoder_examples(df, order, include_question, data.words, mode)

    return J.with_examples(base, ex(train), {s: ex(df) for s, df in evals.items()})


def question_folds(questions: Sequence[str], k: int) -> dict[str, int]:
    """Grouped folds: each question in one of ``min(k, #questions)`` folds, round robin in
    order of first appearance (deterministic, balanced in questions)."""
    unique = list(dict.fromkeys(questions))
    if len(unique) < 2:
        raise ValueError("grouped folds need at least two questions")
    k = min(k, len(unique))
    return {q: i % k for i, q in enumerate(unique)}


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

    def stack_features(self, seed: int) -> SY.StackFeatures:
        """Out-of-fold features for train, the ``seed`` model's features for eval splits."""
        table = {("train", r["id"]): _ce_vector(r) for r in self.oof.to_dict("records")}
        mine = self.outputs[self.outputs.seed == seed]
        table.update({(r["split"], r["id"]): _ce_vector(r) for r in mine.to_dict("records")})
        names = ([f"ce_p_{lab}" for lab in S.SAF_LABELS]
                 if isinstance(self.oof.probs.iloc[0], Mapping) else ["ce_score"])
        return SY.StackFeatures(table, names)


def _macro_f1(gold: Sequence[str], pred: Sequence[str]) -> float:
    return M.metric("macro_f1").score(gold, pred, labels=S.SAF_LABELS).value


def cross_encoder_oof(data: SAFData, cross_encoder: Mapping[str, Any], config: Mapping[str, Any],
                      seed: int, output_dir: str | Path, mode: str = "verification",
                      folds: int = 3, launcher: str = "none", log: Callable[[str], None] = print
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Out-of-fold cross-encoder outputs for every training answer: grouped k-fold over
    questions, one fine-tune per fold on the other folds' answers.

    No training answer's output comes from a model that saw it, nor any answer to its
    question: the stacked classifier never learns from in-sample probabilities, and the
    same outputs score the cross-encoder's unseen-question path (grouped CV, cheaper than
    one fine-tune per left-out question). Returns the rows (``fold`` = the held-out fold,
    ``trained_on`` = that job's examples file) and the jobs' logs.
    """
    tr = data.train
    fold_of = question_folds(tr.question.tolist(), folds)
    f = tr.question.map(fold_of)
    jobs = []
    for k in sorted(set(f)):
        job = _ce_job(data, cross_encoder, mode, output_dir, "cross_encoder-oof", tr[f != k],
                      {"heldout": tr[f == k]}, config["order"], config["include_question"],
                      fold=k, learning_rate=config["learning_rate"], epochs=config["epochs"])
        jobs += J.job_grid(job, [seed])
    res = J.run_jobs(jobs, launcher=launcher, log=log)
    oof = res.predictions.copy()
    oof["trained_on"] = oof.fold.map({j.fold: j.examples for j in jobs})
    oof = oof.merge(tr[["id", "question", "verification_feedback"]], on="id", how="left")
    if len(oof) != len(tr) or oof.id.duplicated().any():
        raise ValueError(f"{len(oof)} out-of-fold rows for {len(tr)} training answers")
    return oof, res.logs.assign(job="oof")


@SYSTEMS.register("cross_encoder", "system", family="cross_encoder", kind="experiment",
                  params=("cross_encoder", "cross_encoder_grid", "cross_encoder_folds",
                          "seeds", "launcher", "mode"),
                  description="pretrained encoder fine-tuned on (answer, reference[, "
                  "question]) pairs; feedback retrieved for the predicted label")
def run_cross_encoder(data: SAFData, cross_encoder: Mapping[str, Any],
                      grid: Mapping[str, Sequence[Any]] | None, seeds: Sequence[int],
                      output_dir: str | Path, encoder: Any = None, mode: str = "verification",
                      folds: int = 3, launcher: str = "none",
                      log: Callable[[str], None] = print) -> CrossEncoderRun:
    """Choose the cross-encoder's settings on validation, train one model per seed, and
    compute out-of-fold outputs on train for stacking and the unseen-question CV.

    Grid (``grid``: ``learning_rate``, ``epochs``, ``order``, ``include_question``): one
    fine-tune per setting at the first seed, scored on validation after every listed epoch
    count (macro-F1; ties: grid order); the grid runs predict every eval split, so the chosen
    run is the first seed's model. Then one model per further seed with the chosen setting,
    and :func:`cross_encoder_oof` at the first seed. Every job goes through
    :func:`saf_utils.jobs.run_jobs` (``launcher`` as for seq2seq).
    """
    import itertools

    if "validation" not in data.evals:
        raise ValueError("run_cross_encoder needs a validation split")
    g = {**CE_GRID, **dict(grid or {})}
    epochs = sorted(int(e) for e in g["epochs"])
    val = data.evals["validation"]
    points = list(itertools.product(g["learning_rate"], g["order"], g["include_question"]))
    jobs = []
    for i, (lr, order, question) in enumerate(points):
        job = _ce_job(data, cross_encoder, mode, output_dir, f"cross_encoder-grid{i}",
                      data.train, data.evals, order, question, learning_rate=lr,
                      epochs=epochs[-1], predict_every_epoch=len(epochs) > 1)
        jobs += J.job_grid(job, seeds[:1])
    res = J.run_jobs(jobs, launcher=launcher, log=log)
    gold = val.set_index("id").verification_feedback
    rows = []
    for i, (lr, order, question) in enumerate(points):
        for e in epochs:
            r = res.predictions[(res.predictions.system == f"cross_encoder-grid{i}")
                                & (res.predictions.epoch == e)
                                & (res.predictions.split == "validation")]
            pred = _ce_labels(r.output.tolist(), mode)
            y = gold.loc[r.id].tolist()
            rows.append({"learning_rate": lr, "order": order, "include_question": question,
                         "epochs": e, "accuracy": M.metric("accuracy").score(y, pred).value,
                         "macro_f1": _macro_f1(y, pred), "system": f"cross_encoder-grid{i}"})
    table = pd.DataFrame(rows)
    best = numerics.sort_best(table, "macro_f1").iloc[0]  # ties: grid order
    config = {"learning_rate": float(best.learning_rate), "epochs": int(best.epochs),
              "order": best.order, "include_question": bool(best.include_question)}
    log(f"[cross_encoder] chosen on validation: {listing(config)}")
    # The first seed's model is the chosen grid run after the chosen epoch (constant
    # learning rate: the same model as a fresh run of that many epochs); only the other
    # seeds are trained again.
    first = res.predictions[(res.predictions.system == best.system)
                            & (res.predictions.epoch == config["epochs"])]
    job = _ce_job(data, cross_encoder, mode, output_dir, CE_SYSTEM, data.train, data.evals,
                  config["order"], config["include_question"],
                  learning_rate=config["learning_rate"], epochs=config["epochs"])
    seeded = J.run_jobs(J.job_grid(job, seeds[1:]), launcher=launcher, log=log)
    outputs = pd.concat([first.assign(system=CE_SYSTEM), seeded.predictions],
                        ignore_index=True)
    out = []
    for (seed, split), r in outputs.groupby(["seed", "split"], sort=False):
        gold_df = data.evals[split]
        r = r.set_index("id").loc[gold_df["id"]]
        labels = _ce_labels(r.output.tolist(), mode)
        scores = ([min(max(float(o), 0.0), 1.0) for o in r.output] if mode == "score"
                  else None)
        out.append(SY.retrieved_feedback_table(data.train, gold_df, labels, CE_SYSTEM,
                                               encoder, scores, int(seed),
                                               raw=r.output.tolist()))
    oof, oof_logs = cross_encoder_oof(data, cross_encoder, config, seeds[0], output_dir, mode,
                                      folds, launcher, log)
    pred = _ce_labels(oof.output.tolist(), mode)
    y = oof.verification_feedback.tolist()
    cv = pd.DataFrame([{"system": CE_SYSTEM,
                        "accuracy": M.metric("accuracy").score(y, pred).value,
                        "macro_f1": _macro_f1(y, pred),
                        "protocol": f"grouped {oof.fold.nunique()}-fold over questions"}])
    logs = pd.concat([res.logs.assign(job="grid"), seeded.logs.assign(job="seed"), oof_logs],
                     ignore_index=True)
    return CrossEncoderRun(pd.concat(out, ignore_index=True), table, config, outputs, oof,
                           cv, logs)


@SYSTEMS.register(STACKED_SYSTEM, "system", family="feature_clf", kind="experiment",
                  params=(*_CLF_PARAMS, "cross_encoder"),
                  description="feature_clf whose seen-question model also takes the "
                  "cross-encoder's class probabilities (out-of-fold on train)")
def run_stacked_feature_clf(data: SAFData, encoder: Any, tuning: FeatureClfTuning,
                            ce: CrossEncoderRun) -> pd.DataFrame:
    """``feature_clf:stacked`` per cross-encoder seed: the chosen feature_clf settings, its
    seen-question model fitted with the cross-encoder's out-of-fold outputs on train and
    that seed's outputs on the eval splits (unseen questions: the unstacked generic model).
    """
    out = []
    for seed in sorted(ce.outputs.seed.unique()):
        clf = SY.FeatureClassifier(encoder, seed=int(seed), system=STACKED_SYSTEM,
                                   stack=ce.stack_features(seed), **tuning.config)
        clf.fit(data.train)
        out += [clf.predict(df) for df in data.evals.values()]
    return EV.collapse_identical_seeds(pd.concat(out, ignore_index=True))


def cross_encoder_notes(ce: CrossEncoderRun, headline: pd.DataFrame,
                        metric: str = "macro_f1") -> list[str]:
    """Sentences for the closing note: the setting chosen on validation, whether stacking
    won there, the unseen-question CV, and the cost (time per seed, peak memory)."""
    stack = stacking_choice(headline, metric)
    vals = stack.table.set_index("system").value
    seeds = ce.logs[ce.logs.job.isin(["grid", "seed"])]
    first = numerics.sort_best(ce.grid, metric).iloc[0]
    per_seed = [float(first.epochs) / ce.grid.epochs.max()
                * float(seeds[(seeds.job == "grid") & (seeds.system == first.system)]
                        .train_seconds.iloc[0]),
                *seeds[seeds.job == "seed"].train_seconds.astype(float)]
    cv = ce.grouped_cv.iloc[0]
    return [
        "cross_encoder: chosen on validation (" + ce.selection + "): "
        + ", ".join(f"{k} {v}" for k, v in ce.config.items()) + ".",
        f"Stacking chosen on validation ({metric}): `{stack.per_fold[None]}` "
        f"(feature_clf {vals.get('feature_clf', float('nan')):.3f}, feature_clf:stacked "
        f"{vals.get(STACKED_SYSTEM, float('nan')):.3f}).",
        f"cross_encoder unseen-question path, {cv.protocol} on train: accuracy "
        f"{cv.accuracy:.3f}, macro-F1 {cv.macro_f1:.3f}.",
        f"Cost: training time per seed {np.mean(per_seed):.0f} s (first seed: its share of "
        f"the grid run's epochs), all {len(ce.logs)} cross-encoder jobs "
        f"{ce.logs.seconds_total.sum():.0f} s; peak resident memory "
        f"{ce.logs.peak_rss_mb.max():.0f} MiB (process lifetime)"
        + (f", peak GPU memory {ce.logs.peak_cuda_mb.max():.0f} MiB"
           if "peak_cuda_mb" in ce.logs else "") + ".",
    ]


def stacking_choice(headline: pd.DataFrame, metric: str = "macro_f1") -> P.Choice:
    """Whether to stack, on validation: ``feature_clf`` against ``feature_clf:stacked``."""
    v = headline[(headline.split == "validation") & (headline.metric == metric)
                 & headline.system.isin(["feature_clf", STACKED_SYSTEM])]
    return P.choose_from(v.rename(columns={"mean": "value"})[["system", "value"]], metric,
                         {"feature_clf": "system", STACKED_SYSTEM: "system"}, ("system",),
                         "validation", metric in EV.LOWER_IS_BETTER)


# --------------------------------------------------------------------------- evaluation


@dataclass
class Evaluation:
    """Everything :func:`evaluate` measured; :func:`record` writes it."""

    preds: pd.DataFrame
    items: pd.DataFrame
    designs: dict[str, P.Design]  # the headline design of each split
    headline: pd.DataFrame  # every split × system × metric under its design
    per_seed: pd.DataFrame
    reference: str  # strongest baseline on validation
    chosen: str  # val-chosen system (baselines and systems only)
    choice: P.Choice  # the validation table behind ``chosen``
    selection_metric: str
    comparisons: pd.DataFrame  # test splits: systems minus the reference, leads; adjusted
    new_questions: pd.DataFrame  # mean metrics, estimand "new questions" (enough questions)
    per_question: pd.DataFrame  # few-question splits: per question, item-level intervals
    few_question_splits: list[str]

    def roles(self) -> dict[str, str]:
        return {s: role_of(s) for s in dict.fromkeys(self.preds.system)}


#: The pre-specified primary comparison of notebook 02 (the val-chosen system minus the
#: val-strongest baseline); ``evaluate`` fills in the systems.
PRIMARY = {"split": "test_unseen_answers", "metric": "accuracy"}


def choose_on_validation(headline: pd.DataFrame, metric: str = "macro_f1",
                         roles: Sequence[str] = ("baseline", "system"),
                         split: str = "validation") -> P.Choice:
    """The system with the best validation ``metric`` among ``roles`` (ties: table order)."""
    v = headline[(headline.split == split) & (headline.metric == metric)]
    names = {s: role_of(s) for s in dict.fromkeys(v.system)}
    return P.choose_from(v.rename(columns={"mean": "value"})[["system", "value"]], metric,
                         names, roles, split, metric in EV.LOWER_IS_BETTER)


def evaluate(preds: pd.DataFrame, bertscore_kwargs: Mapping[str, Any] | None = None,
             moverscore_model: Any = None, embedding_metrics: bool = True,
             selection_metric: str = "macro_f1", n_resamples: int = 1000, seed: int = 0
             ) -> Evaluation:
    """Per-item scores, headline intervals, the val choices and the adjusted comparisons.

    The reference is the baseline with the best validation ``selection_metric``; the
    chosen system is the best baseline-or-system by the same metric (oracles and probes
    never). Comparisons (test splits only; eligible systems minus the reference on every
    headline metric, each test leader minus its runner-up, and the chosen system minus the
    reference with the *new questions* estimand where there are enough questions) are
    Holm-adjusted except the primary one (:data:`PRIMARY`).
    """
    preds = EV.collapse_identical_seeds(preds)
    metrics = (*EV.HEADLINE_METRICS, "mse_max_penalty", "unparseable_rate")
    items = EV.item_scores(preds, bertscore_kwargs, moverscore_model, embedding_metrics)
    n_q = preds.groupby("split").question.nunique()
    designs = {s: EV.design_for(int(n_q[s]), n_resamples, seed) for s in n_q.index}
    headline = EV.headline_table(preds, items, designs, metrics)
    reference = choose_on_validation(headline, selection_metric, roles=("baseline",))
    choice = choose_on_validation(headline, selection_metric)
    ref, chosen = reference.per_fold[None], choice.per_fold[None]
    roles = {s: role_of(s) for s in dict.fromkeys(preds.system)}
    eligible = [s for s in roles if roles[s] in P.ELIGIBLE]
    tests = {s: d for s, d in designs.items() if s.startswith("test")}
    frames = [EV.paired_table(preds, items, ref, tests, EV.HEADLINE_METRICS, eligible)]
    lower = EV.LOWER_IS_BETTER
    leads = P.leaders(headline[headline.split.isin(list(tests))
                               & headline.metric.isin(EV.HEADLINE_METRICS)], roles, lower)
    for (split, metric), (top, runner) in leads.items():
        if ref not in (top, runner):
            frames.append(EV.paired_table(preds, items, runner, {split: tests[split]},
                                          (metric,), [top]))
    many = [s for s in tests if n_q[s] >= EV.FEW_QUESTIONS]
    if chosen != ref and many:
        it = EV._items(items, ("accuracy",))
        it = it[it.split.isin(many) & it.system.isin([chosen, ref])]
        frames.append(P.paired_table(it, ref, EV.QUESTIONS.but(n_resamples=n_resamples,
                                                                seed=seed)))
    comp = pd.concat([f for f in frames if len(f)], ignore_index=True)
    comp = comp.drop_duplicates(["split", "metric", "system", "reference", "estimand"])
    primary = ({**PRIMARY, "system": chosen, "reference": ref,
                "estimand": designs.get(PRIMARY["split"], EV.ANSWERS).estimand}
               if chosen != ref and PRIMARY["split"] in designs else None)
    comp = P.adjust(comp, primary)
    few = [s for s in n_q.index if n_q[s] < EV.FEW_QUESTIONS]
    per_question = (EV.per_question_table(items[items.split.isin(few)], ("accuracy", "mse"),
                                          n_resamples, seed, EV.question_ids(items.question))
                    if few else pd.DataFrame())  # ids over all splits, as in 05
    return Evaluation(preds, items, designs, headline, EV.per_seed_table(preds, items, metrics),
                      ref, chosen, choice, selection_metric, comp,
                      EV.new_questions_table(items, many), per_question, few)


def conclusions(ev: Evaluation) -> list[str]:
    """Sentences from the tests: the primary comparison first, then the leads per test
    split and metric (accuracy, macro-F1, sacreBLEU), each with its adjusted p."""
    c = ev.comparisons
    lower = EV.LOWER_IS_BETTER
    out = []
    prim = c[c.primary]
    if len(prim):
        r = prim.iloc[0].to_dict()
        out.append("Primary comparison (pre-specified): " + P.verdict(r))
    else:
        out.append(f"The val-chosen system `{ev.chosen}` is the strongest baseline itself: "
                   "there is no primary comparison.")
    for r in c[(c.system == ev.chosen) & (c.reference == ev.reference) & ~c.primary
               & c.metric.isin(["accuracy", "macro_f1", "sacrebleu"])].to_dict("records"):
        out.append(f"{r['split']}: " + P.verdict(r, lower_is_better=r["metric"] in lower))
    h = ev.headline[ev.headline.split.isin(c.split.unique())]
    for (split, metric), (top, runner) in P.leaders(h, ev.roles(), lower).items():
        if metric not in ("accuracy", "macro_f1", "sacrebleu"):
            continue
        row = c[(c.split == split) & (c.metric == metric) & (c.system == top)
                & (c.reference == runner)]
        out.append(f"{split}: " + P.lead_sentence(top, runner, row.iloc[0].to_dict()
                                                  if len(row) else None, metric))
    return out


def record(rec: Any, ev: Evaluation, dataset: str, tuning: FeatureClfTuning | None = None,
           unseen_cv: pd.DataFrame | None = None, ce: CrossEncoderRun | None = None) -> int:
    """Write the evaluation with the Recorder conventions; returns the number of records.

    Headline (seed None, interval, method, estimand, role), per-seed values (seeded systems
    only), the val choice (kind tuning, subset ``chosen`` / ``candidate``; the reference as
    ``reference baseline``), comparisons (kind analysis: ``minus <ref>``, ``p vs <ref>``,
    ``primary p`` / ``p_adj vs <ref>``), *new questions* intervals (kind analysis, subset
    ``new questions``), per-question rows of few-question splits (subset = question id), the
    system chosen for unseen questions by leave-one-question-out CV on train (subset
    ``chosen for test_unseen_questions``, :func:`saf_utils.protocol.chosen_for`),
    tuning grids and per-item scores (``items.jsonl``).
    """
    roles = ev.roles()
    n = P.record(rec, TASK, dataset, headline=ev.headline, roles=roles)
    for r in ev.per_seed[ev.per_seed.seed.notna()].itertuples():
        rec.add(TASK, dataset, r.split, r.system, r.metric, r.value, seed=int(r.seed),
                role=role_of(r.system))
        n += 1
    n += P.record(rec, TASK, dataset, comparisons=ev.comparisons, choice=ev.choice, roles=roles)
    val = ev.choice.table.set_index("system").value
    if ev.reference in val.index:
        rec.add(TASK, dataset, ev.choice.split, ev.reference, ev.selection_metric,
                val[ev.reference], kind="tuning", subset="reference baseline", role="baseline")
        n += 1
    for r in ev.new_questions.itertuples():
        rec.add(TASK, dataset, r.split, r.system, r.metric, r.mean, kind="analysis",
                subset="new questions", role=role_of(r.system), ci_low=r.ci_low,
                ci_high=r.ci_high, method=r.method, estimand=r.estimand)
        n += 1
    for r in ev.per_question.itertuples():
        rec.add(TASK, dataset, r.split, r.system, r.metric, r.mean, kind="analysis",
                subset=r.question_id, role=role_of(r.system), ci_low=r.ci_low,
                ci_high=r.ci_high, method=r.method, estimand=r.estimand)
        n += 1
    if tuning is not None:
        for r in tuning.grid.itertuples():
            for metric in ("accuracy", "macro_f1", "sacrebleu"):
                rec.add(TASK, dataset, "validation", "feature_clf", metric, getattr(r, metric),
                        kind="tuning", subset=f"model={r.model} C={r.C} feedback={r.feedback}",
                        role="system")
                n += 1
        for r in tuning.cv.itertuples():
            for metric in ("accuracy", "macro_f1"):
                rec.add(TASK, dataset, "train", "feature_clf", metric, getattr(r, metric),
                        kind="tuning", role="system",
                        subset=(f"loqo model={r.generic_model} features={r.feature_set} "
                                f"normalize={r.normalize_unseen} "
                                f"class_weight={r.generic_class_weight} C={r.generic_C}"))
                n += 1
    if ce is not None:
        for r in ce.grid.itertuples():
            for metric in ("accuracy", "macro_f1"):
                rec.add(TASK, dataset, "validation", CE_SYSTEM, metric, getattr(r, metric),
                        kind="tuning", role="system",
                        subset=(f"lr={r.learning_rate} epochs={r.epochs} order={r.order} "
                                f"question={r.include_question}"))
                n += 1
    if unseen_cv is not None and len(unseen_cv):
        for r in unseen_cv.itertuples():
            rec.add(TASK, dataset, "train", r.system, "macro_f1", r.macro_f1, kind="tuning",
                    subset=("loqo unseen-question path" if r.protocol == "leave one question out"
                            else f"{r.protocol} unseen-question path"), role=r.role)
            n += 1
        best = numerics.sort_best(unseen_cv[~unseen_cv.transductive], "macro_f1").iloc[0]
        rec.add(TASK, dataset, "train", best.system, "macro_f1", best.macro_f1, kind="tuning",
                subset=P.chosen_for(UNSEEN_QUESTIONS), role=best.role,
                method="leave-one-question-out CV on train; validation has no unseen "
                       "questions")
        n += 1
    rec.add_items(EV.recorder_items(ev.items, TASK, dataset))
    return n
