"""Shared fixtures: one smoke run per test session (the slow tests read the same run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.toy_project import project  # noqa: F401 - the runner tests' toy project fixture


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> tuple[Path, int]:
    """``(run folder, exit code)`` of ``saf-run --profile smoke``; ``SAF_SMOKE_RUN=<folder>``
    checks an existing smoke run instead of running one."""
    if os.environ.get("SAF_SMOKE_RUN"):
        return Path(os.environ["SAF_SMOKE_RUN"]), 0
    if not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")):
        pytest.skip("needs SAF_DATA and ARGSCICHAT_DATA (local data copies)")
    from saf_utils.reporting import cli

    reports = tmp_path_factory.mktemp("smoke")
    code = cli.main(["--profile", "smoke", "--reports-dir", str(reports), "--run-name", "s"])
    return reports / "s", code
