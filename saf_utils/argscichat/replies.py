"""ArgSciChat reply systems: the registry :data:`REPLY_SYSTEMS`, each system's parameters
dataclass, what they all read (:class:`ReplyData`) and the systems; a system is
``fn(data: ReplyData, params, **context) -> predictions frame`` (adding one:
docs/recipes.md). Every choice a system makes (a word budget, a threshold) uses *that*
fold's val pairs only (:func:`saf_utils.statistics.validation_choice.choose_value`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.argscichat import generation as RG
from saf_utils.argscichat.data import MessagePair
from saf_utils.registry import NoParams, Registry
from saf_utils.statistics import validation_choice
from saf_utils.training import jobs as J

TASK, DATASET = "argscichat_generation", "argscichat"
EVAL_SPLITS = ("val", "test")
FLOOR = "constant_frequent"

#: Reply systems: ``fn(data: ReplyData, params, **context) -> predictions frame``.
REPLY_SYSTEMS = Registry("reply system")


# --------------------------------------------------------------------------- inputs

@dataclass
class ReplyFold:
    """One fold's pairs (capped), the pair index and the fact selector's choices."""

    fold: int
    train: list[MessagePair]
    val: list[MessagePair]
    test: list[MessagePair]
    index: dict[str, MessagePair]
    selected: dict[tuple[str, str], list[int]]  # (split, pair_id) -> sentence indexes
    fact_system: str | None = None  # the 03 system whose selections these are

    def __getitem__(self, split: str) -> list[MessagePair]:
        if split not in ("train", *EVAL_SPLITS):
            raise KeyError(f"unknown split {split!r}")
        return getattr(self, split)

    def sel(self, split: str, pair: MessagePair) -> list[int]:
        key = (split, pair.pair_id)
        if key not in self.selected:
            raise KeyError(f"fold {self.fold}: no selected facts for {split} pair "
                           f"{pair.pair_id!r}")
        return self.selected[key]


@dataclass
class ReplyConfig:
    """What every reply system of a run shares (04's notebook-level parameters)."""

    tune_metric: str = "message_f1"  # what within-system knobs maximise on the fold's val
    encoder: str = "local:all-MiniLM-L6-v2"  # sentence encoder of nearest_reply
    embed: Callable[[Sequence[str]], np.ndarray] | None = None  # overrides encoder (tests)
    seeds: Sequence[int] = (0,)  # seeds of the trained systems
    launcher: str = "none"  # seq2seq training: none, processes:N, torchrun:N or accelerate[:N]
    work_dir: str | None = None  # where the training jobs write (model, predictions, log)
    save_model: bool = False
    log: Callable[[str], None] = J.progress

    def metric(self) -> Callable[[str, str], float]:
        from saf_utils import metrics

        if self.tune_metric not in RG.OVERLAP_METRICS:
            raise ValueError(f"tune_metric {self.tune_metric!r}: use one of "
                             f"{RG.OVERLAP_METRICS}")
        return getattr(metrics, self.tune_metric)

    def embedder(self) -> Callable[[Sequence[str]], np.ndarray]:
        if self.embed is not None:
            return self.embed
        from functools import partial

        from saf_utils.encoders.sentence import encode

        return partial(encode, model=self.encoder)


@dataclass
class ReplyData:
    """What a reply system reads: the folds and the run's settings. ``tuning`` and ``logs``
    collect the systems' val grid points and chosen knobs as they run."""

    folds: Mapping[int, ReplyFold]
    config: ReplyConfig = field(default_factory=ReplyConfig)
    tuning: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SystemOutput:
    """A system's replies for one fold (and seed): ``outputs[split]`` follows
    ``fold[split]``; ``tuning`` lists val grid points ``{"subset", "value", "chosen"}``."""

    outputs: dict[str, list[str]]
    seed: int | None = None
    tuning: list[dict[str, Any]] = field(default_factory=list)
    log: dict[str, Any] = field(default_factory=dict)


def each_fold(data: ReplyData, make: Callable[[ReplyFold], list[SystemOutput]]
              ) -> pd.DataFrame:
    """A system's predictions frame from ``make(fold)`` on every fold."""
    rows: list[dict[str, Any]] = []
    for f, fold in data.folds.items():
        for out in make(fold):
            for split in EVAL_SPLITS:
                pairs, outs = fold[split], out.outputs[split]
                if len(outs) != len(pairs):
                    raise ValueError(f"fold {f} {split}: {len(outs)} outputs for "
                                     f"{len(pairs)} pairs")
                rows += [{"fold": f, "split": split, "pair_id": p.pair_id,
                          "paper_id": p.paper_id, "seed": out.seed, "output": o,
                          "gold": p.reply} for p, o in zip(pairs, outs, strict=True)]
            data.tuning += [{"fold": f, "metric": data.config.tune_metric, **t}
                            for t in out.tuning]
            data.logs.append({"fold": f, "seed": out.seed, **out.log})
    return pd.DataFrame(rows)


def seed_column(values: Any) -> pd.Series:
    """Seeds as Python ints, None for deterministic systems (never 0.0 / NaN)."""
    return pd.Series([None if pd.isna(x) else int(x) for x in values], dtype=object)


def _val_choice(fold: ReplyFold, config: ReplyConfig, candidates: Sequence[Any],
                outputs: Callable[[Any], list[str]], label: Callable[[Any], str]
                ) -> tuple[Any, list[dict[str, Any]]]:
    """The candidate whose val replies ``outputs(candidate)`` score best on the fold's val
    (:func:`saf_utils.statistics.validation_choice.choose_value`), and the grid's rows."""
    metric = config.metric()
    scores = {c: float(np.mean([metric(o, p.reply) for o, p in zip(outputs(c), fold.val,
                                                                  strict=True)]))
              for c in candidates}
    chosen = validation_choice.choose_value(scores, config.tune_metric)
    return chosen, [{"subset": label(c), "value": v, "chosen": c == chosen}
                    for c, v in scores.items()]


# --------------------------------------------------------------------------- baselines

@dataclass(frozen=True)
class FrequentParams:
    """``constant_frequent``: candidate numbers of words, one chosen per fold on val."""

    n_words: tuple[int, ...] = (5, 10, 15, 20, 25, 30, 40, 50)


def frequent_words(replies: Sequence[str], n: int) -> str:
    """The ``n`` whitespace tokens (as Message-F1 counts them) in most training replies,
    ties alphabetical, joined."""
    df = Counter(t for r in replies for t in set(r.split()))
    return " ".join(sorted(df, key=lambda t: (-df[t], t))[:n])


@REPLY_SYSTEMS.register("constant_frequent", "baseline", params=FrequentParams)
def constant_frequent(data: ReplyData, params: FrequentParams, **context: Any
                      ) -> pd.DataFrame:
    """The floor: the same string for every query, the ``n`` most frequent training-reply
    words of the fold, ``n`` chosen on the fold's val."""
    def make(fold: ReplyFold) -> list[SystemOutput]:
        replies = [p.reply for p in fold.train]
        n, tuning = _val_choice(fold, data.config, params.n_words,
                                lambda n: [frequent_words(replies, n)] * len(fold.val),
                                lambda n: f"n={n}")
        text = frequent_words(replies, n)
        return [SystemOutput({s: [text] * len(fold[s]) for s in EVAL_SPLITS}, tuning=tuning,
                             log={"n": n})]
    return each_fold(data, make)


@REPLY_SYSTEMS.register("nearest_reply", "baseline", params=NoParams)
def nearest_reply(data: ReplyData, params: NoParams, **context: Any) -> pd.DataFrame:
    """The reply of the training pair whose query embedding is most similar (cosine)."""
    emb = data.config.embedder()

    def make(fold: ReplyFold) -> list[SystemOutput]:
        train_q = emb([p.query for p in fold.train])
        return [SystemOutput({s: RG.nearest_replies(emb([p.query for p in fold[s]]), train_q,
                                                    [p.reply for p in fold.train])
                              for s in EVAL_SPLITS})]
    return each_fold(data, make)


@REPLY_SYSTEMS.register("copy_selected", "baseline", params=NoParams)
def copy_selected(data: ReplyData, params: NoParams, **context: Any) -> pd.DataFrame:
    """The selected fact sentences in paper order."""
    return each_fold(data, lambda fold: [SystemOutput(
        {s: [RG.facts_text(p, fold.sel(s, p)) for p in fold[s]] for s in EVAL_SPLITS})])


@dataclass(frozen=True)
class TrimParams:
    """``trimmed_selected``: candidate word budgets (None keeps all), one chosen per fold."""

    lengths: tuple[int | None, ...] = (10, 15, 20, 25, 30, 40, 50, 60, None)


@REPLY_SYSTEMS.register("trimmed_selected", "baseline", params=TrimParams)
def trimmed_selected(data: ReplyData, params: TrimParams, **context: Any) -> pd.DataFrame:
    """The selected facts cut after a word budget chosen on the fold's val."""
    def make(fold: ReplyFold) -> list[SystemOutput]:
        texts = {s: [RG.facts_text(p, fold.sel(s, p)) for p in fold[s]] for s in EVAL_SPLITS}
        n, tuning = _val_choice(fold, data.config, params.lengths,
                                lambda n: [RG.trim_words(t, n) for t in texts["val"]],
                                lambda n: f"words={n}")
        return [SystemOutput({s: [RG.trim_words(t, n) for t in texts[s]] for s in EVAL_SPLITS},
                             tuning=tuning, log={"words": n})]
    return each_fold(data, make)


# --------------------------------------------------------------------------- systems

#: 04's seq2seq settings (:class:`saf_utils.training.seq2seq.Seq2SeqSettings` fields): a scratch
#: transformer that trains on 2 CPU cores.
SCRATCH_SEQ2SEQ = {"model": "scratch", "epochs": 8.0, "learning_rate": 0.003, "batch_size": 16,
                   "max_source_length": 128, "max_target_length": 48, "num_beams": 1,
                   "scratch_d_model": 64, "scratch_ff": 256, "scratch_vocab_size": 2000}


@dataclass(frozen=True)
class ReplySeq2SeqParams:
    """``seq2seq``: the model's settings, its source parts (:data:`RG.GENERATION_INPUTS`)
    and whether training sources use gold facts in place of selected ones."""

    settings: dict[str, Any] = field(default_factory=lambda: dict(SCRATCH_SEQ2SEQ))
    inputs: tuple[str, ...] = ("query", "selected_facts")
    train_with_gold_facts: bool = True


def _seq2seq_examples(fold: ReplyFold, params: ReplySeq2SeqParams, split: str) -> J.Examples:
    """The training job's examples of one split: sources from ``params.inputs``."""
    pairs, inputs = fold[split], list(params.inputs)
    if split == "train":
        facts = [p.fact_indexes if params.train_with_gold_facts
                 else fold.selected.get(("train", p.pair_id), p.fact_indexes) for p in pairs]
    else:
        facts = [fold.sel(split, p) if "selected_facts" in inputs else None for p in pairs]
    return J.Examples([p.pair_id for p in pairs],
                      [RG.build_source(p, inputs, f, fold.index)
                       for p, f in zip(pairs, facts, strict=True)],
                      [p.reply for p in pairs])


#: What the page shows of each trained model: what actually ran (fp16 needs CUDA), on how
#: many processes, with LED's global attention.
TRAIN_LOG_FIELDS = ("model", "precision", "world_size", "global_attention", "train_loss",
                    "train_steps", "train_seconds")


@REPLY_SYSTEMS.register("seq2seq", "system", params=ReplySeq2SeqParams)
def seq2seq(data: ReplyData, params: ReplySeq2SeqParams, **context: Any) -> pd.DataFrame:
    """A seq2seq model per seed, trained on the fold's train pairs (gold facts unless
    ``train_with_gold_facts`` is False) through :func:`saf_utils.training.jobs.run_jobs`, generating
    val/test replies from the selected facts."""
    from saf_utils.training.seq2seq import Seq2SeqSettings

    Seq2SeqSettings(**params.settings)  # a typo fails here, before any training
    config = data.config

    def make(fold: ReplyFold) -> list[SystemOutput]:
        base = J.TrainJob(examples="", task="argscichat",
                          output_dir=config.work_dir or "seq2seq_jobs",
                          settings=dict(params.settings), fold=fold.fold,
                          save_model=config.save_model)
        base = J.with_examples(base, _seq2seq_examples(fold, params, "train"),
                               {s: _seq2seq_examples(fold, params, s) for s in EVAL_SPLITS})
        res = J.run_jobs(J.job_grid(base, list(config.seeds)), config.launcher, config.log)
        out = []
        for seed in config.seeds:
            p = res.predictions[res.predictions.seed == seed]
            logs = res.logs[res.logs.seed == seed].iloc[0].to_dict()
            out.append(SystemOutput({s: p[p.split == s].output.tolist() for s in EVAL_SPLITS},
                                    seed=int(seed),
                                    log={k: logs[k] for k in TRAIN_LOG_FIELDS if k in logs}))
        return out
    return each_fold(data, make)


# --------------------------------------------------------------------------- oracle, probe

@REPLY_SYSTEMS.register("copy_gold", "oracle", params=NoParams)
def copy_gold(data: ReplyData, params: NoParams, **context: Any) -> pd.DataFrame:
    """Oracle: the gold fact sentences in paper order ("" for a query without gold facts)."""
    return each_fold(data, lambda fold: [SystemOutput(
        {s: [RG.facts_text(p, p.fact_indexes) for p in fold[s]] for s in EVAL_SPLITS})])


@dataclass(frozen=True)
class CompressParams:
    """``compressed_selected``: keep-probability thresholds and numbers of frequent reply
    words the compressor may add (both chosen per fold on val), and its classifier."""

    thresholds: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)
    prior_words: tuple[int, ...] = (0, 50, 200, 500)
    model: str = "hgb"  # hgb or logreg


