"""JupyterLab saves of the tracked notebooks stay in their committed form.

An autosave in JupyterLab would rewrite a notebook of ``notebooks/`` with outputs, execution
counts, the running kernel's ``kernelspec``, ``language_info`` and editor cell metadata.
:func:`pre_save_hook` (set by the project's ``jupyter_server_config.py``, which ``make
install`` copies to the venv's ``etc/jupyter``) strips all of that before the file is written,
so a save that changed no source is the committed file byte for byte; notebooks elsewhere keep
their outputs. Why not jupytext pairing or nbstripout: pairing adds a second tracked file per
notebook, and nbstripout's git filter acts at commit time, so ``git status`` would still show
every opened notebook as modified.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from saf_utils.reporting.manifest import PROJECT_ROOT

#: The folder whose notebooks are kept in committed form.
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
#: The kernelspec every tracked notebook is committed with (papermill and the runner start
#: the kernel by this name).
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: Cell metadata a tracked notebook keeps (``parameters`` tags; jupytext's blank-line hint);
#: everything else in cell metadata is editor state.
CELL_METADATA = ("tags", "lines_to_next_cell")


def strip_notebook(nb: Any) -> Any:
    """The notebook (a dict or NotebookNode, changed in place) in committed form: no outputs or
    execution counts, only the project's kernelspec and :data:`CELL_METADATA`."""
    nb["metadata"] = {"kernelspec": dict(KERNELSPEC)}
    for cell in nb.get("cells", []):
        meta = cell.get("metadata") or {}
        cell["metadata"] = type(meta)({k: meta[k] for k in CELL_METADATA if k in meta})
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    return nb


def pre_save_hook(model: dict, path: str, contents_manager: Any, **kwargs: Any) -> None:
    """jupyter_server pre-save hook: strip a notebook saved under ``notebooks/`` (``path``: the
    API path, relative to the server's root folder)."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    file = (Path(getattr(contents_manager, "root_dir", ".")) / path.lstrip("/")).resolve()
    if file.suffix == ".ipynb" and file.is_relative_to(NOTEBOOKS_DIR.resolve()):
        strip_notebook(model["content"])
