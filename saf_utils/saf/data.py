"""SAF loader and validation: the hub dataset, a hub-layout folder, or split files.

:func:`load_saf` reads a hub id (``SAF_DATA`` overrides the legal-set default), a local
hub-layout folder ``data/{split}-0000k-of-0000n.parquet`` or ``{split}.jsonl|.csv|.parquet``
files, and validates every row (column-wise: a 100k-row split in seconds, see
benchmarks/loader_bench.py and docs/data.md). Two kinds of findings:

- **Problems** (structural; always an error): a missing expected split, an incomplete or
  ambiguous set of split files, a data path that is a file, an unreadable or non-UTF-8 file,
  a split with 0 rows, a file (shard) without an expected column, a duplicate column name or
  JSON key, an empty or duplicate id (ids are compared by
  :func:`saf_utils.text.identity_key`: two ids equal only once normalised name both rows),
  an integer id beyond 64 bits, ids of mixed types, a label that is missing or not one of
  :data:`SAF_LABELS`, a score that is not a number in [0, 1], a missing or blank
  ``question`` / ``reference_answer`` / ``answer_feedback`` (blank:
  :func:`saf_utils.text.is_blank`), a text cell that is not a string (a number, a list,
  bytes). All problems are raised together as one :class:`SAFDataError`, each naming file,
  split, row, id and column, with any value shown as a prefix and its size
  (:func:`saf_utils.loading.show`).
- **Anomalies** (content that real releases contain; :data:`SAF_ANOMALY_KINDS`): a blank
  student answer (``empty_answer``; graded, e.g. as an empty submission), a label that
  disagrees with the score (``label_score_mismatch``; Correct <=> 1, Incorrect <=> 0,
  Partially correct strictly between), and **leakage by content** (text normalised with
  :func:`saf_utils.text.squash`, whatever the ids): a test answer to the same question as a
  train answer (``leak_answer_in_train``), a ``test_unseen_questions`` question also in
  train or validation (``leak_question_seen``); and a column that is not a SAF column
  (``extra_column``, one per file and column, its name as the id: not loaded, but never
  dropped silently). They are loaded as they are (a missing
  answer becomes ``""``), counted per split and kind (``return_report=True``), written into
  the data-source entries of the run manifest (:func:`saf_utils.provenance.annotate`:
  ``rows``, ``anomalies`` and ``anomaly_ids`` per file), and announced with a
  :class:`SAFDataWarning`. ``strict=True`` makes them problems.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
import os
import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.loading import (
    DuplicateKey,
    clash_message,
    clip,
    describe,
    folder_problem,
    id_clashes,
    id_key,
    id_keys,
    is_int64,
    load_json_text,
    read_utf8,
    show,
    show_id,
)
from saf_utils.provenance import DataError, annotate, register
from saf_utils.text import is_blank, squash


class SAFDataError(DataError):
    """One or more problems in a SAF dataset, all reported together."""

    def __init__(self, problems: Sequence[str], source: str = "", limit: int = 20):
        self.problems = list(problems)
        head = "\n  - ".join(self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n  ... and {more} more problem(s)" if more > 0 else ""
        where = f" in {source}" if source else ""
        super().__init__(f"{len(self.problems)} problem(s){where}:\n  - {head}{tail}")


class SAFDataWarning(UserWarning):
    """A SAF dataset loaded with content anomalies (counted, see ``return_report``)."""


SAF_HUB_ID = "Short-Answer-Feedback/saf_legal_domain_german"
SAF_SPLITS = ("train", "validation", "test_unseen_answers", "test_unseen_questions")
SAF_LABELS = ("Correct", "Partially correct", "Incorrect")
SAF_COLUMNS = (
    "id",
    "question",
    "reference_answer",
    "provided_answer",
    "answer_feedback",
    "verification_feedback",
    "score",
)
SAF_OPTIONAL_COLUMNS = ("error_class",)
#: Content anomalies that are loaded and counted (``strict=True``: problems).
SAF_ANOMALY_KINDS = ("empty_answer", "label_score_mismatch", "leak_answer_in_train",
                     "leak_question_seen", "extra_column")
#: Test splits checked for answers also in train; and the split whose questions must be unseen.
SAF_TEST_SPLITS = ("test_unseen_answers", "test_unseen_questions")
#: Columns of the anomaly report (one row per loaded split and kind, zero counts included).
REPORT_COLUMNS = ("split", "kind", "count", "ids", "rows", "files")
_SAF_SUFFIXES = (".parquet", ".jsonl", ".csv")
_SHARD = re.compile(r"^(?P<split>\w+?)-(?P<k>\d+)-of-(?P<n>\d+)(?:-[0-9a-f]+)?\.parquet$")
_REQUIRED_TEXT = ("question", "reference_answer", "answer_feedback")


def saf_dataset_name(source: str | os.PathLike | None = None) -> str:
    """Short name of a SAF source for result tables: folder or hub dataset name."""
    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    return Path(source.rstrip("/")).name


def looks_like_path(source: str) -> bool:
    """A hub id is ``org/name``; anything else (``./x``, ``/x``, ``~/x``, ``a/b/c``) is a path."""
    return source.startswith(("/", ".", "~")) or source.count("/") != 1 or "\\" in source


# --------------------------------------------------------------------------- files


def _isna(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


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
    """A parsed JSONL column as CSV and parquet files give it, where that loses nothing.

    Strings (and missing cells) become pandas' text dtype (pandas >= 3; through Arrow, the
    fastest route) and floats ``float64`` (when none is missing: a missing score is shown as
    ``None``), so that the column-wise checks apply; any other column (integers, which may
    exceed 64 bits, mixed types) stays ``object``. The values are the same either way.
    """
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
    """One object per line; every cell kept as parsed (object columns: no int64 overflow).

    Plain text and float columns get the dtypes that CSV and parquet files give them
    (:func:`_typed`).
    """
    records: list[dict[str, Any]] = []
    for line_no, line in enumerate(_lines(_utf8(path)), 1):
        if not line.strip():
            continue
        try:
            rec = load_json_text(line)
        except DuplicateKey as exc:
            raise ValueError(f"line {line_no}: duplicate key(s) {exc.args[0]} in one JSON "
                             "object") from None
        except ValueError as exc:  # JSONDecodeError, or an integer of > 4300 digits
            raise ValueError(f"line {line_no}: not valid JSON ({clip(str(exc))})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"line {line_no}: a JSON {type(rec).__name__}, not an object")
        records.append(rec)
    names = dict.fromkeys(k for rec in records for k in rec)  # in order of first appearance
    columns = {}
    for name in names:
        columns[name] = _typed([rec.get(name) for rec in records])
    return pd.DataFrame(columns, index=range(len(records)))


def _header(path: Path) -> list[str]:
    """Column names as written in a CSV or parquet file (before pandas renames duplicates).

    A CSV file is decoded whole (a non-UTF-8 byte anywhere is an error naming its line); its
    header is parsed from the first line (or the first record, if that line opens a quote).
    """
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
            twice = sorted({c for c in names if names.count(c) > 1})
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


def _extra_columns(split: str, file: str, df: pd.DataFrame) -> list[dict[str, Any]]:
    """``extra_column`` anomalies: columns of one file that are not SAF columns (not loaded).

    One per file and column; ``id`` is the column name (``row`` None), the message says how
    many non-missing cells are not loaded.
    """
    out = []
    for col in df.columns:
        if col in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS or col in ("_file", "_row"):
            continue
        filled = int(df[col].notna().sum())
        out.append({"kind": "extra_column", "id": str(col), "row": None, "file": file,
                    "message": f"{file} [{split}]: column {show(str(col))} is not a SAF column "
                               f"(known: {list(SAF_COLUMNS + SAF_OPTIONAL_COLUMNS)}); not "
                               f"loaded ({filled} of {len(df)} cells filled)"})
    return out


@dataclass
class _SplitFiles:
    files: dict[str, list[Path]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    near_misses: dict[str, list[Path]] = field(default_factory=dict)
    seen: list[Path] = field(default_factory=list)


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


def _local_saf_files(root: Path, wanted: Sequence[str]) -> _SplitFiles:
    """Split files in hub layout (``data/{split}-0000k-of-0000n.parquet``) or ``{split}.{ext}``.

    Each split must come from exactly one source: one file, or one complete set of shards.
    Names that look like a split but are not read (``train.CSV``, ``train.json``) are kept as
    near misses so that a missing-split error can name them.
    """
    out = _SplitFiles()
    candidates: dict[str, list[Path]] = defaultdict(list)
    shards: dict[str, list[tuple[int, int, Path]]] = defaultdict(list)
    bad_shards: dict[str, list[Path]] = defaultdict(list)
    for folder in (root / "data", root):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if not path.is_file():
                continue
            out.seen.append(path)
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
                    out.near_misses.setdefault(split, []).append(path)
                    if path.name.startswith(f"{split}-") and path.suffix == ".parquet":
                        bad_shards[split].append(path)
                    break
    for split in wanted:
        if bad_shards[split]:
            out.problems.append(
                f"split '{split}': shard name(s) not of the form {split}-0000k-of-0000n.parquet: "
                f"{', '.join(map(str, bad_shards[split]))}"
            )
            continue
        paths = candidates.get(split, [])
        if not paths:
            continue
        singles = [p for p in paths if not _SHARD.match(p.name)]
        folders = {p.parent for p in paths}
        if len(folders) > 1 or (singles and len(paths) > 1):
            out.problems.append(
                f"split '{split}': {len(paths)} files ({', '.join(map(str, paths))}); "
                "keep exactly one file (or one set of shards) per split"
            )
            continue
        if not singles:
            problems = _shard_problems(split, shards[split])
            if problems:
                out.problems += problems
                continue
            paths = [p for _, _, p in sorted(shards[split], key=lambda t: t[0])]
        out.files[split] = paths
    return out


def _missing_split_message(root: Path, missing: list[str], found: _SplitFiles) -> str:
    seen = ", ".join(str(p.relative_to(root)) for p in found.seen) or "nothing"
    msg = (
        f"{root}: no file for split(s) {missing} (every expected split must be present; "
        f"pass splits=[...] to load a subset on purpose). Read are data/{{split}}-0000k-of-"
        f"0000n.parquet shards or one {{split}}.parquet|.jsonl|.csv file. Found: {seen}"
    )
    near = [p.name for s in missing for p in found.near_misses.get(s, [])]
    if near:
        msg += f". Not read (wrong name or extension): {', '.join(near)}"
    return msg


# --------------------------------------------------------------------------- validation


@dataclass
class _Checked:
    """One split after validation: its kept columns, problems, and counted anomalies.

    ``frame`` holds the kept columns (blank answers as ``""``, ``score`` as float); ``ids``,
    ``files`` and ``rows`` give each row's id, file and 1-based row number in that file.
    """

    frame: pd.DataFrame
    ids: list[Any]
    keys: list[Any]  # the ids' identity (saf_utils.loading.id_key)
    files: np.ndarray
    rows: np.ndarray
    problems: list[str]
    anomalies: list[dict[str, Any]]  # {kind, id, row, file, message}

    def __len__(self) -> int:
        return len(self.ids)


def _where(file: str, split: str, row: int, rid: Any) -> str:
    return f"{file} [{split}] row {row} (id={show_id(rid)})"


def _number(value: Any) -> float | None:
    """A score cell as a float (text too, as CSV gives it); ``None`` when it is no number."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float) or type(value).__module__ == "numpy":
        try:
            return float(value)
        except OverflowError:  # an integer beyond the float range: certainly outside [0, 1]
            return math.inf if value > 0 else -math.inf
        except (TypeError, ValueError):
            return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _is_text(s: pd.Series) -> bool:
    """A column whose every present cell is a string (pandas ``str`` dtype)."""
    return isinstance(s.dtype, pd.StringDtype)


