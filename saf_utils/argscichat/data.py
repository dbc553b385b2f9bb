"""ArgSciChat loader: the five official folds, from a local copy or a pinned GitHub download.

:func:`load_argscichat` returns one fold as :class:`ArgSciChatFold` of :class:`MessagePair`
records; gold fact strings are mapped to content-sentence indexes as the official baseline
script does (:func:`map_facts`), and what cannot be mapped is counted, not asserted.

Every malformed or unreadable input (missing, unreadable or non-UTF-8 file, duplicate JSON
key, missing key, wrong type, a paper or pair id in two splits) is an
:class:`ArgSciChatDataError` naming file, paper and pair. Leakage by content, a paper whose
content sentences (normalised with :func:`saf_utils.text.squash`) appear in an earlier split
of the fold under another key or id (``leak_paper_content``, counted on the later split:
train < val < test), is a counted anomaly (:data:`ARGSCICHAT_ANOMALY_KINDS`): listed in
``ArgSciChatFold.anomalies``, written to the manifest's data sources, announced with an
:class:`ArgSciChatDataWarning`, and an error with ``strict=True``.
"""

from __future__ import annotations

import csv
import io
import json
import numbers
import os
import re
import urllib.error
import urllib.request
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.provenance import DataError, annotate, register, sha256_file
from saf_utils.text import split_sentences, squash


class ArgSciChatDataError(DataError):
    """A missing, unreadable or malformed ArgSciChat file."""


class ArgSciChatDataWarning(UserWarning):
    """An ArgSciChat fold loaded with content anomalies (leakage; see ``return_report``)."""


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
#: Content anomalies that are loaded and counted (``strict=True``: errors).
ARGSCICHAT_ANOMALY_KINDS = ("leak_paper_content",)
#: Columns of the anomaly report (one row per split and kind, zero counts included).
ARGSCICHAT_REPORT_COLUMNS = ("fold", "split", "kind", "count", "ids", "files")
INTENT_COLUMNS = ("Role", "Message Number", "Sentence Number", "Sentence", "Tag")
#: Share of a paper's distinct content sentences found in one other paper that makes a leak.
LEAK_OVERLAP = 0.5
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
    #: Content anomalies: {kind, split, paper_id, title, file, message}.
    anomalies: list[dict[str, Any]] = field(default_factory=list)

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

    def anomaly_report(self) -> pd.DataFrame:
        """Content anomalies per split and kind (:data:`ARGSCICHAT_REPORT_COLUMNS`; zeros kept)."""
        rows = []
        for split in ARGSCICHAT_SPLITS:
            for kind in ARGSCICHAT_ANOMALY_KINDS:
                hits = [a for a in self.anomalies if a["split"] == split and a["kind"] == kind]
                rows.append({"fold": self.fold, "split": split, "kind": kind,
                             "count": len(hits), "ids": [a["paper_id"] for a in hits],
                             "files": sorted({Path(a["file"]).name for a in hits})})
        return pd.DataFrame(rows, columns=list(ARGSCICHAT_REPORT_COLUMNS))


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
    norm_content = [squash(s) for s in content]
    norm_title = squash(title)
    indexes: set[int] = set()
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        fact = fact.replace("\n", " ").strip()
        if not squash(fact):
            dropped.append((fact, "empty"))
            continue
        whole = squash(fact)
        pieces = [fact] if any(whole in s for s in norm_content) else split_sentences(fact)
        for piece in pieces:
            npiece = squash(piece)
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


