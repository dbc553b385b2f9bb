"""The files notebooks hand to each other (docs/architecture.md): names, writers and typed
readers. A reader that finds a file missing names the folder's notebook as the one to run
first. Per-item files are gzip-compressed JSON lines written with ``mtime=0`` (the same rows,
the same bytes); values keep their JSON types, except ``id`` / ``item`` (strings) and
``seed`` / ``fold`` (ints or None)."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

RECORDS_FILE = "records.jsonl"
ITEMS_FILE = "items.jsonl.gz"
SAF_PREDICTIONS_FILE = "predictions_{split}.jsonl.gz"
SELECTIONS_FILE = "predictions.jsonl.gz"
CHOSEN_FILE = "chosen.json"
GENERATIONS_FILE = "generations.jsonl.gz"


# --------------------------------------------------------------------------- JSON lines

def _lines(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> bytes:
    if isinstance(rows, pd.DataFrame):
        text = rows.to_json(orient="records", lines=True, force_ascii=False) if len(rows) else ""
    else:
        text = "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows)
    return text.encode("utf-8")


def _encoded(path: Path, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0) if path.suffix == ".gz" and data else data


def write_jsonl(rows: pd.DataFrame | Iterable[Mapping[str, Any]], path: str | os.PathLike
                ) -> Path:
    """Rows (a frame or dicts) as UTF-8 JSON lines, gzip-compressed where ``path`` ends in
    ``.gz``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_encoded(path, _lines(rows)))
    return path


def append_jsonl(rows: pd.DataFrame | Iterable[Mapping[str, Any]], path: str | os.PathLike
                 ) -> Path:
    """Rows appended to a JSON-lines file (``.gz``: one more gzip member, which every gzip
    reader reads as the continuation of the file)."""
    path = Path(path)
    with open(path, "ab") as fh:
        fh.write(_encoded(path, _lines(rows)))
    return path


class ArtifactError(ValueError):
    """A damaged artifact (truncated gzip, not UTF-8, not JSON lines); the message names the
    file and what is wrong with it, in one line."""


