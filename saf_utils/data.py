"""Loaders and validation for the two datasets of the collection.

One loader per dataset: :func:`load_saf` (short answer feedback, hub or local copy) and
:func:`load_argscichat` (one fold of ArgSciChat, local copy or a pinned GitHub download).
Every file a loader reads is recorded with its SHA-256 (:func:`data_sources`), so that a
run manifest can name exactly the data its numbers come from.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import string
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

# --------------------------------------------------------------------------- provenance

_SOURCES: dict[str, dict[str, Any]] = {}


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file, read in chunks (data files can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _register(dataset: str, source: str, path: str | Path, split: str | None = None) -> None:
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


# --------------------------------------------------------------------------- errors


class DataError(ValueError):
    """Bad or missing input data; the message names file, split, row and column."""


class SAFDataError(DataError):
    """One or more problems in a SAF dataset, all reported together."""

    def __init__(self, problems: Sequence[str], source: str = "", limit: int = 20):
        self.problems = list(problems)
        head = "\n  - ".join(self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n  ... and {more} more problem(s)" if more > 0 else ""
        where = f" in {source}" if source else ""
        super().__init__(f"{len(self.problems)} problem(s){where}:\n  - {head}{tail}")


class ArgSciChatDataError(DataError):
    """A missing, unreadable or malformed ArgSciChat file."""


# --------------------------------------------------------------------------- SAF

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
                _register("saf", source, p, split)
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
                _register("saf", source, cache["filename"], split)

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


# --------------------------------------------------------------------------- ArgSciChat

ARGSCICHAT_REPO = "UKPLab/acl2023-argscichat"
ARGSCICHAT_COMMIT = "ad4680ec5ce5f274b3ddec05a237e39b33dc1bd5"
ARGSCICHAT_FOLDER = "argscichat_allennlp/argscichat_train_dev"
ARGSCICHAT_SPLITS = ("train", "val", "test")
ARGSCICHAT_FOLDS = (0, 1, 2, 3, 4)
# SHA-256 of the fold files at ARGSCICHAT_COMMIT, checked after a download.
ARGSCICHAT_SHA256 = {
    "fold_0_test.json": "93993d3aa60874a088934b61da7758c248ba4d9aeb46a17f1d4855d17b741b45",
    "fold_0_train.json": "2a8dc299534bd8fd9dea40e174027a4f09fd5c82183e4035860d738c03876c51",
    "fold_0_val.json": "558972aa0ef8c48a514ea786edcc405ecccf8c5af1fd4ab1f8b2e6c81be5f494",
    "fold_1_test.json": "9e7056e288b4c29632f56a3074b926e25b2f06a893aaed76d12794e63fe5c8be",
    "fold_1_train.json": "48862c2b2867b03a1f31e0159cc7f7b0b860995347136854a3454efc16fe8f41",
    "fold_1_val.json": "e9bfa8d4a7a51b03f15a8b6ae336557f525a64e5a67a4bb222413fc5aa372b75",
    "fold_2_test.json": "65ff2236b48829162f84f9bbc46e84c00f79b800b865e4d3694f3cce868a0814",
    "fold_2_train.json": "9de73a225f87c5f89a8c7505544abae3018b0dc1cd5f9410680e0611dbafb2c2",
    "fold_2_val.json": "ca9bf3f28ea35d73540d29e5b231a4e02cbec96b12ec634f20d9e10f41a7e1ae",
    "fold_3_test.json": "8ebc7495cdfc1994f5bce0c20b0553f25103378d4b416bc07f5204c61f58db60",
    "fold_3_train.json": "683d46868c41526ae4c2764d2794fd029bf01746214449ea766a31e1452627a6",
    "fold_3_val.json": "952af801e068edc4f0bd00045db78eccb53a50af1efd89fc453cd85459163dc0",
    "fold_4_test.json": "b0cc4f76fc9021a47536912804c8d23cbdb61ca68211b1480b89daf351b4211b",
    "fold_4_train.json": "25edf79cbbf46303a5d265e50dcca964ccc1dabab9314d8f2031a3d3416cdb08",
    "fold_4_val.json": "0ed87fb78ce9bc073673fa8ba56c547627427b4e4ca01caddde878be0c68171f",
}
_PAIR_KEYS = ("id", "P_Message", "DE_Message", "facts", "history", "history_ids", "history_facts")
_PAPER_KEYS = ("id", "title", "content", "message_pairs")


@dataclass(frozen=True)
class MessagePair:
    """One proponent message and the domain expert's reply, with the paper it is about."""

    pair_id: str
    paper_id: str
    title: str
    content: tuple[str, ...]
    dialogue_id: str
    turn: int
    query: str
    reply: str
    history: tuple[str, ...]
    history_ids: tuple[str, ...]
    facts: tuple[str, ...]
    fact_indexes: tuple[int, ...]
    history_fact_indexes: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class DroppedFact:
    split: str
    pair_id: str
    fact: str
    reason: str  # "title" | "not_found" | "empty"


