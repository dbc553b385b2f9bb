"""Checks of the ArgSciChat fold files: types and ids of papers and message pairs (errors
naming file, paper and pair), content anomalies (:data:`ARGSCICHAT_ANOMALY_KINDS`: loaded and
counted), the reading of one fold file into :class:`MessagePair` records, and the checks
across the splits of a fold (ids never cross; leakage by content)."""

from __future__ import annotations

from collections.abc import Sequence
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


def _is_str_list(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _check_paper(path: Path, title: str, paper: dict) -> str:
    """Type checks of one paper entry; returns its id as a string."""
    where = f"{path}: paper {shorten(title, 120)}"
    pid = paper["id"]
    if isinstance(pid, bool) or not isinstance(pid, (int, str)) or not str(pid).strip():
        raise ArgSciChatDataError(f"{where}: id is {describe(pid)}, expected an int or string")
    where = f"{path}: paper {shorten(title, 120)} (id {show_id(pid)})"
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




def _anomaly(kind: str, split: str, rid: str, paper_id: str, title: str, path: Path,
             message: str) -> dict[str, Any]:
    return {"kind": kind, "split": split, "id": rid, "paper_id": paper_id, "title": title,
            "file": str(path), "message": message}


def _extra_keys(what: str, obj: dict, known: Sequence[str]) -> str | None:
    """A message when a paper or pair object has keys that the loader does not read."""
    extra = [k for k in obj if k not in known]
    if not extra:
        return None
    shown = ", ".join(shorten(k) for k in extra[:10]) + (
        f" and {len(extra) - 10} more" if len(extra) > 10 else "")
    return (f"{what}: key(s) {shown} not read (a {'paper' if known is _PAPER_KEYS else 'pair'} "
            f"has {list(known)}); not loaded")


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


def _paper_entry(path: Path, split: str, title: str, paper: Any,
                 paper_ids: dict[str, tuple[str, str]], anomalies: list[dict[str, Any]]
                 ) -> tuple[str, str]:
    """One paper's checks (keys, types, its id unique in the file) and its paper-level
    anomalies; returns its id and how messages name it (file, title, id)."""
    missing = [k for k in _PAPER_KEYS if not isinstance(paper, dict) or k not in paper]
    if missing:
        raise ArgSciChatDataError(f"{path}: paper {shorten(title, 120)} lacks key(s) {missing}")
    paper_id = _check_paper(path, title, paper)
    at = f"{path}: paper {shorten(title, 120)} (id {show_id(paper_id)})"
    pkey = identity_key(paper_id)
    if pkey in paper_ids:
        other_id, other = paper_ids[pkey]
        what = ("the same id" if other_id == paper_id else clash_message(paper_id, other_id))
        raise ArgSciChatDataError(f"{at}: {what} as paper {shorten(other, 120)}; every paper "
                                  "has its own id")
    paper_ids[pkey] = (paper_id, title)
    extra = _extra_keys(at, paper, _PAPER_KEYS)
    if extra:
        anomalies.append(_anomaly("extra_key", split, paper_id, paper_id, paper["title"],
                                  path, extra))
    if identity_key(title) != identity_key(paper["title"]):
        anomalies.append(_anomaly(
            "paper_key_not_title", split, paper_id, paper_id, paper["title"], path,
            f"{at}: its key differs from its title {shorten(paper['title'], 120)}"))
    return paper_id, at


def _pair_entries(path: Path, split: str, title: str, paper: dict, paper_id: str, at: str,
                  seen: dict[str, tuple[str, str]], anomalies: list[dict[str, Any]]) -> None:
    """Every message pair's checks (keys, types, its id unique in the file) and extra keys."""
    for n, mp in enumerate(paper["message_pairs"]):
        missing = [k for k in _PAIR_KEYS if not isinstance(mp, dict) or k not in mp]
        if missing:
            rid = mp.get("id") if isinstance(mp, dict) else None
            raise ArgSciChatDataError(
                f"{path}: paper {shorten(title, 120)}, message pair {n} (id={shorten(rid)}) "
                f"lacks key(s) {missing}")
        where = f"{at}, pair {shorten(mp['id'])}"
        if not isinstance(mp["id"], str) or not identity_key(mp["id"]):
            raise ArgSciChatDataError(f"{where}: id is {describe(mp['id'])}, "
                                      f"expected a non-empty string")
        key = identity_key(mp["id"])
        if key in seen:
            other_id, other = seen[key]
            what = ("duplicate pair id" if other_id == mp["id"]
                    else f"pair id: {clash_message(mp['id'], other_id)}")
            raise ArgSciChatDataError(f"{where}: {what} (also in paper {shorten(other, 120)})")
        seen[key] = (mp["id"], title)
        _check_pair(where, mp)
        extra = _extra_keys(where, mp, _PAIR_KEYS)
        if extra:
            anomalies.append(_anomaly("extra_key", split, mp["id"], paper_id,
                                      paper["title"], path, extra))


def _mapped_facts(where: str, split: str, mp: dict, index: ContentIndex,
                  dropped: list[DroppedFact]) -> tuple[tuple[int, ...], list[tuple[int, ...]],
                                                       list[tuple[str, str]]]:
    """A pair's gold facts and earlier turns' facts as sentence indexes (what is lost goes
    to ``dropped``), and (kind, message) of each fact found nowhere or blank."""
    indexes, lost = map_facts(mp["facts"], index)
    dropped += [DroppedFact(split, mp["id"], f, r) for f, r in lost]
    found = [("facts", lost)]
    hist_idx = []
    for turn in mp["history_facts"]:
        idx, hlost = map_facts(turn, index)
        hist_idx.append(idx)
        dropped += [DroppedFact(split, mp["id"], f, r, "history_facts") for f, r in hlost]
        found.append(("history_facts", hlost))
    problems = []
    for field_name, lost_pieces in found:
        for piece, reason in lost_pieces:
            if reason != "title":
                kind = "fact_not_found" if field_name == "facts" else "history_fact_not_found"
                what = "blank" if reason == "empty" else \
                    "found neither in the content nor in the title"
                problems.append((kind, f"{where}, {field_name}: {shorten(piece)} is {what}"))
    return indexes, hist_idx, problems


def _paper_pairs(path: Path, split: str, paper: dict, paper_id: str, at: str,
                 content: tuple[str, ...], index: ContentIndex, dropped: list[DroppedFact],
                 anomalies: list[dict[str, Any]]) -> list[MessagePair]:
    """A checked paper's message pairs as records, with their fact and history anomalies."""
    mps = paper["message_pairs"]
    by_id = {mp["id"]: mp for mp in mps}
    keys = {identity_key(i): i for i in by_id}
    pairs = []
    for mp in mps:
        where = f"{at}, pair {shorten(mp['id'])}"
        indexes, hist_idx, problems = _mapped_facts(where, split, mp, index, dropped)
        problems += _history_anomalies(where, mp, by_id, keys)
        anomalies += [_anomaly(kind, split, mp["id"], paper_id, paper["title"], path, message)
                      for kind, message in problems]
        pairs.append(MessagePair(
            pair_id=mp["id"], paper_id=paper_id, title=paper["title"], content=content,
            dialogue_id=mp["history_ids"][0] if mp["history_ids"] else mp["id"],
            turn=len(mp["history_ids"]), query=mp["P_Message"], reply=mp["DE_Message"],
            history=tuple(mp["history"]), history_ids=tuple(mp["history_ids"]),
            facts=tuple(mp["facts"]), fact_indexes=indexes,
            history_fact_indexes=tuple(hist_idx)))
    return pairs


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
    pairs: list[MessagePair] = []
    dropped: list[DroppedFact] = []
    anomalies: list[dict[str, Any]] = []
    seen: dict[str, tuple[str, str]] = {}  # pair id key -> (pair id, paper title)
    paper_ids: dict[str, tuple[str, str]] = {}  # paper id key -> (paper id, paper key)
    for title, paper in raw.items():
        paper_id, at = _paper_entry(path, split, title, paper, paper_ids, anomalies)
        content = tuple(s.replace("\n", " ").strip() for s in paper["content"])
        index = ContentIndex(content, paper["title"])
        norms[split, paper_id] = index.norm
        _pair_entries(path, split, title, paper, paper_id, at, seen, anomalies)
        pairs += _paper_pairs(path, split, paper, paper_id, at, content, index, dropped,
                              anomalies)
    return pairs, dropped, anomalies


# --------------------------------------------------------------------------- a fold


def _crossing(owners: dict[str, tuple[str, MessagePair]], key: str, split: str,
              p: MessagePair) -> tuple[str, MessagePair, str] | None:
    """(split, pair, how the ids differ: empty when equal) of an earlier split's pair that
    already holds ``p``'s ``key`` (``paper_id`` or ``pair_id``, once normalised), else None;
    the first split to hold an id owns it."""
    value = getattr(p, key)
    prev = owners.setdefault(identity_key(value), (split, p))
    if prev[0] == split:
        return None
    other = getattr(prev[1], key)
    return prev[0], prev[1], "" if other == value else f" ({clash_message(value, other)})"


def check_fold(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str]) -> None:
    """Papers and pair ids (once normalised) never cross the splits of a fold."""
    owner: dict[str, tuple[str, MessagePair]] = {}
    pair_owner: dict[str, tuple[str, MessagePair]] = {}
    for split in ARGSCICHAT_SPLITS:
        for p in splits[split]:
            hit = _crossing(owner, "paper_id", split, p)
            if hit is not None:
                other_split, prev, same = hit
                raise ArgSciChatDataError(
                    f"fold {fold}: paper {shorten(p.title, 120)} (id {show_id(p.paper_id)}) is in "
                    f"both {files[other_split]} (pair {shorten(prev.pair_id)}) and "
                    f"{files[split]} (pair {shorten(p.pair_id)}); papers must not cross "
                    f"splits{same}")
            hit = _crossing(pair_owner, "pair_id", split, p)
            if hit is not None:
                other_split, prev, same = hit
                raise ArgSciChatDataError(
                    f"fold {fold}: pair id {shorten(p.pair_id)} "
                    f"(paper {shorten(p.title, 120)}) is in "
                    f"both {files[other_split]} and {files[split]}{same}")


def paper_leaks(fold: int, splits: dict[str, list[MessagePair]], files: dict[str, str],
                 norms: dict[tuple[str, str], list[str]] | None = None) -> list[dict[str, Any]]:
    """Papers of a later split whose content is in a paper of an earlier split (other id);
    ``norms``: each (split, paper id)'s normalised content sentences, when known."""
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
                        f"fold {fold}: paper {shorten(title, 120)} (id {show_id(pid)}) in "
                        f"{files[split]} shares {shared} of its {len(sents)} content sentences "
                        f"with paper {shorten(otitle, 120)} "
                        f"(id {oid}) in {files[earlier]} (normalised text)")})
                break
    return out
