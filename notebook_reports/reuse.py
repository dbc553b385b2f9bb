"""Frozen notebooks: skip a notebook whose inputs are unchanged and copy its earlier outputs.

``--reuse RUN`` (or ``reuse: latest``) compares the :data:`INPUTS` recorded in that run's
manifest with those the notebook has now: its file; its parameters but ``output_dir``; the data
it would read now (:func:`notebook_data`); the lock file; the package sources but
:data:`RUNNER_ONLY` (fixing the runner reruns nothing); the output folders of its
``depends_on`` in the new run, hashed now; the models its parameters name, resolved. Equal:
its files are hard-linked into the new run and each checked against the digests its execution
recorded; a file that differs, is missing or is new undoes the copy and the notebook runs.

Why not jupyter-cache: its key is the notebook's code, not the data, package, lock or upstream
outputs, and it stores executed notebooks, not the artifact folders notebooks 04-06 read.
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

from notebook_reports.manifest import (
    PROJECT_ROOT,
    Manifest,
    ReportWriteError,
    died,
    lock_info,
    now_iso,
)
from notebook_reports.parameters import NotebookPlan
from notebook_reports.run_folder import NotebookResult, archive_previous, render
from saf_utils.data.provenance import model_identities, sha256_file

IGNORED_PARAMETERS = ("output_dir",)
INPUTS = ("notebook", "parameters", "data", "lock", "package", "depends_on", "models")
#: the runner's own modules: they neither run inside a notebook nor render its page
RUNNER_ONLY = tuple(f"notebook_reports/{m}.py" for m in (
    "__main__", "cli", "compare", "compare_page", "profiles", "parameters", "data_check", "plan",
    "reuse", "runner", "notebook_exec", "run_folder", "executors", "cluster_options", "sweep",
    "crossrun"))
#: the packages whose sources a notebook runs
PACKAGES = ("saf_utils", "notebook_reports")


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(files: dict[str, str]) -> str:
    """SHA-256 over ``{relative path: sha256}``, in path order."""
    return _sha([[k, files[k]] for k in sorted(files, key=Path)])


def tree_digest(root: Path, files: Iterable[Path] | None = None) -> str:
    """:func:`_digest` of the files under ``root`` (or of ``files`` there)."""
    files = (p for p in root.rglob("*") if p.is_file()) if files is None else files
    return _digest({p.relative_to(root).as_posix(): sha256_file(p) for p in files})


def output_files(run: Path, name: str) -> dict[str, str]:
    """``{path in the run: sha256}`` of ``<name>.ipynb``, ``<name>.html`` and ``<name>/``; a
    page is hashed without its navigation bar, rewritten whenever another page appears."""
    from notebook_reports.chrome import without_bar

    def page_sha(path: Path) -> str:
        text = without_bar(path.read_text(encoding="utf-8", errors="surrogateescape"))
        return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()

    found = [p for p in (run / f"{name}.ipynb", run / f"{name}.html") if p.is_file()]
    if (run / name).is_dir():
        found += sorted(p for p in (run / name).rglob("*") if p.is_file())
    return {p.relative_to(run).as_posix(): page_sha(p) if p.suffix == ".html"
            else sha256_file(p) for p in found}


def folder_digest(files: dict[str, str], name: str) -> str:
    """:func:`tree_digest` of ``<name>/`` from :func:`output_files` (no second read)."""
    return _digest({k[len(name) + 1:]: v for k, v in files.items() if k.startswith(f"{name}/")})


def upstream_digests(run: Path, deps: Iterable[str]) -> dict[str, str | None]:
    """``{dependency: tree_digest}`` of the dependencies' folders in ``run`` (None: none)."""
    return {d: tree_digest(run / d) if (run / d).is_dir() else None for d in deps}


