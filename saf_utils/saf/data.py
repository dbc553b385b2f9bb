"""SAF loader and validation: the hub dataset, a hub-layout folder, or split files; problems
are one :class:`SAFDataError` naming file, split, row, id and column, anomalies are counted
and warned about (docs/data.md lists every check). Every public name of ``data_schema``,
``data_files`` and ``data_checks`` is importable from here."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.data.provenance import register
from saf_utils.data.reading import annotate_anomalies, folder_problem
from saf_utils.saf.data_checks import (
    _check_split,
    _cross_split_problems,
    _extra_columns,
    _id_type_problems,
    _leak_anomalies,
    _report,
    _Split,
    validate_saf_frame,
)
from saf_utils.saf.data_files import (
    _file_columns,
    _local_saf_files,
    _read_table,
)
from saf_utils.saf.data_schema import (
    REPORT_COLUMNS,
    SAF_ANOMALY_KINDS,
    SAF_COLUMNS,
    SAF_HUB_ID,
    SAF_LABELS,
    SAF_OPTIONAL_COLUMNS,
    SAF_SPLITS,
    SAF_TEST_SPLITS,
    SAFDataError,
    SAFDataWarning,
)

#: The public names (the loader's, and those of the modules it is split into).
__all__ = ["REPORT_COLUMNS", "SAF_ANOMALY_KINDS", "SAF_COLUMNS", "SAF_HUB_ID", "SAF_LABELS",
           "SAF_OPTIONAL_COLUMNS", "SAF_SPLITS", "SAF_TEST_SPLITS", "SAFDataError",
           "SAFDataWarning", "load_saf", "looks_like_path", "saf_dataset_name",
           "validate_saf_frame"]


def saf_dataset_name(source: str | os.PathLike | None = None) -> str:
    """Short name of a SAF source for result tables: folder or hub dataset name."""
    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    return Path(source.rstrip("/")).name


def looks_like_path(source: str) -> bool:
    """A hub id is ``org/name``; anything else (``./x``, ``/x``, ``~/x``, ``a/b/c``) is a path."""
    return source.startswith(("/", ".", "~")) or source.count("/") != 1 or "\\" in source


# --------------------------------------------------------------------------- loader


def _annotate_sources(registered: dict[str, list[tuple[str, str]]],
                      frames: dict[str, pd.DataFrame], checked: dict[str, _Split]) -> None:
    """Rows and anomaly counts per registered file (``registered``: split -> (row label,
    path) pairs); hub cache files carry the split's counts on its first file."""
    for split, files in registered.items():
        anomalies, labels = checked[split].anomalies, frames[split]["_file"]
        for j, (label, path) in enumerate(files):
            if not path or (label.startswith("hub:") and j > 0):
                continue  # hub cache files: the split's counts go on the first one
            annotate_anomalies(path, int((labels == label).sum()),
                               [a for a in anomalies if a["file"] == label], SAF_ANOMALY_KINDS)


@dataclass
class _Read:
    """The splits as read: frames, registered files and extra-column anomalies per split."""

    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    registered: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))


def _wanted_splits(splits: Iterable[str] | None, source: str) -> list[str]:
    wanted = list(dict.fromkeys(splits)) if splits is not None else list(SAF_SPLITS)
    unknown = [s for s in wanted if s not in SAF_SPLITS]
    if unknown or not wanted:
        what = f"unknown split(s) {unknown}" if unknown else "no split asked for"
        raise SAFDataError([f"{what}; known: {list(SAF_SPLITS)}"], source)
    return wanted


def _read_local(root: Path, source: str, wanted: list[str]) -> _Read:
    """The split files of a local folder, every problem of finding or reading them at once."""
    files, problems = _local_saf_files(root, wanted)
    if problems:
        raise SAFDataError(problems, source)
    read, read_problems = _Read(), []
    for split in wanted:
        parts = []
        for p in files[split]:
            try:
                parts.append((p, _read_table(p)))
            except SAFDataError as exc:
                read_problems += exc.problems
        read_problems += _file_columns(split, parts)
        for p, df in parts:
            read.extra[split] += _extra_columns(split, str(p), df)
        if parts:
            read.frames[split] = pd.concat(
                [df.assign(_file=str(p), _row=range(1, len(df) + 1)) for p, df in parts],
                ignore_index=True)
    if read_problems:
        raise SAFDataError(read_problems, source)
    for split in wanted:
        for p in files[split]:
            register("saf", source, p, split)
        read.registered[split] = [(str(p), str(p)) for p in files[split]]
    return read


