"""Manifest pieces: git state, package versions, hardware, timestamps, JSON, safe writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LOCK_FILE = Path("requirements") / "cpu.lock.txt"
MANIFEST_PACKAGES = (
    "saf_utils", "torch", "transformers", "datasets", "accelerate", "sentence-transformers",
    "papermill", "nbconvert", "pandas", "numpy", "scikit-learn", "bert-score", "sacrebleu",
    "rouge-score", "nltk", "pot", "rank-bm25", "matplotlib", "seaborn",
)


def git_state() -> dict[str, Any]:
    """Commit hash and dirty flag of the project checkout (None outside git)."""

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True,
                                  text=True, timeout=20, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def software() -> dict[str, Any]:
    """The manifest's ``environment`` (Python, platform, cores, GPUs), ``packages``
    (:data:`MANIFEST_PACKAGES`), ``installed`` (every distribution) and ``lock``."""
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                           "cpu_count": os.cpu_count()}
    import torch

    env["cuda"] = torch.cuda.is_available()
    env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    installed: dict[str, str] = {}
    for dist in metadata.distributions():
        if name := dist.metadata.get("Name"):
            key = re.sub(r"[-_.]+", "-", name).lower()
            installed.setdefault(key, f"{key}=={dist.version}")
    packages: dict[str, str | None] = {}
    for name in MANIFEST_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return {"environment": env, "packages": packages, "installed": sorted(installed.values()),
            "lock": lock_info()}


def lock_info() -> dict[str, Any] | None:
    """Path and SHA-256 of the lock file the environment was installed from (None if absent)."""
    path = PROJECT_ROOT / LOCK_FILE
    if not path.is_file():
        return None
    return {"path": str(LOCK_FILE), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


class ReportWriteError(OSError):
    """A report file could not be written (disk full, read-only folder, ...)."""

    def __str__(self) -> str:
        return str(self.strerror)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write atomically (a uniquely named temporary file + rename): a failure never leaves a
    truncated file, and writers of one shared page at once never collide; the last wins.
    Raises :class:`ReportWriteError` naming the path and the reason."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ReportWriteError(exc.errno, f"cannot write {path}: "
                               f"{exc.strerror or exc}") from None
    return path


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(to_jsonable(obj), indent=1))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def to_jsonable(obj: Any) -> Any:
    """numpy scalars, paths and non-finite floats as JSON values."""
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
    """Whether the process ``pid`` (a manifest's) still runs."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, TypeError, ValueError):
        return True
    return True


def died(manifest: Manifest) -> bool:
    """A run still marked ``running`` whose process, on this host, is gone: killed (SIGKILL,
    out of memory, power loss) before it could record how it ended."""
    return (manifest.status == "running" and manifest.host == socket.gethostname()
            and not pid_alive(manifest.pid))


@dataclass
class Manifest:
    """A run's ``manifest.json`` (docs/runs.md), typed; keys it does not know (a later
    version's) are kept in ``extra`` and written back unchanged."""

    run: str | None = None
    profile: str | None = None
    profile_file: str | None = None
    extends: list[str] = field(default_factory=list)
    description: str | None = None
    started: str | None = None
    invocations: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)  # every started execution
    notebooks: list[dict[str, Any]] = field(default_factory=list)  # the latest of each notebook
    # running | ok | failed (a notebook failed or was skipped) | interrupted | cluster_lost |
    # write_error (disk full, read-only folder) | error (the runner raised) | killed (found
    # later: its process is gone, no end recorded); ``status_reason`` says more (docs/runs.md)
    status: str | None = None
    status_reason: str | None = None
    finished: str | None = None
    git: dict[str, Any] | None = None
    pid: int | None = None
    host: str | None = None
    environment: dict[str, Any] | None = None
    packages: dict[str, str | None] | None = None
    installed: list[str] | None = None
    lock: dict[str, Any] | None = None
    overrides: list[str] = field(default_factory=list)
    hide_code: bool = False
    depends_on: dict[str, list[str]] = field(default_factory=dict)
    data_check: list[dict[str, Any]] = field(default_factory=list)
    records: dict[str, Any] | None = None  # counts of the records read (run_folder.write_reports)
    data_sources: list[dict[str, Any]] = field(default_factory=list)  # every data file read
    seeds: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """An existing run's manifest (older runs lack some keys: their defaults)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        out = cls(**{k: v for k, v in data.items() if k in known})
        out.extra = {k: v for k, v in data.items() if k not in known}
        if "executions" not in data:  # runs before executions were kept: the latest ones
            out.executions = list(out.notebooks)
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**out, **self.extra}