def _suspects(s: pd.Series) -> np.ndarray:
    """Positions of cells that may not be visibly non-blank strings (looked at one by one).

    A string that starts with a letter or digit is not blank; every other cell (missing,
    not a string, starting with a space, a mark or an invisible character) is a suspect.
    """
    if _is_text(s):
        ok = s.str.slice(0, 1).str.isalnum().fillna(False).to_numpy(dtype=bool)
        return np.flatnonzero(~ok)
    return np.array([i for i, v in enumerate(s.tolist())
                     if not (isinstance(v, str) and v[:1].isalnum())], dtype=int)


def _text_problem(value: Any, col: str) -> str | None:
    if _isna(value):
        return "missing label" if col == "verification_feedback" else "missing value"
    if not isinstance(value, str):
        return f"{show(value)} is a {type(value).__name__}, not a string"
    if is_blank(value):
        return "empty (blank) text"
    return None


def _scores(s: pd.Series) -> np.ndarray:
    """The score column as floats (NaN where a cell is no number; booleans are none)."""
    if pd.api.types.is_bool_dtype(s):
        return np.full(len(s), np.nan)
    if pd.api.types.is_numeric_dtype(s):
        return s.to_numpy(dtype=float, na_value=np.nan)
    if _is_text(s):
        return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.array([np.nan if (x := _number(v)) is None else x for v in s.tolist()],
                    dtype=float)


