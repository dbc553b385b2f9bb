"""The jobs layer: one training job (``"seq2seq"`` or ``"cross_encoder"``), task-agnostic, in
the kernel or under a launcher (``none``, ``processes:N``, ``torchrun:N``, ``accelerate[:N]``);
the job kinds, files and launchers: docs/distributed-training.md."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from saf_utils import determinism
from saf_utils.data.artifacts import read_text, write_jsonl
from saf_utils.text import listing
from saf_utils.training import launchers
from saf_utils.training.cross_encoder import CrossEncoderSettings, train_and_predict
from saf_utils.training.seq2seq import Seq2SeqSettings, dist_rank_world, generate, train_seq2seq
from saf_utils.training.settings_checks import check_fields

#: A job's progress lines, logged at INFO rather than printed: they stay off the page (a
#: job's numbers are in its ``train_log.json``).
progress: Callable[[str], None] = logging.getLogger(__name__).info

CONFIG_FILE = "job.json"
#: gzip-compressed, as the run's other per-item files (:mod:`saf_utils.data.artifacts`).
EXAMPLES_FILE = "examples.jsonl.gz"
OUTPUT_FILE = "predictions.jsonl.gz"
LOG_FILE = "train_log.json"
MODEL_DIR = "model"
OUTPUT_FIELDS = ("task", "system", "seed", "fold", "split", "id", "source", "output",
                 "target")
#: Extra output fields of cross-encoder jobs (class probabilities, epoch of the model).
CROSS_ENCODER_FIELDS = ("pair", "probs", "epoch")
TRAIN_SPLIT = "train"
#: The settings dataclass of each job kind.
KINDS = {"seq2seq": Seq2SeqSettings, "cross_encoder": CrossEncoderSettings}


class TrainJobError(RuntimeError):
    """A launched job failed; the message carries the failing rank's exception."""


@dataclass
class TrainJob:
    """One training run: examples file, settings of the job's kind, seed (over
    ``settings["seed"]``) and folder; ``task``, ``system`` and ``fold`` label the rows."""

    examples: str  # JSON lines written by write_examples
    output_dir: str
    settings: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    task: str = ""
    system: str = "seq2seq"
    fold: int | None = None
    save_model: bool = True
    kind: str = "seq2seq"  # seq2seq | cross_encoder

    def __post_init__(self) -> None:  # every field and setting, before a launcher starts
        check_fields(self, f"job {str(self.system)[:80]!r}")
        self.kind_settings()

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> TrainJob:
        """A job from a config dict; unknown keys are an error (typos must not pass)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown job field(s) {unknown}; known: {sorted(known)}")
        return cls(**config)

    @classmethod
    def load(cls, path: str | os.PathLike) -> TrainJob:
        """A job from a JSON file (what :func:`run_job` writes: YAML 1.1 would read ``5e-05``
        as a string) or a YAML file (by hand)."""
        import yaml

        try:
            with open(path, encoding="utf-8") as fh:
                # by hand: a value YAML reads as text is named by kind_settings
                config = json.load(fh) if str(path).endswith(".json") else yaml.safe_load(fh)
        except (OSError, ValueError, yaml.YAMLError) as exc:  # one line, naming the file
            raise ValueError(f"{path}: not a readable job config ({' '.join(str(exc).split())})"
                             ) from None
        if not isinstance(config, dict):
            raise ValueError(f"{path}: a job config must be a mapping")
        return cls.from_dict(config)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def kind_settings(self) -> Any:
        """The settings object of the job's kind with the job's seed, every value checked,
        ints of float fields cast to float."""
        from saf_utils.registry import make_params

        if self.kind not in KINDS:
            raise ValueError(f"job kind {self.kind!r}: use one of {tuple(KINDS)}")
        cls = KINDS[self.kind]
        values = dict(self.settings)
        if self.seed is not None:
            values["seed"] = self.seed
        where = f"{cls.__name__} of job {self.system!r}"
        settings = make_params(cls, values, where)
        check_fields(settings, where)
        floats = {f.name: float(getattr(settings, f.name)) for f in dataclasses.fields(cls)
                  if isinstance(f.default, float) and isinstance(getattr(settings, f.name), int)}
        return dataclasses.replace(settings, **floats)


@dataclass
class Examples:
    """Model inputs of one split, in the split's order."""

    ids: list[Any]
    sources: list[str]
    targets: list[str]
    pairs: list[str] | None = None  # second text of each pair (cross-encoder jobs)


@dataclass
class JobResult:
    """What a finished job left in its folder: prediction rows and the training log."""

    predictions: pd.DataFrame
    log: dict[str, Any]
    output_dir: Path


class RunResults(NamedTuple):
    """All jobs of :func:`run_jobs`: predictions (tidy rows) and one log row per job."""

    predictions: pd.DataFrame
    logs: pd.DataFrame


# --------------------------------------------------------------------------- examples


