"""The tracked notebooks are stored in their committed form by nbstripout as a git filter (set
up by ``make install``): JupyterLab's saves keep their outputs in the working copy, git sees the
notebook without outputs, counts, ``language_info`` or editor state, and a notebook outside
``notebooks/`` is stored as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACKED = sorted((ROOT / "notebooks").glob("*.ipynb"))
NBSTRIPOUT = Path(sys.executable).parent / "nbstripout"
pytestmark = pytest.mark.skipif(not NBSTRIPOUT.exists() or shutil.which("git") is None,
                                reason="needs git and the venv's nbstripout (make install)")


def _as_lab_leaves_it(path: Path) -> nbformat.NotebookNode:
    """The notebook as JupyterLab saves it after running it: outputs, counts, language_info
    and editor state in cell metadata."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.5"}
    for n, cell in enumerate(nb.cells):
        cell.metadata["scrolled"] = True
        cell.metadata["jupyter"] = {"source_hidden": False}
        if cell.cell_type == "code":
            cell.execution_count = n + 1
            cell.metadata["execution"] = {"iopub.status.busy": "2026-12-01T10:00:00.1Z"}
            cell.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "5"},
                                                   execution_count=n + 1)]
    return nb


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with the project's .gitattributes, one tracked notebook and the filter
    set by the Makefile's own ``git-filter`` target."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    shutil.copy(ROOT / ".gitattributes", tmp_path / ".gitattributes")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(TRACKED[0], tmp_path / "notebooks" / "nb.ipynb")
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "-C", str(tmp_path),
                    "git-filter", f"VENV={Path(sys.executable).parent.parent}"],
                   check=True, capture_output=True)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "start")
    return tmp_path


def test_a_lab_save_keeps_outputs_in_the_working_copy_and_git_sees_the_committed_form(repo):
    nb = repo / "notebooks" / "nb.ipynb"
    committed = nb.read_bytes()
    nbformat.write(_as_lab_leaves_it(nb), nb)
    assert _git(repo, "diff") == ""  # git compares the filtered file: no change
    _git(repo, "add", "notebooks/nb.ipynb")
    assert _git(repo, "show", ":notebooks/nb.ipynb").encode() == committed
    assert _git(repo, "status", "--porcelain") == ""  # nothing to commit
    assert any(c.get("outputs") for c in nbformat.read(nb, as_version=4).cells)


def test_a_source_edit_is_seen_and_a_notebook_elsewhere_keeps_its_outputs(repo):
    nb = repo / "notebooks" / "nb.ipynb"
    edited = _as_lab_leaves_it(nb)
    edited.cells[0].source += "\n# edited"
    nbformat.write(edited, nb)
    (repo / "mine").mkdir()
    nbformat.write(_as_lab_leaves_it(nb), repo / "mine" / "own.ipynb")
    _git(repo, "add", "-A")
    stored = nbformat.reads(_git(repo, "show", ":notebooks/nb.ipynb"), as_version=4)
    assert stored.cells[0].source.endswith("# edited")
    assert not any(c.get("outputs") for c in stored.cells)
    assert "language_info" not in stored.metadata
    own = nbformat.reads(_git(repo, "show", ":mine/own.ipynb"), as_version=4)
    assert any(c.get("outputs") for c in own.cells)


def test_every_tracked_notebook_is_already_in_stripped_form(repo):
    """The committed notebooks are what the filter writes, else every clone would show them
    modified. The filter runs as git runs it: the configured command, stdin to stdout."""
    clean = _git(repo, "config", "filter.nbstripout.clean").strip()
    for path in TRACKED:
        out = subprocess.run(clean, shell=True, input=path.read_bytes(), check=True,
                             capture_output=True)
        assert out.stdout == path.read_bytes(), path.name
