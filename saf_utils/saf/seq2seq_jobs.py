"""SAF seq2seq systems (``seq2seq:<model>``) as jobs: one training job per (model, seed),
outputs parsed by :func:`saf_utils.saf.formats.parsed_prediction_table`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.saf import formats as S
from saf_utils.training import jobs as J

TASK = "saf"


@dataclass(frozen=True)
class Seq2SeqParams:
    """The seq2seq models: shared training settings, per-model overrides, seeds."""

    #: saf_utils.training.seq2seq.Seq2SeqSettings fields over its defaults, shared by all models
    settings: dict = field(default_factory=dict)
    #: model name (hub id, folder, scratch, bert2bert:ENCODER) -> its overrides;
    #: None: just settings["model"] (default scratch)
    models: dict | None = None
    seeds: tuple[int, ...] | None = None  # None: the run's seeds
    include_question: bool = True  # the question in the model input


def seq2seq_settings(seq2seq: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                     **extra: Any):
    """``Seq2SeqSettings(**{**seq2seq, **overrides, **extra})``: the one parameter shape."""
    from saf_utils.training.seq2seq import Seq2SeqSettings

    return Seq2SeqSettings(**{**dict(seq2seq), **dict(overrides or {}), **extra})


def seq2seq_jobs(data: Any, seq2seq: Mapping[str, Any],
                 seq2seq_models: Mapping[str, Mapping[str, Any]] | None, seeds: Sequence[int],
                 output_dir: str | Path, mode: str = "verification",
                 include_question: bool = True) -> list[J.TrainJob]:
    """One training job per (model, seed), its examples written once per model."""
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


def run_seq2seq(data: Any, seq2seq: Mapping[str, Any],
                seq2seq_models: Mapping[str, Mapping[str, Any]] | None, seeds: Sequence[int],
                output_dir: str | Path, mode: str = "verification", include_question: bool = True,
                launcher: str = "none", log: Callable[[str], None] = J.progress
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and generate per (model, seed); the prediction table (unparseable outputs
    kept, scored as wrong) and one training-log row per job."""
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
