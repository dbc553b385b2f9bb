"""SAF loader and validation: the hub dataset, a hub-layout folder, or split files.

:func:`load_saf` reads a hub id (``SAF_DATA`` overrides the legal-set default), a local
hub-layout folder ``data/{split}-0000k-of-0000n.parquet`` or ``{split}.jsonl|.csv|.parquet``
files, and validates every row. Two kinds of findings:

- **Problems** (structural; always an error): a missing expected split, an incomplete or
  ambiguous set of split files, an unreadable or non-UTF-8 file, a split with 0 rows, a file
  (shard) without an expected column, a duplicate column name or JSON key, an empty or
  duplicate id, ids of mixed types, a label that is missing or not one of
  :data:`SAF_LABELS`, a score that is not a number in [0, 1], a missing or blank
  ``question`` / ``reference_answer`` / ``answer_feedback``, a non-string text cell. All
  problems are raised together as one :class:`SAFDataError`, each naming file, split, row,
  id and column.
- **Anomalies** (content that real releases contain; :data:`SAF_ANOMALY_KINDS`): a blank
  student answer (``empty_answer``; graded, e.g. as an empty submission), a label that
  disagrees with the score (``label_score_mismatch``; Correct <=> 1, Incorrect <=> 0,
  Partially correct strictly between), and **leakage by content** (text normalised with
  :func:`saf_utils.text.squash`, whatever the ids): a test answer to the same question as a
  train answer (``leak_answer_in_train``), a ``test_unseen_questions`` question also in
  train or validation (``leak_question_seen``). They are loaded as they are (a missing
  answer becomes ``""``), counted per split and kind (``return_report=True``), written into
  the data-source entries of the run manifest (:func:`saf_utils.provenance.annotate`:
  ``rows``, ``anomalies`` and ``anomaly_ids`` per file), and announced with a
  :class:`SAFDataWarning`. ``strict=True`` makes them problems.
"""

from __future__ import annotations

import csv
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

import pandas as pd

from saf_utils.loading import (
    DuplicateKey,
    clash_message,
    describe,
    folder_problem,
    id_clashes,
    id_key,
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
                     "leak_question_seen")
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


