"""Frozen notebooks (docs/reuse.md): a notebook whose :data:`INPUTS` are those an earlier
execution recorded is not run; that execution's files are linked in and checked instead.

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
    died,
    lock_info,
    now_iso,
)
from notebook_reports.parameters import NotebookPlan
from notebook_reports.profiles import RunnerError
from notebook_reports.run_folder import (
    NotebookResult,
    archive_previous,
    data_sources,
    read_manifest,
    render,
    write_error,
)
from saf_utils.data.provenance import model_identities, sha256_file

INPUTS = ("notebook", "parameters", "data", "lock", "package", "depends_on", "models")
#: the runner's own modules: they neither run inside a notebook nor render its page
RUNNER_ONLY = tuple(f"notebook_reports/{m}.py" for m in (
    "__main__", "cli", "compare", "compare_page", "profiles", "parameters", "data_check", "plan",
    "reuse", "runner", "notebook_exec", "run_folder", "executors", "cluster_options", "sweep",
    "crossrun"))


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def tree_digest(root: Path) -> str | None:
    """SHA-256 over ``{relative path: sha256}`` of the files under ``root`` (None: no folder)."""
    return _sha({p.relative_to(root).as_posix(): sha256_file(p) for p in root.rglob("*")
                 if p.is_file()}) if root.is_dir() else None


@lru_cache(maxsize=1)
def package_digest() -> str:
    """:func:`tree_digest` of the ``*.py`` of both packages but :data:`RUNNER_ONLY`."""
    files = (p.relative_to(PROJECT_ROOT).as_posix() for pkg in ("saf_utils", "notebook_reports")
             for p in (PROJECT_ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)
    return _sha({f: sha256_file(PROJECT_ROOT / f) for f in files if f not in RUNNER_ONLY})


def output_files(run: Path, name: str) -> dict[str, str]:
    """``{path in the run: sha256}`` of ``<name>.ipynb``, ``<name>.html`` and ``<name>/``; a
    page is hashed without its navigation bar, rewritten whenever another page appears."""
    from notebook_reports.chrome import without_bar

    found = [p for p in (run / f"{name}.ipynb", run / f"{name}.html") if p.is_file()]
    found += sorted(p for p in (run / name).rglob("*") if p.is_file())
    return {p.relative_to(run).as_posix(): hashlib.sha256(without_bar(p.read_text(
        encoding="utf-8", errors="surrogateescape")).encode("utf-8", "surrogateescape")
    ).hexdigest() if p.suffix == ".html" else sha256_file(p) for p in found}


def mismatch(recorded: Any, now: dict[str, str], skip: Iterable[str] = ()) -> str | None:
    """The first file of ``now`` (:func:`output_files`) that is not the one its execution
    recorded, in words (None: all match; ``skip``: files not compared)."""
    if not isinstance(recorded, dict) or not recorded:
        return "no digests of its files were recorded (executed before reuse verified files)"
    for f in sorted((set(recorded) | set(now)) - set(skip)):
        if f not in now:
            return f"{f} is missing"
        if f not in recorded:
            return f"{f} was not made by its execution"
        if recorded[f] != now[f]:
            return f"{f} differs from the file its execution made (edited?)"
    return None


def notebook_data(params: dict[str, Any], declared: Iterable[str],
                  read: Iterable[str] = ()) -> dict[str, Any]:
    """The ``data`` input: per dataset whose source parameter it declares, the source it would
    read now (parameter, else environment variable, else hub id) and the SHA-256 of every file
    in a local one; ``other_files``: those of ``read`` outside them (a hub cache), hashed now."""
    from notebook_reports.tasks import declared_data_sources

    out: dict[str, Any] = {}
    for src in (s for s in declared_data_sources() if s.param in declared):
        value = str(params.get(src.param) or os.environ.get(src.env) or src.hub)
        root = Path(value).expanduser().resolve()
        if not root.exists():
            out[src.name] = {"source": value}
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out[src.name] = {"source": str(root), "files": {
            (p.name if p == root else p.relative_to(root).as_posix()): sha256_file(p)
            for p in files}}
    roots = [Path(d["source"]) for d in out.values() if "files" in d]
    out["other_files"] = {p: sha256_file(p) if Path(p).is_file() else "missing" for p in sorted(
        set(read)) if not any(Path(p).is_relative_to(r) for r in roots)}
    return out


def notebook_inputs(nb_path: Path, params: dict[str, Any], lock_sha: str | None,
                    depends: dict[str, str | None], data: dict[str, Any]) -> dict[str, Any]:
    """The inputs of one execution (see the module docstring), with their ``key``."""
    inputs = dict(zip(INPUTS, (
        sha256_file(nb_path), _sha({k: v for k, v in params.items() if k != "output_dir"}),
        data, lock_sha, package_digest(), depends,
        model_identities(params, nb_path.parent)), strict=True))  # the kernel's folder
    return {**inputs, "key": _sha(inputs)}


def changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The names of the inputs that differ (``[]``: reuse); a missing upstream folder always
    differs."""
    return [k for k in INPUTS if old.get(k) != new.get(k)
            or k == "depends_on" and None in new[k].values()]


