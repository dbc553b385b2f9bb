"""Loaders and validation on shipped fixtures, malformed variants, and the real shared data."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from saf_utils import provenance
from saf_utils.argscichat import data as adata
from saf_utils.argscichat.data import (
    ArgSciChatDataError,
    load_argscichat,
    load_intents,
    map_facts,
)
from saf_utils.saf import data as sdata
from saf_utils.saf.data import SAFDataError, load_saf

FIX = Path(__file__).parent / "fixtures"
SPLITS = ("train", "validation", "test_unseen_answers", "test_unseen_questions")


def _frames(folder: str) -> dict[str, pd.DataFrame]:
    return {s: pd.read_json(FIX / folder / f"{s}.jsonl", lines=True, dtype=False) for s in SPLITS}


def _write_jsonl(root: Path, frames: dict[str, pd.DataFrame]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for split, df in frames.items():
        df.to_json(root / f"{split}.jsonl", orient="records", lines=True, force_ascii=False)
    return root


def test_load_saf_jsonl_with_error_class():
    ds = load_saf(FIX / "saf_legal_jsonl")
    assert {s: len(ds[s]) for s in ds} == {"train": 5, "validation": 2,
                                            "test_unseen_answers": 3, "test_unseen_questions": 2}
    assert "error_class" in ds["train"].column_names
    assert ds["train"][0]["provided_answer"] == "Bei Arbeitsunfähigkeit und Versicherung."


def test_load_saf_csv_without_error_class_and_split_subset():
    ds = load_saf(FIX / "saf_csv", splits=["train", "test_unseen_questions"])
    assert list(ds) == ["train", "test_unseen_questions"]
    assert "error_class" not in ds["train"].column_names
    assert ds["test_unseen_questions"]["score"] == [0.75, 0.0]


def test_load_saf_hub_layout_parquet(tmp_path):
    for split, df in _frames("saf_legal_jsonl").items():
        (tmp_path / "data").mkdir(exist_ok=True)
        df.to_parquet(tmp_path / "data" / f"{split}-00000-of-00001.parquet")
    ds = load_saf(tmp_path)
    assert len(ds["train"]) == 5
    recorded = [s for s in provenance.data_sources() if s["path"].startswith(str(tmp_path.resolve()))]
    assert len(recorded) == 4 and all(len(s["sha256"]) == 64 for s in recorded)


def test_saf_env_variable_is_the_default(monkeypatch):
    monkeypatch.setenv("SAF_DATA", str(FIX / "saf_csv"))
    assert len(load_saf()["validation"]) == 2


MUTATIONS = {
    "missing_column": (lambda f: f["train"].drop(columns=["score"]), "missing column 'score'"),
    "score_range": (lambda f: f["train"].assign(score=[1.0, 1.5, 0.0, 1.0, 0.0]),
                    "column 'score': 1.5 outside [0, 1]"),
    "score_not_number": (lambda f: f["train"].assign(score=[1.0, "viel", 0.0, 1.0, 0.0]),
                         "column 'score': not a number ('viel')"),
    "bad_label": (lambda f: f["train"].assign(verification_feedback=[
        "Correct", "partially correct", "Incorrect", "Correct", "Incorrect"]),
        "'partially correct' not one of"),
    "inconsistent": (lambda f: f["train"].assign(verification_feedback=[
        "Correct", "Correct", "Incorrect", "Correct", "Incorrect"]),
        "label 'Correct' inconsistent with score 0.5"),
    "empty_answer": (lambda f: f["train"].assign(provided_answer=["a", "  ", "b", "c", "d"]),
                     "row 2 (id=t2), column 'provided_answer': empty answer"),
    "duplicate_id": (lambda f: f["train"].assign(id=["t1", "t2", "t2", "t4", "t5"]),
                     "row 3 (id=t2), column 'id': duplicate id"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_saf_validation_names_file_row_and_column(tmp_path, name):
    mutate, expected = MUTATIONS[name]
    frames = _frames("saf_legal_jsonl")
    frames["train"] = mutate(frames)
    root = _write_jsonl(tmp_path / name, frames)
    with pytest.raises(SAFDataError) as err:
        load_saf(root)
    message = str(err.value)
    assert expected in message
    assert "train.jsonl [train]" in message or "missing column" in message


def test_saf_reports_all_problems_together_with_a_cap(tmp_path):
    frames = _frames("saf_legal_jsonl")
    big = pd.concat([frames["train"]] * 6, ignore_index=True)
    big["id"] = [f"x{i}" for i in range(len(big))]
    big["score"] = 2.0  # 30 range problems (no label check against an invalid score)
    frames["train"] = big
    with pytest.raises(SAFDataError) as err:
        load_saf(_write_jsonl(tmp_path / "many", frames))
    assert len(err.value.problems) == 30
    assert str(err.value).count("outside [0, 1]") == 20
    assert "and 10 more problem(s)" in str(err.value)


def test_saf_duplicate_id_across_splits(tmp_path):
    frames = _frames("saf_legal_jsonl")
    frames["validation"].loc[0, "id"] = "t1"
    with pytest.raises(SAFDataError, match="id t1 appears in splits 'train' and 'validation'"):
        load_saf(_write_jsonl(tmp_path / "cross", frames))


def test_saf_unreadable_file_is_named(tmp_path):
    root = tmp_path / "broken"
    shutil.copytree(FIX / "saf_csv", root)
    (root / "train.csv").unlink()
    (root / "train.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(SAFDataError, match=r"train\.parquet: cannot be read as parquet"):
        load_saf(root)


def test_saf_missing_split_and_unknown_split(tmp_path):
    root = tmp_path / "partial"
    shutil.copytree(FIX / "saf_csv", root)
    (root / "validation.csv").unlink()
    with pytest.raises(SAFDataError, match=r"no file for split\(s\) \['validation'\]"):
        load_saf(root, splits=["validation"])
    with pytest.raises(SAFDataError, match="unknown split"):
        load_saf(root, splits=["dev"])


def test_saf_unreachable_hub_says_how_to_use_a_local_copy(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub")

    monkeypatch.delenv("SAF_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(SAFDataError, match="Point SAF_DATA") as err:
        load_saf()
    assert sdata.SAF_HUB_ID in str(err.value)


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
    assert [len(fold[s]) for s in ("train", "val", "test")] == [2, 1, 1]
    first, second = fold.train
    assert first.fact_indexes == (0, 1) and second.fact_indexes == (2,)
    assert second.turn == 1 and second.dialogue_id == "P_0"
    assert second.history_fact_indexes == ((0, 1),)
    assert fold.val[0].fact_indexes == ()
    report = fold.fact_report()
    assert report["dropped_title"] == 1 and report["pairs_without_facts"] == 1
    assert report["pairs_without_fact_sentences"] == 2


def test_argscichat_env_variable(monkeypatch):
    monkeypatch.setenv("ARGSCICHAT_DATA", str(FIX / "argscichat"))
    assert len(load_argscichat(fold=0).train) == 2
    assert load_intents() is None  # the fixture has no intents.csv


def test_argscichat_errors_name_the_file(tmp_path):
    root = tmp_path / "a"
    shutil.copytree(FIX / "argscichat", root)
    with pytest.raises(ArgSciChatDataError, match=r"fold_1_train\.json: missing fold file"):
        load_argscichat(root, fold=1)
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

SAF_DATA = os.environ.get("SAF_DATA")
ARGSCICHAT_DATA = os.environ.get("ARGSCICHAT_DATA")


@pytest.mark.realdata
@pytest.mark.skipif(not SAF_DATA, reason="SAF_DATA not set")
def test_real_saf_counts():
    ds = load_saf(SAF_DATA)
    assert {s: len(ds[s]) for s in ds} == {"train": 1228, "validation": 306,
                                            "test_unseen_answers": 271,
                                            "test_unseen_questions": 602}


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