def write_examples(path: str | os.PathLike, train: Examples,
                   evals: Mapping[str, Examples]) -> Path:
    """Write a task's examples as JSON lines ``{split, id, source, target}``: the training
    rows (split ``train``) first, then each evaluation split in order."""
    if TRAIN_SPLIT in evals:
        raise ValueError(f"evaluation splits may not be named {TRAIN_SPLIT!r}")
    rows = []
    for split, ex in {TRAIN_SPLIT: train, **evals}.items():
        pairs = ex.pairs if ex.pairs is not None else [None] * len(ex.ids)
        for i, s, t, p in zip(ex.ids, ex.sources, ex.targets, pairs, strict=True):
            row = {"split": split, "id": i, "source": s, "target": t}
            if ex.pairs is not None:
                row["pair"] = p
            rows.append(row)
    return write_jsonl(rows, path)


def read_examples(path: str | os.PathLike) -> tuple[Examples, dict[str, Examples]]:
    """Training examples and the evaluation splits' examples of :func:`write_examples`."""
    splits: dict[str, Examples] = {}
    try:
        text = read_text(path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the examples file ({exc.strerror or exc})"
                         ) from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}:{n}: not a JSON line") from None
        if not isinstance(row, dict) or not {"split", "id", "source", "target"} <= set(row):
            raise ValueError(f"{path}:{n}: an example is an object with split, id, source "
                             "and target")
        ex = splits.setdefault(str(row["split"]), Examples(
            [], [], [], [] if "pair" in row else None))
        if (ex.pairs is not None) != ("pair" in row):
            raise ValueError(f"{path}:{n}: 'pair' given on some rows of split "
                             f"{row['split']!r} only")
        ex.ids.append(row["id"])
        ex.sources.append(row["source"])
        ex.targets.append(row["target"])
        if ex.pairs is not None:
            ex.pairs.append(row["pair"])
    train = splits.pop(TRAIN_SPLIT, None)
    if train is None or not train.sources:
        raise ValueError(f"{path}: no training examples")
    return train, splits


def _in_folder(job: TrainJob, name: str) -> Path:
    """``<output_dir>/<system>/[fold<f>-]<name>`` (the system's name made a folder name)."""
    system = "".join(c if c.isalnum() or c in "-_." else "_" for c in job.system)
    fold = f"fold{job.fold}-" if job.fold is not None else ""
    return Path(job.output_dir) / system / f"{fold}{name}"


def with_examples(base: TrainJob | dict[str, Any], train: Examples,
                  evals: Mapping[str, Examples]) -> TrainJob:
    """``base`` reading examples written once to
    ``<output_dir>/<system>/[fold<f>-]examples.jsonl.gz`` (shared by its seeds)."""
    job = base if isinstance(base, TrainJob) else TrainJob.from_dict(base)
    path = write_examples(_in_folder(job, EXAMPLES_FILE), train, evals)
    return dataclasses.replace(job, examples=str(path))


# --------------------------------------------------------------------------- one process

def train_job(job: TrainJob, log: Callable[[str], None] = progress) -> JobResult:
    """Train, predict and (on rank 0) write the job's files; the in-process path, with
    fixed kernels before torch's first operation and fixed training threads."""
    determinism.pin_kernels()
    with determinism.training_threads():
        return _train_job(job, log)


def _train_job(job: TrainJob, log: Callable[[str], None]) -> JobResult:
    rank, world = dist_rank_world()
    out = Path(job.output_dir)
    settings = job.kind_settings()
    train, evals = read_examples(job.examples)
    cross = job.kind == "cross_encoder"
    if cross and (train.pairs is None or any(e.pairs is None for e in evals.values())):
        raise ValueError(f"{job.examples}: cross-encoder examples need a 'pair' per row")
    if rank == 0:
        log(f"[train] {job.task} {job.system} seed {settings.seed}: {len(train.sources)} "
            f"training pairs, eval {listing({s: len(e.sources) for s, e in evals.items()})}, "
            f"{world} process(es)")
    model_dir = str(out / MODEL_DIR) if job.save_model else None
    head = {"task": job.task, "system": job.system, "seed": settings.seed, "fold": job.fold}
    if cross:  # every epoch's predictions with predict_every_epoch
        by_epoch, summary = train_and_predict(
            train.sources, train.pairs, train.targets,
            {s: (e.sources, e.pairs) for s, e in evals.items()}, settings, model_dir)
        rows = [{**head, "split": split, "id": i, "source": s, "output": o, "target": t,
                 "pair": p, "probs": pr, "epoch": epoch}
                for epoch, splits in sorted(by_epoch.items())
                for split, (outputs, probs) in splits.items()
                for i, s, p, t, o, pr in zip(evals[split].ids, evals[split].sources,
                                             evals[split].pairs, evals[split].targets,
                                             outputs, probs, strict=True)]
    else:  # exactly train_seq2seq + generate per split, as a notebook's direct calls
        model, tokenizer, summary = train_seq2seq(train.sources, train.targets, settings,
                                                  output_dir=model_dir)
        rows = []
        for split, ex in evals.items():
            outputs = generate(model, tokenizer, ex.sources, settings,
                               desc=f"{job.system} {split}", distributed=world > 1)
            rows += [{**head, "split": split, "id": i, "source": s, "output": o, "target": t}
                     for i, s, o, t in zip(ex.ids, ex.sources, outputs, ex.targets,
                                           strict=True)]
    history = summary.pop("log_history", [])
    record = {"job": job.to_dict(), "summary": summary, "log_history": history}
    if rank == 0:
        write_jsonl(rows, out / OUTPUT_FILE)
        (out / LOG_FILE).write_text(json.dumps(record, indent=1, ensure_ascii=False))
        memory = f", peak RSS {summary['peak_rss_mb']} MiB" if "peak_rss_mb" in summary else ""
        log(f"[train] train loss {summary['train_loss']:.4f} after {summary['train_steps']} "
            f"steps, {summary['train_seconds']} s{memory}; {len(rows)} predictions written "
            f"to {out / OUTPUT_FILE}")
    return JobResult(_output_frame(rows), record, out)


