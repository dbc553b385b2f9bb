"""The ArgSciChat runner: the folds' pairs capped as a notebook asks, and one function per
task that runs any list of registry names with the parameters a profile gives per system
name, returning tidy prediction rows, the val choices and seconds per system."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat.data import ArgSciChatFold, MessagePair
from saf_utils.argscichat.dialogue import pair_index
from saf_utils.argscichat.replies import EVAL_SPLITS, ReplyConfig, ReplyData, ReplyFold, seed_column
from saf_utils.argscichat.selection_fit import SelectionContext
from saf_utils.argscichat.systems import REPLY_SYSTEMS, SELECTORS
from saf_utils.registry import Registry

SystemParams = Mapping[str, Mapping[str, Any]]


def selector_groups(params: Mapping[str, Any]) -> dict[str, list[str]]:
    """Notebook 03's selectors by group (``baselines``, ``oracles``, ``systems``,
    ``ablations``): each group's parameter selects within the group, so a new selector runs
    in its group unless a profile leaves it out. ``systems`` holds the learned selectors,
    those that read earlier turns' gold facts (role ``gold_input``) among them."""
    learned = ["system", "gold_input"]
    groups = {"baselines": SELECTORS.names(["baseline"]), "oracles": SELECTORS.names(["oracle"]),
              "systems": SELECTORS.names(learned, ablation_of=None),
              "ablations": [n for n in SELECTORS.names(learned) if SELECTORS[n].ablation_of]}
    return {g: SELECTORS.select(params.get(g), within=names) for g, names in groups.items()}


