"""ArgSciChat loader: the five official folds, from a local copy or a pinned GitHub download.

:func:`load_argscichat` returns one fold as :class:`ArgSciChatFold` of :class:`MessagePair`
records; gold fact strings are mapped to content-sentence indexes as the official baseline
script does (:func:`map_facts`, through a per-paper :class:`ContentIndex`), and what cannot
be mapped is counted, not asserted.

Every malformed or unreadable input (missing, unreadable or non-UTF-8 file, a folder that is
a file, duplicate JSON key, missing key, wrong type, a paper or pair id in two splits, two
papers with one id, ids equal only once normalised by :func:`saf_utils.text.identity_key`)
is an :class:`ArgSciChatDataError` naming file, paper and pair. Content anomalies
(:data:`ARGSCICHAT_ANOMALY_KINDS`) are loaded and counted: leakage by content, a paper
whose content sentences (normalised with :func:`saf_utils.text.squash`) appear in an
earlier split of the fold under another key or id (``leak_paper_content``, counted on the
later split: train < val < test); a paper key that is not its title; facts and history
facts found nowhere in the paper; history entries beyond the turns named by
``history_ids``; history ids that name no pair; keys of a paper or message pair that
the loader does not read (``extra_key``). They are listed in
``ArgSciChatFold.anomalies``, written to the manifest's data sources, announced with an
:class:`ArgSciChatDataWarning`, and an error with ``strict=True``.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import numbers
import os
import re
import urllib.error
import urllib.request
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.loading import (
    DuplicateKey,
    clash_message,
    clip,
    describe,
    folder_problem,
    load_json_text,
    read_utf8,
    show,
    show_id,
)
from saf_utils.provenance import DataError, annotate, register, sha256_file
from saf_utils.text import identity_key, split_sentences, squash


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
#: Content anomalies that are loaded and counted (``strict=True``: errors): leakage by
#: content; a paper whose key is not its title; a gold fact (``facts``) or an earlier turn's
#: fact (``history_facts``) found neither in the content nor in the title, or blank (dropped
#: from ``fact_indexes`` / ``history_fact_indexes``); history entries found in none of the
#: earlier turns named by ``history_ids`` (their messages and facts); a history id that names
#: no pair of the paper; a paper or message pair with keys the loader does not read
#: (``extra_key``, one per object, its paper or pair id as the id: never dropped silently).
ARGSCICHAT_ANOMALY_KINDS = ("leak_paper_content", "paper_key_not_title", "fact_not_found",
                            "history_fact_not_found", "history_longer_than_ids",
                            "history_id_unknown", "extra_key")
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
    """A fact (piece) not mapped to a content sentence: in the title, nowhere, or blank."""

    split: str
    pair_id: str
    fact: str
    reason: str  # "title" | "not_found" | "empty"
    field: str = "facts"  # "facts" | "history_facts" (an earlier turn's facts)


@dataclass
class ArgSciChatFold:
    """The train/val/test message pairs of one official fold."""

    fold: int
    train: list[MessagePair]
    val: list[MessagePair]
    test: list[MessagePair]
    dropped_facts: list[DroppedFact] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    #: Content anomalies: {kind, split, id (paper id, or pair id for pair kinds), paper_id,
    #: title, file, message}.
    anomalies: list[dict[str, Any]] = field(default_factory=list)

    def __getitem__(self, split: str) -> list[MessagePair]:
        if split not in ARGSCICHAT_SPLITS:
            raise KeyError(f"unknown split {split!r}; known: {ARGSCICHAT_SPLITS}")
        return getattr(self, split)

    def fact_report(self) -> dict[str, int]:
        """How many gold facts were mapped to sentences and how many dropped, by reason
        (``history_dropped_*``: the same for the earlier turns' facts, ``history_facts``)."""
        pairs = self.train + self.val + self.test
        report = {"pairs": len(pairs), "facts": sum(len(p.facts) for p in pairs)}
        report["pairs_without_facts"] = sum(not p.facts for p in pairs)
        report["pairs_without_fact_sentences"] = sum(not p.fact_indexes for p in pairs)
        for prefix, fld in (("", "facts"), ("history_", "history_facts")):
            for reason in ("title", "not_found", "empty"):
                report[f"{prefix}dropped_{reason}"] = sum(
                    d.reason == reason and d.field == fld for d in self.dropped_facts)
        return report

    def anomaly_report(self) -> pd.DataFrame:
        """Content anomalies per split and kind (:data:`ARGSCICHAT_REPORT_COLUMNS`; zeros kept)."""
        rows = []
        for split in ARGSCICHAT_SPLITS:
            for kind in ARGSCICHAT_ANOMALY_KINDS:
                hits = [a for a in self.anomalies if a["split"] == split and a["kind"] == kind]
                rows.append({"fold": self.fold, "split": split, "kind": kind,
                             "count": len(hits), "ids": [a["id"] for a in hits],
                             "files": sorted({Path(a["file"]).name for a in hits})})
        return pd.DataFrame(rows, columns=list(ARGSCICHAT_REPORT_COLUMNS))


class ContentIndex:
    """A paper's content sentences, normalised once, for fact lookups (:func:`map_facts`).

    The normalised sentences (:func:`squash`: no spaces, no punctuation, so never a newline)
    are joined by newlines: "the first sentence that contains a piece" is one ``str.find``
    over the joined text and a bisection of the sentence starts, so a paper of 100k
    sentences maps each fact in microseconds instead of a scan per fact.
    """

    def __init__(self, content: Sequence[str], title: str):
        self.norm = [squash(s) for s in content]
        self.title = squash(title)
        self.text = "\n".join(self.norm)
        self.starts = []
        pos = 0
        for n in self.norm:
            self.starts.append(pos)
            pos += len(n) + 1

    def find(self, key: str) -> int | None:
        """Index of the first content sentence containing ``key`` (normalised), or None."""
        at = self.text.find(key) if key else -1
        return None if at < 0 else bisect.bisect_right(self.starts, at) - 1


def map_facts(
    facts: Sequence[str], content: Sequence[str] | ContentIndex, title: str = ""
) -> tuple[tuple[int, ...], list[tuple[str, str]]]:
    """Map gold fact strings to content-sentence indexes, as the official baseline script.

    Like ``fact_selection_baselines.py`` of the ArgSciChat release: a fact is split into
    sentences, and each piece maps to the first content sentence that contains it after
    lower-casing and ``punctuation_filtering`` (here :func:`squash`, which first applies the
    package's one text identity, :func:`saf_utils.text.identity_key`). A piece found only in
    the title, or nowhere, is returned as dropped with the reason ("title", "not_found";
    "empty" for blank facts) where the official script would stop with an assertion.
    ``content`` may be a :class:`ContentIndex` built once per paper (then ``title`` is its).
    """
    index = content if isinstance(content, ContentIndex) else ContentIndex(content, title)
    indexes: set[int] = set()
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        fact = fact.replace("\n", " ").strip()
        whole = squash(fact)
        if not whole:
            dropped.append((fact, "empty"))
            continue
        pieces = [fact] if index.find(whole) is not None else split_sentences(fact)
        for piece in pieces:
            npiece = squash(piece)
            if not npiece:
                continue
            hit = index.find(npiece)
            if hit is not None:
                indexes.add(hit)
            else:
                dropped.append((piece, "title" if npiece in index.title else "not_found"))
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


def _check_paper(path: Path, title: str, paper: dict) -> str:
    """Type checks of one paper entry; returns its id as a string."""
    where = f"{path}: paper {show(title, 120)}"
    pid = paper["id"]
    if isinstance(pid, bool) or not isinstance(pid, (int, str)) or not str(pid).strip():
        raise ArgSciChatDataError(f"{where}: id is {describe(pid)}, expected an int or string")
    where = f"{path}: paper {show(title, 120)} (id {show_id(pid)})"
    if not isinstance(paper["title"], str) or not paper["title"].strip():
        raise ArgSciChatDataError(f"{where}: title is {describe(paper['title'])}, "
                                  f"expected a non-empty string")
    content = paper["content"]
    if not isinstance(content, list) or not content:
        raise ArgSciChatDataError(f"{where}: content is {describe(content)}, "
                                  f"expected a non-empty list of sentence strings")
    bad = next((i for i, v in enumerate(content) if not isinstance(v, str)), None)
    if bad is not None:
        raise ArgSciChatDataError(f"{where}: content sentence {bad} is "
                                  f"{describe(content[bad])}, expected a string")
    if not isinstance(paper["message_pairs"], list) or not paper["message_pairs"]:
        raise ArgSciChatDataError(
            f"{where}: empty dialogue (message_pairs is {describe(paper['message_pairs'])}, "
            f"expected a non-empty list)")
    return str(pid)


def _check_pair(where: str, mp: dict) -> None:
    """Type checks of one message pair (``where`` names file, paper and pair)."""
    for key in ("P_Message", "DE_Message"):
        if not isinstance(mp[key], str):
            raise ArgSciChatDataError(f"{where}: {key} is {describe(mp[key])}, expected a string")
        if not mp[key].strip():
            raise ArgSciChatDataError(f"{where}: {key} is empty")
    for key in ("facts", "history", "history_ids"):
        if isinstance(mp[key], str):
            raise ArgSciChatDataError(f"{where}: {key} is a string ({describe(mp[key])}), "
                                      f"expected a list of strings")
        if not _is_str_list(mp[key]):
            raise ArgSciChatDataError(f"{where}: {key} is {describe(mp[key])}, "
                                      f"expected a list of strings")
    hf = mp["history_facts"]
    if not isinstance(hf, list) or not all(_is_str_list(t) for t in hf):
        raise ArgSciChatDataError(f"{where}: history_facts is {describe(hf)}, expected one "
                                  f"list of fact strings per earlier turn")
    if len(hf) != len(mp["history_ids"]):
        raise ArgSciChatDataError(f"{where}: {len(hf)} history_facts entries for "
                                  f"{len(mp['history_ids'])} history_ids")


def _read_text(path: Path) -> str:
    """A file's text as UTF-8 (a byte-order mark is dropped), or an error naming the file."""
    return read_utf8(path, ArgSciChatDataError)


def _load_json(path: Path) -> Any:
    """Parse a JSON file, refusing a key twice in one object (a paper title, a pair key)."""
    text = _read_text(path)
    try:
        return load_json_text(text)
    except DuplicateKey as exc:
        key = exc.args[0][0]
        pattern = re.compile("|".join(re.escape(json.dumps(key, ensure_ascii=a)) + r"\s*:"
                                      for a in (False, True)))
        lines = [n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        where = f" (lines {', '.join(map(str, lines[:5]))})" if lines else ""
        raise ArgSciChatDataError(
            f"{path}: duplicate key {show(key)} in one JSON object{where}; the later value "
            "would silently replace the earlier one") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of > 4300 digits
        raise ArgSciChatDataError(f"{path}: not valid JSON ({clip(str(exc))})") from None


def _anomaly(kind: str, split: str, rid: str, paper_id: str, title: str, path: Path,
             message: str) -> dict[str, Any]:
    return {"kind": kind, "split": split, "id": rid, "paper_id": paper_id, "title": title,
            "file": str(path), "message": message}


def _extra_keys(what: str, obj: dict, known: Sequence[str]) -> str | None:
    """A message when a paper or pair object has keys that the loader does not read."""
    extra = [k for k in obj if k not in known]
    if not extra:
        return None
    shown = ", ".join(show(k) for k in extra[:10]) + (
        f" and {len(extra) - 10} more" if len(extra) > 10 else "")
    return (f"{what}: key(s) {shown} not read (a {'paper' if known is _PAPER_KEYS else 'pair'} "
            f"has {list(known)}); not loaded")


def _history_anomalies(where: str, mp: dict, by_id: dict[str, dict], keys: dict[str, str]
                       ) -> list[tuple[str, str]]:
    """(kind, message) for history ids naming no pair of the paper, and for history entries
    found in none of the earlier turns they name (their messages and facts, :func:`squash`)."""
    out = []
    known = []
    for hid in mp["history_ids"]:
        if hid in by_id:
            known.append(by_id[hid])
        elif identity_key(hid) in keys:
            raise ArgSciChatDataError(
                f"{where}: history id: {clash_message(hid, keys[identity_key(hid)])}")
        else:
            out.append(("history_id_unknown", f"{where}: history id {show(hid)} names no "
                                              "message pair of this paper"))
    if not mp["history"]:
        return out
    earlier = "\n".join(squash(t) for e in known
                        for t in (e["P_Message"], e["DE_Message"], *e["facts"]))
    extra = [h for h in mp["history"] if squash(h) and squash(h) not in earlier]
    if extra:
        out.append(("history_longer_than_ids",
                    f"{where}: {len(extra)} of {len(mp['history'])} history entries are in "
                    f"none of the {len(known)} earlier turn(s) named by history_ids "
                    f"(first: {show(extra[0])})"))
    return out


def _read_fold_file(path: Path, split: str, norms: dict[tuple[str, str], list[str]]
                    ) -> tuple[list[MessagePair], list[DroppedFact], list[dict[str, Any]]]:
    """The message pairs of one fold file, its dropped facts, and its content anomalies.

    ``norms`` receives each paper's normalised content sentences (for the leakage check).
    """
    if not path.is_file():
        raise ArgSciChatDataError(f"{path}: missing fold file")
    raw = _load_json(path)
    if not isinstance(raw, dict):
        raise ArgSciChatDataError(f"{path}: expected an object {{paper title: paper}}")
    if not raw:
        raise ArgSciChatDataError(f"{path}: no papers (empty object)")
    pairs: list[MessagePair] = []
    dropped: list[DroppedFact] = []
    anomalies: list[dict[str, Any]] = []
    seen: dict[str, tuple[str, str]] = {}  # pair id key -> (pair id, paper title)
    paper_ids: dict[str, tuple[str, str]] = {}  # paper id key -> (paper id, paper key)
    for title, paper in raw.items():
        missing = [k for k in _PAPER_KEYS if not isinstance(paper, dict) or k not in paper]
        if missing:
            raise ArgSciChatDataError(f"{path}: paper {show(title, 120)} lacks key(s) {missing}")
        paper_id = _check_paper(path, title, paper)
        at = f"{path}: paper {show(title, 120)} (id {show_id(paper_id)})"
        pkey = identity_key(paper_id)
        if pkey in paper_ids:
            other_id, other = paper_ids[pkey]
            what = ("the same id" if other_id == paper_id else clash_message(paper_id, other_id))
            raise ArgSciChatDataError(f"{at}: {what} as paper {show(other, 120)}; every paper "
                                      "has its own id")
        paper_ids[pkey] = (paper_id, title)
        extra = _extra_keys(at, paper, _PAPER_KEYS)
        if extra:
            anomalies.append(_anomaly("extra_key", split, paper_id, paper_id, paper["title"],
                                      path, extra))
        if identity_key(title) != identity_key(paper["title"]):
            anomalies.append(_anomaly(
                "paper_key_not_title", split, paper_id, paper_id, paper["title"], path,
                f"{at}: its key differs from its title {show(paper['title'], 120)}"))
        content = tuple(s.replace("\n", " ").strip() for s in paper["content"])
        index = ContentIndex(content, paper["title"])
        norms[split, paper_id] = index.norm
        mps = paper["message_pairs"]
        for n, mp in enumerate(mps):
            missing = [k for k in _PAIR_KEYS if not isinstance(mp, dict) or k not in mp]
            if missing:
                rid = mp.get("id") if isinstance(mp, dict) else None
                raise ArgSciChatDataError(
                    f"{path}: paper {show(title, 120)}, message pair {n} (id={show(rid)}) "
                    f"lacks key(s) {missing}")
            where = f"{at}, pair {show(mp['id'])}"
            if not isinstance(mp["id"], str) or not identity_key(mp["id"]):
                raise ArgSciChatDataError(f"{where}: id is {describe(mp['id'])}, "
                                          f"expected a non-empty string")
            key = identity_key(mp["id"])
            if key in seen:
                other_id, other = seen[key]
                what = ("duplicate pair id" if other_id == mp["id"]
                        else f"pair id: {clash_message(mp['id'], other_id)}")
                raise ArgSciChatDataError(f"{where}: {what} (also in paper {show(other, 120)})")
            seen[key] = (mp["id"], title)
            _check_pair(where, mp)
            extra = _extra_keys(where, mp, _PAIR_KEYS)
            if extra:
                anomalies.append(_anomaly("extra_key", split, mp["id"], paper_id,
                                          paper["title"], path, extra))
        by_id = {mp["id"]: mp for mp in mps}
        keys = {identity_key(i): i for i in by_id}
        for mp in mps:
            where = f"{at}, pair {show(mp['id'])}"
            indexes, lost = map_facts(mp["facts"], index)
            dropped += [DroppedFact(split, mp["id"], f, r) for f, r in lost]
            found = [(mp["facts"], "facts", indexes, lost)]
            hist_idx = []
            for turn in mp["history_facts"]:
                idx, hlost = map_facts(turn, index)
                hist_idx.append(idx)
                dropped += [DroppedFact(split, mp["id"], f, r, "history_facts")
                            for f, r in hlost]
                found.append((turn, "history_facts", idx, hlost))
            for _, field_name, _, lost_pieces in found:
                for piece, reason in lost_pieces:
                    if reason != "title":
                        kind = ("fact_not_found" if field_name == "facts"
                                else "history_fact_not_found")
                        what = "blank" if reason == "empty" else \
                            "found neither in the content nor in the title"
                        anomalies.append(_anomaly(
                            kind, split, mp["id"], paper_id, paper["title"], path,
                            f"{where}, {field_name}: {show(piece)} is {what}"))
            for kind, message in _history_anomalies(where, mp, by_id, keys):
                anomalies.append(_anomaly(kind, split, mp["id"], paper_id, paper["title"],
                                          path, message))
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
                    history_fact_indexes=tuple(hist_idx),
                )
            )
    return pairs, dropped, anomalies


