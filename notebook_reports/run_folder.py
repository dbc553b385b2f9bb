"""Run folders: a fresh folder per run, the manifest, earlier executions moved to
``previous/``, the run's pages written from manifest and records, and the lists of runs."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from notebook_reports.manifest import (
    Manifest,
    ReportWriteError,
    died,
    now_iso,
    write_json,
)
from notebook_reports.profiles import (
    REPORTS_DIR,
    RunnerError,
    check_folder_name,
    short,
)
from notebook_reports.records import RECORDS_FILE, SOURCES_FILE, summarize
from saf_utils.data.artifacts import record_rows

RESERVE_FILE = ".saf-run-reserve"
RESERVE_BYTES = 1 << 20  # freed to write the final status on a full disk (manifest < 1 MiB)


@dataclass
class NotebookResult:
    name: str
    status: str = "pending"  # pending | running | ok | failed | interrupted | skipped
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    error: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    html: str | None = None
    invocation: int = 1
    archived_to: str | None = None
    inputs: dict[str, Any] | None = None  # reuse.notebook_inputs of this execution
    files: dict[str, str] | None = None  # reuse.output_files: what a reuse verifies
    reused: dict[str, Any] | None = None  # {"from": run, "at": time, "original": execution}
    worker: str | None = None  # the Dask worker that executed it (None: the runner's process)
    restarts: list[str] | None = None  # Dask workers lost while running it (it started again)


def write_error(exc: OSError, what: str) -> ReportWriteError:
    """``exc`` as the one line a failed write of the run folder is: ``cannot <what>: why``."""
    return ReportWriteError(exc.errno, f"cannot {what}: {exc.strerror or exc}")


def new_run_dir(reports_dir: Path, run_name: str) -> Path:
    """Create a fresh run folder; a taken name gets a numeric suffix, never reused."""
    check_folder_name(run_name, "run name")  # the folder stays inside reports_dir
    try:
        reports_dir.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):
            candidate = reports_dir / (run_name if n == 1 else f"{run_name}-{n}")
            try:
                candidate.mkdir()
                return candidate
            except FileExistsError:
                continue
    except OSError as exc:
        raise write_error(exc, f"create a run folder in {reports_dir}") from None
    raise RunnerError(f"no free run folder name for {run_name} in {reports_dir}")


def lock_run(run_dir: Path) -> int:
    """An exclusive ``flock`` on a run folder (its descriptor; it ends with its process however
    that ends): each run rewrites ``manifest.json`` from the manifest it holds, so a second run
    into the folder at once is refused before it writes anything."""
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunnerError(f"{run_dir} is being written by another saf-run right now; "
                          "wait for it to end, or run into another folder") from None
    return fd


def reserve_space(run_dir: Path) -> None:
    """Keep :data:`RESERVE_BYTES` of disk for the run's final status (:func:`record_end`);
    random bytes: a compressing or sparse-aware file system would not keep it for zeros."""
    path = run_dir / RESERVE_FILE
    try:
        with open(path, "wb") as fh:
            fh.write(os.urandom(RESERVE_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise write_error(exc, f"keep space for the run's status in {run_dir}") from None


def release_space(run_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (run_dir / RESERVE_FILE).unlink(missing_ok=True)


def mark_killed(manifest: Manifest) -> bool:
    """A run whose process :func:`~manifest.died` is ``killed``, its open invocation too, a
    notebook it was running ``interrupted``; True when the manifest changed."""
    if not died(manifest):
        return False
    why = (f"process {manifest.pid} on {manifest.host} ended without recording "
           f"how the run ended (killed: SIGKILL, out of memory, power loss); found {now_iso()}")
    manifest.status, manifest.status_reason = "killed", why
    for inv in manifest.invocations:
        if isinstance(inv, dict) and inv.get("status") == "running":
            inv.update(status="killed", status_reason=why)
    for n in [*manifest.notebooks, *manifest.executions]:
        if isinstance(n, dict) and n.get("status") == "running":
            n.update(status="interrupted", error="killed: the run's process ended while this "
                                                 "notebook ran")
    return True


def why_text(exc: BaseException) -> str:
    """One line on what stopped a run (at most 300 characters of the message)."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else f"{text[:300]}… ({len(text):,} characters)"
    return text if isinstance(exc, OSError) else f"{type(exc).__name__}: {text}"


