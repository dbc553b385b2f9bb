"""Frozen notebooks: skip a notebook whose inputs are unchanged and copy its earlier outputs.

``saf-run --reuse RUN`` (or ``reuse: latest`` in a profile: per notebook, the latest run of
the profile with a successful execution of it) compares, per notebook, the inputs of its last
successful execution there (stored in that run's manifest under ``inputs``) with the inputs it
would have now:

- ``notebook``: SHA-256 of the notebook file;
- ``parameters``: SHA-256 of the resolved parameters (``output_dir`` left out);
- ``data``: what the notebook would read now (:func:`notebook_data`): per dataset it declares,
  the resolved source and the SHA-256 of every file in that folder (so another folder, or a
  new, removed or changed file, an optional one included, reruns it), plus any file its
  execution read outside those folders, hashed again now;
- ``lock``: SHA-256 of the lock file;
- ``package``: SHA-256 of the package sources (``saf_utils/**/*.py``) except the runner's own
  modules (:data:`RUNNER_ONLY`: they pick which notebooks run, they neither run inside a
  notebook nor render its page), so that fixing the runner does not rerun every notebook;
- ``depends_on``: the digest of the output folder of each notebook it depends on, in this run;
- ``models``: every model the parameters name, resolved (:func:`saf_utils.provenance.
  model_identities`): a hub id with the commit it resolves to, a local folder with the
  digest of its files, so a model updated under the same name reruns the notebook.

Equal inputs: the notebook, its page and its folder are hard-linked (copied where links are
impossible) into the new run and verified there: every copied file is hashed and compared with
``files``, the ``{path: sha256}`` that its execution recorded (after its page was rendered). A
file that differs, is missing or was not made by that execution (an edited ``records.jsonl``,
page or artifact) undoes the copy and the notebook runs again, with one log line naming the
file; an execution recorded before files were verified has no ``files`` and runs again too.
The ``depends_on`` digests are recomputed from the upstream folders in the new run, never read
from a manifest, so an edited upstream artifact changes the key of every notebook reading it.
The manifest says ``reused`` with the original execution.

Why not jupyter-cache: its key is the notebook's code, not the data files a notebook reads,
the package sources, the lock or upstream notebooks' outputs, and its store holds executed
notebooks, not the artifact folders that notebooks 04-06 read. The key here is six hashes in
the manifest the run writes anyway; no second store to keep in step.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from saf_utils.provenance import model_identities, sha256_file
from saf_utils.reporting.manifest import (
    PROJECT_ROOT,
    Manifest,
    ReportWriteError,
    died,
    lock_info,
    now_iso,
)
from saf_utils.reporting.parameters import NotebookPlan
from saf_utils.reporting.run_folder import NotebookResult, archive_previous, render

IGNORED_PARAMETERS = ("output_dir",)
RUNNER_ONLY = ("run.py", "reporting/cli.py", "reporting/compare.py", "reporting/compare_page.py",
               "reporting/profiles.py", "reporting/parameters.py", "reporting/data_check.py",
               "reporting/plan.py", "reporting/reuse.py", "reporting/runner.py",
               "reporting/notebook_exec.py", "reporting/run_folder.py",
               "reporting/executors.py", "reporting/cluster_options.py", "reporting/sweep.py",
               "reporting/sweep_page.py", "reporting/crossrun.py")


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def tree_digest(root: Path, files: Iterable[Path] | None = None) -> str:
    """SHA-256 over the relative paths and contents of the files under ``root``."""
    files = sorted(p for p in root.rglob("*") if p.is_file()) if files is None else sorted(files)
    return _sha([[str(p.relative_to(root)), sha256_file(p)] for p in files])


def output_files(run: Path, name: str) -> dict[str, str]:
    """``{path relative to the run: sha256}`` of one notebook's outputs in a run:
    ``<name>.ipynb``, ``<name>.html`` and every file under ``<name>/``."""
    found = [p for p in (run / f"{name}.ipynb", run / f"{name}.html") if p.is_file()]
    if (run / name).is_dir():
        found += sorted(p for p in (run / name).rglob("*") if p.is_file())
    return {p.relative_to(run).as_posix(): _page_sha256(p) if p.suffix == ".html"
            else sha256_file(p) for p in found}


def _page_sha256(path: Path) -> str:
    """SHA-256 of a page without its navigation bar (:func:`chrome.without_bar`): the bar is
    rewritten after the execution recorded the page, each time another page appears."""
    from saf_utils.reporting.chrome import without_bar

    text = without_bar(path.read_text(encoding="utf-8", errors="surrogateescape"))
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def folder_digest(files: dict[str, str], name: str) -> str:
    """:func:`tree_digest` of ``<name>/`` from :func:`output_files` (no second read)."""
    pairs = sorted((Path(k[len(name) + 1:]), v) for k, v in files.items()
                   if k.startswith(f"{name}/"))
    return _sha([[str(p), v] for p, v in pairs])


def upstream_digests(run: Path, deps: Iterable[str]) -> dict[str, str | None]:
    """``{dependency: tree_digest}`` of the dependencies' folders in ``run``, hashed now
    (None: no folder), for the ``depends_on`` input."""
    return {d: tree_digest(run / d) if (run / d).is_dir() else None for d in deps}


def mismatch(recorded: Any, now: dict[str, str], skip: Iterable[str] = ()) -> str | None:
    """The first file of ``now`` (:func:`output_files`) that is not the one its execution
    recorded, in words; None when every file matches (``skip``: files not compared)."""
    if not isinstance(recorded, dict) or not recorded:
        return "no digests of its files were recorded (executed before reuse verified files)"
    found = first_difference(recorded, now, skip)
    if found is None:
        return None
    f, how = found
    return {"gone": f"{f} is missing", "new": f"{f} was not made by its execution"}.get(
        how, f"{f} differs from the file its execution made (edited?)")


def first_difference(old: dict[str, Any], new: dict[str, Any], skip: Iterable[str] = ()
                     ) -> tuple[str, str] | None:
    """The first key (sorted) whose value differs, with how: ``gone``, ``new`` or
    ``changed``; None when equal (``skip``: keys not compared)."""
    for f in sorted((set(old) | set(new)) - set(skip)):
        if f not in new:
            return f, "gone"
        if f not in old:
            return f, "new"
        if old[f] != new[f]:
            return f, "changed"
    return None


def remove_outputs(run: Path, name: str) -> None:
    """Undo :func:`copy_outputs` (links only: the source run keeps its files)."""
    shutil.rmtree(run / name, ignore_errors=True)
    for f in (run / f"{name}.ipynb", run / f"{name}.html"):
        f.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def package_digest() -> str:
    """SHA-256 of the package sources but :data:`RUNNER_ONLY`, once per process."""
    pkg = PROJECT_ROOT / "saf_utils"
    return tree_digest(pkg, (p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts
                             and p.relative_to(pkg).as_posix() not in RUNNER_ONLY))


def data_digests(paths: Iterable[str]) -> dict[str, str]:
    """``{path: sha256}`` of files now (``"missing"`` for a file that is gone)."""
    return {p: sha256_file(p) if Path(p).is_file() else "missing" for p in sorted(set(paths))}


def notebook_data(params: dict[str, Any], declared: Iterable[str],
                  read: Iterable[str] = ()) -> dict[str, Any]:
    """The ``data`` input of a notebook: what it would read now, not what an earlier execution
    read (another folder must never return the old results).

    Per dataset whose source parameter it declares: the source (the parameter, else the
    dataset's environment variable, else its hub id) and, for a local folder, ``{relative
    path: sha256}`` of every file in it, so that a new, removed or changed file (an optional
    ``intents.csv`` appearing) changes the key; ``other_files``: the files in ``read`` outside
    those folders (a hub copy's cache), hashed now."""
    from saf_utils.tasks import declared_data_sources

    out: dict[str, Any] = {}
    roots: list[Path] = []
    for src in declared_data_sources():
        if src.param not in declared:
            continue
        value = str(params.get(src.param) or os.environ.get(src.env) or src.hub)
        root = Path(value).expanduser()
        if not root.exists():
            out[src.name] = {"source": value}
            continue
        root = root.resolve()
        roots.append(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out[src.name] = {"source": str(root), "files": {
            (p.name if p == root else p.relative_to(root).as_posix()): sha256_file(p)
            for p in files}}
    out["other_files"] = data_digests(
        p for p in read if not any(Path(p).is_relative_to(r) for r in roots))
    return out


def data_change(old: Any, new: dict[str, Any]) -> str:
    """What differs between two :func:`notebook_data`, in words (the first difference)."""
    if not isinstance(old, dict) or "other_files" not in old:
        return "recorded before the key listed the data folders"
    name, _ = first_difference(old, new) or ("", "")
    a, b = old.get(name), new.get(name)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return f"{name} added or removed"
    if a.get("source", "") != b.get("source", ""):
        return f"{name} source {a.get('source')} -> {b.get('source')}"
    f, how = first_difference(a.get("files", a), b.get("files", b)) or ("?", "")
    verb = {"gone": "was removed from", "new": "is new in"}.get(how, "changed in")
    return f"{name}: {f} {verb} {b.get('source', 'its file')}"


def read_sources(folder: Path) -> dict[str, str]:
    """``{path: sha256}`` of the data files a notebook's execution read (its data_sources)."""
    try:
        rows = json.loads((folder / "data_sources.json").read_text())
    except (OSError, ValueError):
        return {}
    return {r["path"]: r.get("sha256") for r in rows if isinstance(r, dict) and "path" in r}


def notebook_inputs(nb_path: Path, params: dict[str, Any], lock_sha: str | None,
                    depends: dict[str, str | None], data: dict[str, str]) -> dict[str, Any]:
    """The inputs of one execution (see the module docstring), with their ``key``."""
    inputs = {
        "notebook": sha256_file(nb_path),
        "parameters": _sha({k: v for k, v in params.items() if k not in IGNORED_PARAMETERS}),
        "data": dict(sorted(data.items())),
        "lock": lock_sha,
        "package": package_digest(),
        "depends_on": dict(sorted(depends.items())),
        "models": model_identities(params),
    }
    return {**inputs, "key": _sha(inputs)}


def changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The names of the inputs that differ (``[]``: reuse)."""
    return [k for k in ("notebook", "parameters", "data", "lock", "package", "depends_on",
                        "models") if old.get(k) != new.get(k)]


def profile_runs(reports_dir: Path, profile: str, exclude: Path | None = None) -> list[Path]:
    """Runs of ``profile`` under ``reports_dir``, most recently started first (not
    ``exclude``, not a run still going; a killed one is a candidate: what it copies is
    verified)."""
    found: list[tuple[str, Path]] = []
    for mpath in reports_dir.glob("*/manifest.json"):
        if exclude is not None and mpath.parent.resolve() == exclude.resolve():
            continue
        try:
            m = json.loads(mpath.read_text(encoding="utf-8"))
            m = Manifest.from_dict(m)
        except (OSError, ValueError, TypeError, AttributeError):  # no run manifest: no run
            continue
        if m.profile == profile and (m.status != "running" or died(m)):
            found.append((str(m.started or ""), mpath.parent))
    return [p for _, p in sorted(found, key=lambda t: t[0], reverse=True)]


def reusable_entry(run: Path, manifest: Manifest, name: str) -> dict | None:
    """The latest execution of ``name`` in ``run`` that succeeded, has recorded inputs and
    whose files are all still there."""
    entry = next((n for n in manifest.notebooks if n.get("name") == name), None)
    if not entry or entry.get("status") != "ok" or not isinstance(entry.get("inputs"), dict):
        return None
    if not all(p.exists() for p in (run / name, run / f"{name}.ipynb")):
        return None
    return entry


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_outputs(src_run: Path, dst_run: Path, name: str, with_html: bool) -> None:
    """``<name>.ipynb``, ``<name>.html`` (``with_html``) and ``<name>/`` from one run into
    another: hard links (run folders are never modified in place), copies across devices."""
    shutil.copytree(src_run / name, dst_run / name, copy_function=_link_or_copy,
                    dirs_exist_ok=True)
    files = [f"{name}.ipynb"] + ([f"{name}.html"] if with_html else [])
    for f in files:
        if (src_run / f).is_file():
            _link_or_copy(str(src_run / f), str(dst_run / f))


def original_execution(run_name: str, manifest: Manifest, entry: dict) -> dict[str, Any]:
    """Where and when the reused outputs were made: the first execution in a reuse chain."""
    if isinstance(entry.get("reused"), dict):
        return dict(entry["reused"]["original"])
    return {"run": run_name, "started": entry.get("started"), "finished": entry.get("finished"),
            "seconds": entry.get("seconds"),
            "commit": (manifest.git or {}).get("commit"),
            "dirty": (manifest.git or {}).get("dirty")}


# ------------------------------------------------------------------ a run's reuse step
def run_parameters(p: NotebookPlan, out: Path) -> dict[str, Any]:
    """The parameters ``p`` runs with in the run folder ``out`` (its own ``output_dir``)."""
    params = dict(p.params)
    if "output_dir" in p.declared:
        params["output_dir"] = str((out / p.name).resolve())
    return params


def record_inputs(res: NotebookResult, p: NotebookPlan, out: Path,
                  deps_out: dict[str, str | None]) -> None:
    """The inputs, file digests and output digest of a successful execution, its page
    rendered (what --reuse compares and verifies)."""
    data = notebook_data(res.parameters, p.declared, read_sources(out / p.name))
    res.inputs = notebook_inputs(p.path, res.parameters, (lock_info() or {}).get("sha256"),
                                 deps_out, data)
    res.files = output_files(out, p.name)
    res.outputs = folder_digest(res.files, p.name)


def _candidate(reuse_from: list[tuple[Path, Manifest]], p: NotebookPlan, out: Path, tag: str
               ) -> tuple[Path, Manifest, dict] | None:
    """The first run to reuse from that has a successful execution of ``p``: (folder,
    manifest, its entry)."""
    candidates = [(src, m) for src, m in reuse_from if Path(src).resolve() != out.resolve()]
    if not candidates:
        return None
    found = next(((src, m, e) for src, m in candidates
                  if (e := reusable_entry(src, m, p.name)) is not None), None)
    if found is None:
        names = ", ".join(src.name for src, _ in candidates[:3])
        print(f"{tag} {p.name}: no successful execution to reuse in {names}", flush=True)
    return found


def try_reuse(reuse_from: list[tuple[Path, Manifest]], p: NotebookPlan, out: Path,
              manifest: Manifest, deps_out: dict[str, str | None], tag: str
              ) -> NotebookResult | None:
    """Copy ``p``'s outputs from a run to reuse into the run ``out`` (its ``manifest``) when
    its inputs are unchanged and the copied files are those the earlier execution recorded
    (else None: the notebook runs)."""
    from saf_utils.reporting.pages import duration_text

    found = _candidate(reuse_from, p, out, tag)
    if found is None:
        return None
    src, old_manifest, old = found
    params = run_parameters(p, out)
    old_data = old["inputs"].get("data")
    read = (old_data.get("other_files") or {}) if isinstance(old_data, dict) else {}
    now = notebook_inputs(p.path, params, (lock_info() or {}).get("sha256"), deps_out,
                          notebook_data(params, p.declared, read))
    diff = [f"data ({data_change(old_data, now['data'])})" if d == "data" else d
            for d in changed(old["inputs"], now)]
    if None in deps_out.values():
        diff.append("depends_on")
    if diff:
        print(f"{tag} {p.name}: changed since {src.name}: {', '.join(dict.fromkeys(diff))}",
              flush=True)
        return None
    archive_previous(out, p.name, manifest)
    hide = manifest.hide_code
    same_html = bool(bool(old_manifest.hide_code) == hide and old.get("html"))
    try:
        copy_outputs(src, out, p.name, with_html=same_html)
    except OSError as exc:
        raise ReportWriteError(exc.errno, f"cannot copy {p.name} from {src}: "
                               f"{exc.strerror or exc}") from None
    files = output_files(out, p.name)  # what was copied, hashed in this run
    bad = mismatch(old.get("files"), files, () if same_html else [f"{p.name}.html"])
    if bad:
        remove_outputs(out, p.name)
        print(f"{tag} {p.name}: not reused from {src.name}: {bad}; running it", flush=True)
        return None
    original = original_execution(src.name, old_manifest, old)
    res = NotebookResult(p.name, "ok", started=old.get("started"), finished=old.get("finished"),
                         seconds=old.get("seconds"), parameters=params,
                         invocation=len(manifest.invocations),
                         html=old.get("html") if same_html else None, inputs=now,
                         outputs=folder_digest(files, p.name), files=files,
                         reused={"from": src.name, "at": now_iso(), "original": original})
    if not same_html:
        render(res, out / f"{p.name}.ipynb", hide)
        res.files = output_files(out, p.name)
    commit = str(original.get("commit") or "?")[:8]
    print(f"{tag} {p.name} reused from {src.name} (executed {original.get('started')}"
          f" at {commit}, {duration_text(original.get('seconds'))})", flush=True)
    return res
