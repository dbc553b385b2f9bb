"""The steps of one notebook in a run, each a small function the runner
(:mod:`saf_utils.reporting.runner`) calls: reuse an unchanged earlier execution
(:func:`try_reuse`), render an executed notebook's page (:func:`render`) and record what a
successful execution read and wrote (:func:`record_inputs`: what a later ``--reuse``
compares and verifies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from saf_utils.reporting import reuse
from saf_utils.reporting.manifest import Manifest, ReportWriteError, lock_info, now_iso
from saf_utils.reporting.parameters import NotebookPlan
from saf_utils.reporting.runs import NotebookResult, _archive_previous


def run_parameters(p: NotebookPlan, out: Path) -> dict[str, Any]:
    """The parameters ``p`` runs with in the run folder ``out`` (its own ``output_dir``)."""
    params = dict(p.params)
    if "output_dir" in p.declared:
        params["output_dir"] = str((out / p.name).resolve())
    return params


def render(res: NotebookResult, out_nb: Path, hide: bool) -> None:
    """The executed notebook's page; a broken render marks the result failed, it does not
    hide the run's other results (a write error is raised: the run records it)."""
    from saf_utils.reporting.pages import render_notebook

    if not out_nb.is_file():
        return
    try:
        res.html = render_notebook(out_nb, hide).name
    except ReportWriteError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken render must not hide other results
        res.error = (res.error or "") + f" | HTML rendering failed: {exc}"
        if res.status == "ok":
            res.status = "failed"


def record_inputs(res: NotebookResult, p: NotebookPlan, out: Path,
                  deps_out: dict[str, str | None]) -> None:
    """The inputs, file digests and output digest of a successful execution, its page
    rendered (what --reuse compares and verifies)."""
    res.inputs = reuse.notebook_inputs(p.path, res.parameters, (lock_info() or {}).get("sha256"),
                                       deps_out, reuse.notebook_data(
                                           res.parameters, p.declared,
                                           reuse.read_sources(out / p.name)))
    res.files = reuse.output_files(out, p.name)
    res.outputs = reuse.folder_digest(res.files, p.name)


def _candidate(reuse_from: list[tuple[Path, dict]], p: NotebookPlan, out: Path, tag: str
               ) -> tuple[Path, dict, dict] | None:
    """The first run to reuse from that has a successful execution of ``p``: (folder,
    manifest, its entry)."""
    candidates = [(src, m) for src, m in reuse_from if Path(src).resolve() != out.resolve()]
    if not candidates:
        return None
    found = next(((src, m, e) for src, m in candidates
                  if (e := reuse.reusable_entry(src, m, p.name)) is not None), None)
    if found is None:
        names = ", ".join(src.name for src, _ in candidates[:3])
        print(f"{tag} {p.name}: no successful execution to reuse in {names}", flush=True)
    return found


def try_reuse(reuse_from: list[tuple[Path, dict]], p: NotebookPlan, out: Path,
              deps_out: dict[str, str | None], hide: bool, n_inv: int, tag: str,
              manifest: Manifest) -> NotebookResult | None:
    """Copy ``p``'s outputs from a run to reuse when its inputs are unchanged (else None)."""
    found = _candidate(reuse_from, p, out, tag)
    if found is None:
        return None
    src, old_manifest, old = found
    params = run_parameters(p, out)
    old_data = old["inputs"].get("data")
    read = (old_data.get("other_files") or {}) if isinstance(old_data, dict) else {}
    now = reuse.notebook_inputs(p.path, params, (lock_info() or {}).get("sha256"), deps_out,
                                reuse.notebook_data(params, p.declared, read))
    diff = [f"data ({reuse.data_change(old_data, now['data'])})" if d == "data" else d
            for d in reuse.changed(old["inputs"], now)]
    if None in deps_out.values():
        diff.append("depends_on")
    if diff:
        print(f"{tag} {p.name}: changed since {src.name}: {', '.join(dict.fromkeys(diff))}",
              flush=True)
        return None
    _archive_previous(out, p.name, manifest)
    same_html = bool(old_manifest.get("hide_code", False)) == hide and old.get("html")
    try:
        reuse.copy_outputs(src, out, p.name, with_html=bool(same_html))
    except OSError as exc:
        raise ReportWriteError(exc.errno, f"cannot copy {p.name} from {src}: "
                               f"{exc.strerror or exc}") from None
    return _copied(src, old_manifest, old, p, out, bool(same_html), hide, params, now, n_inv,
                   tag)


def _copied(src: Path, old_manifest: dict, old: dict, p: NotebookPlan, out: Path,
            same_html: bool, hide: bool, params: dict[str, Any], now: dict[str, Any],
            n_inv: int, tag: str) -> NotebookResult | None:
    """The result of a copied execution once its files are verified (None: they differ from
    what the earlier run recorded; the copy is removed and the notebook runs)."""
    from saf_utils.reporting.pages import duration_text

    files = reuse.output_files(out, p.name)  # what was copied, hashed in this run
    bad = reuse.mismatch(old.get("files"), files, () if same_html else [f"{p.name}.html"])
    if bad:
        reuse.remove_outputs(out, p.name)
        print(f"{tag} {p.name}: not reused from {src.name}: {bad}; running it", flush=True)
        return None
    original = reuse.original_execution(src.name, old_manifest, old)
    res = NotebookResult(p.name, "ok", started=old.get("started"), finished=old.get("finished"),
                         seconds=old.get("seconds"), parameters=params, invocation=n_inv,
                         html=old.get("html") if same_html else None, inputs=now,
                         outputs=reuse.folder_digest(files, p.name), files=files,
                         reused={"from": src.name, "at": now_iso(),
                                 "original": original})
    if not same_html:
        render(res, out / f"{p.name}.ipynb", hide)
        res.files = reuse.output_files(out, p.name)
    commit = str(original.get("commit") or "?")[:8]
    print(f"{tag} {p.name} reused from {res.reused['from']} (executed {original.get('started')}"
          f" at {commit}, {duration_text(original.get('seconds'))})", flush=True)
    return res
