"""Data provenance: every file a loader reads is recorded with its SHA-256.

A run manifest names exactly the data its numbers come from (:func:`data_sources`); loaders
of every task call :func:`register` for each file they read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_SOURCES: dict[str, dict[str, Any]] = {}


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file, read in chunks (data files can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def register(dataset: str, source: str, path: str | Path, split: str | None = None) -> None:
    path = Path(path).resolve()
    key = str(path)
    if key not in _SOURCES:
        _SOURCES[key] = {
            "dataset": dataset,
            "source": source,
            "split": split,
            "path": key,
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }


def data_sources() -> list[dict[str, Any]]:
    """Every data file read by a loader in this process, with size and SHA-256."""
    return sorted(_SOURCES.values(), key=lambda r: r["path"])




class DataError(ValueError):
    """Bad or missing input data; the message names file, split, row and column."""


def annotate(path: str | Path, **fields: Any) -> None:
    """Add what a loader found in a registered file (e.g. ``rows``, ``anomalies``) to its entry.

    The fields travel with :func:`data_sources` into each notebook's ``data_sources.json`` and
    the run manifest's ``data_sources``.
    """
    key = str(Path(path).resolve())
    if key not in _SOURCES:
        raise KeyError(f"{key}: not registered; call register() first")
    _SOURCES[key].update(fields)