def profile_runs(reports_dir: Path, profile: str, exclude: Path | None = None
                 ) -> list[tuple[Path, Manifest]]:
    """Runs of ``profile`` with their manifests, latest first: not ``exclude``, a malformed one or
    one still going (a killed one is: what it copies is verified)."""
    found = []
    for mpath in reports_dir.glob("*/manifest.json"):
        if exclude is not None and mpath.parent.resolve() == exclude.resolve():
            continue
        try:
            m = read_manifest(mpath.parent)
        except RunnerError:
            continue
        if m.profile == profile and (m.status != "running" or died(m)):
            found.append((mpath.parent, m))
    return sorted(found, key=lambda run: str(run[1].started or ""), reverse=True)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link (run folders are never modified in place), a copy across devices."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


# ------------------------------------------------------------------ a run's reuse step
def run_parameters(p: NotebookPlan, out: Path) -> dict[str, Any]:
    """The parameters ``p`` runs with in the run folder ``out`` (its own ``output_dir``)."""
    own = {"output_dir": str((out / p.name).resolve())} if "output_dir" in p.declared else {}
    return {**p.params, **own}


def _inputs_now(p: NotebookPlan, params: dict[str, Any], folder: Path,
                deps_out: dict[str, str | None]) -> dict[str, Any]:
    """:func:`notebook_inputs` of ``p`` now, with the files its execution in ``folder`` read."""
    data = notebook_data(params, p.declared, [r["path"] for r in data_sources(folder)])
    return notebook_inputs(p.path, params, (lock_info() or {}).get("sha256"), deps_out, data)


def record_inputs(res: NotebookResult, p: NotebookPlan, out: Path,
                  deps_out: dict[str, str | None]) -> None:
    """The inputs and file digests of a successful execution, page rendered."""
    res.inputs = _inputs_now(p, res.parameters, out / p.name, deps_out)
    res.files = output_files(out, p.name)


def try_reuse(reuse_from: list[tuple[Path, Manifest]], p: NotebookPlan, out: Path,
              manifest: Manifest, deps_out: dict[str, str | None], tag: str
              ) -> NotebookResult | None:
    """``p``'s files copied from the first run whose latest execution of it succeeded with the
    inputs it has now, when they are those that execution recorded (else None: it runs)."""
    from notebook_reports.pages import duration_text

    def say(text: str) -> None:
        print(f"{tag} {p.name}{text}", flush=True)

    runs = [(src, m) for src, m in reuse_from if Path(src).resolve() != out.resolve()]
    found = next(((src, m, e) for src, m in runs for e in m.notebooks
                  if e.get("name") == p.name and e.get("status") == "ok"
                  and isinstance(e.get("inputs"), dict) and (src / f"{p.name}.ipynb").exists()
                  and (src / p.name).exists()), None)
    if found is None:
        if runs:
            names = ", ".join(src.name for src, _ in runs[:3])
            say(f": no successful execution to reuse in {names}")
        return None
    src, old_manifest, old = found
    params = run_parameters(p, out)
    now = _inputs_now(p, params, src / p.name, deps_out)
    if diff := changed(old["inputs"], now):
        return say(f": changed since {src.name}: {', '.join(diff)}")
    archive_previous(out, p.name, manifest)
    same_html = bool(old_manifest.hide_code) == manifest.hide_code and bool(old.get("html"))
    try:
        shutil.copytree(src / p.name, out / p.name, copy_function=_link_or_copy,
                        dirs_exist_ok=True)
        for f in [f"{p.name}.ipynb"] + [f"{p.name}.html"] * same_html:
            if (src / f).is_file():
                _link_or_copy(str(src / f), str(out / f))
    except OSError as exc:
        raise write_error(exc, f"copy {p.name} from {src}") from None
    files = output_files(out, p.name)  # what was copied, hashed in this run
    if bad := mismatch(old.get("files"), files, [] if same_html else [f"{p.name}.html"]):
        shutil.rmtree(out / p.name, ignore_errors=True)
        for f in (out / f"{p.name}.ipynb", out / f"{p.name}.html"):
            f.unlink(missing_ok=True)
        return say(f": not reused from {src.name}: {bad}; running it")
    git = old_manifest.git or {}  # the original: the first execution in a reuse chain
    original = dict(old["reused"]["original"]) if isinstance(old.get("reused"), dict) else {
        "run": src.name, **{k: old.get(k) for k in ("started", "finished", "seconds")},
        "commit": git.get("commit"), "dirty": git.get("dirty")}
    res = NotebookResult(p.name, "ok", started=old.get("started"), finished=old.get("finished"),
                         seconds=old.get("seconds"), parameters=params,
                         invocation=len(manifest.invocations),
                         html=old.get("html") if same_html else None, inputs=now, files=files,
                         reused={"from": src.name, "at": now_iso(), "original": original})
    if not same_html:
        render(res, out / f"{p.name}.ipynb", manifest.hide_code)
        res.files = output_files(out, p.name)
    say(f" reused from {src.name} (executed {original.get('started')} at "
        f"{str(original.get('commit') or '?')[:8]}, {duration_text(original.get('seconds'))})")
    return res