def _check_split(df: pd.DataFrame, split: str, files: Sequence[str]) -> _Checked:
    """Validate one split read from ``files``; ``df`` carries ``_file`` and ``_row`` (1-based).

    Column-wise: whole columns are tested at once, cells are looked at one by one only where
    a column is not plain text or a cell is a suspect, and messages are made only for rows
    with a problem (a 100k-row split loads in seconds: benchmarks/loader_bench.py).
    """
    where_split = f"{', '.join(files)} [{split}]"
    empty = _Checked(pd.DataFrame(), [], [], np.array([]), np.array([]), [], [])
    if len(df) == 0:
        return dataclasses.replace(empty, problems=[f"{where_split}: split has 0 rows"])
    missing = [c for c in SAF_COLUMNS if c not in df.columns]
    if missing:
        return dataclasses.replace(
            empty, problems=[f"{where_split}: missing column '{c}'" for c in missing])
    keep = [c for c in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS if c in df.columns]
    frame = df[keep].reset_index(drop=True)
    file_of = df["_file"].astype(str).to_numpy()
    row_of = df["_row"].to_numpy()
    ids = [None if _isna(v) else v for v in frame["id"].tolist()]
    keys = id_keys(frame["id"])
    problems: list[tuple[int, str]] = []  # (row position, message): sorted into file order
    anomalies: list[tuple[int, dict[str, Any]]] = []

    def at(i: int) -> str:
        return _where(file_of[i], split, int(row_of[i]), ids[i])

    columns = {c: frame[c] for c in keep}

    def cells(col: str, positions: np.ndarray) -> list[tuple[int, Any]]:
        """(position, value) of a few cells of a column."""
        return list(zip(positions.tolist(), columns[col].iloc[positions].tolist(), strict=True))

    good_id = []
    for i, rid in enumerate(ids):
        if rid is None or keys[i] == "":
            problems.append((i, f"{at(i)}, column 'id': empty id"))
        elif isinstance(rid, bool) or not isinstance(rid, str | int):
            problems.append((i, f"{at(i)}, column 'id': {describe(rid)} is not a string or "
                                "integer"))
        elif isinstance(rid, int) and not is_int64(rid):
            problems.append((i, f"{at(i)}, column 'id': integer {show(rid)} beyond the 64-bit "
                                "range; write such ids as strings"))
        else:
            good_id.append(i)
    for j, first, exact in id_clashes([ids[i] for i in good_id], [keys[i] for i in good_id]):
        i, f = good_id[j], good_id[first]
        what = "duplicate id" if exact else clash_message(ids[i], ids[f])
        where = "" if file_of[f] == file_of[i] else f" of {file_of[f]}"
        problems.append((i, f"{at(i)}, column 'id': {what} (first in row {row_of[f]}{where})"))
    for col in _REQUIRED_TEXT + ("verification_feedback",):
        for i, value in cells(col, _suspects(columns[col])):
            what = _text_problem(value, col)
            if what:
                problems.append((i, f"{at(i)}, column '{col}': {what}"))
    if "error_class" in frame and not _is_text(frame["error_class"]):
        for i, value in enumerate(frame["error_class"].tolist()):
            if not _isna(value) and not isinstance(value, str):
                problems.append((i, f"{at(i)}, column 'error_class': {describe(value)} is not "
                                    "a string"))
    blank = []
    for i, answer in cells("provided_answer", _suspects(columns["provided_answer"])):
        if not _isna(answer) and not isinstance(answer, str):
            problems.append((i, f"{at(i)}, column 'provided_answer': {show(answer)} is a "
                                f"{type(answer).__name__}, not a string"))
        elif _isna(answer) or is_blank(answer):
            anomalies.append((i, {"kind": "empty_answer", "id": ids[i], "row": int(row_of[i]),
                                  "file": file_of[i],
                                  "message": f"{at(i)}, column 'provided_answer': empty answer"}))
            if _isna(answer):
                blank.append(i)
    if blank:  # a missing answer is loaded as ""
        answers = frame["provided_answer"].astype(object)
        answers.iloc[blank] = ""
        frame["provided_answer"] = answers
    scores = _scores(frame["score"])
    for i, raw in cells("score", np.flatnonzero(np.isnan(scores))):
        problems.append((i, f"{at(i)}, column 'score': not a number ({show(raw)})"))
    outside = ~np.isnan(scores) & ((scores < 0) | (scores > 1))
    for i, raw in cells("score", np.flatnonzero(outside)):
        shown = show(raw if np.isinf(scores[i]) else float(scores[i]))
        problems.append((i, f"{at(i)}, column 'score': {shown} outside [0, 1]"))
    labels = frame["verification_feedback"]
    known = labels.isin(SAF_LABELS).to_numpy(dtype=bool)
    for i in np.flatnonzero(~known):
        label = labels.iat[i]
        if isinstance(label, str):
            problems.append((i, f"{at(i)}, column 'verification_feedback': {show(label)} not "
                                f"one of {list(SAF_LABELS)}"))
    expected = np.where(scores == 1, "Correct",
                        np.where(scores == 0, "Incorrect", "Partially correct"))
    valid = known & ~np.isnan(scores) & ~outside
    for i in np.flatnonzero(valid & (labels.to_numpy(dtype=object) != expected)):
        anomalies.append((i, {
            "kind": "label_score_mismatch", "id": ids[i], "row": int(row_of[i]),
            "file": file_of[i],
            "message": f"{at(i)}, column 'verification_feedback': label {labels.iat[i]!r} "
                       f"inconsistent with score {float(scores[i])} "
                       f"(expected {expected[i]!r})"}))
    frame["score"] = scores
    problems.sort(key=lambda t: t[0])  # stable: within a row, in column order
    anomalies.sort(key=lambda t: t[0])
    return _Checked(frame, ids, keys, file_of, row_of, [m for _, m in problems],
                    [a for _, a in anomalies])


