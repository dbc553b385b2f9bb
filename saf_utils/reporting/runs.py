"""Run folders and what they hold: a fresh folder per run, the manifest, earlier executions
moved to ``previous/``, and the run's pages (index, results, metrics) written from the
manifest and the records.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from saf_utils.reporting.manifest import (
    ReportWriteError,
    write_json,
)
from saf_utils.reporting.profiles import (
    RunnerError,
    check_folder_name,
)
from saf_utils.reporting.records import RECORDS_FILE, SOURCES_FILE, read_records, summarize

PREVIOUS_DIR = "previous"


@dataclass
class NotebookResult:
    name: str
    status: str = "pending"  # pending | running | ok | failed | interrupted
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    error: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    html: str | None = None
    invocation: int = 1
    archived_to: str | None = None
    inputs: dict[str, Any] | None = None  # reuse.notebook_inputs of this execution
    outputs: str | None = None  # reuse.tree_digest of its output folder
    reused: dict[str, Any] | None = None  # {"from": run, "at": time, "original": execution}
    worker: str | None = None  # the Dask worker that executed it (None: the runner's process)


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
        if isinstance(exc, ReportWriteError):
            raise
        raise ReportWriteError(exc.errno, f"cannot create a run folder in {reports_dir}: "
                               f"{exc.strerror or exc}") from None
    raise RunnerError(f"no free run folder name for {run_name} in {reports_dir}")


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The checked manifest of an existing run (see :func:`compare.check_manifest`)."""
    from saf_utils.reporting.compare import check_manifest

    path = run_dir / "manifest.json"
    if not path.is_file():
        raise RunnerError(f"{run_dir}: not a run folder (no manifest.json)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{path}: unreadable ({' '.join(str(exc).split())[:200]})") from None
    return check_manifest(manifest, path)


def _latest(manifest: dict) -> list[dict]:
    return list(manifest.get("notebooks", []))


def write_reports(run_dir: Path, manifest: dict[str, Any]) -> None:
    """metrics.json, manifest.json, index.html and results.html from what is on disk now.

    Records come from each notebook's latest execution; a bad records line is skipped and
    counted; every record carries ``notebook_status`` (its notebook's status).
    """
    from saf_utils.reporting import pages

    latest = _latest(manifest)
    status = {n["name"]: n["status"] for n in latest}
    skipped: list[str] = []
    records = read_records((run_dir / n["name"] / RECORDS_FILE for n in latest), skipped)
    for r in records:
        r["notebook_status"] = status.get(r.get("notebook"), "unknown")
    sources: dict[tuple, dict] = {}  # (path, sha256): a file rewritten between notebooks
    for n in latest:                   # appears once per version, flagged ``changed``
        src = run_dir / n["name"] / SOURCES_FILE
        try:
            rows = json.loads(src.read_text()) if src.is_file() else []
        except (OSError, ValueError):
            rows = []
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and "path" in row:
                entry = sources.setdefault((row["path"], row.get("sha256")),
                                           {**row, "notebooks": []})
                entry["notebooks"].append(n["name"])
    versions = Counter(path for path, _ in sources)
    for (path, _), entry in sources.items():
        entry["changed"] = versions[path] > 1
    summary = summarize(records)
    manifest["records"] = {"n": len(records), "skipped_lines": len(skipped),
                           "skipped": skipped[:50]}
    manifest["data_sources"] = sorted(sources.values(),
                                      key=lambda s: (s["path"], str(s.get("sha256"))))
    manifest["seeds"] = {n["name"]: {k: v for k, v in n.get("parameters", {}).items()
                                     if "seed" in k} for n in latest}
    write_json(run_dir / "metrics.json", {"records": records,
                                          "summary": summary.to_dict(orient="records"),
                                          "skipped_record_lines": skipped})
    write_json(run_dir / "manifest.json", manifest)
    pages.write_index(run_dir, manifest, records)
    pages.write_results(run_dir, manifest, records)


def _archive_previous(run_dir: Path, name: str, manifest: dict) -> str | None:
    """Move an earlier execution's files of ``name`` to ``previous/<name>-<k>/``."""
    present = [p for p in (run_dir / f"{name}.ipynb", run_dir / f"{name}.html", run_dir / name)
               if p.exists()]
    if not present:
        return None
    k = 1 + sum(1 for e in manifest.get("executions", []) if e["name"] == name
                and e.get("archived_to"))
    target = run_dir / PREVIOUS_DIR / f"{name}-{k}"
    while target.exists():
        k += 1
        target = run_dir / PREVIOUS_DIR / f"{name}-{k}"
    try:
        target.mkdir(parents=True)
        for p in present:
            shutil.move(str(p), str(target / p.name))
    except OSError as exc:
        raise ReportWriteError(exc.errno, f"cannot move the previous {name} to {target}: "
                               f"{exc.strerror or exc}") from None
    rel = str(target.relative_to(run_dir))
    for e in manifest.get("executions", []):
        if e["name"] == name and not e.get("archived_to"):
            e["archived_to"] = rel
    return rel


def _record_result(manifest: dict, res: NotebookResult, order: list[str]) -> None:
    """The latest entry of ``res.name`` in ``notebooks``; every started execution (not the
    "pending" placeholders) in ``executions``."""
    entry = asdict(res)
    execs = manifest.setdefault("executions", [])
    if res.started:
        for i, e in enumerate(execs):
            if e["name"] == res.name and e.get("invocation") == res.invocation \
                    and e.get("started") == res.started:
                execs[i] = entry
                break
        else:
            execs.append(entry)
    latest = {n["name"]: n for n in manifest.get("notebooks", [])}
    latest[res.name] = entry
    rank = {n: i for i, n in enumerate(order)}
    manifest["notebooks"] = sorted(latest.values(), key=lambda n: rank.get(n["name"], 1e9))
