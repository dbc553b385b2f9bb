"""What every SAF system is given: the data (:class:`SAFData`), the run's encoders
(:class:`EncoderChoice`) and the run context (:class:`RunContext`, with the
:class:`RunState` where a system leaves what later systems and the records read)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.saf import formats as S
from saf_utils.saf.data import load_saf, saf_dataset_name
from saf_utils.training.jobs import progress

#: Splits the systems are evaluated on (those present in the dataset).
EVAL_SPLITS = S.EVAL_SPLITS
UNSEEN_QUESTIONS = "test_unseen_questions"  # its system is chosen by CV on train, not on val


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
    """Load any SAF-format dataset; ``max_rows`` / ``max_train_rows`` take fixed samples."""
    saf = load_saf(saf_source)
    train = S.saf_frame(saf["train"], "train", max_train_rows)
    evals = {s: S.saf_frame(saf[s], s, max_rows) for s in EVAL_SPLITS if s in saf}
    return SAFData(train, evals, saf_dataset_name(saf_source), saf_source, language,
                   S.prompt_words(language, prompt_words), max_rows, max_train_rows)


def make_encoder(encoder: str) -> Callable[[Sequence[str]], np.ndarray]:
    """``texts -> L2-normalised vectors`` (process-wide cache of ``encoders.sentence``)."""
    from saf_utils.encoders.sentence import encode

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
        from saf_utils.encoders.sentence import encoder_tag

        how = {k: " (default for language " + repr(self.language) + ")"
               if k in self.defaulted else " (set by the run)"
               for k in ("sentence", "extras", "cross_encoder")}
        extras = ", ".join(f"`{e}` (systems `nearest_neighbour:{encoder_tag(e)}`, "
                           f"`feature_clf:{encoder_tag(e)}`)" for e in self.extras) or "none"
        return (f"- sentence encoder of the baselines and `feature_clf`: `{self.sentence}`"
                f"{how['sentence']}\n- further sentence encoders, reported beside: {extras}"
                f"{how['extras']}\n- model of `cross_encoder`: `{self.cross_encoder}`"
                f"{how['cross_encoder']}")


@dataclass
class RunState:
    """What the systems of one run leave for later systems and for the records."""

    feature_clf: Any = None  # saf_utils.saf.feature_clf.FeatureClfRun of ``feature_clf``
    cross_encoder: Any = None  # saf_utils.saf.cross_encoder_jobs.CrossEncoderRun
    variant_tunings: dict[str, Any] = field(default_factory=dict)  # encoder -> its tuning
    unseen_cv: dict[str, pd.DataFrame] = field(default_factory=dict)  # system -> CV rows
    #: the unseen-question feedback chosen on train (feedback_choice.FeedbackChoice)
    unseen_feedback: Any = None
    seq2seq_logs: pd.DataFrame | None = None  # one training-log row per seq2seq job
    criteria: Any = None  # saf_utils.saf.criteria.CriteriaCV of ``criteria``
    #: system -> its prediction table, as the systems run (stacking reads the earlier ones)
    preds: dict[str, pd.DataFrame] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # system -> wall time
    # system -> peak resident memory of the process while it ran, MiB
    peak_mb: dict[str, float | None] = field(default_factory=dict)


@dataclass
class RunContext:
    """The run-level settings every system reads (not one system's parameters)."""

    encoders: EncoderChoice
    seeds: tuple[int, ...] = (0,)
    output_dir: Path = Path(".")
    mode: str = "verification"  # verification: label + feedback; score: score + feedback
    launcher: str = "none"  # seq2seq and cross-encoder jobs
    log: Callable[[str], None] = progress
    state: RunState = field(default_factory=RunState)
    #: the sentence encoder as a callable (None: :func:`make_encoder` of
    #: ``encoders.sentence``); tests pass a fake
    embed: Callable[[Sequence[str]], np.ndarray] | None = None

    @functools.cached_property
    def encoder(self) -> Callable[[Sequence[str]], np.ndarray]:
        """The sentence encoder of the baselines and ``feature_clf``."""
        return self.embed or make_encoder(self.encoders.sentence)
