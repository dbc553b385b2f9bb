"""ArgSciChat reply generation as experiments: a registry of reply systems and the function
that runs them over folds and seeds (scoring and the choice on validation:
:mod:`saf_utils.argscichat.reply_evaluation`).

**Registry.** :data:`REPLY_SYSTEMS` (:class:`saf_utils.registry.Registry`) holds each
system's function, which produces one fold's val and test replies, the
:class:`ReplyParams` fields it reads, and its role

- ``baseline``: a floor or a simple reference (``constant_frequent``, ``nearest_reply``,
  ``copy_selected``, ``trimmed_selected``);
- ``system``: a learned generator (``seq2seq``);
- ``oracle``: sees gold (``copy_gold`` copies the gold facts);
- ``probe``: exploits a metric (``compressed_selected`` keeps the tokens that Message-F1
  rewards; it is never "best").

Adding a system = one function ``fn(fold: ReplyFold, params: ReplyParams) ->
list[SystemOutput]`` decorated with ``@REPLY_SYSTEMS.register(name, role, params=...)``.

**Protocol.** Every choice a system makes (a word budget, a threshold, how many frequent
words) uses *that* fold's val pairs only, never another fold's and never test.

**Rows.** :func:`run_reply_systems` returns tidy prediction rows ``fold, split, pair_id,
paper_id, system, role, seed, output, gold`` (seed None for deterministic systems).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from saf_utils import jobs as J
from saf_utils.argscichat import generation as RG
from saf_utils.argscichat.data import ArgSciChatFold, MessagePair
from saf_utils.argscichat.dialogue import pair_index
from saf_utils.registry import Registry

TASK, DATASET = "argscichat_generation", "argscichat"
EVAL_SPLITS = ("val", "test")
PREDICTION_COLUMNS = ("fold", "split", "pair_id", "paper_id", "system", "role", "seed",
                      "output", "gold")
FLOOR = "constant_frequent"


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


def reply_folds(data: Mapping[int, ArgSciChatFold],
                selected: Mapping[tuple[int, str, str], Sequence[int]],
                max_rows: int | None = None,
                fact_system: str | Mapping[int, str] | None = None) -> dict[int, ReplyFold]:
    """:class:`ReplyFold` per fold: the first ``max_rows`` pairs of every split (as 03 caps
    them) and 03's selections (``(fold, split, pair_id) ->
    indexes``, :func:`saf_utils.argscichat.dialogue.selection_lookup`).

    Every val/test pair must have a selection: a missing one means 03 ran with other folds
    or ``max_rows``, and is an error naming it.
    """
    out = {}
    for f, fold in data.items():
        splits = {s: (fold[s][:max_rows] if max_rows else list(fold[s]))
                  for s in ("train", *EVAL_SPLITS)}
        missing = [(f, s, p.pair_id) for s in EVAL_SPLITS for p in splits[s]
                   if (f, s, p.pair_id) not in selected]
        if missing:
            raise ValueError(f"03 predictions lack {len(missing)} val/test pair(s), e.g. "
                             f"{missing[0]}; rerun 03 with the same folds and max_rows")
        sel = {(s, pid): list(v) for (ff, s, pid), v in selected.items() if ff == f}
        name = fact_system.get(f) if isinstance(fact_system, Mapping) else fact_system
        out[f] = ReplyFold(f, splits["train"], splits["val"], splits["test"],
                           pair_index(fold.train + fold.val + fold.test), sel, name)
    return out


@dataclass
class ReplyParams:
    """Settings of every reply system (the notebook's parameters map onto these)."""

    tune_metric: str = "message_f1"  # what within-system knobs maximise on the fold's val
    frequent_words: Sequence[int] = (5, 10, 15, 20, 25, 30, 40, 50)  # constant_frequent n
    trim_lengths: Sequence[int | None] = (10, 15, 20, 25, 30, 40, 50, 60, None)
    compress_thresholds: Sequence[float] = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)
    compress_prior_words: Sequence[int] = (0, 50, 200, 500)
    compress_model: str = "hgb"
    encoder: str = "local:all-MiniLM-L6-v2"
    embed: Callable[[Sequence[str]], np.ndarray] | None = None  # overrides encoder (tests)
    # seq2seq (through saf_utils.jobs: in-kernel or under a launcher)
    seq2seq: Mapping[str, Any] = field(default_factory=dict)  # Seq2SeqSettings fields
    seeds: Sequence[int] = (0,)
    inputs: Sequence[str] = ("query", "selected_facts")
    train_with_gold_facts: bool = True
    launcher: str = "none"
    work_dir: str | None = None  # where the training jobs write (model, predictions, log)
    save_model: bool = False
    log: Callable[[str], None] = print

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

        from saf_utils.encoders import encode

        return partial(encode, model=self.encoder)