def record_end(out: Path, manifest: Manifest, invocation: dict, status: str,
               results: list[NotebookResult], stop: BaseException | None) -> BaseException | None:
    """Record how the run ended in the space kept for it (a page not written: ``write_error``,
    the manifest alone); returns the error to raise, if any."""
    run_status, _, sig = status.partition(":")
    bad = ", ".join(f"{r.name} ({r.status})" for r in results if r.status != "ok")
    reason = why_text(stop) if stop is not None else {
        "interrupted": sig, "cluster_lost": sig, "failed": f"not ok: {bad}"}.get(run_status)

    def record(s: str, why: str | None) -> None:
        invocation.update(finished=now_iso(), status=s, status_reason=why)
        manifest.status, manifest.status_reason = s, why
        manifest.finished = invocation["finished"]

    record(run_status, reason)
    release_space(out)  # kept for this moment
    try:
        write_reports(out, manifest)  # the manifest first, then the pages
        return stop
    except ReportWriteError as exc:
        if run_status != "write_error":
            record("write_error", f"{exc} (while recording that the run ended {run_status})")
            stop = exc
    try:
        write_json(out / "manifest.json", manifest.to_dict())  # the status alone
        return stop
    except ReportWriteError:
        pass
    if isinstance(stop, ReportWriteError):  # still one line for the CLI
        return ReportWriteError(stop.errno, f"{stop}; the run's status could not be recorded "
                                f"in {out / 'manifest.json'} either")
    print(f"saf-run: could not record the run's status ({manifest.status}) in "
          f"{out / 'manifest.json'}", file=sys.stderr)
    return stop


def read_manifest(run_dir: Path) -> Manifest:
    """The checked manifest of an existing run (:func:`compare.check_manifest`), typed."""
    from notebook_reports.compare import check_manifest

    path = run_dir / "manifest.json"
    if not path.is_file():
        raise RunnerError(f"{run_dir}: not a run folder (no manifest.json)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{path}: unreadable ({' '.join(str(exc).split())[:200]})") from None
    return Manifest.from_dict(check_manifest(manifest, path))


def data_sources(folder: Path) -> list[dict[str, Any]]:
    """The data files an execution read (the rows of its ``data_sources.json``; none: [])."""
    try:
        rows = json.loads((folder / SOURCES_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict) and "path" in r] \
        if isinstance(rows, list) else []


def write_reports(run_dir: Path, manifest: Manifest) -> None:
    """manifest.json, metrics.json and the pages from the records of each notebook's latest
    execution on disk (a bad line skipped and counted), each with its ``notebook_status``."""
    from notebook_reports import chrome, index_page, metric_cards, results_page

    latest = list(manifest.notebooks)
    status = {n["name"]: n["status"] for n in latest}
    skipped: list[str] = []
    records = record_rows((run_dir / n["name"] / RECORDS_FILE for n in latest), skipped)
    for r in records:
        r["notebook_status"] = status.get(r.get("notebook"), "unknown")
    sources: dict[tuple, dict] = {}  # (path, sha256): a file rewritten between notebooks
    for n in latest:                   # appears once per version, flagged ``changed``
        for row in data_sources(run_dir / n["name"]):
            sources.setdefault((row["path"], row.get("sha256")),
                               {**row, "notebooks": []})["notebooks"].append(n["name"])
    versions = Counter(path for path, _ in sources)
    for (path, _), entry in sources.items():
        entry["changed"] = versions[path] > 1
    manifest.records = {"n": len(records), "skipped_lines": len(skipped),
                        "skipped": skipped[:50]}
    manifest.data_sources = sorted(sources.values(),
                                   key=lambda s: (s["path"], str(s.get("sha256"))))
    manifest.seeds = {n["name"]: {k: v for k, v in n.get("parameters", {}).items()
                                  if "seed" in k} for n in latest}
    written = manifest.to_dict()  # what the pages read
    write_json(run_dir / "manifest.json", written)  # the status first: it is small
    write_json(run_dir / "metrics.json", {"records": records,
                                          "summary": summarize(records).to_dict(orient="records"),
                                          "skipped_record_lines": skipped})
    index_page.write_index(run_dir, written, records)
    results_page.write_results(run_dir, written, records)
    metric_cards.write_cards(run_dir / chrome.CARDS_PAGE, run_dir)
    chrome.refresh(run_dir)  # every page's navigation bar lists the pages there are now