@dataclass
class ArgSciChatFold:
    """The train/val/test message pairs of one official fold."""

    fold: int
    train: list[MessagePair]
    val: list[MessagePair]
    test: list[MessagePair]
    dropped_facts: list[DroppedFact] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, split: str) -> list[MessagePair]:
        if split not in ARGSCICHAT_SPLITS:
            raise KeyError(f"unknown split {split!r}; known: {ARGSCICHAT_SPLITS}")
        return getattr(self, split)

    def fact_report(self) -> dict[str, int]:
        """How many gold facts were mapped to sentences and how many dropped, by reason."""
        pairs = self.train + self.val + self.test
        report = {"pairs": len(pairs), "facts": sum(len(p.facts) for p in pairs)}
        report["pairs_without_facts"] = sum(not p.facts for p in pairs)
        report["pairs_without_fact_sentences"] = sum(not p.fact_indexes for p in pairs)
        for reason in ("title", "not_found", "empty"):
            report[f"dropped_{reason}"] = sum(d.reason == reason for d in self.dropped_facts)
        return report


def punctuation_filtering(text: str) -> str:
    """Remove punctuation and all whitespace, as the official ArgSciChat baseline script does."""
    table = str.maketrans("", "", string.punctuation)
    return "".join(w.translate(table) for w in text.split())


_SENT_END = re.compile(r"(?<=[.!?])\s+")


def _norm(text: str) -> str:
    return punctuation_filtering(text.lower().strip())


def map_facts(
    facts: Sequence[str], content: Sequence[str], title: str
) -> tuple[tuple[int, ...], list[tuple[str, str]]]:
    """Map gold fact strings to content-sentence indexes, as the official baseline script.

    Like ``fact_selection_baselines.py`` of the ArgSciChat release: a fact is split into
    sentences, and each piece maps to the first content sentence that contains it after
    lower-casing and ``punctuation_filtering``. A piece found only in the title, or nowhere,
    is returned as dropped with the reason ("title", "not_found"; "empty" for blank facts)
    where the official script would stop with an assertion.
    """
    norm_content = [_norm(s) for s in content]
    norm_title = _norm(title)
    indexes: set[int] = set()
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        fact = fact.replace("\n", " ").strip()
        if not _norm(fact):
            dropped.append((fact, "empty"))
            continue
        whole = _norm(fact)
        pieces = [fact] if any(whole in s for s in norm_content) else _SENT_END.split(fact)
        for piece in pieces:
            npiece = _norm(piece)
            if not npiece:
                continue
            hit = next((i for i, s in enumerate(norm_content) if npiece in s), None)
            if hit is not None:
                indexes.add(hit)
            else:
                dropped.append((piece, "title" if npiece in norm_title else "not_found"))
    return tuple(sorted(indexes)), dropped


def _argscichat_cache_dir() -> Path:
    base = os.environ.get("SAF_UTILS_CACHE") or Path.home() / ".cache" / "saf_utils"
    return Path(base) / "argscichat" / ARGSCICHAT_COMMIT


def download_argscichat(target: str | os.PathLike | None = None) -> Path:
    """Download the five official folds at the pinned commit into a cache folder (once).

    Each file is checked against :data:`ARGSCICHAT_SHA256`; a mismatch deletes the file and
    raises. Needs internet (GitHub); offline, set ``ARGSCICHAT_DATA`` to a local copy.
    """
    folder = Path(target) if target else _argscichat_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"fold_{k}_{s}.json" for k in ARGSCICHAT_FOLDS for s in ARGSCICHAT_SPLITS]
    base = (
        f"https://raw.githubusercontent.com/{ARGSCICHAT_REPO}/{ARGSCICHAT_COMMIT}/"
        f"{ARGSCICHAT_FOLDER}/"
    )
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