def _read_jsonl(path: Path) -> pd.DataFrame:
    """One object per line; every cell kept as parsed (object columns: no int64 overflow)."""
    records = []
    for line_no, line in enumerate(_utf8(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = load_json_text(line)
        except DuplicateKey as exc:
            raise ValueError(f"line {line_no}: duplicate key(s) {exc.args[0]} in one JSON "
                             "object") from None
        except ValueError as exc:  # JSONDecodeError, or an integer of > 4300 digits
            raise ValueError(f"line {line_no}: not valid JSON ({show(str(exc), 200)})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"line {line_no}: a JSON {type(rec).__name__}, not an object")
        records.append(rec)
    columns = list(dict.fromkeys(k for rec in records for k in rec))
    return pd.DataFrame({c: pd.Series([rec.get(c) for rec in records], dtype=object)
                         for c in columns}, index=range(len(records)))


def _header(path: Path) -> list[str]:
    """Column names as written in a CSV or parquet file (before pandas renames duplicates)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    return next(csv.reader(io.StringIO(_utf8(path), newline="")), [])


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
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except SAFDataError:
        raise
    except Exception as exc:  # pandas/arrow raise many types; the user needs the file name
        raise SAFDataError([f"{path}: cannot be read as {path.suffix[1:]} ({exc})"]) from None


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
    """One split after validation: clean columns, problems, and counted anomalies.

    ``columns`` maps each kept column to its values in file order; ``files`` and ``rows``
    give each row's file and 1-based row number in it.
    """

    columns: dict[str, list[Any]]
    files: list[str]
    rows: list[int]
    problems: list[str]
    anomalies: list[dict[str, Any]]  # {kind, id, row, file, message}

    def __len__(self) -> int:
        return len(self.rows)


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


def _keys(values: list[Any], key) -> list[Any]:
    """``key`` of each string value (``None`` otherwise), computed once per distinct value."""
    cache: dict[str, Any] = {}
    out = []
    for v in values:
        if isinstance(v, str):
            k = cache.get(v)
            if k is None:
                k = cache[v] = key(v)
            out.append(k)
        else:
            out.append(None)
    return out


def _text_problem(value: Any, col: str) -> str | None:
    if value is None:
        return "missing label" if col == "verification_feedback" else "missing value"
    if not isinstance(value, str):
        return f"{show(value)} is a {type(value).__name__}, not a string"
    if is_blank(value):
        return "empty (blank) text"
    return None


def _check_split(df: pd.DataFrame, split: str, files: Sequence[str]) -> _Checked:
    """Validate one split read from ``files``; ``df`` carries ``_file`` and ``_row`` (1-based).

    Column-wise: every cell is looked at once (text keys once per distinct value), and a
    message is made only for the rows that have a problem.
    """
    where_split = f"{', '.join(files)} [{split}]"
    if len(df) == 0:
        return _Checked({}, [], [], [f"{where_split}: split has 0 rows"], [])
    missing = [c for c in SAF_COLUMNS if c not in df.columns]
    if missing:
        return _Checked({}, [], [], [f"{where_split}: missing column '{c}'" for c in missing],
                        [])
    keep = [c for c in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS if c in df.columns]
    cells: dict[str, list[Any]] = {}
    for c in keep:
        values = df[c].tolist()
        na = df[c].isna().to_numpy()
        if na.any():
            values = [None if n else v for v, n in zip(values, na, strict=True)]
        cells[c] = values
    file_of = [str(f) for f in df["_file"].tolist()]
    row_of = [int(r) for r in df["_row"].tolist()]
    ids = cells["id"]
    problems: list[tuple[int, str]] = []  # (row index, message): sorted into file order
    anomalies: list[tuple[int, dict[str, Any]]] = []  # (row index, anomaly)

    def at(i: int) -> str:
        return _where(file_of[i], split, row_of[i], ids[i])

    good_id = []
    for i, rid in enumerate(ids):
        if rid is None or (isinstance(rid, str) and is_blank(rid)):
            problems.append((i, f"{at(i)}, column 'id': empty id"))
        elif isinstance(rid, bool) or not isinstance(rid, str | int):
            problems.append((i, f"{at(i)}, column 'id': {describe(rid)} is not a string or "
                                "integer"))
        elif isinstance(rid, int) and not is_int64(rid):
            problems.append((i, f"{at(i)}, column 'id': integer {show(rid)} beyond the 64-bit "
                                "range; write such ids as strings"))
        else:
            good_id.append(i)
    for j, first, exact in id_clashes(ids[i] for i in good_id):
        i, f = good_id[j], good_id[first]
        what = "duplicate id" if exact else clash_message(ids[i], ids[f])
        problems.append((i, f"{at(i)}, column 'id': {what} (first in row {row_of[f]}"
                            + ("" if file_of[f] == file_of[i] else f" of {file_of[f]}") + ")"))
    for col in _REQUIRED_TEXT + ("verification_feedback",):
        for i, value in enumerate(cells[col]):
            if not (isinstance(value, str) and value[:1].isalnum()):  # else: visibly not blank
                what = _text_problem(value, col)
                if what:
                    problems.append((i, f"{at(i)}, column '{col}': {what}"))
    if "error_class" in cells:
        for i, value in enumerate(cells["error_class"]):
            if value is not None and not isinstance(value, str):
                problems.append((i, f"{at(i)}, column 'error_class': {describe(value)} is not "
                                    "a string"))
    answers = cells["provided_answer"]
    for i, answer in enumerate(answers):
        if isinstance(answer, str) and answer[:1].isalnum():
            continue
        if answer is not None and not isinstance(answer, str):
            problems.append((i, f"{at(i)}, column 'provided_answer': {show(answer)} is a "
                                f"{type(answer).__name__}, not a string"))
        elif answer is None or is_blank(answer):
            anomalies.append((i, {"kind": "empty_answer", "id": ids[i], "row": row_of[i],
                                  "file": file_of[i],
                                  "message": f"{at(i)}, column 'provided_answer': empty answer"}))
            answers[i] = answer or ""
    scores = [_number(v) for v in cells["score"]]
    for i, (raw, score, label) in enumerate(zip(cells["score"], scores,
                                                cells["verification_feedback"], strict=True)):
        if score is None or math.isnan(score):
            problems.append((i, f"{at(i)}, column 'score': not a number ({show(raw)})"))
            scores[i] = None
            score = None
        elif not 0.0 <= score <= 1.0:
            shown = show(raw if math.isinf(score) else score)
            problems.append((i, f"{at(i)}, column 'score': {shown} outside [0, 1]"))
        if isinstance(label, str) and label not in SAF_LABELS:
            problems.append((i, f"{at(i)}, column 'verification_feedback': {show(label)} not "
                                f"one of {list(SAF_LABELS)}"))
        elif label in SAF_LABELS and score is not None and 0.0 <= score <= 1.0:
            expected = ("Correct" if score == 1 else "Incorrect" if score == 0
                        else "Partially correct")
            if label != expected:
                anomalies.append((i, {
                    "kind": "label_score_mismatch", "id": ids[i], "row": row_of[i],
                    "file": file_of[i],
                    "message": f"{at(i)}, column 'verification_feedback': label {label!r} "
                               f"inconsistent with score {score} (expected {expected!r})"}))
    cells["score"] = scores
    problems.sort(key=lambda t: t[0])  # stable: within a row, in column order
    anomalies.sort(key=lambda t: t[0])
    return _Checked(cells, file_of, row_of, [m for _, m in problems], [a for _, a in anomalies])


def _id_type_problems(checked: dict[str, _Checked]) -> list[str]:
    """Ids must share one type (all strings or all integers) across the loaded splits."""
    def kind(rid: Any) -> str | None:
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            return None
        return type(rid).__name__

    kinds = Counter(k for c in checked.values() for k in map(kind, c.columns.get("id", [])) if k)
    if len(kinds) < 2:
        return []
    main = "str" if kinds["str"] >= kinds["int"] else "int"
    problems = []
    for split, c in checked.items():
        for i, rid in enumerate(c.columns.get("id", [])):
            if kind(rid) not in (None, main):
                at = _where(c.files[i], split, c.rows[i], repr(rid))
                problems.append(
                    f"{at}, column 'id': {type(rid).__name__} id among {main} ids "
                    f"({kinds[main]} of them); write every id as a {main}"
                )
    return problems


def _cross_split_problems(checked: dict[str, _Checked]) -> list[str]:
    """An id (once normalised) belongs to one split only; both places are named."""
    places = [(split, i) for split, c in checked.items() for i in range(len(c))
              if isinstance(c.columns["id"][i], str | int)]
    ids = [checked[s].columns["id"][i] for s, i in places]
    problems, reported = [], set()
    for j, first, exact in id_clashes(ids):
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


def _leak_anomalies(checked: dict[str, _Checked]) -> None:
    """Add leakage by normalised content to the test splits' anomalies (ids may differ).

    ``leak_answer_in_train``: a test answer (not blank) to the same question as a train
    answer with the same text. ``leak_question_seen``: a ``test_unseen_questions`` question
    also asked in train or validation. Texts are compared by :func:`squash`.
    """
    keys = {s: (_keys(c.columns.get("question", []), squash),
                _keys(c.columns.get("provided_answer", []), squash))
            for s, c in checked.items()}

    def places(split: str):
        c = checked[split]
        q, a = keys[split]
        return zip(q, a, c.files, c.rows, c.columns.get("id", []), strict=True)

    def first(splits: Sequence[str], key) -> dict:
        out: dict = {}
        for s in splits:
            for q, a, file, row, rid in places(s):
                k = key(q, a)
                if q and k is not None and k not in out:
                    out[k] = _where(file, s, row, rid)
        return out

    if "train" in checked:
        answers = first(["train"], lambda q, a: (q, a) if a else None)
        for split in (s for s in SAF_TEST_SPLITS if s in checked):
            for q, a, file, row, rid in places(split):
                if a and (q, a) in answers:
                    checked[split].anomalies.append({
                        "kind": "leak_answer_in_train", "id": rid, "row": row, "file": file,
                        "message": f"{_where(file, split, row, rid)}, column 'provided_answer': "
                                   f"same answer to the same question as {answers[q, a]} "
                                   "(normalised text)"})
    seen_in = [s for s in ("train", "validation") if s in checked]
    if "test_unseen_questions" in checked and seen_in:
        questions = first(seen_in, lambda q, a: q)
        split = "test_unseen_questions"
        for q, _, file, row, rid in places(split):
            if q and q in questions:
                checked[split].anomalies.append({
                    "kind": "leak_question_seen", "id": rid, "row": row, "file": file,
                    "message": f"{_where(file, split, row, rid)}, column 'question': question "
                               f"also asked in {questions[q]} (normalised text)"})


def validate_saf_frame(df: pd.DataFrame, split: str, file: str, strict: bool = True
                       ) -> list[str]:
    """All problems of one split as messages (anomalies included when ``strict``).

    Rows are numbered from 1 in file order; each message names file, split, row, id, column.
    """
    df = df.reset_index(drop=True).assign(_file=file, _row=range(1, len(df) + 1))
    checked = _check_split(df, split, [file])
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
            frames[split] = df.assign(_file=f"hub:{source}", _row=range(1, len(df) + 1))
            for cache in hub[split].cache_files:
                register("saf", source, cache["filename"], split)
            registered[split] = [(f"hub:{source}", c["filename"])
                                 for c in hub[split].cache_files] or [(f"hub:{source}", "")]

    checked = {split: _check_split(df, split, [label for label, _ in registered[split]])
               for split, df in frames.items()}
    _leak_anomalies(checked)
    problems = [p for c in checked.values() for p in c.problems]
    problems += _id_type_problems(checked)
    if strict:
        problems += [a["message"] + " (content anomaly; strict=True)"
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
    ds = datasets.DatasetDict({s: _to_dataset(c.columns) for s, c in checked.items()})
    return (ds, report) if return_report else ds


def _to_dataset(columns: dict[str, list[Any]]):
    """A ``datasets.Dataset`` straight from the checked columns (one Arrow array each)."""
    import datasets
    import pyarrow as pa

    table = pa.table({c: pa.array(v, type=pa.float64() if c == "score" else None)
                      for c, v in columns.items()})
    return datasets.Dataset(table)