def _is_str_list(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _describe(x: object) -> str:
    text = repr(x)
    kind = type(x).__name__
    return f"{text[:60]}... ({kind})" if len(text) > 60 else f"{text} ({kind})"


def _check_paper(path: Path, title: str, paper: dict) -> str:
    """Type checks of one paper entry; returns its id as a string."""
    where = f"{path}: paper {title!r}"
    pid = paper["id"]
    if isinstance(pid, bool) or not isinstance(pid, (int, str)) or not str(pid).strip():
        raise ArgSciChatDataError(f"{where}: id is {_describe(pid)}, expected an int or string")
    where = f"{path}: paper {title!r} (id {pid})"
    if not isinstance(paper["title"], str) or not paper["title"].strip():
        raise ArgSciChatDataError(f"{where}: title is {_describe(paper['title'])}, "
                                  f"expected a non-empty string")
    content = paper["content"]
    if not isinstance(content, list) or not content:
        raise ArgSciChatDataError(f"{where}: content is {_describe(content)}, "
                                  f"expected a non-empty list of sentence strings")
    bad = next((i for i, v in enumerate(content) if not isinstance(v, str)), None)
    if bad is not None:
        raise ArgSciChatDataError(f"{where}: content sentence {bad} is "
                                  f"{_describe(content[bad])}, expected a string")
    if not isinstance(paper["message_pairs"], list) or not paper["message_pairs"]:
        raise ArgSciChatDataError(
            f"{where}: empty dialogue (message_pairs is {_describe(paper['message_pairs'])}, "
            f"expected a non-empty list)")
    return str(pid)


def _check_pair(where: str, mp: dict) -> None:
    """Type checks of one message pair (``where`` names file, paper and pair)."""
    for key in ("P_Message", "DE_Message"):
        if not isinstance(mp[key], str):
            raise ArgSciChatDataError(f"{where}: {key} is {_describe(mp[key])}, expected a string")
        if not mp[key].strip():
            raise ArgSciChatDataError(f"{where}: {key} is empty")
    for key in ("facts", "history", "history_ids"):
        if isinstance(mp[key], str):
            raise ArgSciChatDataError(f"{where}: {key} is a string ({_describe(mp[key])}), "
                                      f"expected a list of strings")
        if not _is_str_list(mp[key]):
            raise ArgSciChatDataError(f"{where}: {key} is {_describe(mp[key])}, "
                                      f"expected a list of strings")
    hf = mp["history_facts"]
    if not isinstance(hf, list) or not all(_is_str_list(t) for t in hf):
        raise ArgSciChatDataError(f"{where}: history_facts is {_describe(hf)}, expected one "
                                  f"list of fact strings per earlier turn")
    if len(hf) != len(mp["history_ids"]):
        raise ArgSciChatDataError(f"{where}: {len(hf)} history_facts entries for "
                                  f"{len(mp['history_ids'])} history_ids")


def _read_text(path: Path) -> str:
    """A file's text as UTF-8 (a byte-order mark is dropped), or an error naming the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArgSciChatDataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ArgSciChatDataError(
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} on line {line}, offset "
            f"{exc.start}; e.g. Latin-1); save it as UTF-8") from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for k, _ in pairs:
        if k in seen:
            raise _DuplicateKey(k)
        seen.add(k)
    return dict(pairs)


def _load_json(path: Path) -> Any:
    """Parse a JSON file, refusing a key twice in one object (a paper title, a pair key)."""
    text = _read_text(path)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        key = exc.args[0]
        pattern = re.compile("|".join(re.escape(json.dumps(key, ensure_ascii=a)) + r"\s*:"
                                      for a in (False, True)))
        lines = [n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        where = f" (lines {', '.join(map(str, lines[:5]))})" if lines else ""
        raise ArgSciChatDataError(
            f"{path}: duplicate key {key!r} in one JSON object{where}; the later value "
            "would silently replace the earlier one") from None
    except json.JSONDecodeError as exc:
        raise ArgSciChatDataError(f"{path}: not valid JSON ({exc})") from None


def _read_fold_file(path: Path, split: str) -> tuple[list[MessagePair], list[DroppedFact]]:
    if not path.is_file():
        raise ArgSciChatDataError(f"{path}: missing fold file")
    raw = _load_json(path)
    if not isinstance(raw, dict):
        raise ArgSciChatDataError(f"{path}: expected an object {{paper title: paper}}")
    if not raw:
        raise ArgSciChatDataError(f"{path}: no papers (empty object)")
    pairs: list[MessagePair] = []
    dropped: list[DroppedFact] = []
    seen: dict[str, str] = {}
    for title, paper in raw.items():
        missing = [k for k in _PAPER_KEYS if not isinstance(paper, dict) or k not in paper]
        if missing:
            raise ArgSciChatDataError(f"{path}: paper {title!r} lacks key(s) {missing}")
        paper_id = _check_paper(path, title, paper)
        content = tuple(s.replace("\n", " ").strip() for s in paper["content"])
        for n, mp in enumerate(paper["message_pairs"]):
            missing = [k for k in _PAIR_KEYS if not isinstance(mp, dict) or k not in mp]
            if missing:
                raise ArgSciChatDataError(
                    f"{path}: paper {title!r}, message pair {n} "
                    f"(id={mp.get('id') if isinstance(mp, dict) else None}) lacks key(s) {missing}"
                )
            where = f"{path}: paper {title!r} (id {paper_id}), pair {mp['id']!r}"
            if not isinstance(mp["id"], str) or not mp["id"].strip():
                raise ArgSciChatDataError(f"{where}: id is {_describe(mp['id'])}, "
                                          f"expected a non-empty string")
            if mp["id"] in seen:
                raise ArgSciChatDataError(f"{where}: duplicate pair id (also in paper "
                                          f"{seen[mp['id']]!r})")
            seen[mp["id"]] = title
            _check_pair(where, mp)
            indexes, lost = map_facts(mp["facts"], content, paper["title"])
            dropped += [DroppedFact(split, mp["id"], f, r) for f, r in lost]
            hist_idx = tuple(map_facts(f, content, paper["title"])[0] for f in mp["history_facts"])
            pairs.append(
                MessagePair(
                    pair_id=mp["id"],
                    paper_id=paper_id,
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


def _check_fold(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str]) -> None:
    """Papers and pair ids never cross the splits of a fold."""
    owner: dict[str, tuple[str, MessagePair]] = {}
    pair_owner: dict[str, str] = {}
    for split in ARGSCICHAT_SPLITS:
        for p in splits[split]:
            prev = owner.get(p.paper_id)
            if prev is not None and prev[0] != split:
                raise ArgSciChatDataError(
                    f"fold {fold}: paper {p.title!r} (id {p.paper_id}) is in both "
                    f"{files[prev[0]]} (pair {prev[1].pair_id!r}) and {files[split]} "
                    f"(pair {p.pair_id!r}); papers must not cross splits")
            owner.setdefault(p.paper_id, (split, p))
            if p.pair_id in pair_owner and pair_owner[p.pair_id] != split:
                raise ArgSciChatDataError(
                    f"fold {fold}: pair id {p.pair_id!r} (paper {p.title!r}) is in both "
                    f"{files[pair_owner[p.pair_id]]} and {files[split]}")
            pair_owner[p.pair_id] = split


def _paper_leaks(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str]
                 ) -> list[dict[str, Any]]:
    """Papers of a later split whose content is in a paper of an earlier split (other id)."""
    papers: dict[str, dict[str, tuple[str, frozenset[str]]]] = {}
    for split in ARGSCICHAT_SPLITS:
        papers[split] = {}
        for p in splits[split]:
            if p.paper_id not in papers[split]:
                sents = frozenset(k for k in map(squash, p.content) if k)
                papers[split][p.paper_id] = (p.title, sents)
    out = []
    for j, split in enumerate(ARGSCICHAT_SPLITS):
        for pid, (title, sents) in papers[split].items():
            for earlier in ARGSCICHAT_SPLITS[:j]:
                hit = next(((oid, otitle, len(sents & osents)) for oid, (otitle, osents)
                            in papers[earlier].items()
                            if sents and osents and len(sents & osents)
                            >= LEAK_OVERLAP * min(len(sents), len(osents))), None)
                if hit is None:
                    continue
                oid, otitle, shared = hit
                out.append({
                    "kind": "leak_paper_content", "split": split, "paper_id": pid,
                    "title": title, "file": files[split],
                    "message": (
                        f"fold {fold}: paper {title!r} (id {pid}) in {files[split]} shares "
                        f"{shared} of its {len(sents)} content sentences with paper {otitle!r} "
                        f"(id {oid}) in {files[earlier]} (normalised text)")})
                break
    return out


def _argscichat_root(source: str | os.PathLike | None) -> tuple[Path, str]:
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if source:
        root = Path(source).expanduser()
        if not root.is_dir():
            what = "is not a folder" if root.exists() else "does not exist"
            rel = "" if root.is_absolute() else (
                f" ({root.resolve()}, from the working directory {Path.cwd()})")
            raise ArgSciChatDataError(f"{root}: ArgSciChat folder {what}{rel}")
        return root, str(source)
    return download_argscichat(), f"github:{ARGSCICHAT_REPO}@{ARGSCICHAT_COMMIT}"


def _check_fold_number(fold: object) -> int:
    if isinstance(fold, bool) or not isinstance(fold, numbers.Integral):
        raise TypeError(f"fold must be an int, one of {ARGSCICHAT_FOLDS}; got {fold!r} "
                        f"({type(fold).__name__})")
    if int(fold) not in ARGSCICHAT_FOLDS:
        raise ArgSciChatDataError(f"unknown fold {fold}; folds are {ARGSCICHAT_FOLDS}")
    return int(fold)


def load_argscichat(source: str | os.PathLike | None = None, fold: int = 0, *,
                    strict: bool = False, return_report: bool = False):
    """Load one official ArgSciChat fold as lists of :class:`MessagePair`.

    ``source``: a folder with ``fold_{k}_{split}.json`` (default: ``ARGSCICHAT_DATA``, else a
    one-time download of the pinned commit). ``fold`` must be an int in
    :data:`ARGSCICHAT_FOLDS` (a ``str`` or ``bool`` is a ``TypeError``). Gold facts are mapped
    to content-sentence indexes with :func:`map_facts`; dropped facts are listed in
    ``dropped_facts``. Leakage by content (:data:`ARGSCICHAT_ANOMALY_KINDS`) is counted in
    ``anomalies`` and the manifest, or an error when ``strict``. ``return_report=True``
    returns ``(fold, fold.anomaly_report())``.
    """
    fold = _check_fold_number(fold)
    root, label = _argscichat_root(source)
    splits: dict[str, list[MessagePair]] = {}
    dropped: list[DroppedFact] = []
    files: dict[str, str] = {}
    for split in ARGSCICHAT_SPLITS:
        path = root / f"fold_{fold}_{split}.json"
        splits[split], lost = _read_fold_file(path, split)
        dropped += lost
        files[split] = str(path)
    _check_fold(fold, splits, files)
    anomalies = _paper_leaks(fold, splits, files)
    if strict and anomalies:
        raise ArgSciChatDataError(
            f"{len(anomalies)} content anomaly(ies) (strict=True):\n  - "
            + "\n  - ".join(a["message"] for a in anomalies))
    for split in ARGSCICHAT_SPLITS:
        register("argscichat", label, files[split], f"fold{fold}/{split}")
        mine = [a for a in anomalies if a["split"] == split]
        ids = {k: [a["paper_id"] for a in mine if a["kind"] == k]
               for k in ARGSCICHAT_ANOMALY_KINDS}
        annotate(files[split], rows=len(splits[split]),
                 anomalies={k: len(v) for k, v in ids.items()},
                 anomaly_ids={k: v for k, v in ids.items() if v})
    data = ArgSciChatFold(fold=fold, dropped_facts=dropped, files=files, anomalies=anomalies,
                          **splits)
    if anomalies:
        warnings.warn(ArgSciChatDataWarning(
            f"fold {fold}: loaded with {len(anomalies)} leak_paper_content anomaly(ies): "
            + "; ".join(a["message"] for a in anomalies[:3])
            + ". load_argscichat(..., return_report=True) lists them, strict=True refuses "
            "them"), stacklevel=2)
    return (data, data.anomaly_report()) if return_report else data


def load_intents(source: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """Sentence-level dialogue intents (``intents.csv``); ``None`` when the file is absent.

    The file must be UTF-8 (a byte-order mark is accepted) with the :data:`INTENT_COLUMNS`,
    each named once, and one cell per column on every row; anything else is an
    :class:`ArgSciChatDataError` naming file, line and column.
    """
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if not source:
        return None
    path = Path(source).expanduser() / "intents.csv"
    if not path.is_file():
        return None
    reader = csv.reader(io.StringIO(_read_text(path), newline=""))
    numbered = [(reader.line_num, r) for r in reader]
    if not numbered:
        raise ArgSciChatDataError(f"{path}: empty file (no header row)")
    header = numbered[0][1]
    twice = sorted({c for c in header if header.count(c) > 1})
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
    register("argscichat", str(source), path, "intents")
    df = pd.DataFrame([r for _, r in rows], columns=header)
    annotate(path, rows=len(df))
    return df