def _id_type_problems(checked: dict[str, _Checked]) -> list[str]:
    """Ids must share one type (all strings or all integers) across the loaded splits."""
    types = Counter()
    for c in checked.values():
        types.update(map(type, c.ids))
    kinds = {"str": types[str], "int": types[int]}
    if not (kinds["str"] and kinds["int"]):
        return []
    main = "str" if kinds["str"] >= kinds["int"] else "int"
    other = int if main == "str" else str
    problems = []
    for split, c in checked.items():
        for i, rid in enumerate(c.ids):
            if type(rid) is other:
                at = _where(c.files[i], split, int(c.rows[i]), repr(rid))
                problems.append(
                    f"{at}, column 'id': {type(rid).__name__} id among {main} ids "
                    f"({kinds[main]} of them); write every id as a {main}"
                )
    return problems


def _cross_split_problems(checked: dict[str, _Checked]) -> list[str]:
    """An id (once normalised) belongs to one split only; both places are named."""
    sets = [set(c.keys) - {None} for c in checked.values()]
    shared = set().union(*(a & b for n, a in enumerate(sets) for b in sets[n + 1:]))
    if not shared:
        return []
    places = [(split, i) for split, c in checked.items() for i, k in enumerate(c.keys)
              if k in shared]
    ids = [checked[s].ids[i] for s, i in places]
    problems, reported = [], set()
    for j, first, exact in id_clashes(ids, [checked[s].keys[i] for s, i in places]):
        (s, i), (fs, fi) = places[j], places[first]
        if s == fs or (fs, s, id_key(ids[j])) in reported:
            continue  # within a split: reported by _check_split
        reported.add((fs, s, id_key(ids[j])))
        a, b = checked[s], checked[fs]
        both = f"({b.files[fi]} row {b.rows[fi]}; {a.files[i]} row {a.rows[i]})"
        if exact:
            problems.append(f"id {show_id(ids[j])} appears in splits {fs!r} and {s!r} {both}")
        else:
            problems.append(f"splits {fs!r} and {s!r}: {clash_message(ids[j], ids[first])} "
                            f"{both}")
    return problems


