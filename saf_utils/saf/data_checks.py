"""SAF validation, column-wise: problems (errors) and anomalies (counted) of one split,
across splits (ids, types) and leakage by content (docs/data.md)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.data.reading import (
    anomaly_report,
    clash_message,
    describe,
    id_clashes,
    id_key,
    id_keys,
    is_int64,
    shorten,
    show_id,
)
from saf_utils.saf.data_schema import (
    _REQUIRED_TEXT,
    REPORT_COLUMNS,
    SAF_ANOMALY_KINDS,
    SAF_COLUMNS,
    SAF_LABELS,
    SAF_OPTIONAL_COLUMNS,
    SAF_TEST_SPLITS,
)
from saf_utils.text import is_blank, squash


def _isna(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _extra_columns(split: str, file: str, df: pd.DataFrame) -> list[dict[str, Any]]:
    """``extra_column`` anomalies, one per column of one file that is not a SAF column (not
    loaded); ``id`` is the column name."""
    out = []
    for col in df.columns:
        if col in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS or col in ("_file", "_row"):
            continue
        filled = int(df[col].notna().sum())
        out.append({"kind": "extra_column", "id": str(col), "row": None, "file": file,
                    "message": f"{file} [{split}]: column {shorten(str(col))} is not a SAF column "
                               f"(known: {list(SAF_COLUMNS + SAF_OPTIONAL_COLUMNS)}); not "
                               f"loaded ({filled} of {len(df)} cells filled)"})
    return out


def _where(file: str, split: str, row: int, rid: Any) -> str:
    return f"{file} [{split}] row {row} (id={show_id(rid)})"


def _number(value: Any) -> float | None:
    """A score cell as a float (text too, as CSV gives it); ``None`` when it is no number."""
    if isinstance(value, bool) or not (isinstance(value, int | float | str)
                                       or type(value).__module__ == "numpy"):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond the float range: certainly outside [0, 1]
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        return None


def _is_text(s: pd.Series) -> bool:
    """A column whose every present cell is a string (pandas ``str`` dtype)."""
    return isinstance(s.dtype, pd.StringDtype)


def _suspects(s: pd.Series) -> np.ndarray:
    """Positions of cells to look at one by one: every cell but a string that starts with
    a letter or digit (which is certainly not blank)."""
    if _is_text(s):
        ok = s.str.slice(0, 1).str.isalnum().fillna(False).to_numpy(dtype=bool)
        return np.flatnonzero(~ok)
    return np.array([i for i, v in enumerate(s.tolist())
                     if not (isinstance(v, str) and v[:1].isalnum())], dtype=int)


def _text_problem(value: Any, col: str) -> str | None:
    if _isna(value):
        return "missing label" if col == "verification_feedback" else "missing value"
    if not isinstance(value, str):
        return f"{shorten(value)} is a {type(value).__name__}, not a string"
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


@dataclass
class _Split:
    """One split while and after it is checked: its kept columns (blank answers as ``""``,
    ``score`` as float), each row's id, the id's identity (:func:`id_key`), file and 1-based
    row, problems (messages) and anomalies (``{kind, id, row, file, message}``); during the
    checks each is a (row position, ...) pair, sorted into file order at the end."""

    frame: pd.DataFrame
    split: str
    file_of: np.ndarray
    row_of: np.ndarray
    ids: list[Any]
    keys: list[Any]
    problems: list[Any] = dataclasses.field(default_factory=list)
    anomalies: list[Any] = dataclasses.field(default_factory=list)

    def at(self, i: int) -> str:
        return _where(self.file_of[i], self.split, int(self.row_of[i]), self.ids[i])

    def cells(self, col: str, positions: np.ndarray) -> list[tuple[int, Any]]:
        """(position, value) of a few cells of a column."""
        return list(zip(positions.tolist(), self.frame[col].iloc[positions].tolist(),
                        strict=True))

    def problem(self, i: int, col: str, what: str) -> None:
        self.problems.append((i, f"{self.at(i)}, column '{col}': {what}"))

    def anomaly(self, i: int, kind: str, col: str, what: str) -> dict[str, Any]:
        return {"kind": kind, "id": self.ids[i], "row": int(self.row_of[i]),
                "file": self.file_of[i], "message": f"{self.at(i)}, column '{col}': {what}"}


def _check_ids(sp: _Split) -> None:
    """Every id non-empty, a string or a 64-bit integer, and unique (also once normalised)."""
    good_id = []
    for i, rid in enumerate(sp.ids):
        if rid is None or sp.keys[i] == "":
            sp.problem(i, "id", "empty id")
        elif isinstance(rid, bool) or not isinstance(rid, str | int):
            sp.problem(i, "id", f"{describe(rid)} is not a string or integer")
        elif isinstance(rid, int) and not is_int64(rid):
            sp.problem(i, "id", f"integer {shorten(rid)} beyond the 64-bit range; write such ids "
                                "as strings")
        else:
            good_id.append(i)
    for j, first, exact in id_clashes([sp.ids[i] for i in good_id],
                                      [sp.keys[i] for i in good_id]):
        i, f = good_id[j], good_id[first]
        what = "duplicate id" if exact else clash_message(sp.ids[i], sp.ids[f])
        where = "" if sp.file_of[f] == sp.file_of[i] else f" of {sp.file_of[f]}"
        sp.problem(i, "id", f"{what} (first in row {sp.row_of[f]}{where})")


def _check_texts(sp: _Split) -> None:
    """The required text columns, the label column and ``error_class`` hold text."""
    for col in _REQUIRED_TEXT + ("verification_feedback",):
        for i, value in sp.cells(col, _suspects(sp.frame[col])):
            what = _text_problem(value, col)
            if what:
                sp.problem(i, col, what)
    if "error_class" in sp.frame and not _is_text(sp.frame["error_class"]):
        for i, value in enumerate(sp.frame["error_class"].tolist()):
            if not _isna(value) and not isinstance(value, str):
                sp.problem(i, "error_class", f"{describe(value)} is not a string")


def _check_answers(sp: _Split) -> None:
    """An answer that is not text is a problem; a blank one an anomaly (missing: "")."""
    blank = []
    for i, answer in sp.cells("provided_answer", _suspects(sp.frame["provided_answer"])):
        what = _text_problem(answer, "provided_answer")
        if what and what.endswith("not a string"):
            sp.problem(i, "provided_answer", what)
        elif what:
            sp.anomalies.append((i, sp.anomaly(i, "empty_answer", "provided_answer",
                                               "empty answer")))
            blank += [i] if _isna(answer) else []
    if blank:  # a missing answer is loaded as ""
        answers = sp.frame["provided_answer"].astype(object)
        answers.iloc[blank] = ""
        sp.frame["provided_answer"] = answers


def _check_scores_and_labels(sp: _Split) -> None:
    """Scores are numbers in [0, 1], labels one of :data:`SAF_LABELS`; a label that
    disagrees with its score is an anomaly. The frame's scores become floats."""
    scores = _scores(sp.frame["score"])
    for i, raw in sp.cells("score", np.flatnonzero(np.isnan(scores))):
        sp.problem(i, "score", f"not a number ({shorten(raw)})")
    outside = ~np.isnan(scores) & ((scores < 0) | (scores > 1))
    for i, raw in sp.cells("score", np.flatnonzero(outside)):
        shown = shorten(raw if np.isinf(scores[i]) else float(scores[i]))
        sp.problem(i, "score", f"{shown} outside [0, 1]")
    labels = sp.frame["verification_feedback"]
    known = labels.isin(SAF_LABELS).to_numpy(dtype=bool)
    for i in np.flatnonzero(~known):
        label = labels.iat[i]
        if isinstance(label, str):
            sp.problem(i, "verification_feedback",
                       f"{shorten(label)} not one of {list(SAF_LABELS)}")
    expected = np.where(scores == 1, "Correct",
                        np.where(scores == 0, "Incorrect", "Partially correct"))
    valid = known & ~np.isnan(scores) & ~outside
    for i in np.flatnonzero(valid & (labels.to_numpy(dtype=object) != expected)):
        sp.anomalies.append((i, sp.anomaly(
            i, "label_score_mismatch", "verification_feedback", f"label {labels.iat[i]!r} "
            f"inconsistent with score {float(scores[i])} (expected {expected[i]!r})")))
    sp.frame["score"] = scores