def _read_hub(source: str, root: Path, wanted: list[str]) -> _Read:
    """The splits of a Hugging Face hub dataset (or an error saying how to work offline)."""
    import datasets

    try:
        hub = datasets.load_dataset(source)
    except Exception as exc:
        raise SAFDataError(
            [
                f"cannot load '{source}' from the Hugging Face hub ({type(exc).__name__}: "
                f"{str(exc)[:300]}); no folder {root.resolve()} either. Offline? Point "
                f"SAF_DATA (or source=) to a local copy, "
                f"e.g. export SAF_DATA=../shared/data/saf_micro_job_german"
            ],
            source,
        ) from None
    missing = [s for s in wanted if s not in hub]
    if missing:
        raise SAFDataError([f"hub dataset has no split(s) {missing} (it has "
                            f"{list(hub)})"], source)
    read = _Read()
    for split in wanted:
        df = hub[split].to_pandas()
        read.extra[split] += _extra_columns(split, f"hub:{source}", df)
        read.frames[split] = df.assign(_file=f"hub:{source}", _row=range(1, len(df) + 1))
        for cache in hub[split].cache_files:
            register("saf", source, cache["filename"], split)
        read.registered[split] = [(f"hub:{source}", c["filename"])
                                  for c in hub[split].cache_files] or [(f"hub:{source}", "")]
    return read


def _checked(read: _Read, source: str, strict: bool) -> dict[str, _Split]:
    """Every split checked; all problems (and, when ``strict``, anomalies) raised at once."""
    checked = {split: _check_split(df, split, [label for label, _ in read.registered[split]])
               for split, df in read.frames.items()}
    for split, found in read.extra.items():
        checked[split].anomalies[:0] = found
    problems = [p for c in checked.values() for p in c.problems]
    problems += _id_type_problems(checked)
    if not problems:  # leakage compares clean texts only
        _leak_anomalies(checked)
    if strict:
        problems += [a["message"] + (" (anomaly; strict=True)" if a["kind"] == "extra_column"
                                     else " (content anomaly; strict=True)")
                     for c in checked.values() for a in c.anomalies]
    problems += _cross_split_problems(checked)
    if problems:
        raise SAFDataError(problems, source)
    return checked


def load_saf(source: str | os.PathLike | None = None, splits: Iterable[str] | None = None,
             *, strict: bool = False, return_report: bool = False):
    """Load and validate the SAF dataset as a ``datasets.DatasetDict``.

    ``source``: a hub id (default :data:`SAF_HUB_ID` or ``SAF_DATA``) or a local folder.
    ``splits=None`` requires all of :data:`SAF_SPLITS`. Anomalies are problems when
    ``strict``; ``return_report=True`` also returns the :data:`REPORT_COLUMNS` frame."""
    import datasets

    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    wanted = _wanted_splits(splits, source)
    root = Path(source).expanduser()
    if root.is_file():
        raise SAFDataError([folder_problem(root, "SAF data source", source)], source)
    if root.exists():
        read = _read_local(root, source, wanted)
    elif looks_like_path(source):
        raise SAFDataError([f"{source}: folder does not exist ({root.resolve()}, from the "
                            f"working directory {Path.cwd()})"], source)
    else:
        read = _read_hub(source, root, wanted)
    checked = _checked(read, source, strict)
    report = _report(checked)
    report.attrs["source"] = source
    _annotate_sources(read.registered, read.frames, checked)
    if report["count"].sum():
        counts = report[report["count"] > 0]
        summary = "; ".join(f"{r.split}: {r.count} {r.kind}" for r in counts.itertuples())
        warnings.warn(SAFDataWarning(
            f"{source}: loaded with content anomalies ({summary}); "
            "load_saf(..., return_report=True) lists them, strict=True refuses them"),
            stacklevel=2)
    ds = datasets.DatasetDict({s: _to_dataset(c.frame) for s, c in checked.items()})
    return (ds, report) if return_report else ds


def _to_dataset(frame: pd.DataFrame):
    """A ``datasets.Dataset`` from the checked columns, fingerprinted by a BLAKE2 digest of
    its Arrow buffers (``datasets`` pickles the table, doubling a large split's peak memory)."""
    import datasets
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = [pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
              for f in table.schema]
    table = table.cast(pa.schema(fields))
    digest = hashlib.blake2b(str(table.schema).encode(), digest_size=8)
    for column in table.columns:
        for chunk in column.chunks:
            for buf in chunk.buffers():
                if buf is not None:
                    digest.update(memoryview(buf))
    return datasets.Dataset(table, fingerprint=digest.hexdigest())
