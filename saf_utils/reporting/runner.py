"""Run a profile's notebooks with papermill and write a self-contained report folder.

``python -m saf_utils.run --profile cpu`` (or the ``saf-run`` console script) executes the
notebooks named in ``configs/<profile>.yaml`` in order and writes ``reports/<run-name>/``:
the executed notebooks, one HTML page each, ``index.html``, ``metrics.json`` (merged metric
records) and ``manifest.json`` (commit, parameters, versions, seeds, data files with
SHA-256, timings). A failing notebook is rendered with its error and marked failed; the
others still run and the exit code is non-zero. An existing run folder is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from saf_utils.reporting.manifest import (
    PROJECT_ROOT,
    environment_info,
    git_state,
    now_iso,
    package_versions,
    to_jsonable,
)
from saf_utils.reporting.pages import write_index
from saf_utils.reporting.records import RECORDS_FILE, SOURCES_FILE, read_records, summarize

CONFIG_DIR = PROJECT_ROOT / "configs"
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"


DATA_ENV_VARS = ("SAF_DATA", "ARGSCICHAT_DATA", "WORDNET_DIR")


def _absolute_if_path(key: str, value: Any) -> Any:
    """Resolve relative paths in *_source/*_path/*_dir parameters against the caller's cwd."""
    if isinstance(value, str) and key.endswith(("_source", "_path", "_dir")) and value:
        path = Path(value).expanduser()
        if not path.is_absolute() and path.exists():
            return str(path.resolve())
    return value


class RunnerError(RuntimeError):
    """A bad profile, parameter or notebook name (raised before anything runs)."""


@dataclass
class NotebookResult:
    name: str
    status: str = "pending"  # ok | failed
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    error: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    html: str | None = None


def load_profile(profile: str | None = None, config: str | os.PathLike | None = None) -> dict:
    """Read a profile YAML (``configs/<profile>.yaml`` or an explicit path) and check its keys."""
    path = Path(config) if config else CONFIG_DIR / f"{profile}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise RunnerError(f"profile file {path} not found; known profiles: {known}")
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RunnerError(f"{path}: not valid YAML ({exc})") from None
    allowed = {"name", "description", "notebooks", "parameters", "notebook_parameters",
               "hide_code", "timeout"}
    unknown = set(cfg) - allowed
    if unknown:
        raise RunnerError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    if not cfg.get("notebooks"):
        raise RunnerError(f"{path}: 'notebooks' must list at least one notebook")
    cfg.setdefault("name", path.stem)
    cfg.setdefault("parameters", {})
    cfg.setdefault("notebook_parameters", {})
    cfg["path"] = str(path)
    return cfg


def parse_overrides(items: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``key=value`` (all notebooks) or ``notebook.key=value``; values are parsed as YAML."""
    common: dict[str, Any] = {}
    per_nb: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise RunnerError(f"-p {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw else ""
        if "." in key:
            nb, key = key.split(".", 1)
            per_nb.setdefault(nb, {})[key] = value
        else:
            common[key] = value
    return common, per_nb


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The parameters a notebook declares in its ``parameters`` cell (via papermill)."""
    import papermill as pm

    return pm.inspect_notebook(str(path))


def _resolve(names: list[str], wanted: list[str] | None) -> list[str]:
    if not wanted:
        return names
    chosen = []
    for w in wanted:
        hits = [n for n in names if n == w or n.startswith(w)]
        if len(hits) != 1:
            raise RunnerError(f"--only {w!r} matches {hits or 'nothing'} in {names}")
        chosen.append(hits[0])
    return [n for n in names if n in chosen]


def new_run_dir(reports_dir: Path, run_name: str) -> Path:
    """Create a fresh run folder; a taken name gets a numeric suffix, never reused."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = reports_dir / (run_name if n == 1 else f"{run_name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RunnerError(f"no free run folder name for {run_name} in {reports_dir}")


def to_html(ipynb: Path, hide_code: bool) -> Path:
    """Render an executed notebook to one self-contained HTML page (figures embedded)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", embed_images=True)
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    body, _ = exporter.from_notebook_node(nbformat.read(ipynb, as_version=4))
    out = ipynb.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out


def execute_one(nb_path: Path, out_path: Path, params: dict, timeout: int | None) -> str | None:
    """Run one notebook; returns None on success or the error text (the output is kept)."""
    import papermill as pm

    try:
        pm.execute_notebook(
            str(nb_path), str(out_path), parameters=params, kernel_name="python3",
            cwd=str(nb_path.parent), progress_bar=sys.stderr.isatty(),
            execution_timeout=timeout,
        )
    except pm.PapermillExecutionError as exc:
        return f"{exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel death, timeout, bad notebook: report, keep going
        return f"{type(exc).__name__}: {exc}"
    return None


def run_profile(
    profile: str | None = None,
    config: str | os.PathLike | None = None,
    overrides: list[str] | None = None,
    only: list[str] | None = None,
    run_name: str | None = None,
    reports_dir: str | os.PathLike | None = None,
    notebooks_dir: str | os.PathLike | None = None,
    hide_code: bool | None = None,
) -> tuple[Path, list[NotebookResult]]:
    """Run the notebooks of a profile; returns the run folder and one result per notebook."""
    cfg = load_profile(profile, config)
    nb_dir = Path(notebooks_dir) if notebooks_dir else NOTEBOOK_DIR
    names = _resolve(list(cfg["notebooks"]), only)
    common, per_nb = parse_overrides(overrides or [])
    for nb in per_nb:
        if nb not in cfg["notebooks"]:
            raise RunnerError(f"-p {nb}.…: no notebook {nb!r} in profile {cfg['name']}")
    hide = cfg.get("hide_code", False) if hide_code is None else hide_code

    # Check every notebook and parameter before running anything.
    plans: list[tuple[str, Path, dict[str, Any]]] = []
    for name in names:
        path = nb_dir / f"{name}.ipynb"
        if not path.is_file():
            raise RunnerError(f"notebook {path} not found")
        declared = notebook_parameters(path)
        specific = {**(cfg["notebook_parameters"].get(name) or {}), **per_nb.get(name, {})}
        undeclared = sorted(set(specific) - set(declared))
        if undeclared:
            raise RunnerError(f"{name}: parameter(s) {undeclared} not in its parameters cell "
                              f"(declared: {sorted(declared)})")
        shared = {k: v for k, v in {**cfg["parameters"], **common}.items() if k in declared}
        plans.append((name, path, {**shared, **specific}))
    unused = set(common) - {k for _, _, p in plans for k in p}
    if unused:
        raise RunnerError(f"-p {sorted(unused)}: no selected notebook declares these parameters")

    # Notebooks run with notebooks/ as working directory: make data paths absolute first.
    for var in DATA_ENV_VARS:
        if os.environ.get(var) and Path(os.environ[var]).exists():
            os.environ[var] = str(Path(os.environ[var]).resolve())
    plans = [(n, p, {k: _absolute_if_path(k, v) for k, v in prm.items()}) for n, p, prm in plans]

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = new_run_dir(Path(reports_dir) if reports_dir else REPORTS_DIR,
                          run_name or f"{cfg['name']}-{stamp}")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Progress bars inside a kernel only clutter the HTML; the runner shows progress per cell
    # (on a terminal) and per notebook instead. Interactive JupyterLab sessions keep theirs.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    manifest: dict[str, Any] = {
        "run": run_dir.name,
        "profile": cfg["name"],
        "profile_file": cfg["path"],
        "description": cfg.get("description"),
        "git": git_state(),
        "started": now_iso(),
        "environment": environment_info(),
        "packages": package_versions(),
        "overrides": overrides or [],
        "hide_code": hide,
    }
    results: list[NotebookResult] = []
    print(f"Run {run_dir.name}: {len(plans)} notebook(s) -> {run_dir}", flush=True)
    for i, (name, path, params) in enumerate(plans, 1):
        nb_out = run_dir / name
        nb_out.mkdir()
        declared = notebook_parameters(path)
        if "output_dir" in declared:
            params = {**params, "output_dir": str(nb_out.resolve())}
        res = NotebookResult(name=name, parameters=params, started=now_iso())
        print(f"[{i}/{len(plans)}] {name} ...", flush=True)
        t0 = time.perf_counter()
        out_nb = run_dir / f"{name}.ipynb"
        res.error = execute_one(path, out_nb, params, cfg.get("timeout"))
        res.seconds = round(time.perf_counter() - t0, 1)
        res.finished = now_iso()
        res.status = "failed" if res.error else "ok"
        if out_nb.is_file():
            try:
                res.html = to_html(out_nb, hide).name
            except Exception as exc:  # a broken render must not hide the run's other results
                res.error = (res.error or "") + f" | HTML rendering failed: {exc}"
                res.status = "failed"
        print(f"[{i}/{len(plans)}] {name} {res.status} in {res.seconds:.1f} s"
              + (f": {res.error}" if res.error else ""), flush=True)
        results.append(res)

    records = read_records(run_dir / r.name / RECORDS_FILE for r in results)
    sources: dict[str, dict] = {}
    for r in results:
        src = run_dir / r.name / SOURCES_FILE
        if src.is_file():
            for row in json.loads(src.read_text()):
                entry = sources.setdefault(row["path"], {**row, "notebooks": []})
                entry["notebooks"].append(r.name)
    summary = summarize(records)
    metrics = {"records": records, "summary": summary.to_dict(orient="records")}
    (run_dir / "metrics.json").write_text(json.dumps(to_jsonable(metrics), indent=1))
    manifest.update({
        "finished": now_iso(),
        "seeds": {r.name: {k: v for k, v in r.parameters.items() if "seed" in k} for r in results},
        "notebooks": [vars(r) for r in results],
        "data_sources": sorted(sources.values(), key=lambda s: s["path"]),
    })
    (run_dir / "manifest.json").write_text(json.dumps(to_jsonable(manifest), indent=1))
    write_index(run_dir, manifest, results, summary)
    return run_dir, results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="saf-run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu", help="configs/<profile>.yaml (default: cpu)")
    ap.add_argument("--config", help="explicit profile YAML path (overrides --profile)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (all notebooks) or NOTEBOOK.KEY=VALUE")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only these notebooks")
    ap.add_argument("--run-name", help="folder name under reports/ (default: <profile>-<time>)")
    ap.add_argument("--reports-dir", help="where run folders go (default: reports/)")
    ap.add_argument("--notebooks-dir", help="where the notebooks are (default: notebooks/)")
    ap.add_argument("--hide-code", action="store_true", default=None,
                    help="HTML without code cells")
    args = ap.parse_args(argv)
    try:
        run_dir, results = run_profile(
            profile=args.profile, config=args.config, overrides=args.param, only=args.only,
            run_name=args.run_name, reports_dir=args.reports_dir,
            notebooks_dir=args.notebooks_dir, hide_code=args.hide_code)
    except RunnerError as exc:
        print(f"saf-run: {exc}", file=sys.stderr)
        return 2
    failed = [r.name for r in results if r.status != "ok"]
    print(f"Report: {(run_dir / 'index.html').resolve()}")
    if failed:
        print(f"Failed notebook(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