def _check_split(df: pd.DataFrame, split: str, files: Sequence[str]) -> _Split:
    """Validate one split read from ``files``; ``df`` carries ``_file`` and ``_row`` (1-based).
    Column-wise, cells looked at one by one only where a column is not plain text or a cell
    is a suspect: a 100k-row split loads in seconds (benchmarks/loader_bench.py)."""
    where_split = f"{', '.join(files)} [{split}]"
    missing = [c for c in SAF_COLUMNS if c not in df.columns]
    if len(df) == 0 or missing:
        return _Split(pd.DataFrame(), split, np.array([]), np.array([]), [], [], problems=[
            f"{where_split}: split has 0 rows"] if len(df) == 0 else [
            f"{where_split}: missing column '{c}'" for c in missing])
    keep = [c for c in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS if c in df.columns]
    frame = df[keep].reset_index(drop=True)
    sp = _Split(frame, split, df["_file"].astype(str).to_numpy(), df["_row"].to_numpy(),
                [None if _isna(v) else v for v in frame["id"].tolist()], id_keys(frame["id"]))
    for check in (_check_ids, _check_texts, _check_answers, _check_scores_and_labels):
        check(sp)
    # stable: within a row, in column order
    sp.problems = [m for _, m in sorted(sp.problems, key=lambda t: t[0])]
    sp.anomalies = [a for _, a in sorted(sp.anomalies, key=lambda t: t[0])]
    return sp