def _check_fold(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str]) -> None:
    """Papers and pair ids (once normalised) never cross the splits of a fold."""
    owner: dict[str, tuple[str, MessagePair]] = {}
    pair_owner: dict[str, tuple[str, MessagePair]] = {}
    for split in ARGSCICHAT_SPLITS:
        for p in splits[split]:
            prev = owner.get(identity_key(p.paper_id))
            if prev is not None and prev[0] != split:
                same = "" if prev[1].paper_id == p.paper_id else \
                    f" ({clash_message(p.paper_id, prev[1].paper_id)})"
                raise ArgSciChatDataError(
                    f"fold {fold}: paper {show(p.title, 120)} (id {show_id(p.paper_id)}) is in "
                    f"both {files[prev[0]]} (pair {show(prev[1].pair_id)}) and {files[split]} "
                    f"(pair {show(p.pair_id)}); papers must not cross splits{same}")
            owner.setdefault(identity_key(p.paper_id), (split, p))
            prev = pair_owner.get(identity_key(p.pair_id))
            if prev is not None and prev[0] != split:
                same = "" if prev[1].pair_id == p.pair_id else \
                    f" ({clash_message(p.pair_id, prev[1].pair_id)})"
                raise ArgSciChatDataError(
                    f"fold {fold}: pair id {show(p.pair_id)} (paper {show(p.title, 120)}) is in "
                    f"both {files[prev[0]]} and {files[split]}{same}")
            pair_owner.setdefault(identity_key(p.pair_id), (split, p))


