"""The one text identity: identity_key, is_blank and squash built on it, and the
shared loader helpers that show any value in a few dozen characters."""

from __future__ import annotations

import sys
import unicodedata

import numpy as np
import pytest

from saf_utils.data import reading
from saf_utils.text import _INVISIBLE, identity_key, is_blank, squash

NFC = unicodedata.normalize("NFC", "Prüfung-1")
NFD = unicodedata.normalize("NFD", "Prüfung-1")


def test_nfc_and_nfd_are_one_identity():
    assert NFC != NFD and identity_key(NFC) == identity_key(NFD) == NFC
    assert squash(NFD) == squash(NFC) == "prüfung1"


@pytest.mark.parametrize("variant", ["X ", " X", "X\u200b", "\ufeffX", "X\u00a0", "X\x00",
                                     "X\u2060", "\u200dX"])
def test_spaces_and_invisible_characters_do_not_change_an_identity(variant):
    assert identity_key(variant) == "X"


def test_whitespace_collapses_and_case_and_punctuation_stay():
    assert identity_key(" a \t b\n\nc\u2003d ") == "a b c d"
    assert identity_key("X") != identity_key("x")
    assert identity_key("a-b") != identity_key("ab")
    assert identity_key("ﬁ") == "fi"  # NFKC: a ligature is its letters


@pytest.mark.parametrize("text", ["", "   ", "\t\n", "\u200b", "\u200b\u200c\u200d\ufeff",
                                  "\x00\x07\x1b", " \u00ad \u2060 ", "\u202e\u200e"])
def test_blank_means_empty_after_whitespace_control_and_zero_width(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", " . ", "\u200b0", "ä", "?"])
def test_visible_text_is_not_blank(text):
    assert not is_blank(text)


def test_identity_key_is_idempotent_on_awkward_text():
    for text in ["e\u200b\u0301", "a \u200b b", "¨", "\u2474 x", NFD + "\u00a0 "]:
        once = identity_key(text)
        assert identity_key(once) == once


def test_invisible_characters_are_every_format_and_non_space_control_character():
    """The hard-coded class equals Unicode's Cf plus the Cc that are not whitespace."""
    wanted = {c for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) == "Cf"
              or (unicodedata.category(chr(c)) == "Cc" and not chr(c).isspace())}
    matched = {c for c in range(sys.maxunicode + 1) if _INVISIBLE.match(chr(c))}
    assert wanted <= matched, sorted(map(hex, wanted - matched))[:10]
    assert all(unicodedata.category(chr(c)) in ("Cf", "Cc", "Cn") for c in matched - wanted)


# --------------------------------------------------------------------------- loading helpers


@pytest.mark.parametrize("value, expected", [
    (10**40, "10000000000000000000... (an integer of about 41 digits)"),
    ("x" * 500, "'" + "x" * 59 + "... (500 characters)"),
    (b"\x00" * 300, repr(b"\x00" * 300)[:60] + "... (300 bytes)"),
    (list(range(1000)), repr(list(range(1000)))[:60] + "... (1000 items)"),
    (np.arange(3), "[0, 1, 2]"),
    (5, "5"),
])
def test_show_gives_a_prefix_and_the_size(value, expected):
    assert reading.shorten(value) == expected


def test_show_survives_integers_too_long_for_repr():
    assert reading.shorten(10**5000).endswith("(an integer of about 5001 digits)")


def test_id_clashes_tell_exact_duplicates_from_normalised_ones():
    ids = ["a", NFC, "b", NFD, "a", "X ", "X", 7, 7]
    assert reading.id_clashes(ids) == [(3, 1, False), (4, 0, True), (6, 5, False), (8, 7, True)]


def test_shared_loader_base_json_headers_and_anomaly_reports(tmp_path) -> None:
    """What both loaders read through saf_utils.data.reading: a JSON file (BOM, duplicate keys
    with their lines), a JSONL record, a header's duplicate names, an anomaly report."""
    class Bad(Exception):
        pass

    path = tmp_path / "x.json"
    path.write_bytes('\ufeff{"a": 1,\n "b": {"k": 1,\n "k": 2}}'.encode())
    with pytest.raises(Bad, match=r"duplicate key 'k' in one JSON object \(lines 2, 3\)"):
        reading.load_json_file(path, Bad)
    path.write_bytes('\ufeff{"a": [1, 2]}'.encode())
    assert reading.load_json_file(path, Bad) == {"a": [1, 2]}
    path.write_text("{", encoding="utf-8")
    with pytest.raises(Bad, match="not valid JSON"):
        reading.load_json_file(path, Bad)
    assert reading.load_json_record('{"id": 1}', 3) == {"id": 1}
    for line, what in (('{"a": 1, "a": 2}', r"line 7: duplicate key\(s\) \['a'\]"),
                       ("[1]", "line 7: a JSON list, not an object"),
                       ("{x", "line 7: not valid JSON")):
        with pytest.raises(ValueError, match=what):
            reading.load_json_record(line, 7)
    assert reading.duplicate_names(["b", "a", "b", "c", "a"]) == ["a", "b"]
    found = [{"kind": "k1", "id": "x", "row": 2, "file": "/d/train.csv"},
             {"kind": "k1", "id": "y", "row": 5, "file": "/d/train.csv"}]
    report = reading.anomaly_report({"train": found, "test": []}, ("k1", "k2"),
                                    ("fold", "split", "kind", "count", "ids", "files"), fold=3)
    assert report["count"].tolist() == [2, 0, 0, 0]
    assert report.iloc[0].to_dict() == {"fold": 3, "split": "train", "kind": "k1", "count": 2,
                                        "ids": ["x", "y"], "files": ["train.csv"]}
    assert "2 content anomaly(ies) (strict=True)" in reading.strict_message(
        [{"message": "m1"}, {"message": "m2"}])
