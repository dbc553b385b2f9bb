"""SAF split files: finding them (hub layout or ``{split}.{ext}``) and reading them raw.

Cells are read as written (CSV cells as text, JSONL cells as parsed) so that
:mod:`saf_utils.saf.data_checks` sees every bad value; a file problem is a
:class:`SAFDataError` naming the file."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.data.reading import clip, duplicate_names, load_json_record, read_utf8
from saf_utils.saf.data_schema import (
    _SAF_SUFFIXES,
    _SHARD,
    SAF_COLUMNS,
    SAF_OPTIONAL_COLUMNS,
    SAF_SPLITS,
    SAFDataError,
)


def _utf8(path: Path) -> str:
    return read_utf8(path, lambda msg: SAFDataError([msg]))


def _lines(text: str) -> Iterable[str]:
    """The ``\n``-separated lines of a text, one at a time (no list of them all)."""
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def _typed(cells: list[Any]) -> pd.Series:
    """A parsed JSONL column as CSV and parquet files give it, where that loses nothing:
    text columns as pandas' text dtype, floats without a missing cell as ``float64``, any
    other column (integers beyond 64 bits, mixed types) ``object``."""
    values = pd.Series(cells, dtype=object)
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind == "floating" and not values.isna().any():
        return values.astype(float)
    if kind != "string":
        return values
    import pyarrow as pa

    try:
        text = pa.array(cells, type=pa.large_string()).to_pandas()
    except (pa.ArrowException, UnicodeError):  # a NaN, a lone surrogate: checked cell by cell
        return values
    return text if isinstance(text.dtype, pd.StringDtype) else values


def _read_jsonl(path: Path) -> pd.DataFrame:
    """One object per line, every cell kept as parsed (:func:`_typed`)."""
    records: list[dict[str, Any]] = []
    for line_no, line in enumerate(_lines(_utf8(path)), 1):
        if not line.strip():
            continue
        records.append(load_json_record(line, line_no))
    names = dict.fromkeys(k for rec in records for k in rec)  # in order of first appearance
    columns = {}
    for name in names:
        columns[name] = _typed([rec.get(name) for rec in records])
    return pd.DataFrame(columns, index=range(len(records)))


def _header(path: Path) -> list[str]:
    """Column names as written in a CSV or parquet file (before pandas renames duplicates);
    a CSV file is decoded whole, so a non-UTF-8 byte anywhere is an error naming its line."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    text = _utf8(path)
    first = text.split("\n", 1)[0]
    source = first if first.count('"') % 2 == 0 else text
    return next(csv.reader(io.StringIO(source, newline="")), [])


def _read_table(path: Path) -> pd.DataFrame:
    """Read one parquet/jsonl/csv file with raw cell values, or raise naming the file."""
    if path.suffix not in _SAF_SUFFIXES:
        raise SAFDataError([f"{path}: unsupported file type (use .parquet, .jsonl or .csv)"])
    try:
        if path.suffix != ".jsonl":
            names = [c for c in _header(path) if c != "__index_level_0__"]
            twice = duplicate_names(names)
            if twice:
                raise SAFDataError([f"{path}: duplicate column name(s) {twice}; "
                                    "every column must be named once"])
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".jsonl":
            return _read_jsonl(path)
        # Every CSV cell as text (ids like "007" stay text); only empty cells are missing.
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""],
                           encoding="utf-8-sig")
    except SAFDataError:
        raise
    except Exception as exc:  # pandas/arrow raise many types; the user needs the file name
        raise SAFDataError([f"{path}: cannot be read as {path.suffix[1:]} "
                            f"({clip(str(exc), 500)})"]) from None


def _file_columns(split: str, parts: list[tuple[Path, pd.DataFrame]]) -> list[str]:
    """Every file of a split has every expected column, and the same optional ones."""
    problems = []
    for path, df in parts:
        if len(df) == 0 and len(parts) == 1:
            continue  # a 0-row split is reported as such
        missing = [c for c in SAF_COLUMNS if c not in df.columns]
        extra = [c for c in df.columns if c not in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS]
        hint = f" (unexpected column(s) {extra})" if extra else ""
        problems += [f"{path} [{split}]: missing column '{c}'{hint}" for c in missing]
    for col in SAF_OPTIONAL_COLUMNS:
        have = [p.name for p, df in parts if col in df.columns]
        if have and len(have) < len(parts):
            lack = [p.name for p, df in parts if col not in df.columns]
            problems.append(f"split '{split}': column '{col}' in {have} but not in {lack}; "
                            "the files of a split must have the same columns")
    return problems