@dataclass
class SystemOutput:
    """A system's replies for one fold (and seed): ``outputs[split]`` follows
    ``fold[split]``; ``tuning`` lists val grid points ``{"subset", "value", "chosen"}``."""

    outputs: dict[str, list[str]]
    seed: int | None = None
    tuning: list[dict[str, Any]] = field(default_factory=list)
    log: dict[str, Any] = field(default_factory=dict)


ReplyFn = Callable[[ReplyFold, ReplyParams], list[SystemOutput]]


def _grid(scores: Mapping[Any, float], chosen: Any, name: str) -> list[dict[str, Any]]:
    return [{"subset": f"{name}={k}", "value": float(v), "chosen": k == chosen}
            for k, v in scores.items()]


def seed_column(values: Any) -> pd.Series:
    """Seeds as Python ints, None for deterministic systems (never 0.0 / NaN)."""
    return pd.Series([None if pd.isna(x) else int(x) for x in values], dtype=object)


def _mean_metric(params: ReplyParams, outs: Sequence[str], pairs: Sequence[MessagePair]
                 ) -> float:
    metric = params.metric()
    return float(np.mean([metric(o, p.reply) for o, p in zip(outs, pairs, strict=True)]))


# --------------------------------------------------------------------------- registry

#: Reply systems: ``fn(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]``;
#: ``params`` names the :class:`ReplyParams` fields a system reads.
REPLY_SYSTEMS = Registry("reply system", param_names=[f.name for f in fields(ReplyParams)])


# --------------------------------------------------------------------------- baselines

def frequent_words(replies: Sequence[str], n: int) -> str:
    """The ``n`` whitespace tokens in most training replies (ties alphabetical), joined.

    Tokens as Message-F1 (model card) counts them: case and punctuation kept.
    """
    df = Counter(t for r in replies for t in set(r.split()))
    return " ".join(sorted(df, key=lambda t: (-df[t], t))[:n])


@REPLY_SYSTEMS.register("constant_frequent", "baseline",
                        params=("tune_metric", "frequent_words"))