def mismatch(recorded: Any, now: dict[str, str], skip: Iterable[str] = ()) -> str | None:
    """The first file of ``now`` (:func:`output_files`) that is not the one its execution
    recorded, in words (None: all match; ``skip``: files not compared)."""
    if not isinstance(recorded, dict) or not recorded:
        return "no digests of its files were recorded (executed before reuse verified files)"
    f, how = first_difference(recorded, now, skip) or (None, None)
    return None if f is None else {"gone": f"{f} is missing", "new": f"{f} was not made by its "
                                   "execution"}.get(how, f"{f} differs from the file its "
                                                    "execution made (edited?)")


def first_difference(old: dict[str, Any], new: dict[str, Any], skip: Iterable[str] = ()
                     ) -> tuple[str, str] | None:
    """The first key (sorted) whose value differs, and how: ``gone``, ``new`` or ``changed``."""
    for f in sorted((set(old) | set(new)) - set(skip)):
        if f not in new or f not in old or old[f] != new[f]:
            return f, "gone" if f not in new else "new" if f not in old else "changed"
    return None


def remove_outputs(run: Path, name: str) -> None:
    """Undo :func:`copy_outputs` (the source run keeps its files)."""
    shutil.rmtree(run / name, ignore_errors=True)
    for f in (run / f"{name}.ipynb", run / f"{name}.html"):
        f.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def package_digest() -> str:
    """SHA-256 of the sources of :data:`PACKAGES` but :data:`RUNNER_ONLY`, once per process."""
    return tree_digest(PROJECT_ROOT, (
        p for pkg in PACKAGES for p in (PROJECT_ROOT / pkg).rglob("*.py")
        if "__pycache__" not in p.parts and p.relative_to(PROJECT_ROOT).as_posix()
        not in RUNNER_ONLY))


def data_digests(paths: Iterable[str]) -> dict[str, str]:
    """``{path: sha256}`` of files now (``"missing"``: gone)."""
    return {p: sha256_file(p) if Path(p).is_file() else "missing" for p in sorted(set(paths))}


def notebook_data(params: dict[str, Any], declared: Iterable[str],
                  read: Iterable[str] = ()) -> dict[str, Any]:
    """The ``data`` input: what the notebook would read now (another folder must never return
    old results). Per dataset whose source parameter it declares: the source (parameter, else
    environment variable, else hub id) and, for a local folder, ``{relative path: sha256}`` of
    every file in it (an optional file appearing changes the key); ``other_files``: the files
    in ``read`` outside those folders (a hub copy's cache), hashed now."""
    from notebook_reports.tasks import declared_data_sources

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
    """``{path: sha256}`` of the data files an execution read (its ``data_sources.json``)."""
    try:
        rows = json.loads((folder / "data_sources.json").read_text())
    except (OSError, ValueError):
        return {}
    return {r["path"]: r.get("sha256") for r in rows if isinstance(r, dict) and "path" in r}


def notebook_inputs(nb_path: Path, params: dict[str, Any], lock_sha: str | None,
                    depends: dict[str, str | None], data: dict[str, str]) -> dict[str, Any]:
    """The inputs of one execution (see the module docstring), with their ``key``."""
    inputs = dict(zip(INPUTS, (
        sha256_file(nb_path),
        _sha({k: v for k, v in params.items() if k not in IGNORED_PARAMETERS}),
        dict(sorted(data.items())), lock_sha, package_digest(), dict(sorted(depends.items())),
        model_identities(params, nb_path.parent)), strict=True))  # the kernel's folder
    return {**inputs, "key": _sha(inputs)}


def changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The names of the inputs that differ (``[]``: reuse)."""
    return [k for k in INPUTS if old.get(k) != new.get(k)]


def profile_runs(reports_dir: Path, profile: str, exclude: Path | None = None) -> list[Path]:
    """Runs of ``profile`` under ``reports_dir``, latest first (not ``exclude``, not one still
    going; a killed one is a candidate: what it copies is verified)."""
    found: list[tuple[str, Path]] = []
    for mpath in reports_dir.glob("*/manifest.json"):
        if exclude is not None and mpath.parent.resolve() == exclude.resolve():
            continue
        try:
            m = Manifest.from_dict(json.loads(mpath.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, AttributeError):  # no run manifest: no run
            continue
        if m.profile == profile and (m.status != "running" or died(m)):
            found.append((str(m.started or ""), mpath.parent))
    return [p for _, p in sorted(found, key=lambda t: t[0], reverse=True)]


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
    for f in [f"{name}.ipynb"] + ([f"{name}.html"] if with_html else []):
        if (src_run / f).is_file():
            _link_or_copy(str(src_run / f), str(dst_run / f))


# ------------------------------------------------------------------ a run's reuse step
def run_parameters(p: NotebookPlan, out: Path) -> dict[str, Any]:
    """The parameters ``p`` runs with in the run folder ``out`` (its own ``output_dir``)."""
    own = {"output_dir": str((out / p.name).resolve())} if "output_dir" in p.declared else {}
    return {**p.params, **own}


def record_inputs(res: NotebookResult, p: NotebookPlan, out: Path,
                  deps_out: dict[str, str | None]) -> None:
    """The inputs, file digests and output digest of a successful execution, page rendered."""
    data = notebook_data(res.parameters, p.declared, read_sources(out / p.name))
    res.inputs = notebook_inputs(p.path, res.parameters, (lock_info() or {}).get("sha256"),
                                 deps_out, data)
    res.files = output_files(out, p.name)
    res.outputs = folder_digest(res.files, p.name)


def _candidate(reuse_from: list[tuple[Path, Manifest]], p: NotebookPlan, out: Path, tag: str
               ) -> tuple[Path, Manifest, dict] | None:
    """The first run to reuse from whose latest execution of ``p`` succeeded, recorded its
    inputs and left its files: (folder, manifest, its entry)."""
    candidates = [(src, m) for src, m in reuse_from if Path(src).resolve() != out.resolve()]
    if not candidates:
        return None
    latest = ((src, m, next((n for n in m.notebooks if n.get("name") == p.name), {}))
              for src, m in candidates)
    found = next(((src, m, e) for src, m, e in latest
                  if e.get("status") == "ok" and isinstance(e.get("inputs"), dict)
                  and (src / p.name).exists() and (src / f"{p.name}.ipynb").exists()), None)
    if found is None:
        names = ", ".join(src.name for src, _ in candidates[:3])
        print(f"{tag} {p.name}: no successful execution to reuse in {names}", flush=True)
    return found


def try_reuse(reuse_from: list[tuple[Path, Manifest]], p: NotebookPlan, out: Path,
              manifest: Manifest, deps_out: dict[str, str | None], tag: str
              ) -> NotebookResult | None:
    """Copy ``p``'s outputs into the run ``out`` when its inputs are unchanged and the copied
    files are those the earlier execution recorded (else None: the notebook runs)."""
    from notebook_reports.pages import duration_text

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
    same_html = bool(old_manifest.hide_code) == hide and bool(old.get("html"))
    try:
        copy_outputs(src, out, p.name, with_html=same_html)
    except OSError as exc:
        raise ReportWriteError(exc.errno, f"cannot copy {p.name} from {src}: "
                               f"{exc.strerror or exc}") from None
    files = output_files(out, p.name)  # what was copied, hashed in this run
    if bad := mismatch(old.get("files"), files, () if same_html else [f"{p.name}.html"]):
        remove_outputs(out, p.name)
        print(f"{tag} {p.name}: not reused from {src.name}: {bad}; running it", flush=True)
        return None
    git = old_manifest.git or {}  # the original: the first execution in a reuse chain
    original = dict(old["reused"]["original"]) if isinstance(old.get("reused"), dict) else {
        "run": src.name, **{k: old.get(k) for k in ("started", "finished", "seconds")},
        "commit": git.get("commit"), "dirty": git.get("dirty")}
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
