"""SAF loader and validation: the hub dataset, a hub-layout folder, or split files.

:func:`load_saf` reads a hub id (``SAF_DATA`` overrides the legal-set default), a local
hub-layout folder ``data/{split}-*.parquet`` or ``{split}.jsonl|.csv|.parquet`` files, and
validates every row; all problems are raised together as one :class:`SAFDataError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from saf_utils.provenance import DataError, register


class SAFDataError(DataError):
    """One or more problems in a SAF dataset, all reported together."""

    def __init__(self, problems: Sequence[str], source: str = "", limit: int = 20):
        self.problems = list(problems)
        head = "\n  - ".join(self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n  ... and {more} more problem(s)" if more > 0 else ""
        where = f" in {source}" if source else ""
        super().__init__(f"{len(self.problems)} problem(s){where}:\n  - {head}{tail}")



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
_SAF_SUFFIXES = (".parquet", ".jsonl", ".csv")


def saf_dataset_name(source: str | os.PathLike | None = None) -> str:
    """Short name of a SAF source for result tables: folder or hub dataset name."""
    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    return Path(source.rstrip("/")).name


def _read_table(path: Path) -> pd.DataFrame:
    """Read one parquet/jsonl/csv file as strings+score, or raise naming the file."""
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        if path.suffix == ".csv":
            return pd.read_csv(
                path,
                dtype={c: "string" for c in SAF_COLUMNS if c != "score"},
                keep_default_na=False,
                na_values=[""],
            )
    except Exception as exc:  # pandas/arrow raise many types; the user needs the file name
        raise SAFDataError([f"{path}: cannot be read as {path.suffix[1:]} ({exc})"]) from None
    raise SAFDataError([f"{path}: unsupported file type (use .parquet, .jsonl or .csv)"])


def _local_saf_files(root: Path) -> dict[str, list[Path]]:
    """Find split files in hub layout (data/{split}-*.parquet) or as {split}.{ext}."""
    found: dict[str, list[Path]] = {}
    for folder in (root / "data", root):
        for split in SAF_SPLITS:
            if split in found:
                continue
            shards = sorted(folder.glob(f"{split}-*.parquet"))
            if not shards:
                shards = [
                    folder / f"{split}{s}"
                    for s in _SAF_SUFFIXES
                    if (folder / f"{split}{s}").is_file()
                ][:1]
            if shards:
                found[split] = shards
    return found


def validate_saf_frame(df: pd.DataFrame, split: str, file: str) -> list[str]:
    """All schema and value problems of one split, each naming file, split, row, id, column.

    Rows are numbered from 1 in file order. Label and score must agree: Correct <=> 1,
    Incorrect <=> 0, Partially correct strictly between.
    """
    where = f"{file} [{split}]"
    missing = [c for c in SAF_COLUMNS if c not in df.columns]
    if missing:
        return [f"{where}: missing column '{c}'" for c in missing]
    problems: list[str] = []
    ids = df["id"].astype("string")
    dup = ids[ids.duplicated(keep="first") & ids.notna()]
    for row, value in dup.items():
        problems.append(f"{where} row {row + 1} (id={value}), column 'id': duplicate id")
    scores = pd.to_numeric(df["score"], errors="coerce")
    for row in range(len(df)):
        rid = ids.iloc[row]
        at = f"{where} row {row + 1} (id={rid})"
        if pd.isna(rid) or not str(rid).strip():
            problems.append(f"{at}, column 'id': empty id")
        answer = df["provided_answer"].iloc[row]
        if pd.isna(answer) or not str(answer).strip():
            problems.append(f"{at}, column 'provided_answer': empty answer")
        for col in ("question", "reference_answer"):
            if pd.isna(df[col].iloc[row]):
                problems.append(f"{at}, column '{col}': missing value")
        raw_score, score = df["score"].iloc[row], scores.iloc[row]
        label = df["verification_feedback"].iloc[row]
        if pd.isna(score):
            problems.append(f"{at}, column 'score': not a number ({raw_score!r})")
        elif not 0.0 <= score <= 1.0:
            problems.append(f"{at}, column 'score': {score} outside [0, 1]")
        if label not in SAF_LABELS:
            problems.append(
                f"{at}, column 'verification_feedback': {label!r} not one of {list(SAF_LABELS)}"
            )
        elif not pd.isna(score) and 0.0 <= score <= 1.0:
            expected = (
                "Correct" if score == 1 else "Incorrect" if score == 0 else "Partially correct"
            )
            if label != expected:
                problems.append(
                    f"{at}, column 'verification_feedback': label {label!r} inconsistent "
                    f"with score {score} (expected {expected!r})"
                )
    return problems


def _frame_to_dataset(df: pd.DataFrame):
    import datasets

    keep = [c for c in SAF_COLUMNS + SAF_OPTIONAL_COLUMNS if c in df.columns]
    df = df[keep].copy()
    for col in keep:
        df[col] = df[col].astype(float) if col == "score" else df[col].astype(object)
    return datasets.Dataset.from_pandas(df, preserve_index=False)


def load_saf(source: str | os.PathLike | None = None, splits: Iterable[str] | None = None):
    """Load and validate the SAF dataset as a ``datasets.DatasetDict``.

    ``source`` is a hub id (default :data:`SAF_HUB_ID`, overridden by the ``SAF_DATA``
    environment variable), a local folder in hub layout (``data/{split}-*.parquet``) or a
    folder of ``{split}.jsonl|.csv|.parquet`` files. ``error_class`` is kept when present.
    All problems are raised together as one :class:`SAFDataError`.
    """
    import datasets

    source = str(source or os.environ.get("SAF_DATA") or SAF_HUB_ID)
    wanted = list(splits) if splits is not None else None
    unknown = [s for s in wanted or [] if s not in SAF_SPLITS]
    if unknown:
        raise SAFDataError([f"unknown split(s) {unknown}; known: {list(SAF_SPLITS)}"], source)

    frames: dict[str, tuple[pd.DataFrame, str]] = {}
    root = Path(source).expanduser()
    if root.exists():
        files = _local_saf_files(root)
        if not files:
            raise SAFDataError(
                [
                    f"{root}: no split files found (expected data/{{split}}-*.parquet or "
                    f"{{split}}.jsonl|.csv|.parquet for splits {list(SAF_SPLITS)})"
                ],
                source,
            )
        missing = [s for s in wanted or [] if s not in files]
        if missing:
            raise SAFDataError([f"{root}: no file for split(s) {missing}"], source)
        for split in wanted or [s for s in SAF_SPLITS if s in files]:
            parts = [_read_table(p) for p in files[split]]
            frames[split] = (pd.concat(parts, ignore_index=True), ", ".join(map(str, files[split])))
            for p in files[split]:
                register("saf", source, p, split)
    else:
        try:
            hub = datasets.load_dataset(source)
        except Exception as exc:
            raise SAFDataError(
                [
                    f"cannot load '{source}' from the Hugging Face hub ({type(exc).__name__}: "
                    f"{str(exc)[:300]}). Offline? Point SAF_DATA (or source=) to a local copy, "
                    f"e.g. export SAF_DATA=../shared/data/saf_micro_job_german"
                ],
                source,
            ) from None
        for split in wanted or [s for s in SAF_SPLITS if s in hub]:
            if split not in hub:
                raise SAFDataError([f"hub dataset has no split '{split}'"], source)
            frames[split] = (hub[split].to_pandas(), f"hub:{source}")
            for cache in hub[split].cache_files:
                register("saf", source, cache["filename"], split)

    problems = [
        p for split, (df, file) in frames.items() for p in validate_saf_frame(df, split, file)
    ]
    split_of: dict[str, str] = {}
    for split, (df, _) in frames.items():
        for i in df["id"].dropna().unique() if "id" in df else []:
            if i in split_of:
                problems.append(f"id {i} appears in splits {split_of[i]!r} and {split!r}")
            split_of[i] = split
    if problems:
        raise SAFDataError(problems, source)
    return datasets.DatasetDict({s: _frame_to_dataset(df) for s, (df, _) in frames.items()})