def _read_fold_file(path: Path, split: str) -> tuple[list[MessagePair], list[DroppedFact]]:
    if not path.is_file():
        raise ArgSciChatDataError(f"{path}: missing fold file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArgSciChatDataError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ArgSciChatDataError(f"{path}: expected an object {{paper title: paper}}")
    pairs: list[MessagePair] = []
    dropped: list[DroppedFact] = []
    for title, paper in raw.items():
        missing = [k for k in _PAPER_KEYS if not isinstance(paper, dict) or k not in paper]
        if missing:
            raise ArgSciChatDataError(f"{path}: paper {title!r} lacks key(s) {missing}")
        content = tuple(s.replace("\n", " ").strip() for s in paper["content"])
        for n, mp in enumerate(paper["message_pairs"]):
            missing = [k for k in _PAIR_KEYS if not isinstance(mp, dict) or k not in mp]
            if missing:
                raise ArgSciChatDataError(
                    f"{path}: paper {title!r}, message pair {n} "
                    f"(id={mp.get('id') if isinstance(mp, dict) else None}) lacks key(s) {missing}"
                )
            indexes, lost = map_facts(mp["facts"], content, paper["title"])
            dropped += [DroppedFact(split, mp["id"], f, r) for f, r in lost]
            hist_idx = tuple(map_facts(f, content, paper["title"])[0] for f in mp["history_facts"])
            pairs.append(
                MessagePair(
                    pair_id=mp["id"],
                    paper_id=str(paper["id"]),
                    title=paper["title"],
                    content=content,
                    dialogue_id=mp["history_ids"][0] if mp["history_ids"] else mp["id"],
                    turn=len(mp["history_ids"]),
                    query=mp["P_Message"],
                    reply=mp["DE_Message"],
                    history=tuple(mp["history"]),
                    history_ids=tuple(mp["history_ids"]),
                    facts=tuple(mp["facts"]),
                    fact_indexes=indexes,
                    history_fact_indexes=hist_idx,
                )
            )
    return pairs, dropped


def _argscichat_root(source: str | os.PathLike | None) -> tuple[Path, str]:
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if source:
        root = Path(source).expanduser()
        if not root.is_dir():
            raise ArgSciChatDataError(f"{root}: ArgSciChat folder does not exist")
        return root, str(source)
    return download_argscichat(), f"github:{ARGSCICHAT_REPO}@{ARGSCICHAT_COMMIT}"


def load_argscichat(source: str | os.PathLike | None = None, fold: int = 0) -> ArgSciChatFold:
    """Load one official ArgSciChat fold as lists of :class:`MessagePair`.

    ``source``: a folder with ``fold_{k}_{split}.json`` (default: ``ARGSCICHAT_DATA``, else a
    one-time download of the pinned commit). Gold facts are mapped to content-sentence
    indexes with :func:`map_facts`; dropped facts are listed in ``dropped_facts``.
    """
    if fold not in ARGSCICHAT_FOLDS:
        raise ArgSciChatDataError(f"unknown fold {fold}; folds are {ARGSCICHAT_FOLDS}")
    root, label = _argscichat_root(source)
    splits: dict[str, list[MessagePair]] = {}
    dropped: list[DroppedFact] = []
    files: dict[str, str] = {}
    for split in ARGSCICHAT_SPLITS:
        path = root / f"fold_{fold}_{split}.json"
        splits[split], lost = _read_fold_file(path, split)
        dropped += lost
        files[split] = str(path)
        _register("argscichat", label, path, f"fold{fold}/{split}")
    return ArgSciChatFold(fold=fold, dropped_facts=dropped, files=files, **splits)


def load_intents(source: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """Sentence-level dialogue intents (``intents.csv``); ``None`` when the file is absent."""
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if not source:
        return None
    path = Path(source) / "intents.csv"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    need = {"Role", "Message Number", "Sentence Number", "Sentence", "Tag"}
    if rows and not need <= set(rows[0]):
        raise ArgSciChatDataError(f"{path}: missing column(s) {sorted(need - set(rows[0]))}")
    _register("argscichat", str(source), path, "intents")
    return pd.DataFrame(rows)