class _Codes:
    """Integer codes of normalised texts (:func:`squash`), shared by every split.

    Each distinct cell value is normalised once; a missing or empty key is ``-1``.
    """

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, s: pd.Series) -> np.ndarray:
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        ukeys = [squash(u) if isinstance(u, str) else "" for u in uniques]
        table = np.array([self.vocab.setdefault(k, len(self.vocab)) if k else -1
                          for k in ukeys] + [-1], dtype=np.int64)
        return table[codes]  # the sentinel -1 picks the final -1


def _first_places(codes: np.ndarray, split: str, c: _Checked) -> dict[int, str]:
    """Code -> where it first occurs in a split (only for codes >= 0)."""
    uniq, first = np.unique(codes, return_index=True)
    return {int(k): _where(c.files[i], split, int(c.rows[i]), c.ids[i])
            for k, i in zip(uniq, first, strict=True) if k >= 0}


def _leak_anomalies(checked: dict[str, _Checked]) -> None:
    """Add leakage by normalised content to the test splits' anomalies (ids may differ).

    ``leak_answer_in_train``: a test answer (not blank) to the same question as a train
    answer with the same text. ``leak_question_seen``: a ``test_unseen_questions`` question
    also asked in train or validation. Texts are compared by :func:`squash`, on integer
    codes (one per distinct text).
    """
    code = _Codes()
    questions = {s: code(c.frame["question"]) for s, c in checked.items()}
    tests = [s for s in SAF_TEST_SPLITS if s in checked]
    if "train" in checked and tests:
        answers = {s: code(checked[s].frame["provided_answer"]) for s in ["train", *tests]}
        width = np.int64(len(code.vocab) + 1)

        def pairs(s: str) -> np.ndarray:
            q, a = questions[s], answers[s]
            return np.where((q >= 0) & (a >= 0), q * width + a, -1)

        train = pairs("train")
        where = None
        for split in tests:
            c, both = checked[split], pairs(split)
            hits = np.flatnonzero((both >= 0) & np.isin(both, train))
            if len(hits) and where is None:
                where = _first_places(train, "train", checked["train"])
            for i in hits:
                checked[split].anomalies.append({
                    "kind": "leak_answer_in_train", "id": c.ids[i], "row": int(c.rows[i]),
                    "file": c.files[i],
                    "message": f"{_where(c.files[i], split, int(c.rows[i]), c.ids[i])}, column "
                               f"'provided_answer': same answer to the same question as "
                               f"{where[int(both[i])]} (normalised text)"})
    seen_in = [s for s in ("train", "validation") if s in checked]
    split = "test_unseen_questions"
    if split in checked and seen_in:
        c, q = checked[split], questions[split]
        seen = np.concatenate([questions[s] for s in seen_in])
        hits = np.flatnonzero((q >= 0) & np.isin(q, seen))
        if len(hits):
            where: dict[int, str] = {}
            for s in reversed(seen_in):  # the first split wins
                where.update(_first_places(questions[s], s, checked[s]))
        for i in hits:
            c.anomalies.append({
                "kind": "leak_question_seen", "id": c.ids[i], "row": int(c.rows[i]),
                "file": c.files[i],
                "message": f"{_where(c.files[i], split, int(c.rows[i]), c.ids[i])}, column "
                           f"'question': question also asked in {where[int(q[i])]} "
                           "(normalised text)"})