def _output_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    extra = [k for k in CROSS_ENCODER_FIELDS if rows and k in rows[0]]
    return pd.DataFrame(rows, columns=[*OUTPUT_FIELDS, *extra])


def load_result(output_dir: str | os.PathLike) -> JobResult:
    """Read a finished job's predictions and log back (ids keep their JSON types)."""
    out = Path(output_dir)
    rows = [json.loads(line) for line in read_text(out / OUTPUT_FILE).splitlines()
            if line.strip()]
    record = json.loads((out / LOG_FILE).read_text(encoding="utf-8"))
    return JobResult(_output_frame(rows), record, out)


def run_job(config: dict[str, Any] | TrainJob, launcher: str = "none",
            log: Callable[[str], None] = progress) -> JobResult:
    """Run one job in the kernel (``"none"``) or under a launcher (a subprocess streaming to
    ``log`` and ``launcher.log``; a failure raises :class:`TrainJobError`); its results."""
    job = config if isinstance(config, TrainJob) else TrainJob.from_dict(config)
    out = Path(job.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("rank*.error"), out / OUTPUT_FILE, out / LOG_FILE]:
        stale.unlink(missing_ok=True)  # never read an earlier run's files as this run's
    if launcher == "none" or launchers.processes(launcher):  # one job: in the kernel
        with determinism.training_threads():  # the same model whatever the machine's threads
            return train_job(job, log)
    cfg = out / CONFIG_FILE
    cfg.write_text(json.dumps(job.to_dict(), indent=1, ensure_ascii=False))
    read_examples(job.examples)  # a bad file: one line here, not a traceback in each rank
    launchers.launch(launcher, cfg, log, TrainJobError)
    return load_result(out)


def job_grid(base: dict[str, Any] | TrainJob, seeds: Sequence[int]) -> list[TrainJob]:
    """One job per seed, each in ``<output_dir>/<system>/[fold<f>-]seed<s>``."""
    job = base if isinstance(base, TrainJob) else TrainJob.from_dict(base)
    return [dataclasses.replace(job, seed=seed, output_dir=str(_in_folder(job, f"seed{seed}")))
            for seed in seeds]


def run_jobs(jobs: Sequence[dict[str, Any] | TrainJob], launcher: str = "none",
             log: Callable[[str], None] = progress) -> RunResults:
    """Run jobs one after the other (``"processes:N"``: N at a time in forked processes, the
    same outputs); all prediction rows and one log row per job, in job order."""
    jobs = [TrainJob.from_dict(j) if isinstance(j, dict) else j for j in jobs]
    n = launchers.processes(launcher)  # N jobs at a time in the kernel, or one under a launcher
    seconds = launchers.run_forked(jobs, n or 1, run_job, TrainJobError, log,
                                   launcher="none" if n else launcher)
    done = [(load_result(j.output_dir), s) for j, s in zip(jobs, seconds, strict=True)]
    preds, logs = [], []
    for result, seconds_total in done:
        summary = {k: v for k, v in result.log["summary"].items()
                   if k not in ("settings", "labels")}
        job_d = result.log["job"]
        settings = result.log["summary"]["settings"]
        logs.append({"system": job_d["system"], "seed": settings["seed"],
                     "fold": job_d["fold"], "model": settings.get("model"),
                     **summary, "seconds_total": round(seconds_total, 1),
                     "output_dir": str(result.output_dir)})
        preds.append(result.predictions)
    predictions = (pd.concat(preds, ignore_index=True) if preds
                   else pd.DataFrame(columns=list(OUTPUT_FIELDS)))
    return RunResults(predictions, pd.DataFrame(logs))
