"""JupyterLab saves keep tracked notebooks in their committed form: the project's
``jupyter_server_config.py``, loaded by traitlets as ``jupyter lab --config=...`` does, sets
a pre-save hook that jupyter_server's own contents manager runs."""

from __future__ import annotations

import asyncio
import copy
import inspect
import shutil
from pathlib import Path

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import FileContentsManager
from jupytext import AsyncTextFileContentsManager
from traitlets.config.loader import PyFileConfigLoader

from saf_utils.reporting import lab

ROOT = Path(__file__).resolve().parent.parent
TRACKED = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _as_lab_leaves_it(path: Path) -> dict:
    """The notebook as JupyterLab sends it to the server after running it: outputs, counts,
    the running kernel's spec, language_info and editor state in cell metadata."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (saf_utils)", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.5",
                                    "mimetype": "text/x-python"}
    for n, cell in enumerate(nb.cells):
        cell.metadata["scrolled"] = True
        cell.metadata["jupyter"] = {"source_hidden": False}
        if cell.cell_type == "code":
            cell.execution_count = n + 1
            cell.metadata["execution"] = {"iopub.status.busy": "2026-12-01T10:00:00.1Z"}
            cell.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "5"},
                                                   execution_count=n + 1),
                            nbformat.v4.new_output("stream", name="stderr",
                                                   text="/tmp/ipykernel_1/x.py: Warning\n")]
    return nb


class Saver:
    """A contents manager's ``save``, sync or async (Lab's jupytext manager is async)."""

    def __init__(self, manager) -> None:
        self.manager = manager
        self.pre_save_hook = manager.pre_save_hook

    def save(self, model: dict, path: str) -> None:
        out = self.manager.save(model, path)
        if inspect.isawaitable(out):
            asyncio.run(out)


@pytest.fixture(params=[FileContentsManager, AsyncTextFileContentsManager],
                ids=["jupyter_server", "jupytext_async"])
def manager(request, tmp_path, monkeypatch):
    """A contents manager (jupyter_server's plain one; jupytext's async one, which Lab uses
    here) configured by the project's config file, serving a copy of notebooks/ (the hook's
    NOTEBOOKS_DIR points at the copy) and a scratch folder."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(lab, "NOTEBOOKS_DIR", tmp_path / "notebooks")
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(ROOT)).load_config()
    return Saver(request.param(config=config, root_dir=str(tmp_path)))


def test_the_project_config_sets_the_hook(manager):
    assert manager.pre_save_hook is lab.pre_save_hook


@pytest.mark.parametrize("path", TRACKED, ids=lambda p: p.stem)
def test_a_lab_save_of_a_tracked_notebook_writes_the_committed_bytes(manager, tmp_path, path):
    model = {"type": "notebook", "format": "json", "content": _as_lab_leaves_it(path)}
    manager.save(model, f"notebooks/{path.name}")
    assert (tmp_path / "notebooks" / path.name).read_bytes() == path.read_bytes()


def test_a_source_edit_is_kept_and_a_notebook_elsewhere_keeps_its_outputs(manager, tmp_path):
    nb = _as_lab_leaves_it(TRACKED[0])
    nb.cells[0].source += "\n\nA new sentence."
    nb.cells[1].metadata["tags"] = ["parameters"]
    manager.save({"type": "notebook", "format": "json", "content": copy.deepcopy(nb)},
                 f"notebooks/{TRACKED[0].name}")
    saved = nbformat.read(tmp_path / "notebooks" / TRACKED[0].name, as_version=4)
    assert saved.cells[0].source.endswith("A new sentence.")
    assert saved.cells[1].metadata == {"tags": ["parameters"]}
    assert saved.metadata == {"kernelspec": lab.KERNELSPEC}
    assert not any(c.get("outputs") or c.get("execution_count") for c in saved.cells)
    manager.save({"type": "notebook", "format": "json", "content": nb}, "scratch/copy.ipynb")
    kept = nbformat.read(tmp_path / "scratch" / "copy.ipynb", as_version=4)
    assert "language_info" in kept.metadata
    assert any(c.get("outputs") for c in kept.cells if c.cell_type == "code")


def test_every_tracked_notebook_is_already_in_stripped_form():
    for path in TRACKED:
        nb = nbformat.read(path, as_version=4)
        assert nbformat.writes(lab.strip_notebook(copy.deepcopy(nb))) == nbformat.writes(nb), \
            path.name


@pytest.mark.slow
def test_jupyter_lab_from_the_venv_keeps_a_tracked_notebook_clean_without_config(tmp_path):
    """``jupyter lab`` started by hand from the venv (no ``--config``, not ``make lab``)
    reads the copy ``make install`` puts in ``<venv>/etc/jupyter``: a save of a tracked
    notebook with outputs (what Lab's autosave sends after a cell ran) leaves the file
    byte for byte as committed."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("not the project's .venv (make install puts the config there)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    jupyter = Path(sys.executable).parent / "jupyter"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "user-config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    cmd = [str(jupyter), "lab", "--no-browser", "--allow-root", f"--port={port}",
           "--ip=127.0.0.1", "--IdentityProvider.token=t", f"--ServerApp.root_dir={ROOT}"]
    path = TRACKED[0]
    before = path.read_bytes()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/contents/notebooks/{path.name}?token=t"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        body = json.dumps({"type": "notebook", "format": "json",
                           "content": _as_lab_leaves_it(path)}).encode()
        req = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
        assert path.read_bytes() == before
    finally:
        path.write_bytes(before)  # never leave a dirtied tracked notebook behind
        proc.terminate()
        proc.wait(timeout=30)
