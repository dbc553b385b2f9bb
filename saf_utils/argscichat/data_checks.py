"""Checks of the ArgSciChat fold files: types and ids of papers and message pairs (errors
naming file, paper and pair), content anomalies (:data:`ARGSCICHAT_ANOMALY_KINDS`: loaded and
counted), the reading of one fold file into :class:`MessagePair` records, and the checks
across the splits of a fold (ids never cross; leakage by content)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from saf_utils.argscichat.data_facts import ContentIndex, map_facts
from saf_utils.argscichat.data_schema import (
    _PAIR_KEYS,
    _PAPER_KEYS,
    ARGSCICHAT_SPLITS,
    LEAK_OVERLAP,
    ArgSciChatDataError,
    DroppedFact,
    MessagePair,
)
from saf_utils.data.reading import clash_message, describe, load_json_file, shorten, show_id
from saf_utils.text import identity_key, squash


def _text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _texts(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


#: What the fields of a paper and of a message pair must be, checked in this order:
#: (key, test, what is expected); a failed test is an error naming file, paper (pair), key.
_PAPER_FIELDS = (
    ("id", lambda v: isinstance(v, int | str) and not isinstance(v, bool) and bool(str(v).strip()),
     "an int or string"),
    ("title", _text, "a non-empty string"),
    ("content", lambda v: isinstance(v, list) and bool(v),
     "a non-empty list of sentence strings"),
    ("message_pairs", lambda v: isinstance(v, list) and bool(v), "a non-empty list (a dialogue)"),
)
_PAIR_FIELDS = (
    ("id", lambda v: isinstance(v, str) and bool(identity_key(v)), "a non-empty string"),
    ("P_Message", _text, "a non-empty string"),
    ("DE_Message", _text, "a non-empty string"),
    ("facts", _texts, "a list of strings"),
    ("history", _texts, "a list of strings"),
    ("history_ids", _texts, "a list of strings"),
    ("history_facts", lambda v: isinstance(v, list) and all(map(_texts, v)),
     "one list of fact strings per earlier turn"),
)


def _check_fields(where: str, obj: Any, keys: Sequence[str],
                  fields: Sequence[tuple[str, Callable[[Any], bool], str]]) -> None:
    """``obj`` (a paper or a pair) has every key and each field passes its test."""
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        raise ArgSciChatDataError(f"{where} lacks key(s) {missing}")
    for key, ok, expected in fields:
        if not ok(obj[key]):
            raise ArgSciChatDataError(f"{where}: {key} is {describe(obj[key])}, "
                                      f"expected {expected}")


def _claim(seen: dict[str, tuple[str, str]], value: str, title: str, where: str) -> None:
    """Record the id ``value`` of an entry of paper ``title``, or an error when an earlier
    entry of the file has it (once normalised: :func:`identity_key`), naming both."""
    key = identity_key(value)
    if key in seen:
        other_id, other = seen[key]
        same = "the same id" if other_id == value else clash_message(value, other_id)
        raise ArgSciChatDataError(f"{where}: {same} as in paper {shorten(other, 120)}")
    seen[key] = (value, title)


def _history_anomalies(where: str, mp: dict, by_id: dict[str, dict], keys: dict[str, str]
                       ) -> list[tuple[str, str]]:
    """(kind, message) for history ids naming no pair of the paper or the pair itself (by id:
    its own text is no earlier turn), and for history entries found in none of the earlier
    turns they name (their messages and facts, :func:`squash`)."""
    out = []
    known = []
    for hid in mp["history_ids"]:
        if identity_key(hid) == identity_key(mp["id"]):
            out.append(("history_id_self", f"{where}: history id {shorten(hid)} names this "
                                           "pair itself, not an earlier turn"))
        elif hid in by_id:
            known.append(by_id[hid])
        elif identity_key(hid) in keys:
            raise ArgSciChatDataError(
                f"{where}: history id: {clash_message(hid, keys[identity_key(hid)])}")
        else:
            out.append(("history_id_unknown", f"{where}: history id {shorten(hid)} names no "
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
                    f"(first: {shorten(extra[0])})"))
    return out


# --------------------------------------------------------------------------- one fold file


class _FoldFile:
    """The reading of one fold file: its message pairs, dropped facts and content anomalies,
    and the ids seen so far (identity key -> (id, paper key))."""

    def __init__(self, path: Path, split: str):
        self.path, self.split = path, split
        self.pairs: list[MessagePair] = []
        self.dropped: list[DroppedFact] = []
        self.anomalies: list[dict[str, Any]] = []
        self.paper_ids: dict[str, tuple[str, str]] = {}
        self.pair_ids: dict[str, tuple[str, str]] = {}

    def note(self, kind: str, rid: str, paper: dict, message: str) -> None:
        self.anomalies.append({"kind": kind, "split": self.split, "id": rid,
                               "paper_id": str(paper["id"]), "title": paper["title"],
                               "file": str(self.path), "message": message})

    def extra_keys(self, where: str, rid: str, paper: dict, obj: dict,
                   known: Sequence[str]) -> None:
        """An anomaly when a paper or pair object has keys that the loader does not read."""
        extra = [k for k in obj if k not in known]
        if extra:
            shown = ", ".join(shorten(k) for k in extra[:10]) + (
                f" and {len(extra) - 10} more" if len(extra) > 10 else "")
            what = "paper" if known is _PAPER_KEYS else "pair"
            self.note("extra_key", rid, paper, f"{where}: key(s) {shown} not read (a {what} "
                      f"has {list(known)}); not loaded")

    def paper(self, title: str, paper: Any) -> str:
        """One paper's checks and paper-level anomalies; how messages name it."""
        where = f"{self.path}: paper {shorten(title, 120)}"
        _check_fields(where, paper, _PAPER_KEYS, _PAPER_FIELDS[:1])
        paper_id = str(paper["id"])
        at = f"{where} (id {show_id(paper['id'])})"
        _check_fields(at, paper, (), _PAPER_FIELDS[1:])
        bad = next((i for i, v in enumerate(paper["content"]) if not isinstance(v, str)), None)
        if bad is not None:
            raise ArgSciChatDataError(f"{at}: content sentence {bad} is "
                                      f"{describe(paper['content'][bad])}, expected a string")
        _claim(self.paper_ids, paper_id, title, at)
        self.extra_keys(at, paper_id, paper, paper, _PAPER_KEYS)
        if identity_key(title) != identity_key(paper["title"]):
            self.note("paper_key_not_title", paper_id, paper,
                      f"{at}: its key differs from its title {shorten(paper['title'], 120)}")
        return at

    def check_pair(self, at: str, title: str, paper: dict, n: int, mp: Any) -> None:
        """One message pair's checks (keys, types, its id unique in the file), extra keys."""
        rid = mp.get("id") if isinstance(mp, dict) else None
        _check_fields(f"{at}, message pair {n} (id={shorten(rid)})", mp, _PAIR_KEYS, ())
        where = f"{at}, pair {shorten(mp['id'])}"
        _check_fields(where, mp, (), _PAIR_FIELDS)
        if len(mp["history_facts"]) != len(mp["history_ids"]):
            raise ArgSciChatDataError(f"{where}: {len(mp['history_facts'])} history_facts "
                                      f"entries for {len(mp['history_ids'])} history_ids")
        _claim(self.pair_ids, mp["id"], title, where)
        self.extra_keys(where, mp["id"], paper, mp, _PAIR_KEYS)

    def read_pairs(self, at: str, paper: dict, content: tuple[str, ...],
                   index: ContentIndex) -> None:
        """A checked paper's message pairs as records, with their fact and history anomalies."""
        by_id = {mp["id"]: mp for mp in paper["message_pairs"]}
        keys = {identity_key(i): i for i in by_id}
        for mp in paper["message_pairs"]:
            where = f"{at}, pair {shorten(mp['id'])}"
            indexes, lost = map_facts(mp["facts"], index)
            lost = [("facts", piece, reason) for piece, reason in lost]
            history = []
            for turn in mp["history_facts"]:
                idx, hlost = map_facts(turn, index)
                history.append(idx)
                lost += [("history_facts", piece, reason) for piece, reason in hlost]
            self.dropped += [DroppedFact(self.split, mp["id"], piece, reason, fld)
                             for fld, piece, reason in lost]
            problems = [("fact_not_found" if fld == "facts" else "history_fact_not_found",
                         f"{where}, {fld}: {shorten(piece)} is " + (
                             "blank" if reason == "empty"
                             else "found neither in the content nor in the title"))
                        for fld, piece, reason in lost if reason != "title"]
            for kind, message in problems + _history_anomalies(where, mp, by_id, keys):
                self.note(kind, mp["id"], paper, message)
            self.pairs.append(MessagePair(
                pair_id=mp["id"], paper_id=str(paper["id"]), title=paper["title"],
                content=content,
                dialogue_id=mp["history_ids"][0] if mp["history_ids"] else mp["id"],
                turn=len(mp["history_ids"]), query=mp["P_Message"], reply=mp["DE_Message"],
                history=tuple(mp["history"]), history_ids=tuple(mp["history_ids"]),
                facts=tuple(mp["facts"]), fact_indexes=indexes,
                history_fact_indexes=tuple(history)))