@REPLY_SYSTEMS.register("compressed_selected", "probe", params=CompressParams)
def compressed_selected(data: ReplyData, params: CompressParams, **context: Any
                        ) -> pd.DataFrame:
    """Probe: the fact and query tokens a boosted token classifier expects in the reply
    (its extra words and threshold chosen on the fold's val): it exploits Message-F1."""
    def make(fold: ReplyFold) -> list[SystemOutput]:
        train, comps, val_probs = fold.train, {}, {}
        for n in params.prior_words:
            comps[n] = RG.TokenCompressor(prior_words=n, kind=params.model).fit(
                [p.query for p in train], [RG.facts_text(p, p.fact_indexes) for p in train],
                [p.reply for p in train])
            val_probs[n] = [comps[n].keep_probabilities(p.query, RG.facts_text(
                p, fold.sel("val", p))) for p in fold.val]
        (n, th), tuning = _val_choice(
            fold, data.config, [(n, t) for n in params.prior_words for t in params.thresholds],
            lambda c: [" ".join(t for t, pr in zip(toks, probs, strict=True) if pr >= c[1])
                       for toks, probs in val_probs[c[0]]],
            lambda c: f"prior_words={c[0]},threshold={c[1]}")
        outs = {s: [comps[n].compress(p.query, RG.facts_text(p, fold.sel(s, p)), th)
                    for p in fold[s]] for s in EVAL_SPLITS}
        return [SystemOutput(outs, tuning=tuning, log={"prior_words": n, "threshold": th})]
    return each_fold(data, make)
