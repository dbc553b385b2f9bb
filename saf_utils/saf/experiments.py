"""The SAF runner: any list of registered system names (:data:`saf_utils.saf.systems.SYSTEMS`)
over every eval split, with parameters by system name (a name ending in ``:`` sets every
variant), and the choices made on train where validation cannot speak (unseen questions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.saf.all_systems import SYSTEMS
from saf_utils.saf.context import EncoderChoice, RunContext, RunState, SAFData
from saf_utils.saf.systems import unseen_cv_table
from saf_utils.saf.unseen import STACKED, UnseenChoice, choose_rule
from saf_utils.statistics import validation_choice
from saf_utils.training import peak_memory
from saf_utils.training.jobs import progress


def effective_params(system_params: Mapping[str, Mapping[str, Any]] | None = None,
                     names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """system -> the parameters it runs with (:meth:`saf_utils.registry.Registry.effective_params`)
    for ``names`` (default: every registered system)."""
    return SYSTEMS.effective_params(SYSTEMS.names() if names is None else names, system_params)


def planned_systems(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The systems notebook 02 runs with its parameters ``params``, each with the parameters
    it runs with (what ``saf-run --dry-run`` lists)."""
    return effective_params(params.get("system_params"), SYSTEMS.select(params.get("systems")))


def choose_encoders(language: str, encoder: str | None = None,
                    extra_encoders: Sequence[str] | None = None,
                    system_params: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> EncoderChoice:
    """Fill the encoders a run leaves at None from the data's language.

    ``encoder``: :func:`saf_utils.encoders.sentence.default_encoder`; ``extra_encoders``: every
    other offline encoder, so validation chooses among all of them; the cross-encoder's model:
    its parameter ``model``, else :func:`saf_utils.encoders.sentence.default_cross_encoder`.
    """
    from saf_utils.encoders.sentence import OFFLINE_ENCODERS, default_cross_encoder, default_encoder

    cross = SYSTEMS.params("cross_encoder", (system_params or {}).get("cross_encoder")).model
    defaulted = tuple(k for k, v in (("sentence", encoder), ("extras", extra_encoders),
                                     ("cross_encoder", cross)) if v is None)
    sentence = encoder or default_encoder(language)
    extras = (tuple(e for e in OFFLINE_ENCODERS if e != sentence) if extra_encoders is None
              else tuple(dict.fromkeys(e for e in extra_encoders if e != sentence)))
    return EncoderChoice(language, sentence, extras,
                         cross or default_cross_encoder(language), defaulted)


@dataclass
class SAFRun:
    """What :func:`run_systems` predicted, and what the systems left for the records."""

    preds: pd.DataFrame  # every system, split and seed (prediction table rows)
    state: RunState  # feature_clf's tuning, the cross-encoder run, logs, seconds
    unseen_cv: pd.DataFrame  # each system's unseen-question path, CV on train
    unseen_choice: validation_choice.Choice  # the system chosen for unseen questions
    params: dict[str, dict[str, Any]]  # the parameters each system ran with
    #: the unseen-question choice rule (and the plain best mean) nested over held-out
    #: training questions: what each would have lost against hindsight (:func:`choose_unseen_rule`)
    unseen_regret: pd.DataFrame | None = None
    #: the rule kept for unseen questions, its regret against the other rules
    unseen_rule: UnseenChoice | None = None

    @property
    def roles(self) -> dict[str, str]:
        """system -> role of every system in ``preds`` (variants by their entry)."""
        return {s: SYSTEMS[s].role for s in dict.fromkeys(self.preds.system)}

    @property
    def unseen_chosen(self) -> str:
        return self.unseen_choice.per_fold[None]


def run_systems(data: SAFData, names: Sequence[str], encoders: EncoderChoice,
                system_params: Mapping[str, Mapping[str, Any]] | None = None,
                seeds: Sequence[int] = (0,), output_dir: str | Path = ".",
                mode: str = "verification",
                launcher: str = "none", log: Callable[[str], None] = progress,
                embed: Callable[[Sequence[str]], Any] | None = None) -> SAFRun:
    """Run ``names`` (registration order; wall time and peak memory per system), then score
    every unseen-question path on train and choose among the inductive ones. ``embed``:
    the sentence encoder as a callable (None: ``encoders.sentence``)."""
    names = SYSTEMS.order(SYSTEMS.check(names))
    params = effective_params(system_params, names)  # every value checked before any run
    ctx = RunContext(encoders, tuple(seeds), Path(output_dir), mode, launcher, log,
                     embed=embed)
    frames = []
    for name, out, seconds in SYSTEMS.each(names, data, system_params, ctx=ctx, around=(
            lambda name: peak_memory.measure(ctx.state.peak_mb, name))):
        frames.append(out)
        for system, part in out.groupby("system", sort=False) if len(out) else ():
            ctx.state.preds[str(system)] = part
        ctx.state.seconds.setdefault(name, seconds)  # variants have set their own
    frames = [f for f in frames if len(f)]
    preds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    cv = unseen_cv_table(data, ctx)  # every unseen-question path scored on train
    rule = choose_unseen_rule(cv)
    return SAFRun(preds, ctx.state, cv, rule.choice, params, rule.regret, rule)


#: Families of systems, simplest first: the order the one-standard-error rule prefers
#: (within a family, the CV table's order).
SIMPLICITY = ("baselines", "criteria", "feature_clf", "cross_encoder", "seq2seq")
#: The pre-declared metric of the unseen-question choice: accuracy per held-out training
#: question, averaged over questions (each counts once, as a new question would).
UNSEEN_METRIC = "accuracy"


def unseen_folds(unseen_cv: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The inductive candidates' per-question CV values (``system, fold, value``; stacking's
    nested values too) and the single candidates' roles, simplest first
    (:data:`SIMPLICITY`). A path that collapsed out of fold (``collapsed``: one label for
    over :data:`saf_utils.saf.unseen.COLLAPSE_SHARE` of the training answers, as the
    majority label does) is no candidate."""
    keep = ~unseen_cv.transductive.astype(bool)
    if "collapsed" in unseen_cv:  # one label for nearly every answer out of fold
        keep &= ~unseen_cv.collapsed.fillna(False).astype(bool)
    cand = unseen_cv[keep].reset_index(drop=True)
    if "per_question" not in cand:
        raise ValueError("the unseen-question CV has no per-question values")
    rank = {f: i for i, f in enumerate(SIMPLICITY)}
    key = {s: (rank.get(SYSTEMS[s].family, len(rank)), i) for i, s in enumerate(cand.system)}
    roles = {s: r for s, r in sorted(zip(cand.system, cand.role, strict=True),
                                     key=lambda x: key[x[0]]) if s != STACKED}
    rows = [{"system": r.system, "fold": q, "value": float(v)}
            for r in cand.itertuples() if isinstance(r.per_question, dict)
            for q, v in r.per_question.items()]
    return pd.DataFrame(rows, columns=["system", "fold", "value"]), roles


def choose_unseen_rule(unseen_cv: pd.DataFrame, n_se: float = 1.0) -> UnseenChoice:
    """The grader of unseen questions: the rule of :data:`saf_utils.saf.unseen.RULES`
    (one-SE, best mean, stacking) with the lowest regret nested over held-out training
    questions, applied on :data:`UNSEEN_METRIC` (:func:`saf_utils.saf.unseen.choose_rule`)."""
    folds, roles = unseen_folds(unseen_cv)
    return choose_rule(folds, UNSEEN_METRIC, roles, n_se=n_se)
