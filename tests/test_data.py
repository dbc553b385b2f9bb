"""ArgSciChat loader on shipped fixtures, malformed variants, and the real shared data.

The SAF loader's tests are in test_saf_data.py.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from saf_utils.argscichat import data as adata
from saf_utils.argscichat.data import (
    ArgSciChatDataError,
    load_argscichat,
    load_intents,
    map_facts,
)

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
     r"facts is a string"),
    (lambda ps: _first_pair(ps).update(facts=["ok", 3]), r"pair 'D_0': facts is .*list of strings"),
    (lambda ps: _first_pair(ps).update(DE_Message=None),
     r"fold_0_test\.json.*pair 'D_0': DE_Message is None \(NoneType\), expected a string"),
    (lambda ps: _first_pair(ps).update(P_Message=5), r"pair 'D_0': P_Message is 5 \(int\)"),
    (lambda ps: _first_pair(ps).update(P_Message="  "), r"pair 'D_0': P_Message is empty"),
    (lambda ps: next(iter(ps.values()))["content"].__setitem__(1, None),
     r"fold_0_test\.json: paper .*\(id 10\): content sentence 1 is None"),
    (lambda ps: next(iter(ps.values())).update(content="one string"),
     r"\(id 10\): content is 'one string' \(str\), expected a non-empty list"),
    (lambda ps: next(iter(ps.values())).update(message_pairs=[]),
     r"fold_0_test\.json: paper .*\(id 10\): empty dialogue"),
    (lambda ps: _first_pair(ps).update(history_facts=[[]]),
     r"pair 'D_0': 1 history_facts entries for 0 history_ids"),
    (lambda ps: _first_pair(ps).update(history="a string"), r"pair 'D_0': history is a string"),
    (lambda ps: _first_pair(ps).update(id=None), r"pair None: id is None"),
    (lambda ps: next(iter(ps.values())).update(id=None), r"paper .*: id is None"),
    (lambda ps: next(iter(ps.values()))["message_pairs"][1].update(id="D_0"),
     r"fold_0_test\.json: paper .*\(id 10\), pair 'D_0': duplicate pair id"),
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


# --------------------------------------------------------------------------- real data

ARGSCICHAT_DATA = os.environ.get("ARGSCICHAT_DATA")


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