def constant_frequent(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """The floor: the same string for every query, the ``n`` most frequent training-reply
    words of the fold, ``n`` from ``params.frequent_words`` chosen on the fold's val."""
    replies = [p.reply for p in fold.train]
    scores = {n: _mean_metric(params, [frequent_words(replies, n)] * len(fold.val), fold.val)
              for n in params.frequent_words}
    n = max(params.frequent_words, key=lambda k: (scores[k], -k))
    text = frequent_words(replies, n)
    return [SystemOutput({s: [text] * len(fold[s]) for s in EVAL_SPLITS},
                         tuning=_grid(scores, n, "n"), log={"n": n})]


@REPLY_SYSTEMS.register("nearest_reply", "baseline", params=("encoder", "embed"))
def nearest_reply(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """The reply of the training pair whose query embedding is most similar (cosine)."""
    emb = params.embedder()
    train_q = emb([p.query for p in fold.train])
    return [SystemOutput({s: RG.nearest_replies(emb([p.query for p in fold[s]]), train_q,
                                                [p.reply for p in fold.train])
                          for s in EVAL_SPLITS})]


@REPLY_SYSTEMS.register("copy_selected", "baseline")
def copy_selected(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """The selected fact sentences in paper order."""
    return [SystemOutput({s: [RG.facts_text(p, fold.sel(s, p)) for p in fold[s]]
                          for s in EVAL_SPLITS})]


@REPLY_SYSTEMS.register("trimmed_selected", "baseline", params=("tune_metric", "trim_lengths"))
def trimmed_selected(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """The selected facts cut after a word budget chosen on the fold's val."""
    texts = {s: [RG.facts_text(p, fold.sel(s, p)) for p in fold[s]] for s in EVAL_SPLITS}
    n, scores = RG.tune_length(texts["val"], [p.reply for p in fold.val],
                               list(params.trim_lengths), params.metric())
    return [SystemOutput({s: [RG.trim_words(t, n) for t in texts[s]] for s in EVAL_SPLITS},
                         tuning=_grid(scores, n, "words"), log={"words": n})]


# --------------------------------------------------------------------------- systems

@REPLY_SYSTEMS.register("seq2seq", "system", params=(
    "seq2seq", "seeds", "inputs", "train_with_gold_facts", "launcher", "work_dir",
    "save_model", "log"))
def seq2seq(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """A seq2seq model per seed, trained on the fold's train pairs (sources from
    ``params.inputs``; gold facts in training unless ``train_with_gold_facts`` is False),
    generating val/test replies from the selected facts.

    The fold's examples are written once and trained through :func:`saf_utils.jobs.run_jobs`
    (``params.launcher``: "none" trains in the kernel, "torchrun:N" / "accelerate" start a
    launcher).
    """
    from saf_utils.seq2seq import Seq2SeqSettings

    Seq2SeqSettings(**params.seq2seq)  # a typo fails here, before any training
    inputs = list(params.inputs)
    uses_selection = "selected_facts" in inputs

    def examples(split: str) -> J.Examples:
        pairs = fold[split]
        if split == "train":
            facts = [p.fact_indexes if params.train_with_gold_facts
                     else fold.selected.get(("train", p.pair_id), p.fact_indexes)
                     for p in pairs]
        else:
            facts = [fold.sel(split, p) if uses_selection else None for p in pairs]
        return J.Examples([p.pair_id for p in pairs],
                          [RG.build_source(p, inputs, f, fold.index)
                           for p, f in zip(pairs, facts, strict=True)],
                          [p.reply for p in pairs])

    base = J.TrainJob(examples="", task="argscichat",
                      output_dir=params.work_dir or "seq2seq_jobs",
                      settings=dict(params.seq2seq), fold=fold.fold,
                      save_model=params.save_model)
    base = J.with_examples(base, examples("train"), {s: examples(s) for s in EVAL_SPLITS})
    res = J.run_jobs(J.job_grid(base, list(params.seeds)), params.launcher, params.log)
    out = []
    for seed in params.seeds:
        p = res.predictions[res.predictions.seed == seed]
        logs = res.logs[res.logs.seed == seed].iloc[0].to_dict()
        out.append(SystemOutput({s: p[p.split == s].output.tolist() for s in EVAL_SPLITS},
                                seed=int(seed),
                                log={k: logs[k] for k in ("train_loss", "train_steps",
                                                          "train_seconds") if k in logs}))
    return out


# --------------------------------------------------------------------------- oracle, probe

@REPLY_SYSTEMS.register("copy_gold", "oracle")
def copy_gold(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """Oracle: the gold fact sentences in paper order ("" for a query without gold facts)."""
    return [SystemOutput({s: [RG.facts_text(p, p.fact_indexes) for p in fold[s]]
                          for s in EVAL_SPLITS})]


@REPLY_SYSTEMS.register("compressed_selected", "probe", params=(
    "tune_metric", "compress_thresholds", "compress_prior_words", "compress_model"))
def compressed_selected(fold: ReplyFold, params: ReplyParams) -> list[SystemOutput]:
    """Probe: the fact and query tokens a boosted token classifier expects in the reply.

    Trained on the fold's train pairs (gold facts); how many frequent reply words it may
    add and its keep threshold are chosen on the fold's val. It exploits Message-F1 (a bag
    of likely words, not a reply) and is reported as a probe.
    """
    train = fold.train
    val_facts = [RG.facts_text(p, fold.sel("val", p)) for p in fold.val]
    best, tuning = None, []
    for n_prior in params.compress_prior_words:
        comp = RG.TokenCompressor(prior_words=n_prior, kind=params.compress_model).fit(
            [p.query for p in train], [RG.facts_text(p, p.fact_indexes) for p in train],
            [p.reply for p in train])
        th, scores = RG.tune_threshold(comp, [p.query for p in fold.val], val_facts,
                                       [p.reply for p in fold.val],
                                       list(params.compress_thresholds), params.metric())
        tuning += [{"subset": f"prior_words={n_prior},threshold={t}", "value": v,
                    "chosen": False} for t, v in scores.items()]
        if best is None or scores[th] > best[2]:
            best = (comp, th, scores[th], n_prior)
    comp, th, _, n_prior = best
    for row in tuning:
        row["chosen"] = row["subset"] == f"prior_words={n_prior},threshold={th}"
    outs = {s: [comp.compress(p.query, RG.facts_text(p, fold.sel(s, p)), th) for p in fold[s]]
            for s in EVAL_SPLITS}
    return [SystemOutput(outs, tuning=tuning, log={"prior_words": n_prior, "threshold": th})]


@dataclass
class ReplyRun:
    """What :func:`run_reply_systems` returns."""

    predictions: pd.DataFrame  # PREDICTION_COLUMNS
    tuning: pd.DataFrame  # fold, system, metric, subset, value, chosen (val grid points)
    logs: pd.DataFrame  # fold, system, seed, ... (chosen knobs, train loss)
    seconds: dict[str, float]

    @staticmethod
    def concat(runs: Sequence[ReplyRun]) -> ReplyRun:
        secs: dict[str, float] = {}
        for r in runs:
            secs.update(r.seconds)
        return ReplyRun(*(pd.concat([getattr(r, a) for r in runs], ignore_index=True)
                          for a in ("predictions", "tuning", "logs")), secs)


def run_reply_systems(folds: Mapping[int, ReplyFold], systems: Sequence[str],
                      params: ReplyParams | None = None) -> ReplyRun:
    """Run ``systems`` on every fold; tidy val/test prediction rows, val tuning grids, logs."""
    params = params or ReplyParams()
    REPLY_SYSTEMS.check(systems)
    rows, tuning, logs, secs = [], [], [], {}
    for name in [n for n in REPLY_SYSTEMS if n in systems]:
        sys_ = REPLY_SYSTEMS[name]
        t0 = time.perf_counter()
        for f, fold in folds.items():
            for out in sys_.fn(fold, params):
                for split in EVAL_SPLITS:
                    pairs, outs = fold[split], out.outputs[split]
                    if len(outs) != len(pairs):
                        raise ValueError(f"{name} fold {f} {split}: {len(outs)} outputs for "
                                         f"{len(pairs)} pairs")
                    rows += [{"fold": f, "split": split, "pair_id": p.pair_id,
                              "paper_id": p.paper_id, "system": name, "role": sys_.role,
                              "seed": out.seed, "output": o, "gold": p.reply}
                             for p, o in zip(pairs, outs, strict=True)]
                tuning += [{"fold": f, "system": name, "metric": params.tune_metric, **t}
                           for t in out.tuning]
                logs.append({"fold": f, "system": name, "seed": out.seed, **out.log})
        secs[name] = round(time.perf_counter() - t0, 1)
    preds = pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS))
    preds["seed"] = seed_column(preds.seed)
    return ReplyRun(preds, pd.DataFrame(tuning, columns=["fold", "system", "metric", "subset",
                                                         "value", "chosen"]),
                    pd.DataFrame(logs), secs)
