"""ArgSciChat loader: the five official folds, from a local copy or a pinned GitHub download;
malformed input is an :class:`ArgSciChatDataError` naming file, paper and pair, anomalies are
counted and warned about (docs/data.md lists every check). Every public name of
``data_schema``, ``data_facts`` and ``data_checks`` is importable from here."""

from __future__ import annotations

import csv
import io
import numbers
import os
import urllib.error
import urllib.request
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.argscichat.data_checks import check_fold, paper_leaks, read_fold_file
from saf_utils.argscichat.data_facts import ContentIndex, map_facts
from saf_utils.argscichat.data_schema import (
    ARGSCICHAT_ANOMALY_KINDS,
    ARGSCICHAT_COMMIT,
    ARGSCICHAT_FOLDER,
    ARGSCICHAT_FOLDS,
    ARGSCICHAT_REPO,
    ARGSCICHAT_REPORT_COLUMNS,
    ARGSCICHAT_SHA256,
    ARGSCICHAT_SPLITS,
    INTENT_COLUMNS,
    LEAK_OVERLAP,
    ArgSciChatDataError,
    ArgSciChatDataWarning,
    ArgSciChatFold,
    DroppedFact,
    MessagePair,
)
from saf_utils.data.provenance import annotate, register, sha256_file
from saf_utils.data.reading import (
    annotate_anomalies,
    duplicate_names,
    folder_problem,
    read_utf8,
    strict_message,
)

#: The public names (the loader's, and those of the modules it is split into).
__all__ = ["ARGSCICHAT_ANOMALY_KINDS", "ARGSCICHAT_COMMIT", "ARGSCICHAT_FOLDER",
           "ARGSCICHAT_FOLDS", "ARGSCICHAT_REPO", "ARGSCICHAT_REPORT_COLUMNS",
           "ARGSCICHAT_SHA256", "ARGSCICHAT_SPLITS", "INTENT_COLUMNS", "LEAK_OVERLAP",
           "ArgSciChatDataError", "ArgSciChatDataWarning", "ArgSciChatFold", "ContentIndex",
           "DroppedFact", "MessagePair", "download_argscichat", "load_argscichat",
           "load_intents", "map_facts"]


def _argscichat_cache_dir() -> Path:
    base = os.environ.get("SAF_UTILS_CACHE") or Path.home() / ".cache" / "saf_utils"
    return Path(base) / "argscichat" / ARGSCICHAT_COMMIT


def download_argscichat(target: str | os.PathLike | None = None) -> Path:
    """Download the five official folds at the pinned commit into a cache folder (once),
    each checked against :data:`ARGSCICHAT_SHA256`; offline, set ``ARGSCICHAT_DATA``."""
    folder = Path(target) if target else _argscichat_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"fold_{k}_{s}.json" for k in ARGSCICHAT_FOLDS for s in ARGSCICHAT_SPLITS]
    base = (f"https://raw.githubusercontent.com/{ARGSCICHAT_REPO}/{ARGSCICHAT_COMMIT}/"
            f"{ARGSCICHAT_FOLDER}/")
    for name in names:
        path = folder / name
        if not path.is_file():
            try:
                with urllib.request.urlopen(base + name, timeout=60) as resp:
                    data = resp.read()
            except (urllib.error.URLError, OSError) as exc:
                raise ArgSciChatDataError(
                    f"cannot download {base + name} ({exc}). Offline? Point ARGSCICHAT_DATA "
                    f"(or source=) to a local folder with fold_{{k}}_{{split}}.json, e.g. "
                    f"export ARGSCICHAT_DATA=../shared/data/argscichat"
                ) from None
            tmp = path.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.replace(path)
        expected = ARGSCICHAT_SHA256.get(name)
        if expected and sha256_file(path) != expected:
            path.unlink()
            raise ArgSciChatDataError(f"{path}: SHA-256 mismatch with the pinned commit; removed")
    return folder


def _argscichat_root(source: str | os.PathLike | None) -> tuple[Path, str]:
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if source:
        root = Path(source).expanduser()
        problem = folder_problem(root, "ArgSciChat folder")
        if problem:
            raise ArgSciChatDataError(problem)
        return root, str(source)
    return download_argscichat(), f"github:{ARGSCICHAT_REPO}@{ARGSCICHAT_COMMIT}"