def _shard_problems(split: str, shards: list[tuple[int, int, Path]]) -> list[str]:
    """Shards must be ``-0000k-of-0000n`` for every k < n, once each, with one n."""
    names = ", ".join(p.name for _, _, p in shards)
    totals = {n for _, n, _ in shards}
    if len(totals) > 1:
        return [f"split '{split}': shards disagree on their number ({names})"]
    n = totals.pop()
    counts = Counter(k for k, _, _ in shards)
    missing = [k for k in range(n) if k not in counts]
    twice = sorted(k for k, c in counts.items() if c > 1)
    beyond = sorted(k for k in counts if k >= n)
    problems = []
    if missing:
        problems.append(
            f"split '{split}': shard(s) {', '.join(f'{k:05d}-of-{n:05d}' for k in missing)} "
            f"missing (found {names}); a partial split is never loaded"
        )
    if twice or beyond:
        problems.append(f"split '{split}': shard numbers repeated or out of range ({names})")
    return problems


def _local_saf_files(root: Path, wanted: Sequence[str]
                     ) -> tuple[dict[str, list[Path]], list[str]]:
    """Split files in hub layout or ``{split}.{ext}``, each split from exactly one source,
    and every problem of finding them; a missing split's message names the near misses
    (``train.CSV``, ``train.json``)."""
    files: dict[str, list[Path]] = {}
    problems: list[str] = []
    missing: list[str] = []
    seen: list[Path] = []
    near_misses: dict[str, list[Path]] = defaultdict(list)
    candidates: dict[str, list[Path]] = defaultdict(list)
    shards: dict[str, list[tuple[int, int, Path]]] = defaultdict(list)
    bad_shards: dict[str, list[Path]] = defaultdict(list)
    for folder in (root / "data", root):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if not path.is_file():
                continue
            seen.append(path)
            m = _SHARD.match(path.name)
            if m and m["split"] in SAF_SPLITS:
                shards[m["split"]].append((int(m["k"]), int(m["n"]), path))
                candidates[m["split"]].append(path)
                continue
            stem, dot, rest = path.name.partition(".")
            if stem in SAF_SPLITS and dot + rest in _SAF_SUFFIXES:
                candidates[stem].append(path)
                continue
            for split in SAF_SPLITS:
                if path.name.lower().startswith(split):
                    near_misses[split].append(path)
                    if path.name.startswith(f"{split}-") and path.suffix == ".parquet":
                        bad_shards[split].append(path)
                    break
    for split in wanted:
        if bad_shards[split]:
            problems.append(
                f"split '{split}': shard name(s) not of the form {split}-0000k-of-0000n.parquet: "
                f"{', '.join(map(str, bad_shards[split]))}"
            )
            continue
        paths = candidates.get(split, [])
        if not paths:
            missing.append(split)
            continue
        singles = [p for p in paths if not _SHARD.match(p.name)]
        folders = {p.parent for p in paths}
        if len(folders) > 1 or (singles and len(paths) > 1):
            problems.append(
                f"split '{split}': {len(paths)} files ({', '.join(map(str, paths))}); "
                "keep exactly one file (or one set of shards) per split"
            )
            continue
        if not singles:
            shard_problems = _shard_problems(split, shards[split])
            if shard_problems:
                problems += shard_problems
                continue
            paths = [p for _, _, p in sorted(shards[split], key=lambda t: t[0])]
        files[split] = paths
    if missing:
        found = ", ".join(str(p.relative_to(root)) for p in seen) or "nothing"
        near = [p.name for s in missing for p in near_misses[s]]
        problems.insert(0, (
            f"{root}: no file for split(s) {missing} (every expected split must be present; "
            f"pass splits=[...] to load a subset on purpose). Read are data/{{split}}-0000k-of-"
            f"0000n.parquet shards or one {{split}}.parquet|.jsonl|.csv file. Found: {found}"
        ) + (f". Not read (wrong name or extension): {', '.join(near)}" if near else ""))
    return files, problems