def read_text(path: str | os.PathLike) -> str:
    """A JSON-lines file's text, decompressed where its name ends in ``.gz``; a damaged file
    raises :class:`ArtifactError` naming it."""
    path = Path(path)
    data = path.read_bytes()
    try:
        data = gzip.decompress(data) if path.suffix == ".gz" and data else data
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ArtifactError(f"{path}: a damaged gzip file (truncated or not gzip: "
                            f"{exc or type(exc).__name__})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _older_layout(path: Path) -> Path:
    """``path``, or the uncompressed file runs made before per-item files were compressed
    (``items.jsonl`` for ``items.jsonl.gz``) where only that one is there."""
    old = path.with_suffix("") if path.suffix == ".gz" else path
    return old if not path.is_file() and old.is_file() else path


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for col in ("id", "item"):
        if col in df:
            df[col] = df[col].astype(str)
    for col in ("seed", "fold"):
        if col in df:
            df[col] = pd.Series([None if pd.isna(x) else int(x) for x in df[col]],
                                dtype=object, index=df.index)
    return df


def read_jsonl(path: str | os.PathLike, producer: str | None = None) -> pd.DataFrame:
    """A JSON-lines artifact as a typed frame; a missing file raises FileNotFoundError naming
    ``producer``, the notebook that writes it (default: the folder's name)."""
    path = _older_layout(Path(path))
    producer = producer or path.parent.name
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run notebook {producer} first (same run / "
                                f"output folder), e.g. python -m notebook_reports --profile cpu "
                                f"--only {producer}")
    text = read_text(path)
    if not text.strip():
        return pd.DataFrame()
    try:
        return _typed(pd.read_json(io.StringIO(text), lines=True, dtype=False))
    except ValueError:
        n = next((n for n, line in enumerate(text.splitlines(), 1) if line.strip()
                  and not isinstance(_json_or_none(line), dict)), "?")
        raise ArtifactError(f"{path}:{n}: not a JSON object per line") from None


def _json_or_none(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


# --------------------------------------------------------------------------- records, items

def record_rows(paths: Iterable[str | os.PathLike],
                skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``records.jsonl`` files (missing ones skipped); a bad line raises a
    ValueError naming file and line, or is appended to ``skipped``."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"a JSON {type(row).__name__}, not an object")
                missing = [k for k in ("task", "system", "metric", "value") if k not in row]
                if missing:
                    raise ValueError(f"missing {missing}")
                if not isinstance(row["value"], (int, float)) or not math.isfinite(row["value"]):
                    raise ValueError(f"value {row['value']!r} is not a finite number")
            except ValueError as exc:  # JSONDecodeError is a ValueError
                msg = f"{path}:{n}: bad record ({exc})"
                if skipped is None:
                    raise ValueError(msg) from None
                skipped.append(msg)
                continue
            rows.append(row)
    return rows


def read_records(folder: str | os.PathLike, producer: str | None = None) -> pd.DataFrame:
    """One notebook's ``records.jsonl`` as a typed frame (every record field a column)."""
    path = Path(folder) / RECORDS_FILE
    read_jsonl(path, producer)  # the missing-file message
    return _typed(pd.DataFrame(record_rows([path])))


def read_items(folder: str | os.PathLike, producer: str | None = None) -> pd.DataFrame:
    """One notebook's per-item scores (``items.jsonl.gz``)."""
    return read_jsonl(Path(folder) / ITEMS_FILE, producer)


def chosen(records: pd.DataFrame, task: str | None = None, subset: str = "chosen"
           ) -> dict[int | None, str]:
    """fold (None: fold-less) -> system of the tuning records marked ``subset`` (``"chosen"``:
    the val-chosen system); the last record of a fold wins."""
    if records.empty or not {"kind", "subset", "fold"} <= set(records.columns):
        return {}
    r = records[(records.kind == "tuning") & (records.subset == subset)]
    if task is not None:
        r = r[r.task == task]
    return {f: str(s) for f, s in zip(r.fold, r.system, strict=True)}


# --------------------------------------------------------------------------- 02: SAF predictions

def write_saf_predictions(preds: pd.DataFrame, folder: str | os.PathLike) -> list[Path]:
    """One ``predictions_<split>.jsonl.gz`` per split (every system and seed) in ``folder``."""
    return [write_jsonl(p, Path(folder) / SAF_PREDICTIONS_FILE.format(split=split))
            for split, p in preds.groupby("split", sort=False)]


def read_saf_predictions(folder: str | os.PathLike) -> pd.DataFrame:
    """Every split's SAF prediction table of 02, stacked (``pred_label`` stays text)."""
    pattern = SAF_PREDICTIONS_FILE.format(split="*")
    files = sorted(Path(folder).glob(pattern)) or sorted(  # or the older uncompressed layout
        Path(folder).glob(pattern.removesuffix(".gz")))
    if not files:
        read_jsonl(Path(folder) / SAF_PREDICTIONS_FILE.format(split="<split>"))
    frames = [read_jsonl(f) for f in files]
    out = pd.concat(frames, ignore_index=True)
    if "pred_label" in out:
        out["pred_label"] = out.pred_label.astype(object)
    return out


# --------------------------------------------------------------------------- 03: selections

def write_selections(rows: pd.DataFrame | Iterable[Mapping[str, Any]],
                     folder: str | os.PathLike) -> Path:
    """03's selection rows (one per fold, split, system, seed and pair)."""
    return write_jsonl(rows, Path(folder) / SELECTIONS_FILE)


def read_selections(folder: str | os.PathLike, system: str | None = None) -> pd.DataFrame:
    """03's selections (optionally of one system)."""
    path = Path(folder) / SELECTIONS_FILE
    df = read_jsonl(path)
    if system is not None:
        if system not in set(df.system):
            raise ValueError(f"{path}: no predictions of system {system!r}; "
                             f"available: {sorted(set(df.system))}")
        df = df[df.system == system].reset_index(drop=True)
    return df


def write_chosen(folder: str | os.PathLike, choice: Mapping[str, Any]) -> Path:
    """03's per-fold val choices (``{"per_fold": {fold: system}, ...}``)."""
    if not choice.get("per_fold"):
        raise ValueError("write_chosen: need a non-empty 'per_fold' entry {fold: system}")
    path = Path(folder) / CHOSEN_FILE
    path.write_text(json.dumps(dict(choice), indent=1, default=float))
    return path


def read_chosen(folder: str | os.PathLike, folds: Sequence[int], task: str | None = None,
                fallback: str | None = None) -> dict[int, str]:
    """fold -> the system a notebook chose on that fold's val: from ``chosen.json`` (a fold
    missing there is an error), else the records marked ``chosen``, else ``fallback``."""
    path = Path(folder) / CHOSEN_FILE
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    per_fold = {int(k): str(v) for k, v in (saved.get("per_fold") or {}).items()}
    source = per_fold or (chosen(read_records(folder), task)
                          if (Path(folder) / RECORDS_FILE).is_file() else {})
    missing = [int(f) for f in folds if int(f) not in source]
    if per_fold and missing:
        raise ValueError(f"{CHOSEN_FILE}: no chosen system for fold(s) {missing}")
    if missing and fallback is None:
        raise ValueError(f"{folder}: no val-chosen system for fold {missing[0]}; name one with "
                         "the `selector` parameter")
    return {int(f): source.get(int(f), fallback) for f in folds}


# --------------------------------------------------------------------------- 04: replies

def write_generations(preds: pd.DataFrame, folder: str | os.PathLike) -> Path:
    """04's reply rows."""
    return write_jsonl(preds, Path(folder) / GENERATIONS_FILE)


def read_generations(folder: str | os.PathLike) -> pd.DataFrame:
    """04's reply rows (fold, split, pair_id, paper_id, system, role, seed, output, gold)."""
    return read_jsonl(Path(folder) / GENERATIONS_FILE)
