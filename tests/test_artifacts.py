"""Files notebooks hand to each other: names, writers, typed readers, chosen systems."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from notebook_reports.records import Recorder
from saf_utils.data import artifacts as AR


def test_records_and_items_are_typed_one_way(tmp_path) -> None:
    rec = Recorder("02_baseline_finetuning", tmp_path)
    rec.add("saf", "d", "validation", "majority", "accuracy", 0.5, kind="tuning",
            subset="chosen", role="baseline")
    rec.add("saf", "d", "validation", "nn", "accuracy", 0.4, kind="tuning",
            subset="reference baseline", role="baseline")
    rec.add("saf", "d", "test", "clf", "accuracy", 0.7, seed=2, role="system")
    rec.add_items(pd.DataFrame([{"task": "saf", "dataset": "d", "split": "test", "system": "s",
                                 "metric": "accuracy", "item": 12, "cluster": "q", "value": 1.0,
                                 "seed": None, "fold": 1}]))
    records = AR.read_records(tmp_path, "02")
    assert records.seed.tolist() == [None, None, 2] and records.seed.dtype == object
    assert AR.chosen(records) == {None: "majority"}
    assert AR.chosen(records, subset="reference baseline") == {None: "nn"}
    assert AR.chosen(records, task="other") == {}
    items = AR.read_items(tmp_path, "02")
    assert items.item.tolist() == ["12"] and items.fold.tolist() == [1]
    assert items.seed.tolist() == [None]
    with pytest.raises(FileNotFoundError, match="run notebook 04_generation first"):
        AR.read_items(tmp_path / "nowhere", "04_generation")
    # the notebook to run first is the output folder's name (this layer names no notebook)
    with pytest.raises(FileNotFoundError, match="run notebook 03_fact_selection first"):
        AR.read_selections(tmp_path / "03_fact_selection")
    (tmp_path / AR.RECORDS_FILE).write_text('{"task": "t"}\n')
    with pytest.raises(ValueError, match="bad record"):
        AR.read_records(tmp_path, "02")
    skipped: list[str] = []
    assert AR.record_rows([tmp_path / AR.RECORDS_FILE], skipped) == [] and len(skipped) == 1


def test_saf_predictions_per_split(tmp_path) -> None:
    preds = pd.DataFrame({"id": [1, 2, 3], "split": ["validation", "test_a", "test_a"],
                          "pred_label": [None, "Correct", "Incorrect"], "seed": [None, 1, 1]})
    paths = AR.write_saf_predictions(preds, tmp_path)
    assert [p.name for p in paths] == ["predictions_validation.jsonl.gz",
                                         "predictions_test_a.jsonl.gz"]
    back = AR.read_saf_predictions(tmp_path)
    assert sorted(back.id) == ["1", "2", "3"] and back.pred_label.dtype == object
    with pytest.raises(FileNotFoundError, match="02_baseline_finetuning"):
        AR.read_saf_predictions(tmp_path / "02_baseline_finetuning")


def test_chosen_file_roundtrip_and_fallbacks(tmp_path) -> None:
    with pytest.raises(ValueError, match="per_fold"):
        AR.write_chosen(tmp_path, {"system": "ranker"})
    with pytest.raises(ValueError, match="selector"):
        AR.read_chosen(tmp_path, [0])
    assert AR.read_chosen(tmp_path, [0, 1], fallback="bm25") == {0: "bm25", 1: "bm25"}
    rec = {"task": "sel", "kind": "tuning", "subset": "chosen", "fold": None,
           "system": "val_chosen", "metric": "fact_f1", "value": 0.5}
    (tmp_path / AR.RECORDS_FILE).write_text("\n".join(json.dumps(r) for r in (
        rec, {**rec, "fold": 1, "system": "tfidf"}, {**rec, "fold": 0, "task": "x"})) + "\n")
    # per-fold records of the task only: the fold-less composite is never a fold's choice
    assert AR.read_chosen(tmp_path, [0, 1], "sel", "bm25") == {0: "bm25", 1: "tfidf"}
    AR.write_chosen(tmp_path, {"per_fold": {0: "sbert", 1: "first"}})
    assert AR.read_chosen(tmp_path, [0, 1], "sel", "bm25") == {0: "sbert", 1: "first"}
    with pytest.raises(ValueError, match="fold"):
        AR.read_chosen(tmp_path, [0, 2])


def test_selections_and_generations_roundtrip(tmp_path) -> None:
    rows = [{"fold": 0, "split": "test", "pair_id": "p", "system": "first", "seed": None,
             "selected": [0, 2], "fact_f1": None}]
    AR.write_selections(rows, tmp_path)
    back = AR.read_selections(tmp_path, "first")
    assert back.selected.tolist() == [[0, 2]] and back.seed.tolist() == [None]
    with pytest.raises(ValueError, match="no predictions of system"):
        AR.read_selections(tmp_path, "bm25")
    gens = pd.DataFrame({"fold": [0], "pair_id": ["p"], "seed": [3.0], "output": ["ä"]})
    AR.write_generations(gens, tmp_path)
    g = AR.read_generations(tmp_path)
    assert g.seed.tolist() == [3] and g.output.tolist() == ["ä"]


def test_per_item_files_are_gzip_read_back_as_written(tmp_path) -> None:
    """The per-item files are compressed (they are most of a run folder's weight) and read
    back as the rows that were written, appended chunks included; same rows, same bytes."""
    rows = pd.DataFrame({"item": ["a", "b"], "value": [0.5, 1.0], "text": ["Frage ä", "x"]})
    path = AR.write_jsonl(rows, tmp_path / AR.ITEMS_FILE)
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # the gzip magic number
    again = AR.write_jsonl(rows, tmp_path / "again" / AR.ITEMS_FILE)
    assert again.read_bytes() == path.read_bytes()
    AR.append_jsonl(rows.assign(item=["c", "d"]), path)
    back = AR.read_items(tmp_path)
    assert back.item.tolist() == ["a", "b", "c", "d"] and back.text.iloc[0] == "Frage ä"
    assert pd.read_json(path, lines=True).shape == (4, 3)  # plain pandas reads it too
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / AR.ITEMS_FILE).write_text("")
    assert AR.read_items(tmp_path / "empty").empty
