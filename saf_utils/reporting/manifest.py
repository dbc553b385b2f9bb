"""Manifest pieces: git state, package versions, hardware, timestamps, JSON conversion."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
