"""Notebook 02 on the English development set (20 training questions, 6 unseen), with the
smoke profile: the documented way to run it (docs/english.md) works end to end, and the
page shows what the unseen-question grader is judged on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def english_data() -> Path | None:
    """``SAF_EN_DATA``, else the English folder beside ``SAF_DATA``'s (the local copies)."""
    if os.environ.get("SAF_EN_DATA"):
        return Path(os.environ["SAF_EN_DATA"])
    if os.environ.get("SAF_DATA"):
        beside = Path(os.environ["SAF_DATA"]).parent / "saf_communication_networks_english_dev"
        return beside if beside.is_dir() else None
    return None


@pytest.fixture(scope="module")
def english_run(tmp_path_factory, monkeypatch_module) -> Path:
    """The run folder of ``saf-run --profile smoke --only 02 -p language=en`` on the English
    set; ``SAF_EN_RUN=<folder>`` checks an existing one instead (as ``SAF_SMOKE_RUN``)."""
    if os.environ.get("SAF_EN_RUN"):
        return Path(os.environ["SAF_EN_RUN"])
    data = english_data()
    if data is None:
        pytest.skip("needs SAF_EN_DATA (the English development set)")
    from notebook_reports import cli

    monkeypatch_module.setenv("SAF_DATA", str(data))
    reports = tmp_path_factory.mktemp("english")
    code = cli.main(["--profile", "smoke", "--only", "02", "-p", "language=en",
                     "--reports-dir", str(reports), "--run-name", "en", "--no-reuse"])
    assert code == 0
    return reports / "en"


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_02_runs_on_the_english_set_and_shows_the_unseen_question_choice(english_run):
    from saf_utils.data import artifacts as AR

    out = english_run / "02_baseline_finetuning"
    preds = AR.read_saf_predictions(out)
    unseen = preds[preds.split == "test_unseen_questions"]
    assert unseen.question.nunique() > 1  # the English set's unseen questions
    assert {"criteria", "majority", "nearest_neighbour"} <= set(unseen.system)
    records = AR.read_records(out)
    chosen = records[records.subset.astype(str).str.contains("chosen for test_unseen_questions")]
    assert len(chosen) == 1
    rules = records[records.system.astype(str).str.startswith("rule:")]
    assert {"rule:one_se", "rule:best_mean"} <= set(rules.system)
    page = next(english_run.glob("02_baseline_finetuning*.html")).read_text(encoding="utf-8")
    assert "Label distribution per split" in page and "collapsed" in page
    assert "language" in page and "kept rule" in page