def load_argscichat(source: str | os.PathLike | None = None, fold: int = 0, *,
                    strict: bool = False, return_report: bool = False):
    """Load one official ArgSciChat fold as lists of :class:`MessagePair`; ``source``: a
    folder with ``fold_{k}_{split}.json`` (default: ``ARGSCICHAT_DATA``, else a download)."""
    if isinstance(fold, bool) or not isinstance(fold, numbers.Integral):
        raise TypeError(f"fold must be an int, one of {ARGSCICHAT_FOLDS}; got {fold!r} "
                        f"({type(fold).__name__})")
    if int(fold) not in ARGSCICHAT_FOLDS:
        raise ArgSciChatDataError(f"unknown fold {fold}; folds are {ARGSCICHAT_FOLDS}")
    fold = int(fold)
    root, label = _argscichat_root(source)
    splits: dict[str, list[MessagePair]] = {}
    dropped: list[DroppedFact] = []
    anomalies: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    norms: dict[tuple[str, str], list[str]] = {}
    for split in ARGSCICHAT_SPLITS:
        path = root / f"fold_{fold}_{split}.json"
        splits[split], lost, found = read_fold_file(path, split, norms)
        dropped += lost
        anomalies += found
        files[split] = str(path)
    check_fold(fold, splits, files)
    anomalies += paper_leaks(fold, splits, files, norms)
    if strict and anomalies:
        raise ArgSciChatDataError(strict_message(anomalies))
    for split in ARGSCICHAT_SPLITS:
        register("argscichat", label, files[split], f"fold{fold}/{split}")
        annotate_anomalies(files[split], len(splits[split]),
                           [a for a in anomalies if a["split"] == split],
                           ARGSCICHAT_ANOMALY_KINDS)
    data = ArgSciChatFold(fold=fold, dropped_facts=dropped, files=files, anomalies=anomalies,
                          **splits)
    if anomalies:
        counts = Counter(a["kind"] for a in anomalies)
        warnings.warn(ArgSciChatDataWarning(
            f"fold {fold}: loaded with content anomalies ("
            + ", ".join(f"{n} {k}" for k, n in counts.items()) + "): "
            + "; ".join(a["message"] for a in anomalies[:3])
            + ". load_argscichat(..., return_report=True) lists them, strict=True refuses "
            "them"), stacklevel=2)
    return (data, data.anomaly_report()) if return_report else data


def load_intents(source: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """Sentence-level dialogue intents (``intents.csv``; UTF-8 with the
    :data:`INTENT_COLUMNS`); ``None`` when the file is absent from an existing folder."""
    if not (source or os.environ.get("ARGSCICHAT_DATA")):
        return None
    root, label = _argscichat_root(source)
    path = root / "intents.csv"
    if not path.is_file():
        return None
    reader = csv.reader(io.StringIO(read_utf8(path, ArgSciChatDataError), newline=""))
    numbered = [(reader.line_num, r) for r in reader]
    if not numbered:
        raise ArgSciChatDataError(f"{path}: empty file (no header row)")
    header = numbered[0][1]
    twice = duplicate_names(header)
    if twice:
        raise ArgSciChatDataError(f"{path}: duplicate column name(s) {twice}")
    missing = [c for c in INTENT_COLUMNS if c not in header]
    if missing:
        raise ArgSciChatDataError(f"{path}: missing column(s) {missing} (header: {header})")
    rows = [(n, r) for n, r in numbered[1:] if r]
    bad = [f"line {n}: {len(r)} cells for {len(header)} columns"
           for n, r in rows if len(r) != len(header)]
    bad += [f"line {n}, column {c!r}: empty" for n, r in rows if len(r) == len(header)
            for c in ("Role", "Tag") if not r[header.index(c)].strip()]
    if bad:
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise ArgSciChatDataError(f"{len(bad)} problem(s) in {path}:\n  - "
                                  + "\n  - ".join(bad[:20]) + more)
    register("argscichat", label, path, "intents")
    df = pd.DataFrame([r for _, r in rows], columns=header)
    annotate(path, rows=len(df))
    return df
