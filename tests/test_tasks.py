"""Task specs (saf_utils.taskspec / saf_utils.all_tasks) and metric metadata (saf_utils.metrics):
the registered specs are consistent with the notebooks and metrics, and a new task reaches the
runner's data check and the index without a change in reporting/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from saf_utils import all_tasks
from saf_utils import metrics as MS
from saf_utils.reporting import data_check, index_page, parameters, profiles

ROOT = Path(__file__).resolve().parents[1]


def test_specs_name_registered_metrics_and_existing_notebooks() -> None:
    specs = all_tasks.specs()
    assert len({s.name for s in specs}) == len(specs)
    for s in specs:
        assert s.headline and all(m in MS.METRICS for m in s.headline), s.name
        for nb in s.notebooks:
            path = ROOT / "notebooks" / f"{nb}.ipynb"
            assert path.is_file(), nb
        declared = [nb for nb in s.notebooks if s.source.param in
                    parameters.notebook_parameters(ROOT / "notebooks" / f"{nb}.ipynb")]
        assert declared, f"no notebook of {s.name} declares {s.source.param}"


def test_metric_direction_and_unknown_metrics() -> None:
    assert MS.lower_is_better("mse") and not MS.lower_is_better("accuracy")
    assert MS.metric("sacrebleu").scale == "0-100"
    assert not MS.lower_is_better("some_new_metric")  # default, stated as not registered
    assert MS.metric("some_new_metric").description == "not registered"
    with pytest.raises(ValueError, match="already registered"):
        MS.add_metric(MS.Metric("accuracy", level="summary", higher_is_better=False))


def _result(task, system, metric, value, split="test", role="system"):
    return {"kind": "result", "task": task, "dataset": "toy", "split": split, "system": system,
            "role": role, "metric": metric, "value": value, "ci_low": value - 0.1,
            "ci_high": value + 0.1, "fold": None, "seed": None, "subset": None}


@pytest.fixture
def toy_task(tmp_path, monkeypatch):
    """A task registered the documented way: a spec module listed in TASK_MODULES."""
    pkg = tmp_path / "toy_task_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "spec.py").write_text(
        "from saf_utils.taskspec import DataSource, TaskSpec\n"
        "SOURCE = DataSource('toy', 'toy_source', 'TOY_DATA', 'toy/hub', 'toy.invalid',\n"
        "                    cached=lambda hub: False)\n"
        "SPECS = (TaskSpec('toy', 'Toy task', ('toy_error', 'accuracy'), ('val', 'test'),\n"
        "                  ('99_toy',), SOURCE),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(all_tasks, "TASK_MODULES", (*all_tasks.TASK_MODULES, "toy_task_pkg.spec"))
    monkeypatch.setitem(MS.METRICS, "toy_error",
                        MS.Metric("toy_error", level="summary", higher_is_better=False,
                                  scale="any"))
    yield
    sys.modules.pop("toy_task_pkg.spec", None)
    sys.modules.pop("toy_task_pkg", None)


def test_a_new_task_reaches_the_index_with_its_direction(toy_task) -> None:
    records = [_result("toy", "good", "toy_error", 0.2), _result("toy", "bad", "toy_error", 0.5),
               _result("toy", "good", "accuracy", 0.7), _result("toy", "bad", "accuracy", 0.6)]
    html = "\n".join(index_page.task_sections(records))
    assert "Toy task" in html
    assert "<b>good</b> is best: lowest toy_error" in html  # direction from the spec


def test_a_new_task_source_is_checked_before_a_run(toy_task, tmp_path, monkeypatch) -> None:
    plan = parameters.NotebookPlan("99_toy", tmp_path / "99_toy.ipynb", {"toy_source": None},
                                 declared={"toy_source": None})
    monkeypatch.delenv("TOY_DATA", raising=False)
    monkeypatch.setattr(data_check, "reachable", lambda host: False)
    with pytest.raises(profiles.RunnerError, match="toy: no local source .TOY_DATA"):
        data_check.check_data_sources([plan])
    monkeypatch.setenv("TOY_DATA", str(tmp_path))
    (entry,) = data_check.check_data_sources([plan])
    assert entry["dataset"] == "toy" and entry["kind"] == "local"
    assert "TOY_DATA" in data_check.data_env_vars()


def test_dry_run_lines_show_every_argscichat_systems_effective_parameters() -> None:
    lines = all_tasks.system_params_lines("03_fact_selection",
                                      {"system_params": {"random": {"seeds": [3]}}})
    assert "      system random: seeds=[3]" in lines and any("system bm25" in x for x in lines)
    reply = all_tasks.system_params_lines("04_generation", {})
    assert any(x.startswith("      system constant_frequent: n_words=") for x in reply)
    bad = all_tasks.system_params_lines("04_generation", {"system_params": {"nope": {}}})
    assert len(bad) == 1 and "error" in bad[0] and "nope" in bad[0]
