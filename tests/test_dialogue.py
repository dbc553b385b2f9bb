"""saf_utils.argscichat.dialogue: the context of a turn, sentence features and prediction
rows, on hand-made dialogues."""

from __future__ import annotations

import pandas as pd
import pytest
from dialogues import CONTENT, INDEX, P0, P1, P2, PAIRS, pair
from fakes import fake_embed
from threadpoolctl import threadpool_limits

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat import fact_selection as FS
from saf_utils.data import artifacts as AR


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """Gradient boosting's OpenMP threads crawl on shared cores; one thread is fast here."""
    with threadpool_limits(1, user_api="openmp"):
        yield


# --------------------------------------------------------------------------- dialogue context


def test_previous_exchanges_and_context() -> None:
    assert A.previous_exchanges(P2, INDEX, turns=1) == [P1.query, P1.reply]
    assert A.previous_exchanges(P2, INDEX, turns=2) == [P0.query, P0.reply, P1.query, P1.reply]
    assert A.dialogue_context(P2, INDEX).endswith(P2.query)
    assert A.dialogue_context(P2) == P2.query
    with pytest.raises(KeyError, match="not in the index"):
        A.previous_exchanges(P2, {"d_2": P2})


def test_sentence_features_history_signals() -> None:
    f = FS.sentence_features(P2, fake_embed, A.dialogue_context(P2, INDEX))
    assert list(f.columns) == list(FS.FEATURES) and len(f) == len(CONTENT)
    assert f.in_last_facts.tolist() == [0, 0, 1, 0, 0]
    assert f.in_prev_facts.tolist() == [0, 0, 1, 0, 0]
    assert f.near_last_facts.tolist() == [0, 1, 0, 1, 0]
    assert f.after_last_fact.tolist() == [-2, -1, 0, 1, 2]
    assert f.is_first2.tolist() == [1, 1, 0, 0, 0]
    assert f.bm25_rank[3] == 0  # "classifier" only in sentence 3
    no_hist = FS.sentence_features(P0, fake_embed)
    assert no_hist.has_last_facts.eq(0).all() and no_hist.dist_last_facts.eq(5).all()
    with pytest.raises(ValueError, match="no content"):
        FS.sentence_features(pair("x", "q", "r", content=()), fake_embed)


def test_feature_table_labels_groups_and_cache() -> None:
    cache: dict = {}
    X, y, g = FS.feature_table([P1, P2], fake_embed, INDEX, cache)
    assert len(X) == 10 and y.tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 1, 0]
    assert g.tolist() == [0] * 5 + [1] * 5 and set(cache) == {"d_1", "d_2"}
    X2, _, _ = FS.feature_table([P2], fake_embed, INDEX, cache)
    assert X2 is cache["d_2"] or X2.equals(cache["d_2"])
    with pytest.raises(ValueError, match="no pairs"):
        FS.feature_table([], fake_embed)


# --------------------------------------------------------------------------- predictions


def test_prediction_rows_roundtrip(tmp_path) -> None:
    rows = A.prediction_rows(PAIRS, [[0, 1], [2, 3], [4, 0]], fold=0, split="test",
                             system="first")
    assert rows[0]["fact_f1"] is None and rows[1]["fact_f1"] == pytest.approx(2 / 3)
    assert rows[1]["selected_sentences"] == [CONTENT[2], CONTENT[3]]
    with pytest.raises(ValueError, match="missing sentence"):
        A.prediction_rows([P1], [[7]], fold=0, split="test", system="x")
    with pytest.raises(ValueError, match="selections"):
        A.prediction_rows([P1], [], fold=0, split="test", system="x")
    AR.write_selections(rows, tmp_path)
    df = AR.read_selections(tmp_path, "first")
    assert len(df) == 3
    lookup = A.selection_lookup(df)
    assert lookup[(0, "test", "d_1")] == [2, 3]
    with pytest.raises(ValueError, match="no predictions of system"):
        AR.read_selections(tmp_path, "bm25")
    with pytest.raises(FileNotFoundError, match="run notebook 03_fact_selection first"):
        AR.read_selections(tmp_path / "03_fact_selection")
    with pytest.raises(ValueError, match="several systems"):
        A.selection_lookup(pd.concat([df, df.assign(system="other")]))