def archive_previous(run_dir: Path, name: str, manifest: Manifest) -> None:
    """Move an earlier execution's files of ``name`` to ``previous/<name>-<k>/``."""
    present = [p for p in (run_dir / f"{name}.ipynb", run_dir / f"{name}.html", run_dir / name)
               if p.exists()]
    if not present:
        return
    k = 1
    while (target := run_dir / "previous" / f"{name}-{k}").exists():
        k += 1
    try:
        target.mkdir(parents=True)
        for p in present:
            shutil.move(str(p), str(target / p.name))
    except OSError as exc:
        raise write_error(exc, f"move the previous {name} to {target}") from None
    for e in manifest.executions:
        if e["name"] == name and not e.get("archived_to"):
            e["archived_to"] = str(target.relative_to(run_dir))


def render(res: NotebookResult, out_nb: Path, hide: bool) -> None:
    """The executed notebook's page; a broken render marks the result failed (a write error
    is raised: the run records it)."""
    from notebook_reports.pages import render_notebook

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


def record_result(manifest: Manifest, res: NotebookResult, order: list[str]) -> None:
    """The latest entry of ``res.name`` in ``notebooks``; every started execution (not the
    "pending" placeholders) in ``executions``."""
    entry = asdict(res)
    execs = manifest.executions
    if res.started:
        for i, e in enumerate(execs):
            if (e["name"], e.get("invocation"), e.get("started")) == (
                    res.name, res.invocation, res.started):
                execs[i] = entry
                break
        else:
            execs.append(entry)
    latest = {n["name"]: n for n in manifest.notebooks} | {res.name: entry}
    rank = {n: i for i, n in enumerate(order)}
    manifest.notebooks = sorted(latest.values(), key=lambda n: rank.get(n["name"], 1e9))


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        t0 = datetime.fromisoformat(start)
        return ((datetime.fromisoformat(end) if end else datetime.now(t0.tzinfo)) - t0
                ).total_seconds()
    except (TypeError, ValueError):
        return None


def _datasets(run_dir: Path) -> list[str]:
    """The datasets a run has records on (``metrics.json``); none where it has no records."""
    try:
        records = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["records"]
        return sorted({str(r["dataset"]) for r in records if isinstance(r, dict)
                       and r.get("dataset") is not None})
    except (OSError, ValueError, KeyError, TypeError):
        return []


def list_runs(reports_dir: str | os.PathLike | None = None,
              problems: list[str] | None = None) -> list[dict]:
    """Runs under the reports folder, oldest first, with profile, commit, status, times and
    datasets (dead ``running`` runs settled as killed). A malformed run raises, unless
    ``problems`` is a list: then one line on it (or on a renamed run) goes there."""
    runs = []
    for mpath in sorted(Path(reports_dir or REPORTS_DIR).glob("*/manifest.json")):
        try:
            m = read_manifest(mpath.parent)
        except RunnerError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        if mark_killed(m):  # a dead "running" run: "killed", written down (best effort)
            release_space(mpath.parent)
            with contextlib.suppress(Exception):
                write_reports(mpath.parent, m)
        folder = mpath.parent.name  # the run is its folder: a copied or renamed run is itself
        if m.run not in (None, folder) and problems is not None:
            problems.append(f"{folder}: its manifest names run {short(m.run)} (copied "
                            "or renamed?); listed under its folder")
        nbs = m.notebooks or []
        status = m.status or ("ok" if all(n.get("status") == "ok" for n in nbs) else "failed")
        if status == "interrupted" and m.status_reason:
            status += f" ({m.status_reason})"  # the signal
        git = m.git or {}
        runs.append({
            "run": folder, "profile": m.profile,
            "commit": str(git.get("commit") or "")[:8] + ("+" if git.get("dirty") else ""),
            "status": status, "started": m.started,
            "seconds": _seconds(m.started, m.finished)
            if m.finished or m.status == "running" else None,
            "notebooks": f"{sum(n.get('status') == 'ok' for n in nbs)}/{len(nbs)} ok",
            "datasets": _datasets(mpath.parent),
        })
    return sorted(runs, key=lambda r: str(r.get("started")))