def _id_type_problems(checked: dict[str, _Split]) -> list[str]:
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
                at = _where(c.file_of[i], split, int(c.row_of[i]), repr(rid))
                problems.append(f"{at}, column 'id': {type(rid).__name__} id among {main} ids "
                                f"({kinds[main]} of them); write every id as a {main}")
    return problems


def _cross_split_problems(checked: dict[str, _Split]) -> list[str]:
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
        both = f"({b.file_of[fi]} row {b.row_of[fi]}; {a.file_of[i]} row {a.row_of[i]})"
        if exact:
            problems.append(f"id {show_id(ids[j])} appears in splits {fs!r} and {s!r} {both}")
        else:
            problems.append(f"splits {fs!r} and {s!r}: {clash_message(ids[j], ids[first])} "
                            f"{both}")
    return problems


class _Codes:
    """Integer codes of normalised texts (:func:`squash`), shared by every split; each
    distinct value normalised once, a missing or empty key ``-1``."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, s: pd.Series) -> np.ndarray:
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        ukeys = [squash(u) if isinstance(u, str) else "" for u in uniques]
        table = np.array([self.vocab.setdefault(k, len(self.vocab)) if k else -1
                          for k in ukeys] + [-1], dtype=np.int64)
        return table[codes]  # the sentinel -1 picks the final -1


def _first_places(codes: np.ndarray, c: _Split) -> dict[int, str]:
    """Code -> where it first occurs in a split (only for codes >= 0)."""
    uniq, first = np.unique(codes, return_index=True)
    return {int(k): c.at(i) for k, i in zip(uniq, first, strict=True) if k >= 0}


def _pairs(code: _Codes, frame: pd.DataFrame) -> np.ndarray:
    """Per row, (question, answer) as one code; -1 where either is missing or empty."""
    q, a = code(frame["question"]), code(frame["provided_answer"])
    return np.where((q >= 0) & (a >= 0), q * np.int64(1 << 31) + a, -1)


def answers_in_train(train: pd.DataFrame, df: pd.DataFrame) -> np.ndarray:
    """Per row of ``df``: is its answer, to the same question, also a train answer
    (normalised text, :func:`squash`; the leakage check's ``leak_answer_in_train``)?"""
    code = _Codes()
    both = _pairs(code, df)
    return (both >= 0) & np.isin(both, _pairs(code, train))


def _leak_anomalies(checked: dict[str, _Split]) -> None:
    """Add leakage by content (:func:`squash`, whatever the ids) to the test splits'
    anomalies (``leak_answer_in_train``, ``leak_question_seen``: docs/data.md)."""
    code = _Codes()
    tests = [s for s in SAF_TEST_SPLITS if s in checked]
    if "train" in checked and tests:
        train = _pairs(code, checked["train"].frame)
        where = None
        for split in tests:
            c, both = checked[split], _pairs(code, checked[split].frame)
            hits = np.flatnonzero((both >= 0) & np.isin(both, train))
            if len(hits) and where is None:
                where = _first_places(train, checked["train"])
            c.anomalies += [c.anomaly(i, "leak_answer_in_train", "provided_answer", "same answer "
                                      f"to the same question as {where[int(both[i])]} "
                                      "(normalised text)") for i in hits]
    seen_in = [s for s in ("train", "validation") if s in checked]
    split = "test_unseen_questions"
    if split in checked and seen_in:
        questions = {s: code(checked[s].frame["question"]) for s in [*seen_in, split]}
        c, q = checked[split], questions[split]
        seen = np.concatenate([questions[s] for s in seen_in])
        hits = np.flatnonzero((q >= 0) & np.isin(q, seen))
        if len(hits):
            where: dict[int, str] = {}
            for s in reversed(seen_in):  # the first split wins
                where.update(_first_places(questions[s], checked[s]))
        c.anomalies += [c.anomaly(i, "leak_question_seen", "question", "question also asked "
                                  f"in {where[int(q[i])]} (normalised text)") for i in hits]


def validate_saf_frame(df: pd.DataFrame, split: str, file: str, strict: bool = True
                       ) -> list[str]:
    """All problems of one split as messages naming file, split, row (from 1), id and
    column (anomalies included when ``strict``)."""
    extra = _extra_columns(split, file, df)
    df = df.reset_index(drop=True).assign(_file=file, _row=range(1, len(df) + 1))
    checked = _check_split(df, split, [file])
    checked.anomalies[:0] = extra
    return checked.problems + ([a["message"] for a in checked.anomalies] if strict else [])


def _report(checked: dict[str, _Split]) -> pd.DataFrame:
    return anomaly_report({split: c.anomalies for split, c in checked.items()},
                          SAF_ANOMALY_KINDS, REPORT_COLUMNS)
