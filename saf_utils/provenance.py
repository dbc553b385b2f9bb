"""Data provenance: every file a loader reads is recorded with its SHA-256.

A run manifest names exactly the data its numbers come from (:func:`data_sources`); loaders
of every task call :func:`register` for each file they read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_SOURCES: dict[str, dict[str, Any]] = {}
_STATS: dict[str, tuple[int, ...]] = {}  # path -> stat of the file when it was hashed


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file, read in chunks (data files can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def register(dataset: str, source: str, path: str | Path, split: str | None = None) -> None:
    """Record a file a loader read, hashed once per version of the file.

    A file whose size, modification time (or inode) changed since it was hashed, e.g.
    rewritten between two loads in one process, is hashed again; its entry then describes
    the new content (what the loader just read), with the earlier hashes kept in
    ``replaced_sha256``, and the annotations of the old content dropped.
    """
    path = Path(path).resolve()
    key = str(path)
    stat = _stat_key(path)
    if key in _SOURCES and _STATS.get(key) == stat:
        return
    entry = {"dataset": dataset, "source": source, "split": split, "path": key,
             "bytes": stat[0], "sha256": sha256_file(path)}
    old = _SOURCES.get(key)
    if old is not None:
        if old["sha256"] == entry["sha256"]:
            _STATS[key] = stat  # touched, not changed: keep the entry and its annotations
            return
        entry["replaced_sha256"] = [*old.get("replaced_sha256", []), old["sha256"]]
    _SOURCES[key] = entry
    _STATS[key] = stat


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
