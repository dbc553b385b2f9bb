"""Shared fixtures: one smoke run per test session (the slow tests read the same run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.toy_project import project  # noqa: F401 - the runner tests' toy project fixture


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that reads the session's smoke run is part of ``make test`` (marker
    ``smoke``): one smoke run of every notebook with its page checks, beside the fast loop.
    The browser tests read it too but stay in ``make test-all``."""
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
                "browser"):
            item.add_marker(pytest.mark.smoke)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> tuple[Path, int]:
    """``(run folder, exit code)`` of ``saf-run --profile smoke``; ``SAF_SMOKE_RUN=<folder>``
    checks an existing smoke run instead of running one."""
    if os.environ.get("SAF_SMOKE_RUN"):
        return Path(os.environ["SAF_SMOKE_RUN"]), 0
    if not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")):
        pytest.skip("needs SAF_DATA and ARGSCICHAT_DATA (local data copies)")
    from notebook_reports import cli

    reports = tmp_path_factory.mktemp("smoke")
    code = cli.main(["--profile", "smoke", "--reports-dir", str(reports), "--run-name", "s"])
    return reports / "s", code


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    """``standin(hub_id) -> folder``: a tiny stand-in of a gpu-profile model
    (:mod:`tests.standins`), built once per session on the SAF fixtures' texts."""
    from tests.standins import build_standin

    root = tmp_path_factory.mktemp("standins")
    built: dict[str, Path] = {}

    def get(hub_id: str) -> Path:
        if hub_id not in built:
            built[hub_id] = build_standin(hub_id, fixture_texts(), root / hub_id.replace("/", "--"))
        return built[hub_id]

    return get


def fixture_texts() -> list[str]:
    """Every text of the SAF fixtures (German and English), for stand-in tokenizers."""
    import pandas as pd

    frames = [pd.read_csv(p) for p in sorted((Path(__file__).parent / "fixtures" / "saf_csv")
                                             .glob("*.csv"))]
    cols = ("question", "reference_answer", "provided_answer", "answer_feedback")
    return [str(t) for df in frames for c in cols if c in df for t in df[c].dropna()]
