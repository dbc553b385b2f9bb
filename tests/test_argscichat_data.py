"""ArgSciChat loader on shipped fixtures, malformed variants, and the real shared data.

A paper copied across the splits of a fold under another key is a counted
``leak_paper_content``; a key twice in a fold file, an unreadable or non-UTF-8 file, a
broken ``intents.csv``, a fold that is not an int and a missing relative path are errors
naming the file. The SAF loader's tests are in test_saf_data.py.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from saf_utils.argscichat import data as adata
from saf_utils.argscichat.data import (
    ArgSciChatDataError,
    ArgSciChatDataWarning,
    load_argscichat,
    load_intents,
    map_facts,
)
from saf_utils.data import provenance

FIX = Path(__file__).parent / "fixtures"


# --------------------------------------------------------------------------- ArgSciChat


def test_map_facts_containment_multi_sentence_and_title():
    content = ["We study argument mining.", "Our model uses memory networks.", "It works."]
    idx, dropped = map_facts(
        ["we study ARGUMENT mining", "Our model uses memory networks. It works.",
         "Great Title", "Something else entirely", "  ...  "],
        content, "A Great Title")
    assert idx == (0, 1, 2)
    assert dropped == [("Great Title", "title"), ("Something else entirely", "not_found"),
                       ("...", "empty")]


def test_load_argscichat_fixture():
    fold = load_argscichat(FIX / "argscichat", fold=0)
    assert [len(fold[s]) for s in ("train", "val", "test")] == [5, 3, 3]
    first, second = fold.train[:2]
    assert first.fact_indexes == (0, 1) and second.fact_indexes == (2,)
    assert second.turn == 1 and second.dialogue_id == "P_0"
    assert second.history_fact_indexes == ((0, 1),)
    assert fold.val[0].fact_indexes == ()  # its only fact is the title
    report = fold.fact_report()
    assert report["dropped_title"] == 1 and report["pairs_without_facts"] == 1
    assert report["pairs_without_fact_sentences"] == 2
    papers = [{p.paper_id for p in fold[s]} for s in ("train", "val", "test")]
    assert papers == [{"7", "8"}, {"9"}, {"10"}]


def test_argscichat_env_variable(monkeypatch):
    monkeypatch.setenv("ARGSCICHAT_DATA", str(FIX / "argscichat"))
    assert len(load_argscichat(fold=0).train) == 5
    assert load_intents() is None  # the fixture has no intents.csv


def test_argscichat_errors_name_the_file(tmp_path):
    root = tmp_path / "a"
    shutil.copytree(FIX / "argscichat", root)
    with pytest.raises(ArgSciChatDataError, match=r"fold_2_train\.json: missing fold file"):
        load_argscichat(root, fold=2)
    (root / "fold_0_val.json").write_text("{not json")
    with pytest.raises(ArgSciChatDataError, match=r"fold_0_val\.json: not valid JSON"):
        load_argscichat(root, fold=0)
    paper = json.loads((FIX / "argscichat" / "fold_0_val.json").read_text())
    next(iter(paper.values()))["message_pairs"][0].pop("DE_Message")
    (root / "fold_0_val.json").write_text(json.dumps(paper))
    missing = r"fold_0_val\.json.*lacks key\(s\) \['DE_Message'\]"
    with pytest.raises(ArgSciChatDataError, match=missing):
        load_argscichat(root, fold=0)
    with pytest.raises(ArgSciChatDataError, match="unknown fold"):
        load_argscichat(root, fold=7)


def _fixture_copy(tmp_path: Path) -> Path:
    root = tmp_path / "a"
    shutil.copytree(FIX / "argscichat", root)
    return root


def _edit(root: Path, name: str, change) -> None:
    """Apply ``change(papers)`` to a fixture file (papers: title -> paper dict)."""
    path = root / name
    papers = json.loads(path.read_text())
    change(papers)
    path.write_text(json.dumps(papers))


def _first_pair(papers: dict) -> dict:
    return next(iter(papers.values()))["message_pairs"][0]


@pytest.mark.parametrize("change, message", [
    (lambda ps: _first_pair(ps).update(facts="Tables come from Wikipedia articles."),
     r"fold_0_test\.json: paper 'Question Answering over Tables' \(id 10\), pair 'D_0': "
     r"facts is 'Tables come .*' \(str\), expected a list of strings"),
    (lambda ps: _first_pair(ps).update(facts=["ok", 3]), r"pair 'D_0': facts is .*list of strings"),
    (lambda ps: _first_pair(ps).update(DE_Message=None),
     r"fold_0_test\.json.*pair 'D_0': DE_Message is None \(NoneType\), expected a non-empty "
     r"string"),
    (lambda ps: _first_pair(ps).update(P_Message=5), r"pair 'D_0': P_Message is 5 \(int\)"),
    (lambda ps: _first_pair(ps).update(P_Message="  "),
     r"pair 'D_0': P_Message is '  ' \(str\), expected a non-empty"),
    (lambda ps: next(iter(ps.values()))["content"].__setitem__(1, None),
     r"fold_0_test\.json: paper .*\(id 10\): content sentence 1 is None"),
    (lambda ps: next(iter(ps.values())).update(content="one string"),
     r"\(id 10\): content is 'one string' \(str\), expected a non-empty list"),
    (lambda ps: next(iter(ps.values())).update(message_pairs=[]),
     r"fold_0_test\.json: paper .*\(id 10\): message_pairs is \[\] \(list\), expected a "
     r"non-empty list \(a dialogue\)"),
    (lambda ps: _first_pair(ps).update(history_facts=[[]]),
     r"pair 'D_0': 1 history_facts entries for 0 history_ids"),
    (lambda ps: _first_pair(ps).update(history="a string"),
     r"pair 'D_0': history is 'a string' \(str\)"),
    (lambda ps: _first_pair(ps).update(id=None), r"pair None: id is None"),
    (lambda ps: next(iter(ps.values())).update(id=None), r"paper .*: id is None"),
    (lambda ps: next(iter(ps.values()))["message_pairs"][1].update(id="D_0"),
     r"fold_0_test\.json: paper .*\(id 10\), pair 'D_0': the same id as in paper "
     r"'Question Answering over Tables'"),
    (lambda ps: ps.clear(), r"fold_0_test\.json: no papers \(empty object\)"),
])
def test_argscichat_malformed_inputs_name_file_paper_and_pair(tmp_path, change, message):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_test.json", change)
    with pytest.raises(ArgSciChatDataError, match=message):
        load_argscichat(root, fold=0)


def test_argscichat_paper_in_two_splits_of_a_fold(tmp_path):
    root = _fixture_copy(tmp_path)
    train = json.loads((root / "fold_0_train.json").read_text())
    paper = dict(train["Memory Networks for Legal Argument Mining"])
    paper["message_pairs"] = [dict(paper["message_pairs"][0], id="X_0")]

    def add_train_paper(ps):
        ps[paper["title"]] = paper

    _edit(root, "fold_0_test.json", add_train_paper)
    with pytest.raises(ArgSciChatDataError, match=(
            r"fold 0: paper 'Memory Networks for Legal Argument Mining' \(id 7\) is in both "
            r".*fold_0_train\.json \(pair 'P_0'\) and .*fold_0_test\.json \(pair 'X_0'\)")):
        load_argscichat(root, fold=0)


def test_argscichat_pair_id_in_two_splits_of_a_fold(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_test.json", lambda ps: _first_pair(ps).update(id="P_0"))
    with pytest.raises(ArgSciChatDataError,
                       match=r"fold 0: pair id 'P_0' .* is in both .*fold_0_train\.json and "
                             r".*fold_0_test\.json"):
        load_argscichat(root, fold=0)


def test_argscichat_download_failure_says_how_to_go_offline(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise adata.urllib.error.URLError("no network")

    monkeypatch.delenv("ARGSCICHAT_DATA", raising=False)
    monkeypatch.setenv("SAF_UTILS_CACHE", str(tmp_path))
    monkeypatch.setattr(adata.urllib.request, "urlopen", refuse)
    with pytest.raises(ArgSciChatDataError, match="ARGSCICHAT_DATA"):
        load_argscichat(fold=0)


def test_argscichat_download_checks_sha256(tmp_path, monkeypatch):
    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"{}"

    monkeypatch.setattr(adata.urllib.request, "urlopen", lambda *a, **k: Response())
    with pytest.raises(ArgSciChatDataError, match="SHA-256 mismatch"):
        adata.download_argscichat(tmp_path)
    assert not (tmp_path / "fold_0_test.json").exists()


# --------------------------------------------------------------------------- leakage by content


def _copy_test_paper_into_train(root: Path, edit=lambda content: content) -> None:
    test = json.loads((root / "fold_0_test.json").read_text())
    paper = json.loads(json.dumps(next(iter(test.values()))))
    paper.update(id=99, title="A Renamed Copy", content=edit(paper["content"]))
    for n, mp in enumerate(paper["message_pairs"]):
        mp["id"] = f"COPY_{n}"
        mp["history_ids"] = [f"COPY_{k}" for k in range(len(mp["history_ids"]))]
    _edit(root, "fold_0_train.json", lambda ps: ps.update({"A Renamed Copy": paper}))


def test_test_paper_copied_into_train_under_another_key_is_a_counted_leak(tmp_path):
    root = _fixture_copy(tmp_path)
    _copy_test_paper_into_train(root)
    with pytest.warns(ArgSciChatDataWarning, match="1 leak_paper_content"):
        fold, report = load_argscichat(root, fold=0, return_report=True)
    assert len(fold.train) == 5 + len(fold.test)  # loaded as it is
    (leak,) = fold.anomalies
    assert leak["split"] == "test" and leak["paper_id"] == "10"
    assert ("fold 0: paper 'Question Answering over Tables' (id 10) in "
            f"{root / 'fold_0_test.json'} shares 4 of its 4 content sentences with paper "
            f"'A Renamed Copy' (id 99) in {root / 'fold_0_train.json'}") in leak["message"]
    assert list(report.columns) == list(adata.ARGSCICHAT_REPORT_COLUMNS)
    leaks = report[report.kind == "leak_paper_content"]
    assert leaks.set_index("split")["count"].to_dict() == {"train": 0, "val": 0, "test": 1}
    assert report["count"].sum() == 1  # the copy is a clean paper otherwise
    entry = next(s for s in provenance.data_sources()
                 if s["path"] == str((root / "fold_0_test.json").resolve()))
    assert entry["anomalies"] == {**dict.fromkeys(adata.ARGSCICHAT_ANOMALY_KINDS, 0),
                                  "leak_paper_content": 1}
    assert entry["anomaly_ids"] == {"leak_paper_content": ["10"]}
    with pytest.raises(ArgSciChatDataError, match=r"1 content anomaly\(ies\) \(strict=True\)"
                       r":\n  - fold 0: paper 'Question Answering over Tables'"):
        load_argscichat(root, fold=0, strict=True)


def test_a_lightly_edited_copy_is_still_a_leak(tmp_path):
    root = _fixture_copy(tmp_path)
    _copy_test_paper_into_train(
        root, lambda content: [c.upper() + " " for c in content[:-1]] + ["A new last line."])
    with pytest.warns(ArgSciChatDataWarning):
        fold = load_argscichat(root, fold=0)
    assert [a["paper_id"] for a in fold.anomalies] == ["10"]


def test_clean_fold_has_no_anomalies():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArgSciChatDataWarning)
        fold, report = load_argscichat(FIX / "argscichat", fold=1, return_report=True)
    assert fold.anomalies == [] and report["count"].sum() == 0
    assert len(report) == 3 * len(adata.ARGSCICHAT_ANOMALY_KINDS)  # zeros included


# --------------------------------------------------------------------------- files and arguments


def test_paper_key_twice_in_a_fold_file_is_an_error(tmp_path):
    root = _fixture_copy(tmp_path)
    path = root / "fold_0_train.json"
    papers = json.loads(path.read_text())
    first, second = (json.dumps({k: v}, indent=1)[1:-2] for k, v in papers.items())
    path.write_text("{" + first + ",\n" + first + ",\n" + second + "\n}\n")
    with pytest.raises(ArgSciChatDataError) as err:  # not a silently lost paper
        load_argscichat(root, fold=0)
    msg = str(err.value)
    assert msg.startswith(f"{path}: duplicate key 'Memory Networks for Legal Argument Mining' "
                          "in one JSON object (lines 2, ")


def test_pair_key_twice_is_an_error(tmp_path):
    root = _fixture_copy(tmp_path)
    path = root / "fold_0_val.json"
    path.write_text(path.read_text().replace('"P_Message":', '"P_Message": "x", "P_Message":', 1))
    with pytest.raises(ArgSciChatDataError, match=r"fold_0_val\.json: duplicate key 'P_Message'"):
        load_argscichat(root, fold=0)


def test_unreadable_fold_file_is_an_error_naming_it(tmp_path, monkeypatch):
    root = _fixture_copy(tmp_path)
    locked = root / "fold_0_val.json"
    read_bytes = Path.read_bytes

    def deny(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", deny)  # chmod is no barrier when tests run as root
    with pytest.raises(ArgSciChatDataError, match=rf"{locked}: cannot be read \(Permission denied"):
        load_argscichat(root, fold=0)


def test_fold_file_encodings(tmp_path):
    root = _fixture_copy(tmp_path)
    path = root / "fold_0_test.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8-sig")
    assert len(load_argscichat(root, fold=0).test) == 3  # a byte-order mark is accepted
    path.write_bytes(json.dumps(json.loads(text), ensure_ascii=False)
                     .replace("Tables", "Täbles").encode("latin-1"))
    with pytest.raises(ArgSciChatDataError,
                       match=rf"{path}: not UTF-8 text \(byte 0xe4 on line 1"):
        load_argscichat(root, fold=0)


INTENTS = ("Role,Message Number,Sentence Number,Sentence,Tag\n"
           "Proponent,0,0,Grüß Gott!,Intro\n"
           'Domain Expert,1,0,"Yes, we do.",Reply_Info\n')


def test_intents_with_a_bom_load(tmp_path):
    root = _fixture_copy(tmp_path)
    (root / "intents.csv").write_text(INTENTS, encoding="utf-8-sig")
    df = load_intents(root)
    assert list(df.columns) == list(adata.INTENT_COLUMNS) and len(df) == 2
    assert df.Sentence.tolist() == ["Grüß Gott!", "Yes, we do."]


@pytest.mark.parametrize("content, message", [
    (INTENTS.encode("latin-1"), r"intents\.csv: not UTF-8 text \(byte 0xfc on line 2"),
    (INTENTS.replace("Role,", "Rolle,").encode(), r"intents\.csv: missing column\(s\) \['Role'\]"),
    (INTENTS.replace(",Tag\n", ",Tag,Tag\n", 1).encode(),
     r"intents\.csv: duplicate column name\(s\) \['Tag'\]"),
    (INTENTS.replace("Grüß Gott!", "Grüß, Gott!").encode(),
     r"1 problem\(s\) in .*intents\.csv:\n  - line 2: 6 cells for 5 columns"),
    (INTENTS.replace(",Intro", ",").encode(), r"line 2, column 'Tag': empty"),
    (b"", r"intents\.csv: empty file"),
])
def test_broken_intents_are_errors_naming_file_line_and_column(tmp_path, content, message):
    root = _fixture_copy(tmp_path)
    (root / "intents.csv").write_bytes(content)
    with pytest.raises(ArgSciChatDataError, match=message):
        load_intents(root)


@pytest.mark.parametrize("fold", ["1", True, 1.0, None])
def test_fold_must_be_an_int(fold):
    with pytest.raises(TypeError, match=r"fold must be an int, one of \(0, 1, 2, 3, 4\); got"):
        load_argscichat(FIX / "argscichat", fold=fold)


def test_numpy_int_fold_loads():
    assert load_argscichat(FIX / "argscichat", fold=np.int64(1)).fold == 1


def test_relative_path_that_does_not_exist_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArgSciChatDataError) as err:
        load_argscichat("data/argscichat", fold=0)
    assert str(err.value) == (
        f"data/argscichat: ArgSciChat folder does not exist ({tmp_path.resolve()}/data/"
        f"argscichat, from the working directory {Path.cwd()})")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArgSciChatDataError, match="file: ArgSciChat folder is not a folder"):
        load_argscichat("file", fold=0)


# --------------------------------------------------------------------------- real data

ARGSCICHAT_DATA = os.environ.get("ARGSCICHAT_DATA")


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.skipif(not ARGSCICHAT_DATA, reason="ARGSCICHAT_DATA not set")
def test_real_argscichat_counts():
    papers, dialogues, pairs, test_sizes = set(), set(), set(), []
    for k in range(5):
        fold = load_argscichat(ARGSCICHAT_DATA, fold=k)
        n_papers = [len({p.paper_id for p in fold[s]}) for s in ("train", "val", "test")]
        assert n_papers == [16, 2, 2]
        test_sizes.append(len(fold.test))
        for s in ("train", "val", "test"):
            papers |= {p.paper_id for p in fold[s]}
            dialogues |= {p.dialogue_id for p in fold[s]}
            pairs |= {p.pair_id for p in fold[s]}
    assert (len(papers), len(dialogues), len(pairs)) == (20, 41, 249)
    assert test_sizes == [23, 35, 27, 10, 20]
    report = fold.fact_report()
    assert report["pairs_without_facts"] == 38 and report["dropped_not_found"] == 0
    # Title facts (3) are dropped from fact_indexes; seen again in later turns, 18 times.
    assert report["dropped_title"] == 3 and report["history_dropped_title"] == 18


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.skipif(not ARGSCICHAT_DATA, reason="ARGSCICHAT_DATA not set")
def test_real_argscichat_has_no_leakage_and_intents_load():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArgSciChatDataWarning)
        for k in range(5):
            assert load_argscichat(ARGSCICHAT_DATA, fold=k, strict=True).anomalies == []
    intents = load_intents(ARGSCICHAT_DATA)
    assert intents.shape == (881, 5) and set(intents.Role) == {"Proponent", "Domain Expert"}


# --------------------------------------------------------------------------- same numbers anywhere


def _anomalies(root: Path, kind: str) -> tuple[list[dict], object]:
    with pytest.warns(ArgSciChatDataWarning, match=f"1 {kind}"):
        fold, report = load_argscichat(root, fold=0, return_report=True)
    found = [a for a in fold.anomalies if a["kind"] == kind]
    row = report[(report.kind == kind) & (report["count"] > 0)]
    assert len(row) == 1 and row.iloc[0]["count"] == len(found) == 1
    with pytest.raises(ArgSciChatDataError, match=r"\(strict=True\)"):
        load_argscichat(root, fold=0, strict=True)
    return found, row.iloc[0]


def _manifest_entry(path: Path) -> dict:
    return next(s for s in provenance.data_sources() if s["path"] == str(path.resolve()))


def _train_pair(papers: dict, n: int) -> dict:
    return papers["Memory Networks for Legal Argument Mining"]["message_pairs"][n]


def test_history_fact_not_in_the_paper_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json", lambda ps: _train_pair(ps, 1)["history_facts"][0].append(
        "A sentence that the paper does not contain."))
    (found,), row = _anomalies(root, "history_fact_not_found")
    assert found["split"] == "train" and found["id"] == "P_1" and row.ids == ["P_1"]
    assert ("(id 7), pair 'P_1', history_facts: 'A sentence that the paper does not contain.' "
            "is found neither in the content nor in the title") in found["message"]
    entry = _manifest_entry(root / "fold_0_train.json")
    assert entry["anomalies"]["history_fact_not_found"] == 1
    assert entry["anomaly_ids"] == {"history_fact_not_found": ["P_1"]}


def test_fact_not_in_the_paper_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json",
          lambda ps: _train_pair(ps, 0)["facts"].append("Nowhere in this paper."))
    (found,), _ = _anomalies(root, "fact_not_found")
    assert found["id"] == "P_0"


def test_history_facts_in_the_title_are_counted_in_the_fact_report(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json", lambda ps: _train_pair(ps, 1)["history_facts"][0].append(
        "Memory Networks for Legal Argument Mining"))
    before = load_argscichat(FIX / "argscichat", fold=0).fact_report()
    fold = load_argscichat(root, fold=0)
    assert before["history_dropped_title"] == 2  # the fixture's title fact, in 2 later turns
    assert fold.fact_report() == {**before, "history_dropped_title": 3}
    assert fold.anomalies == []


def test_history_longer_than_its_history_ids_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json",
          lambda ps: _train_pair(ps, 1)["history"].append("An entry of no earlier turn."))
    (found,), _ = _anomalies(root, "history_longer_than_ids")
    assert found["id"] == "P_1"
    assert ("1 of 3 history entries are in none of the 1 earlier turn(s) named by history_ids "
            "(first: 'An entry of no earlier turn.')") in found["message"]


def test_history_on_a_first_turn_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json",
          lambda ps: _train_pair(ps, 0)["history"].append("Hello?"))
    (found,), _ = _anomalies(root, "history_longer_than_ids")
    assert found["id"] == "P_0" and "none of the 0 earlier turn(s)" in found["message"]


def test_history_id_that_names_no_pair_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)

    def rename(ps):
        _train_pair(ps, 1)["history_ids"] = ["P_9"]

    _edit(root, "fold_0_train.json", rename)
    with pytest.warns(ArgSciChatDataWarning, match="1 history_id_unknown, 1 history_longer"):
        fold = load_argscichat(root, fold=0)
    assert [a["kind"] for a in fold.anomalies] == ["history_id_unknown",
                                                   "history_longer_than_ids"]


def test_paper_key_that_differs_from_its_title_is_a_counted_anomaly(tmp_path):
    root = _fixture_copy(tmp_path)

    def rekey(ps):
        ps["Another Key"] = ps.pop("Memory Networks for Legal Argument Mining")

    _edit(root, "fold_0_train.json", rekey)
    (found,), row = _anomalies(root, "paper_key_not_title")
    assert found["id"] == "7" and row.ids == ["7"]
    assert ("paper 'Another Key' (id 7): its key differs from its title 'Memory Networks for "
            "Legal Argument Mining'") in found["message"]


def test_unknown_keys_of_a_pair_or_paper_are_counted_not_ignored(tmp_path):
    root = _fixture_copy(tmp_path)

    def add(ps):
        _train_pair(ps, 1)["annotator"] = "A3"
        next(iter(ps.values()))["venue"] = "ACL"

    _edit(root, "fold_0_train.json", add)
    with pytest.warns(ArgSciChatDataWarning, match="2 extra_key"):
        fold, report = load_argscichat(root, fold=0, return_report=True)
    found = [a for a in fold.anomalies if a["kind"] == "extra_key"]
    assert [a["id"] for a in found] == ["7", "P_1"]
    assert ("paper 'Memory Networks for Legal Argument Mining' (id 7): key(s) 'venue' not read "
            "(a paper has ['id', 'title', 'content', 'message_pairs']); not loaded"
            ) in found[0]["message"]
    assert "(id 7), pair 'P_1': key(s) 'annotator' not read (a pair has ['id'," in found[1][
        "message"]
    row = report[(report.split == "train") & (report.kind == "extra_key")].iloc[0]
    assert row["count"] == 2 and row.ids == ["7", "P_1"]
    entry = _manifest_entry(root / "fold_0_train.json")
    assert entry["anomalies"]["extra_key"] == 2 and entry["anomaly_ids"] == {
        "extra_key": ["7", "P_1"]}
    with pytest.raises(ArgSciChatDataError, match=r"2 content anomaly\(ies\) \(strict=True\)"):
        load_argscichat(root, fold=0, strict=True)


def test_intents_extra_columns_are_kept(tmp_path):
    root = _fixture_copy(tmp_path)
    (root / "intents.csv").write_text("Role,Message Number,Sentence Number,Sentence,Tag,Note\n"
                                      "Proponent,0,0,Hi!,Intro,x\n", encoding="utf-8")
    df = load_intents(root)
    assert list(df.columns) == [*adata.INTENT_COLUMNS, "Note"] and df.Note.tolist() == ["x"]


def test_paper_key_in_another_unicode_form_is_its_title(tmp_path):
    import unicodedata

    root = _fixture_copy(tmp_path)

    def rekey(ps):
        paper = ps.pop("Analyzing Political Parody in Social Media")
        paper["title"] = "Analysing Parody: Ä Study"
        ps[unicodedata.normalize("NFD", paper["title"]) + " "] = paper

    _edit(root, "fold_0_train.json", rekey)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArgSciChatDataWarning)
        assert load_argscichat(root, fold=0).anomalies == []


@pytest.mark.parametrize("change, message", [
    (lambda ps: _train_pair(ps, 1).update(id="P_0 "),
     r"pair 'P_0 ': id 'P_0 ' equals id 'P_0' once normalised .* as in paper "
     r"'Memory Networks"),
    (lambda ps: _train_pair(ps, 1).update(history_ids=["P_0\u200b"]),
     r"pair 'P_1': history id: id 'P_0\\u200b' equals id 'P_0' once normalised"),
    (lambda ps: ps["Analyzing Political Parody in Social Media"].update(id="7 "),
     r"paper 'Analyzing Political Parody in Social Media' \(id 7 \): id '7 ' equals id '7' once "
     r"normalised .* as in paper 'Memory Networks for Legal Argument Mining'"),
    (lambda ps: ps["Analyzing Political Parody in Social Media"].update(id=7),
     r"\(id 7\): the same id as in paper 'Memory Networks for Legal Argument Mining'"),
])
def test_ids_equal_once_normalised_in_a_fold_file_are_errors_naming_both(tmp_path, change,
                                                                         message):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json", change)
    with pytest.raises(ArgSciChatDataError, match=message):
        load_argscichat(root, fold=0)


def test_pair_id_in_nfd_in_another_split_is_the_same_pair(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_train.json", lambda ps: _train_pair(ps, 0).update(id="Prüfung"))
    _edit(root, "fold_0_train.json", lambda ps: _train_pair(ps, 1).update(history_ids=["Prüfung"]))
    _edit(root, "fold_0_test.json", lambda ps: _first_pair(ps).update(id="Pru\u0308fung"))
    with pytest.raises(ArgSciChatDataError, match=r"fold 0: pair id .* is in both "
                       r".*fold_0_train\.json and .*fold_0_test\.json \(id 'Pru\\u0308fung' "
                                     r"equals id 'Pr\\xfcfung' once"):
        load_argscichat(root, fold=0)


def test_a_fold_file_given_as_the_folder_says_give_its_folder(tmp_path):
    root = _fixture_copy(tmp_path)
    with pytest.raises(ArgSciChatDataError, match=rf"this is a file; give its folder \({root}\)"):
        load_argscichat(root / "fold_0_train.json", fold=0)
    with pytest.raises(ArgSciChatDataError, match="this is a file"):  # not None: "no intents"
        load_intents(root / "fold_0_train.json")
    with pytest.raises(ArgSciChatDataError, match="ArgSciChat folder does not exist"):
        load_intents(root / "nowhere")


def test_long_bad_values_are_shown_as_a_prefix_and_their_size(tmp_path):
    root = _fixture_copy(tmp_path)
    _edit(root, "fold_0_test.json",
          lambda ps: _first_pair(ps).update(facts=[["nested"] * 5000]))
    with pytest.raises(ArgSciChatDataError) as err:
        load_argscichat(root, fold=0)
    assert "facts is [['nested', 'nested'," in str(err.value)
    assert "... (1 items) (list), expected a list of strings" in str(err.value)
    assert len(str(err.value)) < 400


def test_map_facts_on_a_content_index_is_map_facts_on_the_sentences():
    content = ["We study argument mining.", "", "Our model uses memory networks.", "It works."]
    facts = ["our MODEL uses memory", "It works. Great Title", "nothing", "  "]
    index = adata.ContentIndex(content, "A Great Title")
    assert map_facts(facts, index) == map_facts(facts, content, "A Great Title") == (
        (2, 3), [("Great Title", "title"), ("nothing", "not_found"), ("", "empty")])


def test_a_huge_paper_key_is_shown_short(tmp_path):
    root = _fixture_copy(tmp_path)

    def rekey(ps):
        paper = ps.pop("Analyzing Political Parody in Social Media")
        paper["content"] = 5
        ps["K" * 100_000] = paper

    _edit(root, "fold_0_train.json", rekey)
    with pytest.raises(ArgSciChatDataError) as err:
        load_argscichat(root, fold=0)
    assert "paper 'KKKK" in str(err.value) and "... (100000 characters) (id 8): content is 5 " \
        "(int)" in str(err.value)
    assert len(str(err.value)) < 500


def test_history_id_naming_the_pair_itself_is_a_counted_anomaly(tmp_path):
    """Counted by id: the pair's own messages are no earlier turn, so a history entry found
    only in them ("Hi" inside "this" once passed a substring test) is counted too."""
    root = _fixture_copy(tmp_path)

    def self_ref(ps):
        pair = _train_pair(ps, 1)
        pair["history_ids"].append(pair["id"])
        pair["history_facts"].append([])
        pair["history"].append(pair["P_Message"])

    _edit(root, "fold_0_train.json", self_ref)
    with pytest.warns(ArgSciChatDataWarning, match="1 history_id_self"):
        fold = load_argscichat(root, fold=0)
    kinds = [(a["kind"], a["id"]) for a in fold.anomalies]
    assert ("history_id_self", "P_1") in kinds and ("history_longer_than_ids", "P_1") in kinds
    msg = next(a["message"] for a in fold.anomalies if a["kind"] == "history_id_self")
    assert "names this pair itself" in msg
