"""Manifest pieces: git state, package versions, hardware, timestamps, JSON, safe writes."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
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


LOCK_FILE = Path("requirements") / "cpu.lock.txt"


def installed_packages() -> list[str]:
    """Every installed distribution as ``name==version`` (sorted, one per normalised name)."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        seen.setdefault(key, f"{key}=={dist.version}")
    return sorted(seen.values())


def lock_info(root: str | os.PathLike = PROJECT_ROOT) -> dict[str, Any] | None:
    """Path and SHA-256 of the lock file the environment was installed from (None if absent)."""
    path = Path(root) / LOCK_FILE
    if not path.is_file():
        return None
    return {"path": str(LOCK_FILE), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


class ReportWriteError(OSError):
    """A report file could not be written (disk full, read-only folder, ...)."""

    def __str__(self) -> str:
        return str(self.strerror)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write atomically (temporary file + rename): a failure never leaves a truncated file.

    Raises :class:`ReportWriteError` with one readable line naming the path and the reason.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise ReportWriteError(exc.errno, f"cannot write {path}: "
                               f"{exc.strerror or exc}") from None
    return path


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(to_jsonable(obj), indent=1))


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
    return datetime.now(UTC).isoformat(timespec="seconds")


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
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def pid_alive(pid: Any) -> bool:
    """Whether a process with this id still runs (a manifest's ``pid`` of a run that never
    finished): a run left ``running`` by a dead process was killed, not still going."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, TypeError, ValueError):
        return bool(pid)
    return True


def died(manifest: Mapping[str, Any]) -> bool:
    """A run still marked ``running`` whose process, on this host, is gone: it was killed
    (SIGKILL, out of memory, power loss) before it could record how it ended. A run of
    another host cannot be checked and stays ``running``."""
    import socket

    return (manifest.get("status") == "running" and manifest.get("host") == socket.gethostname()
            and not pid_alive(manifest.get("pid")))
