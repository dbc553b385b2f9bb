"""The one metric-record helper every notebook uses, and the run manifest.

A notebook creates a :class:`Recorder` for its output folder and calls :meth:`Recorder.add`
for every number it reports. Records are tidy rows ``{notebook, task, dataset, split,
system, metric, value, seed, fold}`` appended to ``records.jsonl`` at once (so a notebook
that fails half-way keeps what it measured); the runner merges them into ``metrics.json``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.data import data_sources

RECORDS_FILE = "records.jsonl"
SOURCES_FILE = "data_sources.json"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class MetricRecord:
    notebook: str
    task: str
    dataset: str
    split: str
    system: str
    metric: str
    value: float
    seed: int | None = None
    fold: int | None = None


def output_dir_for(notebook: str, output_dir: str | os.PathLike | None = None) -> Path:
    """Where a notebook writes its artifacts: the runner's folder, or reports/interactive."""
    out = Path(output_dir) if output_dir else PROJECT_ROOT / "reports" / "interactive" / notebook
    out.mkdir(parents=True, exist_ok=True)
    return out


class Recorder:
    """Collects a notebook's metric records and the data files it read."""

    def __init__(self, notebook: str, output_dir: str | os.PathLike | None = None):
        self.notebook = notebook
        self.dir = output_dir_for(notebook, output_dir)
        self.path = self.dir / RECORDS_FILE
        self.records: list[MetricRecord] = []
        self.path.write_text("")  # a re-run of the notebook starts its records afresh

    def add(
        self,
        task: str,
        dataset: str,
        split: str,
        system: str,
        metric: str,
        value: float,
        seed: int | None = None,
        fold: int | None = None,
    ) -> MetricRecord:
        """Append one number; NaN/inf are refused, so a broken metric cannot hide in a table."""
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{metric} of {system} on {dataset}/{split} is {value}, not finite")
        rec = MetricRecord(self.notebook, task, dataset, split, system, metric, value,
                           None if seed is None else int(seed), None if fold is None else int(fold))
        self.records.append(rec)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(rec)) + "\n")
        self._write_sources()
        return rec

    def add_many(self, metrics: Mapping[str, float], **keys: Any) -> list[MetricRecord]:
        """Record several metrics sharing task/dataset/split/system/seed/fold."""
        return [self.add(metric=name, value=value, **keys) for name, value in metrics.items()]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(r) for r in self.records])

    def _write_sources(self) -> None:
        (self.dir / SOURCES_FILE).write_text(json.dumps(data_sources(), indent=1))

    def close(self) -> None:
        """Write the data-source list one last time (records are already on disk)."""
        self._write_sources()


def read_records(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """Read ``records.jsonl`` files, skipping none: a bad line is an error naming file and line."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: bad record ({exc})") from None
    return rows


def summarize(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Mean ± std over seeds (and folds) per notebook/task/dataset/split/system/metric.

    The std is the population std (ddof=0), as ``metrics.fold_summary`` and the official
    ArgSciChat script use, so the index and the notebooks' tables agree.
    """
    if not records:
        return pd.DataFrame(columns=["notebook", "task", "dataset", "split", "system", "metric",
                                     "mean", "std", "n"])
    df = pd.DataFrame(records)
    keys = ["notebook", "task", "dataset", "split", "system", "metric"]
    grouped = df.groupby(keys, sort=False)["value"]
    out = grouped.agg(["mean", "count"]).reset_index()
    out.insert(len(keys) + 1, "std", grouped.std(ddof=0).to_numpy())
    return out.rename(columns={"count": "n"})


# --------------------------------------------------------------------------- manifest


def git_state(root: str | os.PathLike = PROJECT_ROOT) -> dict[str, Any]:
    """Commit hash and dirty flag of the project checkout (None outside git)."""

    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                 timeout=20, check=True)
            return res.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


MANIFEST_PACKAGES = (
    "saf_utils", "torch", "transformers", "datasets", "accelerate", "sentence-transformers",
    "papermill", "nbconvert", "pandas", "numpy", "scikit-learn", "bert-score", "sacrebleu",
    "rouge-score", "nltk", "pot", "rank-bm25", "matplotlib", "seaborn",
)


def package_versions(names: Iterable[str] = MANIFEST_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import torch

        info["cuda"] = torch.cuda.is_available()
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:  # pragma: no cover - torch is a dependency
        info["cuda"] = None
    return info


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/pandas scalars and paths so that json.dump never fails on a manifest."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def sibling_dir(output_dir: str | os.PathLike | None, notebook: str) -> Path:
    """Artifact folder of another notebook of the same run (e.g. 03's predictions for 04)."""
    base = Path(output_dir).parent if output_dir else PROJECT_ROOT / "reports" / "interactive"
    return base / notebook
