"""SAF loader: shipped fixtures, malformed variants built in temp dirs, and the real shared data.

Each SAF row of the bad-input table has a test here: a real release's content anomalies load
and are counted; a missing, misnamed, partial (shard) or doubled split file, a 0-row split,
blank required text, a CSV NA label and mixed-type ids are SAFDataErrors naming the place.
Leakage by content (a copied row, a seen "unseen" question) is a counted anomaly, not an
error, because real releases contain it;
a shard without a column, a column or JSON key twice, a non-UTF-8 file and a missing path
are errors naming file and column; provenance re-hashes a rewritten file.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from saf_utils.data import provenance
from saf_utils.saf import data as sdata
from saf_utils.saf import data_files
from saf_utils.saf.data import SAFDataError, SAFDataWarning, load_saf

FIX = Path(__file__).parent / "fixtures"
SPLITS = ("train", "validation", "test_unseen_answers", "test_unseen_questions")
FIXTURE_SIZES = {"train": 5, "validation": 2, "test_unseen_answers": 3,
                 "test_unseen_questions": 2}


def _frames(folder: str = "saf_legal_jsonl") -> dict[str, pd.DataFrame]:
    return {s: pd.read_json(FIX / folder / f"{s}.jsonl", lines=True, dtype=False) for s in SPLITS}


def _write_jsonl(root: Path, frames: dict[str, pd.DataFrame]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for split, df in frames.items():
        df.to_json(root / f"{split}.jsonl", orient="records", lines=True, force_ascii=False)
    return root


def _write_hub(root: Path, frames: dict[str, pd.DataFrame], shards: int = 1) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    for split, df in frames.items():
        size = -(-len(df) // shards)
        for k in range(shards):
            part = df.iloc[k * size:(k + 1) * size]
            part.to_parquet(root / "data" / f"{split}-{k:05d}-of-{shards:05d}.parquet")
    return root


def _error(root, **kwargs) -> str:
    with pytest.raises(SAFDataError) as err:
        load_saf(root, **kwargs)
    return str(err.value)


# --------------------------------------------------------------------------- loads


def test_load_saf_jsonl_with_error_class():
    ds = load_saf(FIX / "saf_legal_jsonl")
    assert {s: len(ds[s]) for s in ds} == FIXTURE_SIZES
    assert "error_class" in ds["train"].column_names
    assert ds["train"][0]["provided_answer"] == "Bei Arbeitsunfähigkeit und Versicherung."


def test_load_saf_csv_without_error_class_and_split_subset():
    ds = load_saf(FIX / "saf_csv", splits=["train", "test_unseen_questions"])
    assert list(ds) == ["train", "test_unseen_questions"]
    assert "error_class" not in ds["train"].column_names
    assert ds["test_unseen_questions"]["score"] == [0.75, 0.0]


def test_load_saf_hub_layout_parquet(tmp_path):
    ds = load_saf(_write_hub(tmp_path, _frames()))
    assert len(ds["train"]) == 5
    recorded = [s for s in provenance.data_sources()
                if s["path"].startswith(str(tmp_path.resolve()))]
    assert len(recorded) == 4 and all(len(s["sha256"]) == 64 for s in recorded)
    assert {s["split"]: s["rows"] for s in recorded} == FIXTURE_SIZES
    assert all(s["anomalies"] == dict.fromkeys(sdata.SAF_ANOMALY_KINDS, 0) for s in recorded)


def test_complete_shards_load_in_order(tmp_path):
    ds = load_saf(_write_hub(tmp_path, _frames(), shards=2))
    assert ds["train"]["id"] == ["t1", "t2", "t3", "t4", "t5"]


def test_saf_env_variable_is_the_default(monkeypatch):
    monkeypatch.setenv("SAF_DATA", str(FIX / "saf_csv"))
    assert len(load_saf()["validation"]) == 2


# --------------------------------------------------------------------------- anomalies


def _release_with_anomalies(root: Path) -> Path:
    """Like the real release: 2 blank answers and 2 'Correct' rows scored 0.75."""
    frames = _frames()
    frames["train"].loc[1, "provided_answer"] = "   "
    frames["test_unseen_answers"].loc[0, "provided_answer"] = None
    frames["train"].loc[1, ["verification_feedback", "score"]] = ["Incorrect", 0.0]
    frames["train"].loc[3, ["verification_feedback", "score"]] = ["Correct", 0.75]
    frames["validation"].loc[0, ["verification_feedback", "score"]] = ["Correct", 0.75]
    return _write_jsonl(root, frames)


def test_real_release_anomalies_load_and_are_counted(tmp_path):
    root = _release_with_anomalies(tmp_path / "release")
    with pytest.warns(SAFDataWarning, match="2 label_score_mismatch|1 empty_answer"):
        ds, report = load_saf(root, return_report=True)
    assert {s: len(ds[s]) for s in ds} == FIXTURE_SIZES
    assert list(report.columns) == list(sdata.REPORT_COLUMNS)
    assert len(report) == len(SPLITS) * len(sdata.SAF_ANOMALY_KINDS)  # zeros included
    counts = report.set_index(["split", "kind"])["count"]
    assert counts[("train", "empty_answer")] == 1
    assert counts[("test_unseen_answers", "empty_answer")] == 1
    assert counts[("train", "label_score_mismatch")] == 1
    assert counts[("validation", "label_score_mismatch")] == 1
    assert report["count"].sum() == 4
    row = report[(report.split == "train") & (report.kind == "label_score_mismatch")].iloc[0]
    assert row.ids == ["t4"] and row.rows == [4] and row.files == ["train.jsonl"]
    # Blank answers are loaded as they are; a missing one becomes "".
    assert ds["train"][1]["provided_answer"] == "   "
    assert ds["test_unseen_answers"][0]["provided_answer"] == ""
    assert ds["train"][3]["verification_feedback"] == "Correct" and ds["train"][3]["score"] == 0.75
    # The manifest's data sources carry the counts per file.
    entry = next(s for s in provenance.data_sources()
                 if s["path"] == str((root / "train.jsonl").resolve()))
    assert entry["rows"] == 5
    assert entry["anomalies"] == {"empty_answer": 1, "label_score_mismatch": 1,
                                  "leak_answer_in_train": 0, "leak_question_seen": 0,
                                  "extra_column": 0}
    assert entry["anomaly_ids"] == {"empty_answer": ["t2"], "label_score_mismatch": ["t4"]}


def test_strict_turns_anomalies_into_errors(tmp_path):
    msg = _error(_release_with_anomalies(tmp_path / "release"), strict=True)
    assert "4 problem(s)" in msg
    assert "train.jsonl [train] row 2 (id=t2), column 'provided_answer': empty answer" in msg
    assert ("train.jsonl [train] row 4 (id=t4), column 'verification_feedback': label 'Correct' "
            "inconsistent with score 0.75") in msg
    assert "strict=True" in msg


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "hub"])
def test_extra_columns_are_counted_not_dropped_silently(tmp_path, fmt):
    frames = _frames()
    frames["train"]["grader"] = ["a", None, "c", "d", "e"]
    frames["train"]["note"] = "x"
    frames["validation"]["grader"] = "b"
    if fmt == "jsonl":
        root = _write_jsonl(tmp_path / fmt, frames)
    elif fmt == "hub":
        root = _write_hub(tmp_path / fmt, frames, shards=2)
    else:
        root = tmp_path / fmt
        root.mkdir()
        for split, df in frames.items():
            df.to_csv(root / f"{split}.csv", index=False)
    per_file = 2 if fmt == "hub" else 1  # one anomaly per file (shard) and column
    with pytest.warns(SAFDataWarning, match=f"train: {2 * per_file} extra_column"):
        ds, report = load_saf(root, return_report=True)
    assert "grader" not in ds["train"].column_names
    row = report.set_index(["split", "kind"]).loc[("train", "extra_column")]
    assert row["count"] == 2 * per_file and sorted(set(row.ids)) == ["grader", "note"]
    assert report.set_index(["split", "kind"]).loc[("validation", "extra_column"), "ids"] == [
        "grader"] * per_file
    name = "train-00000-of-00002.parquet" if fmt == "hub" else f"train.{fmt}"
    path = root / ("data" if fmt == "hub" else "") / name
    entry = next(s for s in provenance.data_sources() if s["path"] == str(path.resolve()))
    assert entry["anomalies"]["extra_column"] == 2
    assert sorted(entry["anomaly_ids"]["extra_column"]) == ["grader", "note"]
    msg = _error(root, strict=True)
    assert f"{path} [train]: column 'grader' is not a SAF column" in msg
    assert "not loaded (" in msg and "(anomaly; strict=True)" in msg


def test_validate_frame_counts_extra_columns_when_strict():
    frame = _frames()["train"].assign(extra=1)
    assert sdata.validate_saf_frame(frame, "train", "f.jsonl", strict=False) == []
    msgs = sdata.validate_saf_frame(frame, "train", "f.jsonl", strict=True)
    assert msgs == ["f.jsonl [train]: column 'extra' is not a SAF column (known: "
                    f"{list(sdata.SAF_COLUMNS + sdata.SAF_OPTIONAL_COLUMNS)}); not loaded "
                    "(5 of 5 cells filled)"]


def test_jsonl_columns_get_the_dtypes_of_csv_and_parquet(tmp_path):
    """Plain text and float columns take the column-wise checks (as CSV and parquet do);
    integer ids (which may exceed 64 bits) and mixed columns stay as parsed."""
    path = tmp_path / "train.jsonl"
    rows = [{"id": 1, "t": "a", "f": 0.5, "m": "x", "n": None, "g": 0.5},
            {"id": 2**70, "t": None, "f": 1.0, "m": 3, "n": None, "g": None}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    df = data_files._read_jsonl(path)
    assert isinstance(df["t"].dtype, pd.StringDtype) and df["t"].isna().tolist() == [False, True]
    assert df["f"].dtype == float and df["f"].tolist() == [0.5, 1.0]
    assert [df[c].dtype for c in ("id", "m", "n", "g")] == [object] * 4
    assert df["id"].tolist() == [1, 2**70] and df["m"].tolist() == ["x", 3]
    path.write_text('{"id": 1, "t": "a"}\n{"id": 2, "t": "b", "t": "c"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: duplicate key\(s\) \['t'\]"):
        data_files._read_jsonl(path)
    path.write_text('{"id": 1}\n{"id": 1' + "0" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: not valid JSON \(Exceeds the limit"):
        data_files._read_jsonl(path)


def test_clean_data_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SAFDataWarning)
        _, report = load_saf(FIX / "saf_csv", return_report=True)
    assert report["count"].sum() == 0 and report.ids.map(len).sum() == 0


# --------------------------------------------------------------------------- structural errors

MUTATIONS = {
    "missing_column": (lambda df: df.drop(columns=["score"]), "missing column 'score'"),
    "score_range": (lambda df: df.assign(score=[1.0, 1.5, 0.0, 1.0, 0.0]),
                    "row 2 (id=t2), column 'score': 1.5 outside [0, 1]"),
    "score_not_number": (lambda df: df.assign(score=[1.0, "viel", 0.0, 1.0, 0.0]),
                         "column 'score': not a number ('viel')"),
    "score_null": (lambda df: df.assign(score=[1.0, None, 0.0, 1.0, 0.0]),
                   "row 2 (id=t2), column 'score': not a number (None)"),
    "bad_label": (lambda df: df.assign(verification_feedback=[
        "Correct", "partially correct", "Incorrect", "Correct", "Incorrect"]),
        "'partially correct' not one of"),
    "null_label": (lambda df: df.assign(verification_feedback=[
        "Correct", None, "Incorrect", "Correct", "Incorrect"]),
        "row 2 (id=t2), column 'verification_feedback': missing label"),
    "duplicate_id": (lambda df: df.assign(id=["t1", "t2", "t2", "t4", "t5"]),
                     "row 3 (id=t2), column 'id': duplicate id (first in row 2)"),
    "empty_id": (lambda df: df.assign(id=["t1", " ", "t3", "t4", "t5"]),
                 "row 2 (id= ), column 'id': empty id"),
    "null_feedback": (lambda df: df.assign(answer_feedback=["a", None, "b", "c", "d"]),
                      "row 2 (id=t2), column 'answer_feedback': missing value"),
    "empty_feedback": (lambda df: df.assign(answer_feedback=["a", "", "b", "c", "d"]),
                       "row 2 (id=t2), column 'answer_feedback': empty (blank) text"),
    "blank_question": (lambda df: df.assign(question=["q", "q", " \t ", "q", "q"]),
                       "row 3 (id=t3), column 'question': empty (blank) text"),
    "blank_reference": (lambda df: df.assign(reference_answer=["r", "r", "r", "r", "\n"]),
                        "row 5 (id=t5), column 'reference_answer': empty (blank) text"),
    "null_question": (lambda df: df.assign(question=["q", None, "q", "q", "q"]),
                      "row 2 (id=t2), column 'question': missing value"),
    "number_as_text": (lambda df: df.assign(answer_feedback=["a", 5, "b", "c", "d"]),
                       "row 2 (id=t2), column 'answer_feedback': 5 is a int, not a string"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_saf_validation_names_file_row_and_column(tmp_path, name):
    mutate, expected = MUTATIONS[name]
    frames = _frames()
    frames["train"] = mutate(frames["train"])
    message = _error(_write_jsonl(tmp_path / name, frames))
    assert expected in message
    assert "train.jsonl [train]" in message


def test_saf_reports_all_problems_together_with_a_cap(tmp_path):
    frames = _frames()
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
    frames = _frames()
    frames["validation"].loc[0, "id"] = "t1"
    with pytest.raises(SAFDataError, match="id t1 appears in splits 'train' and 'validation'"):
        load_saf(_write_jsonl(tmp_path / "cross", frames))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_zero_row_split_is_an_error(tmp_path, fmt):
    root = _write_jsonl(tmp_path / fmt, _frames())
    (root / "validation.jsonl").unlink()
    empty = _frames()["validation"].iloc[:0]
    if fmt == "jsonl":
        (root / "validation.jsonl").write_text("")
    elif fmt == "csv":
        empty.to_csv(root / "validation.csv", index=False)
    else:
        empty.to_parquet(root / "validation.parquet")
    msg = _error(root)
    assert f"validation.{fmt} [validation]" in msg
    assert "split has 0 rows" in msg


def test_csv_empty_label_names_file_split_row_column(tmp_path):
    root = tmp_path / "csv"
    shutil.copytree(FIX / "saf_csv", root)
    lines = (root / "train.csv").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace(",Partially correct,", ",,")
    (root / "train.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SAFDataError) as err:  # not "TypeError: boolean value of NA ..."
        load_saf(root)
    assert "train.csv [train] row 2 (id=t2), column 'verification_feedback': missing label" \
        in str(err.value)


def test_jsonl_mixed_type_ids_name_file_split_row_column(tmp_path):
    root = _write_jsonl(tmp_path / "ids", _frames())
    recs = [json.loads(line) for line in (root / "train.jsonl").read_text().splitlines()]
    recs[0]["id"], recs[1]["id"] = 7, "007"
    (root / "train.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.raises(SAFDataError) as err:  # not ArrowInvalid
        load_saf(root)
    assert err.value.problems == [
        f"{root / 'train.jsonl'} [train] row 1 (id=7), column 'id': int id among str ids "
        "(11 of them); write every id as a str"]


def test_integer_ids_alone_load(tmp_path):
    frames = _frames()
    offset = 0
    for df in frames.values():
        df["id"] = range(offset, offset + len(df))
        offset += len(df)
    ds = load_saf(_write_jsonl(tmp_path / "ints", frames))
    assert ds["validation"]["id"] == [5, 6]


def test_saf_unreadable_file_is_named(tmp_path):
    root = tmp_path / "broken"
    shutil.copytree(FIX / "saf_csv", root)
    (root / "train.csv").unlink()
    (root / "train.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(SAFDataError, match=r"train\.parquet: cannot be read as parquet"):
        load_saf(root)
    (root / "train.parquet").unlink()
    (root / "train.jsonl").write_text('{"id": "t1"}\n{not json\n')
    with pytest.raises(SAFDataError, match=r"train\.jsonl: cannot be read as jsonl \(line 2"):
        load_saf(root)


# --------------------------------------------------------------------------- split files


def test_missing_split_is_an_error_unless_a_subset_is_asked_for(tmp_path):
    root = tmp_path / "partial"
    shutil.copytree(FIX / "saf_csv", root)
    (root / "validation.csv").unlink()
    with pytest.raises(SAFDataError, match=r"no file for split\(s\) \['validation'\]"):
        load_saf(root)  # the other three splits never load alone
    with pytest.raises(SAFDataError, match=r"no file for split\(s\) \['validation'\]"):
        load_saf(root, splits=["validation"])
    assert list(load_saf(root, splits=["train", "test_unseen_answers"])) == [
        "train", "test_unseen_answers"]
    with pytest.raises(SAFDataError, match="unknown split"):
        load_saf(root, splits=["dev"])


@pytest.mark.parametrize("name", ["validation.CSV", "validation.json", "Validation.csv"])
def test_misnamed_split_file_is_a_missing_split_naming_what_was_found(tmp_path, name):
    root = tmp_path / "misnamed"
    shutil.copytree(FIX / "saf_csv", root)
    (root / "validation.csv").rename(root / name)
    msg = _error(root)
    assert "no file for split(s) ['validation']" in msg
    assert f"Not read (wrong name or extension): {name}" in msg
    assert "Found: " in msg and "train.csv" in msg


def test_missing_last_shard_is_an_error(tmp_path):
    root = _write_hub(tmp_path / "hub", _frames(), shards=2)
    (root / "data" / "train-00001-of-00002.parquet").unlink()
    msg = _error(root)
    assert "split 'train': shard(s) 00001-of-00002 missing" in msg
    assert "train-00000-of-00002.parquet" in msg


def test_shards_must_agree_and_be_well_named(tmp_path):
    root = _write_hub(tmp_path / "hub", _frames(), shards=2)
    (root / "data" / "train-00001-of-00002.parquet").rename(
        root / "data" / "train-00001-of-00003.parquet")
    assert "split 'train': shards disagree on their number" in _error(root)
    (root / "data" / "train-00001-of-00003.parquet").rename(root / "data" / "train-00001.parquet")
    assert "split 'train': shard name(s) not of the form" in _error(root)


def test_two_files_for_one_split_is_an_error(tmp_path):
    root = _write_jsonl(tmp_path / "two", _frames())
    _frames()["train"].iloc[:2].to_parquet(root / "train.parquet")
    msg = _error(root)
    assert "split 'train': 2 files" in msg and "train.parquet" in msg and "train.jsonl" in msg


def test_hub_layout_and_loose_file_for_one_split_is_an_error(tmp_path):
    root = _write_hub(tmp_path / "mixed", _frames())
    _frames()["validation"].to_json(root / "validation.jsonl", orient="records", lines=True)
    assert "split 'validation': 2 files" in _error(root)


# --------------------------------------------------------------------------- hub


def test_hub_dataset_missing_split_is_an_error(monkeypatch):
    import datasets

    full = load_saf(FIX / "saf_csv")
    partial = datasets.DatasetDict({s: full[s] for s in ("train", "test_unseen_answers")})
    monkeypatch.delenv("SAF_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: partial)
    with pytest.raises(SAFDataError, match=r"hub dataset has no split\(s\) \['validation'"):
        load_saf()
    assert list(load_saf(splits=["train"])) == ["train"]


def test_saf_unreachable_hub_says_how_to_use_a_local_copy(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub")

    monkeypatch.delenv("SAF_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(SAFDataError, match="Point SAF_DATA") as err:
        load_saf()
    assert sdata.SAF_HUB_ID in str(err.value)


def test_validate_saf_frame_lists_problems_and_anomalies():
    df = _frames()["train"].assign(provided_answer=["a", "", "b", "c", "d"])
    assert sdata.validate_saf_frame(df, "train", "x.jsonl", strict=False) == []
    (msg,) = sdata.validate_saf_frame(df, "train", "x.jsonl")
    assert msg == "x.jsonl [train] row 2 (id=t2), column 'provided_answer': empty answer"


# --------------------------------------------------------------------------- real data

SAF_DATA = os.environ.get("SAF_DATA")


@pytest.mark.realdata
@pytest.mark.skipif(not SAF_DATA, reason="SAF_DATA not set")
def test_real_saf_counts_and_anomalies():
    with pytest.warns(SAFDataWarning, match="test_unseen_answers: 18 leak_answer_in_train"):
        ds, report = load_saf(SAF_DATA, return_report=True)
    assert {s: len(ds[s]) for s in ds} == {"train": 1228, "validation": 306,
                                            "test_unseen_answers": 271,
                                            "test_unseen_questions": 602}
    # Only leakage by content: 18 unseen answers repeat a train answer to the same question
    # word for word (short answers such as "Zu den Öffnungszeiten", from other students).
    counts = report[report["count"] > 0].set_index(["split", "kind"])["count"].to_dict()
    assert counts == {("test_unseen_answers", "leak_answer_in_train"): 18}


# --------------------------------------------------------------------------- leakage by content


def test_train_row_copied_into_a_test_split_under_a_new_id_is_a_counted_leak(tmp_path):
    frames = _frames()
    copy = frames["train"].iloc[[1]].assign(id="new1")
    copy["provided_answer"] = "  wenn MAN krank ist "  # same text once normalised
    frames["test_unseen_answers"] = pd.concat([frames["test_unseen_answers"], copy],
                                              ignore_index=True)
    root = _write_jsonl(tmp_path / "copied", frames)
    with pytest.warns(SAFDataWarning, match="test_unseen_answers: 1 leak_answer_in_train"):
        _, report = load_saf(root, return_report=True)
    row = report.set_index(["split", "kind"]).loc[("test_unseen_answers", "leak_answer_in_train")]
    assert row["count"] == 1 and row["ids"] == ["new1"] and row["rows"] == [4]
    entry = next(s for s in provenance.data_sources()
                 if s["path"] == str((root / "test_unseen_answers.jsonl").resolve()))
    assert entry["anomalies"]["leak_answer_in_train"] == 1
    assert entry["anomaly_ids"] == {"leak_answer_in_train": ["new1"]}
    msg = _error(root, strict=True)
    assert ("test_unseen_answers.jsonl [test_unseen_answers] row 4 (id=new1), column "
            "'provided_answer': same answer to the same question as") in msg
    assert "train.jsonl [train] row 2 (id=t2)" in msg


def test_same_answer_to_another_question_is_no_leak(tmp_path):
    frames = _frames()
    frames["test_unseen_answers"].loc[0, "provided_answer"] = frames["train"].loc[3,
                                                                                  "provided_answer"]
    frames["test_unseen_answers"].loc[0, "question"] = "Frage 9: Etwas anderes?"
    _, report = load_saf(_write_jsonl(tmp_path / "other", frames), return_report=True)
    assert report["count"].sum() == 0


def test_unseen_question_answers_added_to_train_make_unseen_questions_seen(tmp_path):
    frames = _frames()
    added = frames["test_unseen_questions"].assign(
        id=lambda df: [f"x{i}" for i in range(len(df))],
        provided_answer=["Andere Antwort eins.", "Andere Antwort zwei."])
    frames["train"] = pd.concat([frames["train"], added], ignore_index=True)
    root = _write_jsonl(tmp_path / "seen", frames)
    with pytest.warns(SAFDataWarning, match="test_unseen_questions: 2 leak_question_seen"):
        _, report = load_saf(root, return_report=True)
    counts = report.set_index(["split", "kind"])["count"]
    assert counts[("test_unseen_questions", "leak_question_seen")] == 2
    assert counts[("test_unseen_questions", "leak_answer_in_train")] == 0  # other answers
    assert report["count"].sum() == 2
    msg = _error(root, strict=True)
    assert ("test_unseen_questions.jsonl [test_unseen_questions] row 1 (id=q1), column "
            "'question': question also asked in") in msg and "[train] row 6 (id=x0)" in msg


def test_unseen_question_in_validation_is_a_leak(tmp_path):
    frames = _frames()
    frames["validation"].loc[0, "question"] = frames["test_unseen_questions"].loc[0, "question"]
    with pytest.warns(SAFDataWarning, match="2 leak_question_seen"):
        _, report = load_saf(_write_jsonl(tmp_path / "val", frames), return_report=True)
    row = report.set_index(["split", "kind"]).loc[("test_unseen_questions", "leak_question_seen")]
    assert row["count"] == 2 and row["ids"] == ["q1", "q2"]


# --------------------------------------------------------------------------- schemas per file


def test_shard_with_a_renamed_column_is_an_error_naming_the_shard(tmp_path):
    frames = _frames()
    root = _write_hub(tmp_path / "hub", frames, shards=2)
    shard = root / "data" / "train-00001-of-00002.parquet"
    pd.read_parquet(shard).rename(columns={"provided_answer": "answer"}).to_parquet(shard)
    msg = _error(root)  # not "loaded with blank answers"
    assert (f"{shard} [train]: missing column 'provided_answer' (unexpected column(s) "
            "['answer'])") in msg
    assert "train-00000-of-00002" not in msg


def test_optional_column_in_one_shard_only_is_an_error(tmp_path):
    root = _write_hub(tmp_path / "hub", _frames(), shards=2)
    shard = root / "data" / "train-00000-of-00002.parquet"
    pd.read_parquet(shard).drop(columns=["error_class"]).to_parquet(shard)
    assert "split 'train': column 'error_class' in ['train-00001-of-00002.parquet'] but not " \
           "in ['train-00000-of-00002.parquet']" in _error(root)


def test_csv_with_two_score_columns_is_an_error(tmp_path):
    root = tmp_path / "csv"
    shutil.copytree(FIX / "saf_csv", root)
    lines = (root / "train.csv").read_text(encoding="utf-8").splitlines()
    lines = [lines[0] + ",score"] + [line + ",0.0" for line in lines[1:]]
    (root / "train.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    msg = _error(root)
    assert f"{root / 'train.csv'}: duplicate column name(s) ['score']" in msg


def test_parquet_with_two_columns_of_one_name_is_an_error(tmp_path):
    import pyarrow.parquet as pq

    root = _write_hub(tmp_path / "hub", _frames())
    shard = root / "data" / "validation-00000-of-00001.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.append_column("score", table.column("score")), shard)
    assert f"{shard}: duplicate column name(s) ['score']" in _error(root)


def test_jsonl_row_with_a_key_twice_is_an_error(tmp_path):
    root = _write_jsonl(tmp_path / "keys", _frames())
    lines = (root / "train.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-1] + ', "score": 0.0}'
    (root / "train.jsonl").write_text("\n".join(lines) + "\n")
    msg = _error(root)
    assert "train.jsonl: cannot be read as jsonl (line 3: duplicate key(s) ['score']" in msg


@pytest.mark.parametrize("folder, name", [("saf_csv", "train.csv"),
                                          ("saf_legal_jsonl", "validation.jsonl")])
def test_latin1_file_is_an_error_naming_file_and_line(tmp_path, folder, name):
    root = tmp_path / "latin1"
    shutil.copytree(FIX / folder, root)
    text = (root / name).read_text(encoding="utf-8")
    (root / name).write_bytes(text.encode("latin-1"))
    line = next(n for n, t in enumerate(text.split("\n"), 1) if not t.isascii())
    msg = _error(root)
    assert f"{root / name}: not UTF-8 text (byte 0x" in msg and f"on line {line}," in msg


def test_csv_with_a_bom_loads(tmp_path):
    root = tmp_path / "csv"
    shutil.copytree(FIX / "saf_csv", root)
    text = (root / "train.csv").read_text(encoding="utf-8")
    (root / "train.csv").write_text(text, encoding="utf-8-sig")
    assert load_saf(root)["train"]["id"][:2] == ["t1", "t2"]


@pytest.mark.parametrize("source", ["./no/such/folder", "../nowhere", "a/b/c", "~/no-saf-here"])
def test_a_path_that_does_not_exist_says_so(source):
    msg = _error(source)
    assert f"{source}: folder does not exist" in msg and "working directory" in msg


# --------------------------------------------------------------------------- provenance


def test_provenance_rehashes_a_file_rewritten_between_two_loads(tmp_path):
    root = _write_jsonl(tmp_path / "rewrite", _frames())
    path = root / "validation.jsonl"
    load_saf(root)
    first = next(s for s in provenance.data_sources() if s["path"] == str(path.resolve()))
    before = dict(first)
    text = path.read_text()
    path.write_text(text.replace("Frage", "FRAGE"))  # same size, new content
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    load_saf(root)
    after = next(s for s in provenance.data_sources() if s["path"] == str(path.resolve()))
    assert after["bytes"] == before["bytes"] and after["sha256"] != before["sha256"]
    assert after["sha256"] == provenance.sha256_file(path)
    assert after["replaced_sha256"] == [before["sha256"]] and after["rows"] == 2
    os.utime(path)  # touched, not changed: entry kept
    load_saf(root)
    again = next(s for s in provenance.data_sources() if s["path"] == str(path.resolve()))
    assert again == after


# --------------------------------------------------------------------------- same numbers anywhere

NFD = "NFD"


def _nfd(text: str) -> str:
    import unicodedata

    return unicodedata.normalize(NFD, text)


def test_train_answer_copied_in_nfd_is_still_a_leak(tmp_path):
    frames = _frames()
    copy = frames["train"].iloc[[0]].assign(id="nfd1")
    copy["provided_answer"] = _nfd("Bei Arbeitsunfähigkeit und Versicherung.")
    assert copy["provided_answer"].iloc[0] != frames["train"].loc[0, "provided_answer"]
    frames["test_unseen_answers"] = pd.concat([frames["test_unseen_answers"], copy],
                                              ignore_index=True)
    with pytest.warns(SAFDataWarning, match="1 leak_answer_in_train"):
        _, report = load_saf(_write_jsonl(tmp_path / "nfd", frames), return_report=True)
    row = report.set_index(["split", "kind"]).loc[("test_unseen_answers", "leak_answer_in_train")]
    assert row["ids"] == ["nfd1"]


def test_unseen_question_added_to_train_in_nfd_is_seen(tmp_path):
    frames = _frames()
    added = frames["test_unseen_questions"].iloc[[0]].assign(
        id="x0", question=_nfd(frames["test_unseen_questions"].loc[0, "question"]),
        provided_answer="Eine andere Antwort.")
    frames["train"] = pd.concat([frames["train"], added], ignore_index=True)
    with pytest.warns(SAFDataWarning, match="2 leak_question_seen"):
        load_saf(_write_jsonl(tmp_path / "nfd", frames))


@pytest.mark.parametrize("first, second", [("Prüfung-1", _nfd("Prüfung-1")), ("X", "X "),
                                           ("X", "X\u200b")])
def test_ids_equal_only_once_normalised_are_an_error_naming_both_rows(tmp_path, first, second):
    frames = _frames()
    frames["train"]["id"] = [first, "t2", second, "t4", "t5"]
    msg = _error(_write_jsonl(tmp_path / "ids", frames))
    assert "train.jsonl [train] row 3 (id=" in msg
    assert f"column 'id': id {ascii(second)} equals id {ascii(first)} once normalised" in msg
    assert "(first in row 1)" in msg


def test_ids_equal_once_normalised_across_splits_name_both_rows(tmp_path):
    frames = _frames()
    frames["validation"].loc[1, "id"] = "t3 "
    msg = _error(_write_jsonl(tmp_path / "ids", frames))
    assert "splits 'train' and 'validation': id 't3 ' equals id 't3' once normalised" in msg
    assert "train.jsonl row 3; " in msg and "validation.jsonl row 2)" in msg


@pytest.mark.parametrize("blank", ["\u200b", "\x00\x07", " \ufeff\u2060 ", "\u00ad"])
def test_answers_of_control_or_zero_width_characters_are_counted_blank(tmp_path, blank):
    frames = _frames()
    frames["train"].loc[1, "provided_answer"] = blank
    with pytest.warns(SAFDataWarning, match="train: 1 empty_answer"):
        ds, report = load_saf(_write_jsonl(tmp_path / "blank", frames), return_report=True)
    assert report.set_index(["split", "kind"]).loc[("train", "empty_answer"), "ids"] == ["t2"]
    assert ds["train"][1]["provided_answer"] == blank  # loaded as it is


def test_zero_width_feedback_is_blank_text(tmp_path):
    frames = _frames()
    frames["train"].loc[3, "answer_feedback"] = "\u200b\u200c"
    assert "row 4 (id=t4), column 'answer_feedback': empty (blank) text" in \
        _error(_write_jsonl(tmp_path / "zw", frames))


def test_jsonl_id_beyond_int64_is_a_data_error(tmp_path):
    frames = _frames()
    offset = 0
    for df in frames.values():
        df["id"] = range(offset, offset + len(df))
        offset += len(df)
    root = _write_jsonl(tmp_path / "big", frames)
    lines = (root / "train.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"id":1,', f'"id":{2**64},')
    (root / "train.jsonl").write_text("\n".join(lines) + "\n")
    msg = _error(root)  # not OverflowError
    assert (f"train.jsonl [train] row 2 (id={2**64}), column 'id': integer {2**64} beyond the "
            "64-bit range; write such ids as strings") in msg


@pytest.mark.parametrize("column, value, expected", [
    ("question", ["a", "nested", "list"], "column 'question': ['a', 'nested', 'list'] is a "
                                          "list, not a string"),
    ("question", {"de": "Frage"}, "column 'question': {'de': 'Frage'} is a dict, not a string"),
    ("answer_feedback", 10**30, "column 'answer_feedback': 1000000000000000000000000000000 is a "
                                "int, not a string"),
    ("score", 10**400, "column 'score': 10000000000000000000... (an integer of about 401 "
                       "digits) outside [0, 1]"),
    ("score", [0.5], "column 'score': not a number ([0.5])"),
    ("verification_feedback", "x" * 5000, "column 'verification_feedback': '" + "x" * 59
     + "... (5000 characters) not one of"),
    ("provided_answer", list(range(10_000)), "column 'provided_answer': [0, 1, 2, 3"),
])
def test_any_bad_value_is_a_short_data_error_naming_file_row_and_column(tmp_path, column,
                                                                        value, expected):
    root = _write_jsonl(tmp_path / "bad", _frames())
    recs = [json.loads(line) for line in (root / "train.jsonl").read_text().splitlines()]
    recs[1][column] = value
    (root / "train.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    msg = _error(root)
    assert f"train.jsonl [train] row 2 (id=t2), {expected}" in msg
    assert len(msg) < 2000


def test_bytes_in_a_parquet_text_column_are_a_data_error(tmp_path):
    frames = _frames()
    frames["train"]["reference_answer"] = frames["train"]["reference_answer"].map(str.encode)
    msg = _error(_write_hub(tmp_path / "hub", frames))
    assert ("[train] row 1 (id=t1), column 'reference_answer': b'Wenn die Krankheit "
            "arbeitsunf\\xc3\\xa4hig macht (0.5 P) und... (87 bytes) is a bytes, not a "
            "string") in msg


def test_a_data_path_that_is_a_file_says_give_its_folder(tmp_path):
    root = _write_hub(tmp_path / "hub", _frames())
    shard = root / "data" / "train-00000-of-00001.parquet"
    msg = _error(str(shard))  # not "no file for split(s) ... Found: nothing"
    assert f"{shard}: SAF data source is not a folder: this is a file; give its folder " \
           f"({root})" in msg
    single = _write_jsonl(tmp_path / "loose", _frames()) / "train.jsonl"
    assert f"give its folder ({single.parent})" in _error(single)


def test_checks_name_the_same_rows_in_every_format(tmp_path):
    """Column-wise checks: a parquet (text dtype) and a JSONL (object) copy agree."""
    frames = _frames()
    frames["train"].loc[1, "provided_answer"] = None
    frames["train"].loc[2, ["verification_feedback", "score"]] = ["Correct", 0.5]
    frames["train"].loc[3, "question"] = " "
    hub = _error(_write_hub(tmp_path / "hub", frames), strict=True)
    jsonl = _error(_write_jsonl(tmp_path / "jsonl", frames), strict=True)
    strip = [line.split("[train]", 1)[1] for line in hub.splitlines()[1:]]
    assert strip == [line.split("[train]", 1)[1] for line in jsonl.splitlines()[1:]]
    assert len(strip) == 3


def test_saf_loader_modules_are_small_and_keep_their_public_names():
    """saf/data.py was split (data_schema, data_files, data_checks); what the package, the
    notebooks and the benchmarks import from saf_utils.saf.data is still there."""
    used = ("SAF_LABELS", "SAF_HUB_ID", "SAF_SPLITS", "SAF_ANOMALY_KINDS", "SAF_COLUMNS",
            "SAF_OPTIONAL_COLUMNS", "REPORT_COLUMNS", "SAFDataError", "SAFDataWarning",
            "load_saf", "looks_like_path", "saf_dataset_name", "validate_saf_frame")
    assert [n for n in used if not hasattr(sdata, n)] == []
    assert set(used) <= set(sdata.__all__)
    folder = Path(sdata.__file__).parent
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines())
             for p in folder.glob("data*.py")}
    assert len(sizes) == 4 and max(sizes.values()) < 500, sizes


@pytest.mark.parametrize("text", ['{"a": 1}', ' {"a": 1} ', '{"a": 1}\r', '{"a": 1} x',
                                  '{"a": 1, "a": 2}', '{"a": {"b": 1, "b": 2}}', '\ufeff{}', "",
                                  "[1, 2]", '{"a": 1', "1" + "0" * 5000, '{"a": NaN}', "nul"])
def test_the_fast_json_path_gives_json_loads_results_and_errors(text):
    from saf_utils.data.reading import DuplicateKey, load_json_text, unique_keys

    def outcome(parse):
        try:
            return "ok", parse(text)
        except DuplicateKey as exc:
            return "duplicate", exc.args
        except ValueError as exc:
            return type(exc).__name__, str(exc)

    expected = outcome(lambda t: json.loads(t, object_pairs_hook=unique_keys))
    assert outcome(load_json_text) == expected