def validate_saf_frame(df: pd.DataFrame, split: str, file: str, strict: bool = True
                       ) -> list[str]:
    """All problems of one split as messages (anomalies included when ``strict``).

    Rows are numbered from 1 in file order; each message names file, split, row, id, column.
    """
    extra = _extra_columns(split, file, df)
    df = df.reset_index(drop=True).assign(_file=file, _row=range(1, len(df) + 1))
    checked = _check_split(df, split, [file])
    checked.anomalies[:0] = extra
    return checked.problems + ([a["message"] for a in checked.anomalies] if strict else [])


def _report(checked: dict[str, _Checked]) -> pd.DataFrame:
    out = []
    for split, c in checked.items():
        for kind in SAF_ANOMALY_KINDS:
            hits = [a for a in c.anomalies if a["kind"] == kind]
            out.append({"split": split, "kind": kind, "count": len(hits),
                        "ids": [a["id"] for a in hits], "rows": [a["row"] for a in hits],
                        "files": sorted({Path(a["file"]).name for a in hits})})
    return pd.DataFrame(out, columns=list(REPORT_COLUMNS))


def _annotate_sources(registered: dict[str, list[tuple[str, str]]],
                      frames: dict[str, pd.DataFrame], checked: dict[str, _Checked]) -> None:
    """Rows and anomaly counts per registered file, for the run manifest's data sources.

    ``registered`` maps a split to (row label, registered path) pairs. Local files carry
    their own rows' counts; hub cache files (rows not attributable to one file) carry the
    split's counts on its first file.
    """
    for split, files in registered.items():
        anomalies, labels = checked[split].anomalies, frames[split]["_file"]
        for j, (label, path) in enumerate(files):
            if not path or (label.startswith("hub:") and j > 0):
                continue  # hub cache files: the split's counts go on the first one
            mine = [a for a in anomalies if a["file"] == label]
            ids = {k: [a["id"] for a in mine if a["kind"] == k] for k in SAF_ANOMALY_KINDS}
            annotate(path, rows=int((labels == label).sum()),
                     anomalies={k: len(v) for k, v in ids.items()},
                     anomaly_ids={k: v for k, v in ids.items() if v})