def _paper_leaks(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str],
                 norms: dict[tuple[str, str], list[str]] | None = None) -> list[dict[str, Any]]:
    """Papers of a later split whose content is in a paper of an earlier split (other id).

    ``norms``: each (split, paper id)'s normalised content sentences, when already known.
    """
    norms = norms or {}
    papers: dict[str, dict[str, tuple[str, frozenset[str]]]] = {}
    for split in ARGSCICHAT_SPLITS:
        papers[split] = {}
        for p in splits[split]:
            if p.paper_id not in papers[split]:
                norm = norms.get((split, p.paper_id)) or map(squash, p.content)
                papers[split][p.paper_id] = (p.title, frozenset(k for k in norm if k))
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
                    "kind": "leak_paper_content", "split": split, "id": pid, "paper_id": pid,
                    "title": title, "file": files[split],
                    "message": (
                        f"fold {fold}: paper {show(title, 120)} (id {show_id(pid)}) in "
                        f"{files[split]} shares {shared} of its {len(sents)} content sentences "
                        f"with paper {show(otitle, 120)} "
                        f"(id {oid}) in {files[earlier]} (normalised text)")})
                break
    return out


def _argscichat_root(source: str | os.PathLike | None) -> tuple[Path, str]:
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if source:
        root = Path(source).expanduser()
        problem = folder_problem(root, "ArgSciChat folder")
        if problem:
            raise ArgSciChatDataError(problem)
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
    anomalies: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    norms: dict[tuple[str, str], list[str]] = {}
    for split in ARGSCICHAT_SPLITS:
        path = root / f"fold_{fold}_{split}.json"
        splits[split], lost, found = _read_fold_file(path, split, norms)
        dropped += lost
        anomalies += found
        files[split] = str(path)
    _check_fold(fold, splits, files)
    anomalies += _paper_leaks(fold, splits, files, norms)
    if strict and anomalies:
        raise ArgSciChatDataError(
            f"{len(anomalies)} content anomaly(ies) (strict=True):\n  - "
            + "\n  - ".join(a["message"] for a in anomalies[:20])
            + (f"\n  ... and {len(anomalies) - 20} more" if len(anomalies) > 20 else ""))
    for split in ARGSCICHAT_SPLITS:
        register("argscichat", label, files[split], f"fold{fold}/{split}")
        mine = [a for a in anomalies if a["split"] == split]
        ids = {k: [a["id"] for a in mine if a["kind"] == k] for k in ARGSCICHAT_ANOMALY_KINDS}
        annotate(files[split], rows=len(splits[split]),
                 anomalies={k: len(v) for k, v in ids.items()},
                 anomaly_ids={k: v for k, v in ids.items() if v})
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
    """Sentence-level dialogue intents (``intents.csv``); ``None`` when the file is absent
    from an existing folder (a ``source`` that is a file or does not exist is an error).

    The file must be UTF-8 (a byte-order mark is accepted) with the :data:`INTENT_COLUMNS`,
    each named once, and one cell per column on every row; anything else is an
    :class:`ArgSciChatDataError` naming file, line and column.
    """
    source = source or os.environ.get("ARGSCICHAT_DATA")
    if not source:
        return None
    problem = folder_problem(Path(source).expanduser(), "ArgSciChat folder")
    if problem:
        raise ArgSciChatDataError(problem)
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