def read_fold_file(path: Path, split: str, norms: dict[tuple[str, str], list[str]]
                   ) -> tuple[list[MessagePair], list[DroppedFact], list[dict[str, Any]]]:
    """The message pairs of one fold file, its dropped facts, and its content anomalies;
    ``norms`` receives each paper's normalised content sentences (for the leakage check)."""
    if not path.is_file():
        raise ArgSciChatDataError(f"{path}: missing fold file")
    raw = load_json_file(path, ArgSciChatDataError)
    if not isinstance(raw, dict):
        raise ArgSciChatDataError(f"{path}: expected an object {{paper title: paper}}")
    if not raw:
        raise ArgSciChatDataError(f"{path}: no papers (empty object)")
    file = _FoldFile(path, split)
    for title, paper in raw.items():
        at = file.paper(title, paper)
        for n, mp in enumerate(paper["message_pairs"]):
            file.check_pair(at, title, paper, n, mp)
        content = tuple(s.replace("\n", " ").strip() for s in paper["content"])
        index = ContentIndex(content, paper["title"])
        norms[split, str(paper["id"])] = index.norm
        file.read_pairs(at, paper, content, index)
    return file.pairs, file.dropped, file.anomalies


# --------------------------------------------------------------------------- a fold


def check_fold(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str]) -> None:
    """Papers and pair ids (once normalised) never cross the splits of a fold: the first
    split to hold an id owns it."""
    owners: dict[str, dict[str, tuple[str, MessagePair]]] = {"paper_id": {}, "pair_id": {}}
    for split in ARGSCICHAT_SPLITS:
        for p in splits[split]:
            for key, owner in owners.items():
                value = getattr(p, key)
                other_split, prev = owner.setdefault(identity_key(value), (split, p))
                if other_split == split:
                    continue
                other = getattr(prev, key)
                same = "" if other == value else f" ({clash_message(value, other)})"
                raise ArgSciChatDataError(f"fold {fold}: " + (
                    f"paper {shorten(p.title, 120)} (id {show_id(p.paper_id)}) is in both "
                    f"{files[other_split]} (pair {shorten(prev.pair_id)}) and {files[split]} "
                    f"(pair {shorten(p.pair_id)}); papers must not cross splits{same}"
                    if key == "paper_id" else
                    f"pair id {shorten(p.pair_id)} (paper {shorten(p.title, 120)}) is in both "
                    f"{files[other_split]} and {files[split]}{same}"))


def paper_leaks(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str],
                norms: dict[tuple[str, str], list[str]]) -> list[dict[str, Any]]:
    """Papers of a later split whose content is in a paper of an earlier split (other id);
    ``norms``: each (split, paper id)'s normalised content sentences."""
    papers = {split: {p.paper_id: (p.title, frozenset(k for k in norms[split, p.paper_id] if k))
                      for p in splits[split]} for split in ARGSCICHAT_SPLITS}
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
                        f"fold {fold}: paper {shorten(title, 120)} (id {show_id(pid)}) in "
                        f"{files[split]} shares {shared} of its {len(sents)} content sentences "
                        f"with paper {shorten(otitle, 120)} "
                        f"(id {oid}) in {files[earlier]} (normalised text)")})
                break
    return out
