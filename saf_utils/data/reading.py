"""What both data loaders share: reading files (UTF-8, JSON refusing a key twice), showing any
cell value in a few dozen characters, matching ids once normalised, reporting content
anomalies. Functions that raise take the loader's :class:`~saf_utils.data.provenance.DataError`
subclass as ``error``."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from saf_utils.text import identity_key

#: Characters of a value's ``repr`` shown in a message before it is cut (with its length).
SHOW_LIMIT = 60
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class DuplicateKey(ValueError):
    """A key twice in one JSON object (``args[0]``: the sorted keys)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` that refuses a key twice in one object."""
    out = dict(pairs)
    if len(out) != len(pairs):
        keys = [k for k, _ in pairs]
        raise DuplicateKey(sorted({k for k in keys if keys.count(k) > 1}))
    return out


def read_utf8(path: Path, error: Callable[[str], Exception]) -> str:
    """A file's text as UTF-8 (a byte-order mark is dropped), or ``error(message)`` naming it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise error(f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} on line {line}, "
                    f"offset {exc.start}; e.g. Latin-1); save it as UTF-8") from None


#: One decoder for every call: ``json.loads(text, object_pairs_hook=...)`` builds a new
#: ``JSONDecoder`` per call, which costs more than parsing a short JSONL line.
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)


def load_json_text(text: str) -> Any:
    """``json.loads`` with :func:`unique_keys`, through one shared decoder (fast on JSONL)."""
    if text[:1] in ("", " ", "\t", "\n", "\r", "\ufeff"):
        return json.loads(text, object_pairs_hook=unique_keys)
    value, end = _DECODER.raw_decode(text)
    return value if end == len(text) else json.loads(text, object_pairs_hook=unique_keys)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (as parquet gives nested cells) as Python values."""
    if hasattr(value, "tolist") and type(value).__module__ == "numpy":
        return value.tolist()
    return value


def shorten(value: Any, limit: int = SHOW_LIMIT) -> str:
    """``repr(value)``, or for a long one its first ``limit`` characters and its size; safe
    for any value (``repr`` of an integer fails beyond 4300 digits)."""
    value = _plain(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1
        head = str(value)[:20] if digits < 4000 else "?"
        return f"{head}... (an integer of about {digits} digits)"
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not hide the data error
        return f"<{type(value).__name__} that cannot be shown: {type(exc).__name__}>"
    if len(text) <= limit:
        return text
    if isinstance(value, str | bytes):
        size = f"{len(value)} {'characters' if isinstance(value, str) else 'bytes'}"
    elif isinstance(value, list | tuple | dict | set):
        size = f"{len(value)} items"
    else:
        size = f"{len(text)} characters as text"
    return f"{text[:limit]}... ({size})"


def clip(text: str, limit: int = 300) -> str:
    """A message part (an exception's text) cut to ``limit`` characters, with its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def show_id(value: Any) -> str:
    """An id as written (``t1``, ``7``) when it is short and printable, else :func:`shorten`."""
    if isinstance(value, str) and len(value) <= SHOW_LIMIT and value.isprintable():
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 128:
        return str(value)
    return shorten(value)


def describe(value: Any, limit: int = SHOW_LIMIT) -> str:
    """:func:`shorten` with the value's type: ``5 (int)``, ``'abc...' (str)``."""
    return f"{shorten(value, limit)} ({type(_plain(value)).__name__})"


def is_int64(value: int) -> bool:
    """Whether an integer fits the 64-bit column types of Arrow and parquet."""
    return INT64_MIN <= value <= INT64_MAX


def id_key(value: Any) -> Any:
    """The identity of an id: :func:`identity_key` of a string id, an integer id as it is."""
    return identity_key(value) if isinstance(value, str) else value


def id_keys(ids: pd.Series) -> list[Any]:
    """:func:`id_key` of every cell of an id column; printable ASCII ids without extra
    spaces (the common case) are their own key, found with one Arrow pass."""
    values = ids.tolist()
    if isinstance(ids.dtype, pd.StringDtype):
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = pa.array(ids)
        spaced = pc.or_kleene(pc.or_kleene(pc.match_substring(arr, "  "), pc.starts_with(arr, " ")),
                              pc.ends_with(arr, " "))
        clean = pc.and_kleene(pc.and_kleene(pc.string_is_ascii(arr), pc.ascii_is_printable(arr)),
                              pc.invert(spaced))
        mask = clean.fill_null(False).to_numpy(zero_copy_only=False)
        return [v if ok else (identity_key(v) if isinstance(v, str) else None)
                for v, ok in zip(values, mask, strict=True)]
    return [identity_key(v) if isinstance(v, str) else
            v if isinstance(v, int) and not isinstance(v, bool) else None for v in values]


def id_clashes(ids: Sequence[Any], keys: Sequence[Any] | None = None
               ) -> list[tuple[int, int, bool]]:
    """``(i, first, exact)`` for every id equal to an earlier one (position ``first``);
    ``exact``: a plain duplicate, else equal only after :func:`identity_key`. ``keys``: the
    ids' :func:`id_key` when already known."""
    keys = [id_key(v) for v in ids] if keys is None else keys
    try:
        if len(set(keys)) == len(keys):
            return []  # the common case, at C speed: no two keys alike
    except TypeError:  # an unhashable id: the loop below says so
        pass
    first_key: dict[Any, int] = {}
    first_value: dict[Any, int] = {}
    out = []
    for i, (value, key) in enumerate(zip(ids, keys, strict=True)):
        key = (type(value) is str, key)
        if key in first_key:
            exact = (type(value), value) in first_value
            out.append((i, first_value[type(value), value] if exact else first_key[key], exact))
        else:
            first_key[key] = i
        first_value.setdefault((type(value), value), i)
    return out


def clash_message(a: Any, b: Any) -> str:
    """Why two ids that are written differently are one id (non-ASCII ids shown escaped,
    so that NFC ``'Pr\\xfcfung'`` and NFD ``'Pru\\u0308fung'`` look different)."""
    def shown(v: Any) -> str:
        if not isinstance(v, str) or v.isascii():
            return shorten(v)
        text = ascii(v)
        return text if len(text) <= SHOW_LIMIT else f"{text[:SHOW_LIMIT]}... ({len(v)} characters)"

    return (f"id {shown(a)} equals id {shown(b)} once normalised (Unicode NFKC, whitespace "
            "trimmed and collapsed, invisible characters removed: "
            "saf_utils.text.identity_key); write each id one way")


def folder_problem(path: Path, what: str, label: str | None = None) -> str | None:
    """A message when ``path`` is not an existing folder (missing, or a file: then it names
    the folder to give), else ``None``; ``label``: how the user wrote the path."""
    if path.is_dir():
        return None
    label = str(path) if label is None else label
    if path.exists():
        parent = path.parent.parent if path.parent.name == "data" else path.parent
        return f"{label}: {what} is not a folder: this is a file; give its folder ({parent})"
    where = "" if label == str(path.resolve()) else (
        f" ({path.resolve()}, from the working directory {Path.cwd()})")
    return f"{label}: {what} does not exist{where}"


# --------------------------------------------------------------------------- JSON files


def load_json_file(path: Path, error: Callable[[str], Exception]) -> Any:
    """A JSON file's value, or ``error(message)`` naming the file: not UTF-8, not valid JSON,
    or a key twice in one object (with the lines where it stands)."""
    text = read_utf8(path, error)
    try:
        return load_json_text(text)
    except DuplicateKey as exc:
        key = exc.args[0][0]  # the lines where it stands as an object key
        pattern = re.compile("|".join(re.escape(json.dumps(key, ensure_ascii=a)) + r"\s*:"
                                      for a in (False, True)))
        lines = [n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        where = f" (lines {', '.join(map(str, lines[:5]))})" if lines else ""
        raise error(f"{path}: duplicate key {shorten(key)} in one JSON object{where}; the later "
                    "value would silently replace the earlier one") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of > 4300 digits
        raise error(f"{path}: not valid JSON ({clip(str(exc))})") from None


def load_json_record(line: str, line_no: int) -> dict[str, Any]:
    """One JSONL line as an object, or a ValueError naming the line."""
    try:
        rec = load_json_text(line)
    except DuplicateKey as exc:
        raise ValueError(f"line {line_no}: duplicate key(s) {exc.args[0]} in one JSON "
                         "object") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of > 4300 digits
        raise ValueError(f"line {line_no}: not valid JSON ({clip(str(exc))})") from None
    if not isinstance(rec, dict):
        raise ValueError(f"line {line_no}: a JSON {type(rec).__name__}, not an object")
    return rec


def duplicate_names(names: Sequence[Any]) -> list[Any]:
    """The names written more than once in a header, sorted (pandas would rename them)."""
    counts = Counter(names)
    return sorted(n for n, c in counts.items() if c > 1)


# --------------------------------------------------------------------------- anomaly reports


def anomaly_report(by_split: Mapping[str, Sequence[Mapping[str, Any]]], kinds: Sequence[str],
                   columns: Sequence[str], **fixed: Any) -> pd.DataFrame:
    """One row per split and kind (zero counts kept): ``count``, ``ids``, ``rows`` and
    ``files`` of the anomalies, plus the ``fixed`` columns; ``columns`` picks and orders them."""
    out = []
    for split, found in by_split.items():
        for kind in kinds:
            hits = [a for a in found if a["kind"] == kind]
            out.append({**fixed, "split": split, "kind": kind, "count": len(hits),
                        "ids": [a["id"] for a in hits], "rows": [a.get("row") for a in hits],
                        "files": sorted({Path(a["file"]).name for a in hits})})
    return pd.DataFrame(out, columns=list(columns))


def annotate_anomalies(path: Any, rows: int, anomalies: Sequence[Mapping[str, Any]],
                       kinds: Sequence[str]) -> None:
    """A data file's rows, anomaly counts per kind and their ids in the run manifest."""
    from saf_utils.data.provenance import annotate

    ids = {k: [a["id"] for a in anomalies if a["kind"] == k] for k in kinds}
    annotate(path, rows=rows, anomalies={k: len(v) for k, v in ids.items()},
             anomaly_ids={k: v for k, v in ids.items() if v})


def strict_message(anomalies: Sequence[Mapping[str, Any]], limit: int = 20) -> str:
    """The error of a strict load: the number of anomalies, the first ``limit`` listed."""
    more = f"\n  ... and {len(anomalies) - limit} more" if len(anomalies) > limit else ""
    return (f"{len(anomalies)} content anomaly(ies) (strict=True):\n  - "
            + "\n  - ".join(a["message"] for a in anomalies[:limit]) + more)