def planned_selectors(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Selector -> its parameters, as notebook 03 runs them (``saf-run --dry-run``)."""
    names = [n for group in selector_groups(params).values() for n in group]
    return SELECTORS.effective_params(names, params.get("system_params"))


def planned_reply_systems(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Reply system -> its parameters, as notebook 04 runs them (``saf-run --dry-run``)."""
    return REPLY_SYSTEMS.effective_params(REPLY_SYSTEMS.select(params.get("systems")),
                                          params.get("system_params"))


def _run_each(registry: Registry, names: Sequence[str], data: Any,
              system_params: SystemParams | None, sinks: Sequence[list] = ()
              ) -> tuple[pd.DataFrame, dict[str, float], list[list[dict[str, Any]]]]:
    """Every name through :meth:`Registry.each`; the predictions, seconds per system and the
    rows each system appended to each sink; ``system_params`` may name other calls' systems."""
    params = {n: v for n, v in (system_params or {}).items() if n in set(names)}
    registry.check(system_params or {})  # an unknown name fails here
    frames, seconds = [], {}
    named: list[list[dict[str, Any]]] = [[] for _ in sinks]
    starts = [len(sink) for sink in sinks]
    for name, out, secs in registry.each(names, data, params):
        frames.append(out.assign(role=registry[name].role))
        seconds[name] = secs
        for i, (rows, sink) in enumerate(zip(named, sinks, strict=True)):
            rows += [{"fold": r["fold"], "system": name, **r} for r in sink[starts[i]:]]
            starts[i] = len(sink)
    preds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return preds, seconds, named


# --------------------------------------------------------------------------- fact selection

#: Columns of 03's prediction rows (:func:`saf_utils.data.artifacts.write_selections`).
SELECTION_COLUMNS = ("fold", "split", "pair_id", "paper_id", "system", "role", "seed",
                     "selected", "selected_sentences", "gold", "fact_f1")


def split_pairs(data: Mapping[int, ArgSciChatFold], max_rows: int | None = None
                ) -> dict[tuple[int, str], list[MessagePair]]:
    """(fold, split) -> the split's pairs, the first ``max_rows`` of each (smoke runs)."""
    return {(f, s): list(data[f][s])[:max_rows] if max_rows else list(data[f][s])
            for f in data for s in A.SPLITS}


def data_overview(pairs: Mapping[tuple[int, str], Sequence[MessagePair]]) -> pd.DataFrame:
    """Per fold and split: pairs, scored pairs, pairs skipped (no gold fact sentence), papers."""
    rows = []
    for (f, s), ps in pairs.items():
        kept, skipped = A.scored_pairs(ps)
        rows.append({"fold": f, "split": s, "pairs": len(ps), "scored": len(kept),
                     "skipped_no_gold": skipped, "papers": len({p.paper_id for p in ps})})
    return pd.DataFrame(rows)


@dataclass
class SelectionRun:
    """Tidy output of :func:`run_selectors`."""

    predictions: pd.DataFrame  # one row per fold, split, system, seed and pair
    tuning: pd.DataFrame  # fold, system, param, value, val_fact_f1, chosen
    seconds: dict[str, float]


def run_selectors(ctx: SelectionContext, systems: Iterable[str],
                  system_params: SystemParams | None = None) -> SelectionRun:
    """Run the selectors ``systems`` over every fold and split of ``ctx`` (``fact_f1`` is
    None for pairs without gold fact sentences, which the official protocol skips)."""
    preds, seconds, (tuning,) = _run_each(SELECTORS, list(systems), ctx, system_params,
                                          (ctx.tuning,))
    tuning = pd.DataFrame(tuning, columns=["fold", "system", "param", "value", "val_fact_f1",
                                           "chosen"])  # rows keep the system they name
    return SelectionRun(preds.reindex(columns=list(SELECTION_COLUMNS)), tuning.astype(
        {"fold": int, "system": str, "param": str, "value": str, "val_fact_f1": float,
         "chosen": bool}), seconds)


def combine(*runs: Any) -> Any:
    """One run from several :class:`SelectionRun` or :class:`ReplyRun` (e.g. one per family
    of systems): their frames concatenated (empty ones left out), their seconds merged."""
    def joined(name: str) -> Any:
        if name == "seconds":
            return {k: v for r in runs for k, v in r.seconds.items()}
        frames = [getattr(r, name) for r in runs]
        return pd.concat([f for f in frames if not f.empty] or frames[:1], ignore_index=True)

    return type(runs[0])(*map(joined, (f.name for f in fields(runs[0]))))


# --------------------------------------------------------------------------- reply generation

#: Columns of 04's prediction rows (:func:`saf_utils.data.artifacts.write_generations`).
REPLY_COLUMNS = ("fold", "split", "pair_id", "paper_id", "system", "role", "seed",
                 "output", "gold")


def reply_folds(data: Mapping[int, ArgSciChatFold],
                selected: Mapping[tuple[int, str, str], Sequence[int]],
                max_rows: int | None = None,
                fact_system: str | Mapping[int, str] | None = None) -> dict[int, ReplyFold]:
    """:class:`ReplyFold` per fold: the first ``max_rows`` pairs of every split (as 03 caps
    them) and 03's selections; a val/test pair without one (03 ran with other folds or
    ``max_rows``) is an error naming it."""
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
class ReplyRun:
    """What :func:`run_reply_systems` returns."""

    predictions: pd.DataFrame  # REPLY_COLUMNS
    tuning: pd.DataFrame  # fold, system, metric, subset, value, chosen (val grid points)
    logs: pd.DataFrame  # fold, system, seed, ... (chosen knobs, train loss)
    seconds: dict[str, float]


def run_reply_systems(folds: Mapping[int, ReplyFold], systems: Sequence[str],
                      config: ReplyConfig | None = None,
                      system_params: SystemParams | None = None) -> ReplyRun:
    """Run the reply systems ``systems`` (registration order) on every fold."""
    data = ReplyData(folds, config or ReplyConfig())
    names = [n for n in REPLY_SYSTEMS if n in set(REPLY_SYSTEMS.check(systems))]
    preds, secs, (tuning, logs) = _run_each(REPLY_SYSTEMS, names, data, system_params,
                                            (data.tuning, data.logs))
    preds = preds.reindex(columns=list(REPLY_COLUMNS))
    preds["seed"] = seed_column(preds.seed)
    return ReplyRun(preds, pd.DataFrame(tuning, columns=["fold", "system", "metric", "subset",
                                                         "value", "chosen"]),
                    pd.DataFrame(logs), {n: round(v, 1) for n, v in secs.items()})