# --------------------------------------------------------------------------- loader


def load_saf(source: str | os.PathLike | None = None, splits: Iterable[str] | None = None,
             *, strict: bool = False, return_report: bool = False):
    """Load and validate the SAF dataset as a ``datasets.DatasetDict``.

    ``source`` is a hub id (default :data:`SAF_HUB_ID`, overridden by the ``SAF_DATA``
    environment variable), a local folder in hub layout (``data/{split}-0000k-of-0000n
    .parquet``) or a folder of ``{split}.jsonl|.csv|.parquet`` files (one per split).
    ``splits=None`` requires all of :data:`SAF_SPLITS`; a list loads that subset on purpose
    (each one still required). ``error_class`` is kept when present. All problems are raised
    together as one :class:`SAFDataError`; content anomalies (:data:`SAF_ANOMALY_KINDS`) are
    loaded and counted, or problems when ``strict``. ``return_report=True`` returns
    ``(datasets, report)``, the report a frame of :data:`REPORT_COLUMNS` with one row per
    split and kind (``count`` 0 included; ``ids``/``rows`` name the rows).
    """
    import datasets

    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    wanted = list(dict.fromkeys(splits)) if splits is not None else list(SAF_SPLITS)
    unknown = [s for s in wanted if s not in SAF_SPLITS]
    if unknown or not wanted:
        what = f"unknown split(s) {unknown}" if unknown else "no split asked for"
        raise SAFDataError([f"{what}; known: {list(SAF_SPLITS)}"], source)

    frames: dict[str, pd.DataFrame] = {}
    registered: dict[str, list[tuple[str, str]]] = {}
    extra: dict[str, list[dict[str, Any]]] = defaultdict(list)  # extra_column, per split
    root = Path(source).expanduser()
    if root.is_file():
        raise SAFDataError([folder_problem(root, "SAF data source", source)], source)
    if root.exists():
        found = _local_saf_files(root, wanted)
        missing = [s for s in wanted if s not in found.files and not any(
            f"split '{s}'" in p for p in found.problems)]
        problems = list(found.problems)
        if missing:
            problems.insert(0, _missing_split_message(root, missing, found))
        if problems:
            raise SAFDataError(problems, source)
        read_problems = []
        for split in wanted:
            parts = []
            for p in found.files[split]:
                try:
                    parts.append((p, _read_table(p)))
                except SAFDataError as exc:
                    read_problems += exc.problems
            read_problems += _file_columns(split, parts)
            for p, df in parts:
                extra[split] += _extra_columns(split, str(p), df)
            if parts:
                frames[split] = pd.concat(
                    [df.assign(_file=str(p), _row=range(1, len(df) + 1)) for p, df in parts],
                    ignore_index=True)
        if read_problems:
            raise SAFDataError(read_problems, source)
        for split in wanted:
            for p in found.files[split]:
                register("saf", source, p, split)
            registered[split] = [(str(p), str(p)) for p in found.files[split]]
    elif looks_like_path(source):
        raise SAFDataError([f"{source}: folder does not exist ({root.resolve()}, from the "
                            f"working directory {Path.cwd()})"], source)
    else:
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
        for split in wanted:
            df = hub[split].to_pandas()
            extra[split] += _extra_columns(split, f"hub:{source}", df)
            frames[split] = df.assign(_file=f"hub:{source}", _row=range(1, len(df) + 1))
            for cache in hub[split].cache_files:
                register("saf", source, cache["filename"], split)
            registered[split] = [(f"hub:{source}", c["filename"])
                                 for c in hub[split].cache_files] or [(f"hub:{source}", "")]

    checked = {split: _check_split(df, split, [label for label, _ in registered[split]])
               for split, df in frames.items()}
    for split, found in extra.items():
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

    report = _report(checked)
    report.attrs["source"] = source
    _annotate_sources(registered, frames, checked)
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
    """A ``datasets.Dataset`` straight from the checked columns (Arrow ``string`` text).

    The fingerprint is a BLAKE2 digest of the table's Arrow buffers: ``datasets``' default
    pickles the whole table to hash it, which doubles the peak memory of a large split.
    """
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
