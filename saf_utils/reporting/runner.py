"""Run a profile's notebooks with papermill and write a self-contained report folder.

``saf-run --profile cpu`` (or ``python -m saf_utils.run``) executes the notebooks named in
``configs/<profile>.yaml`` in order and writes ``reports/<run-name>/``: the executed
notebooks, one HTML page each (no network loads), ``index.html`` (headline tables),
``results.html`` (every result record), ``metrics.json`` (merged records) and
``manifest.json`` (commit, parameters, installed packages, lock hash, data files with
SHA-256, timings, every execution). Everything is checked before the first notebook runs
(profile, names that become paths, parameters with their types and choices, dependencies,
data sources, the ``--baseline`` run). A failing notebook is
rendered with its error and marked failed; the others still run and the exit code is 1.
Manifest and index are rewritten when the run starts and after each notebook; Ctrl-C or
SIGTERM mark the run and the running notebook "interrupted" and still write them; a write
error or a runner error is recorded as the run's status too, into space kept for it
(docs/runs.md: ``status`` and ``status_reason``).
``--run-dir reports/<run>`` reruns chosen notebooks inside an existing run (the previous
execution's files move to ``previous/``, the manifest keeps both). A new run never touches an
existing folder. ``--workers N`` (a local Dask cluster) or ``--scheduler ADDRESS`` (any Dask
cluster) run independent notebooks at once (:mod:`.scheduler`; ``saf-run sweep``:
:mod:`.sweep`; docs/cluster.md).

Exit codes: 0 ok, 1 a notebook failed, 2 bad invocation (nothing ran), 3 a report file could
not be written, 130/143 interrupted by SIGINT/SIGTERM.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from saf_utils.reporting.execute import (  # noqa: F401 - section_starts re-exported for tests
    Interrupted,
    _signals,
    execute_one,
    mark_interrupted,
    section_starts,
)
from saf_utils.reporting.manifest import (
    ReportWriteError,
    environment_info,
    git_state,
    installed_packages,
    lock_info,
    now_iso,
    package_versions,
    pid_alive,
)
from saf_utils.reporting.pages import _duration
from saf_utils.reporting.profiles import (  # noqa: F401 - re-exported for callers and tests
    CONFIG_DIR,
    NOTEBOOK_DIR,
    REPORTS_DIR,
    NotebookPlan,
    RunnerError,
    check_data_sources,
    check_dependencies,
    check_folder_name,
    check_run_name,
    data_env_vars,
    load_profile,
    notebook_parameters,
    parse_overrides,
    plan_notebooks,
    select_notebooks,
    short,
)
from saf_utils.reporting.runs import (  # noqa: F401 - new_run_dir re-exported for tests
    NotebookResult,
    _archive_previous,
    _record_result,
    mark_killed,
    new_run_dir,
    read_manifest,
    release_space,
    reserve_space,
    write_reports,
    write_status,
)
from saf_utils.tasks import system_params_lines

EXIT_INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143}
def _absolute_if_path(key: str, value: Any) -> Any:
    """Resolve relative paths in *_source/*_path/*_dir parameters against the caller's cwd."""
    if isinstance(value, str) and key.endswith(("_source", "_path", "_dir")) and value:
        path = Path(value).expanduser()
        if not path.is_absolute() and path.exists():
            return str(path.resolve())
    return value


# ------------------------------------------------------------------ a run
@dataclass
class RunRequest:
    profile: str | None = None
    config: str | os.PathLike | None = None
    overrides: list[str] = field(default_factory=list)
    only: list[str] | None = None
    run_name: str | None = None
    run_dir: str | os.PathLike | None = None
    reports_dir: str | os.PathLike | None = None
    notebooks_dir: str | os.PathLike | None = None
    hide_code: bool | None = None
    baseline: str | None = None
    argv: list[str] | None = None
    reuse: str | None = None
    no_reuse: bool = False
    workers: int = 1  # notebooks at once: 1 in this process, N on a local Dask cluster
    scheduler: str | None = None  # tcp://host:port of a running Dask scheduler
    label: str = ""  # before each progress line (a sweep's cell, its runs print at once)


def prepare(req: RunRequest) -> dict[str, Any]:
    """Everything checked before anything runs; returns the plan (nothing is written)."""
    existing = None
    if req.run_dir:  # a path, or a run name under the reports folder
        from saf_utils.reporting.compare import resolve_run

        existing = resolve_run(req.run_dir, req.reports_dir)
    old_manifest = read_manifest(existing) if existing else None
    profile, config = req.profile, req.config
    if old_manifest and not (profile or config):
        old_file = old_manifest.get("profile_file")
        if old_file and Path(old_file).is_file():
            config = old_file
        else:
            profile = old_manifest.get("profile")
    cfg = load_profile(profile or "cpu", config)
    if old_manifest and old_manifest.get("profile") not in (None, cfg["name"]):
        raise RunnerError(f"{existing} was run with profile {old_manifest.get('profile')!r}, "
                          f"not {cfg['name']!r}; omit --profile to reuse it")
    if old_manifest and old_manifest.get("status") == "running" \
            and old_manifest.get("host") == socket.gethostname() \
            and pid_alive(old_manifest.get("pid")) and old_manifest.get("pid") != os.getpid():
        raise RunnerError(f"{existing} is still being run by process {old_manifest['pid']}")
    if req.run_name and existing:
        raise RunnerError("--run-name and --run-dir exclude each other")
    run_name = check_run_name(req.run_name) if req.run_name else None
    nb_dir = Path(req.notebooks_dir) if req.notebooks_dir else NOTEBOOK_DIR
    names = select_notebooks(list(cfg["notebooks"]), req.only)
    deps = check_dependencies(cfg, names, existing, {
        n["name"]: n.get("status") for n in (old_manifest or {}).get("notebooks", [])})
    plans = plan_notebooks(cfg, names, nb_dir, req.overrides or [])
    baseline = None
    if req.baseline:  # a readable run: checked manifest and metrics
        from saf_utils.reporting.compare import load_run, resolve_run

        baseline = resolve_run(req.baseline, req.reports_dir)
        load_run(baseline)
    data = check_data_sources(plans)
    reuse_from: list[tuple[Path, dict]] = []  # where to look, in order
    if req.reuse and req.no_reuse:
        raise RunnerError("--reuse and --no-reuse exclude each other")
    if req.reuse:
        from saf_utils.reporting.compare import resolve_run

        path = resolve_run(req.reuse, req.reports_dir)
        reuse_from = [(path, read_manifest(path))]
    elif cfg.get("reuse") == "latest" and not req.no_reuse:
        from saf_utils.reporting.reuse import profile_runs

        for path in profile_runs(Path(req.reports_dir or REPORTS_DIR), cfg["name"], existing):
            try:
                reuse_from.append((path, read_manifest(path)))
            except RunnerError:  # a malformed old run is no candidate
                continue
    return {"cfg": cfg, "plans": plans, "deps": deps, "data": data, "existing": existing,
            "old_manifest": old_manifest, "run_name": run_name, "baseline": baseline,
            "reuse_from": reuse_from}


def describe_plan(plan: dict[str, Any], req: RunRequest) -> str:
    """The dry-run text: where, which notebooks with which parameters, which data."""
    cfg = plan["cfg"]
    where = (f"inside existing run {plan['existing']}" if plan["existing"] else
             f"new run {plan['run_name'] or cfg['name'] + '-<time>'} in "
             f"{req.reports_dir or REPORTS_DIR}")
    lines = [f"Plan (dry run; nothing runs): profile {cfg['name']} ({cfg['path']}"
             + (f", extends {', '.join(cfg['extends_chain'])}" if cfg["extends_chain"] else "")
             + f"), {where}"]
    for i, p in enumerate(plan["plans"], 1):
        deps = cfg["depends_on"].get(p.name, [])
        dep_txt = ", ".join(f"{d} ({plan['deps'].get(d)})" for d in deps)
        lines.append(f"[{i}] {p.name}" + (f"  depends on {dep_txt}" if deps else ""))
        for k, v in p.params.items():
            lines.append(f"      {k} = {short(v, 500)}    # {p.origins.get(k)}")
        lines += system_params_lines(p.name, p.params)  # effective, by system
    lines.append("Data sources:")
    for d in plan["data"]:
        extra = "" if d["kind"] == "local" else (" (cached)" if d.get("cached") else
                                                  " (download)")
        lines.append(f"  {d['dataset']}: {d['kind']} {d['source']}{extra} via {d['via']}"
                     f" for {', '.join(d['notebooks'])}")
    if not plan["data"]:
        lines.append("  (no selected notebook declares a data source)")
    if plan["baseline"]:
        lines.append(f"Compare with {plan['baseline']} (compare.html)")
    from saf_utils.reporting.scheduler import where_text

    lines.append(where_text(req.workers, req.scheduler))
    if plan["reuse_from"]:
        where = (plan["reuse_from"][0][0] if len(plan["reuse_from"]) == 1 else
                 f"the latest of {len(plan['reuse_from'])} {cfg['name']} runs that has it")
        lines.append(f"Reuse each notebook whose inputs are unchanged from {where}")
    return "\n".join(lines)


def run_profile(req: RunRequest, plan: dict[str, Any] | None = None,
                executor: Any = None) -> tuple[Path, list[NotebookResult], str]:
    """Run the notebooks of a profile; returns the run folder, one result per executed or
    reused notebook and the run status (ok | failed | interrupted:<SIGNAL>).

    Notebooks run on ``executor`` (:mod:`.scheduler`; default: the one ``req.workers`` /
    ``req.scheduler`` name), each as soon as its ``depends_on`` have finished; ``plan`` is
    :func:`prepare`'s (made here when not given)."""
    if executor is None:
        from saf_utils.reporting.scheduler import open_executor

        plan = plan or prepare(req)  # a bad profile is reported before a cluster starts
        # N notebooks at once on this machine share its cores: OpenMP pools of 2 threads per
        # kernel on 2 cores spin against each other (03's gradient boosting ran 10x slower).
        saved = os.environ.get("SAF_NUM_THREADS")
        if req.workers > 1 and not req.scheduler and not saved:
            os.environ["SAF_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // req.workers))
        try:
            with open_executor(req.workers, req.scheduler) as ex:
                return run_profile(req, plan, ex)
        finally:  # a later run in this process gets its own split
            if saved is None:
                os.environ.pop("SAF_NUM_THREADS", None)
    from saf_utils.reporting.scheduler import NotebookTask, forwarded_env, run_graph

    plan = plan or prepare(req)
    cfg, plans = plan["cfg"], plan["plans"]
    hide = cfg.get("hide_code", False) if req.hide_code is None else req.hide_code

    # Notebooks run with notebooks/ as working directory: make data paths absolute first.
    for var in data_env_vars():
        if os.environ.get(var) and Path(os.environ[var]).exists():
            os.environ[var] = str(Path(os.environ[var]).resolve())
    for p in plans:
        p.params = {k: _absolute_if_path(k, v) for k, v in p.params.items()}
    os.environ.setdefault("PYTHONHASHSEED", "0")
    # Kernels and launcher ranks run with the pinned kernel level and threads (OpenBLAS reads
    # its kernel once, when numpy loads: before any saf_utils code in the kernel).
    from saf_utils import numerics

    os.environ.update(numerics.pinned_environment())
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Progress bars inside a kernel only clutter the HTML; the runner prints a line per section
    # (Markdown heading) with the elapsed time, and one per notebook, terminal or not.
    # Interactive JupyterLab sessions keep theirs.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    reports_root = Path(req.reports_dir).resolve() if req.reports_dir else REPORTS_DIR
    executor.preflight(plan["existing"] or reports_root, plans, plan["data"])

    invocation = {
        "started": now_iso(), "finished": None, "status": "running", "argv": req.argv,
        "only": [p.name for p in plans], "overrides": list(req.overrides or []),
        "git": git_state(), "pid": os.getpid(), "host": socket.gethostname(),
        "executor": executor.description,
    }
    if plan["existing"]:
        out = plan["existing"].resolve()
        manifest = plan["old_manifest"]
        mark_killed(manifest)  # an earlier invocation whose process is gone
        manifest.setdefault("invocations", [])
        manifest.setdefault("executions", list(manifest.get("notebooks", [])))
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = new_run_dir(reports_root, plan["run_name"] or f"{cfg['name']}-{stamp}")
        manifest = {"run": out.name, "profile": cfg["name"], "profile_file": cfg["path"],
                    "extends": cfg["extends_chain"], "description": cfg.get("description"),
                    "started": invocation["started"], "invocations": [], "executions": [],
                    "notebooks": []}
    manifest["invocations"].append(invocation)
    n_inv = len(manifest["invocations"])
    manifest.update({
        "status": "running", "finished": None, "git": invocation["git"],
        "pid": invocation["pid"], "host": invocation["host"],
        "environment": environment_info(), "packages": package_versions(),
        "installed": installed_packages(), "lock": lock_info(),
        "overrides": list(req.overrides or []), "hide_code": hide,
        "depends_on": cfg["depends_on"], "data_check": plan["data"],
    })
    order = list(cfg["notebooks"])
    results: list[NotebookResult] = []
    running: dict[str, tuple[NotebookResult, NotebookPlan, float, dict]] = {}
    tags = {p.name: f"{req.label}[{i}/{len(plans)}]" for i, p in enumerate(plans, 1)}
    by_name = {p.name: p for p in plans}
    status = "ok"
    stop: BaseException | None = None  # what ended the run early, raised after its status
    print(f"Run {out.name}: {len(plans)} notebook(s) -> {out}", flush=True)

    def start(name: str) -> NotebookTask | None:
        """Skip, reuse (both done here: None) or set up an execution of ``name``."""
        p, tag = by_name[name], tags[name]
        bad = [r.name for r in results if r.status != "ok"
               and r.name in cfg["depends_on"].get(p.name, [])]
        if bad:  # its inputs are missing: say so instead of failing later
            res = NotebookResult(p.name, "skipped", started=now_iso(),
                                 finished=now_iso(), seconds=0.0, parameters=p.params,
                                 invocation=n_inv,
                                 error=f"not run: depends on {', '.join(bad)}, "
                                       "which did not succeed")
            print(f"{tag} {p.name} skipped: {res.error}", flush=True)
            results.append(res)
            _record_result(manifest, res, order)
            write_reports(out, manifest)
            return None
        deps_out = _upstream(out, cfg["depends_on"].get(p.name, []))
        reused = _try_reuse(plan, p, out, deps_out, hide, n_inv, tag, manifest)
        if reused is not None:  # reports are written before the next execution
            results.append(reused)  # and at the end
            _record_result(manifest, reused, order)
            return None
        _archive_previous(out, p.name, manifest)
        nb_out = out / p.name
        try:
            nb_out.mkdir()
        except OSError as exc:
            raise ReportWriteError(exc.errno, f"cannot create {nb_out}: "
                                   f"{exc.strerror or exc}") from None
        params = dict(p.params)
        if "output_dir" in p.declared:
            params["output_dir"] = str(nb_out.resolve())
        current = NotebookResult(p.name, "running", started=now_iso(),
                                 parameters=params, invocation=n_inv)
        _record_result(manifest, current, order)
        write_reports(out, manifest)
        print(f"{tag} {p.name} ...", flush=True)
        running[name] = (current, p, time.perf_counter(), deps_out)
        return NotebookTask(p.name, str(p.path), str(out / f"{p.name}.ipynb"), params,
                            cfg.get("timeout"), tag, forwarded_env())

    def finish(name: str, outcome: Any) -> None:
        """Record, render and report an execution that came back."""
        current, p, t0, deps_out = running[name]  # popped once recorded: a write error
        current.seconds = round(time.perf_counter() - t0, 1)
        current.finished = now_iso()
        current.error, current.worker = outcome.error, outcome.worker
        current.status = "failed" if current.error else "ok"
        _render(current, out / f"{p.name}.ipynb", hide)
        if current.status == "ok":  # after its page: the file digests include it
            _record_inputs(current, p, out, deps_out)
        print(f"{tags[name]} {p.name} {current.status} in {current.seconds:.1f} s"
              + (f": {current.error}" if current.error else ""), flush=True)
        results.append(current)
        running.pop(name)  # on the way here it still counts as running (a write error)
        _record_result(manifest, current, order)
        write_reports(out, manifest)

    try:
        with _signals(raise_on_signal=True):
            reserve_space(out)
            for p in plans:  # the index lists what will run before anything does
                if not any(n["name"] == p.name for n in manifest["notebooks"]):
                    _record_result(manifest, NotebookResult(p.name, parameters=p.params,
                                                            invocation=n_inv), order)
            write_reports(out, manifest)
            run_graph([p.name for p in plans], cfg["depends_on"], start, finish, executor)
        status = "failed" if any(r.status != "ok" for r in results) else "ok"
    except Interrupted as sig:
        status = f"interrupted:{sig}"
        with _signals(raise_on_signal=False):
            came_back = {o.out_nb: o for o in executor.stop(str(sig)).values()}
            for current, _p, t0, _deps in running.values():
                current.status = "interrupted"
                current.error = f"interrupted by {sig}"
                current.seconds = current.seconds or round(time.perf_counter() - t0, 1)
                current.finished = current.finished or now_iso()
                out_nb = out / f"{current.name}.ipynb"
                current.worker = getattr(came_back.get(str(out_nb)), "worker", None)
                if out_nb.is_file():
                    mark_interrupted(out_nb, str(sig))
                    try:
                        _render(current, out_nb, hide)
                    except ReportWriteError as exc:  # the run's status is still written
                        current.error += f" | page not written: {exc}"
                if current not in results:
                    results.append(current)
                _record_result(manifest, current, order)
            print(f"Run {out.name} interrupted by {sig}", file=sys.stderr, flush=True)
    except BaseException as exc:  # noqa: BLE001 - a write error or a bug: recorded, re-raised
        stop = exc
        status = "write_error" if isinstance(exc, OSError) else "error"
        with _signals(raise_on_signal=False):
            try:  # tasks still out (Dask) are cancelled
                executor.stop(status)
            except Exception:  # noqa: BLE001 - the run's status comes first
                pass
            for current, _p, _t0, _deps in running.values():
                # it ran, or was about to: its result is not complete
                current.status = "interrupted"
                current.error = " | ".join(filter(None, [current.error, "the run stopped: "
                                                         + _why(exc)]))
                current.finished = current.finished or now_iso()
                if current not in results:
                    results.append(current)
                _record_result(manifest, current, order)
    with _signals(raise_on_signal=False):
        # notebooks that never started in a stopped run stay "pending" in the manifest
        stop = _close_run(out, manifest, invocation, status, results, stop)
        if stop is None:  # after a write error the status line is the one line said
            _write_overview(out.parent)
        if plan["baseline"] is not None and stop is None:
            from saf_utils.reporting.compare import compare_runs, write_compare_html

            try:
                cmp = compare_runs(plan["baseline"], out)
                path = write_compare_html(cmp, out / "compare.html")
                print(f"Compared with {plan['baseline'].name}: {path}")
            except (RunnerError, ValueError) as exc:
                print(f"saf-run: compare with {plan['baseline']} failed: {exc}",
                      file=sys.stderr)
    if stop is not None:
        raise stop
    return out, results, status


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else f"{text[:300]}… ({len(text):,} characters)"
    return text if isinstance(exc, OSError) else f"{type(exc).__name__}: {text}"


def _close_run(out: Path, manifest: dict, invocation: dict, status: str,
               results: list[NotebookResult], stop: BaseException | None) -> BaseException | None:
    """Record how the run ended (``status``, ``status_reason``: runs.RUN_STATUSES) in the
    manifest and the pages. When a write fails, the manifest alone is written into the space
    kept for it (:func:`runs.write_status`). Returns the error to raise (None: none)."""
    run_status, _, sig = status.partition(":")
    bad = ", ".join(f"{r.name} ({r.status})" for r in results if r.status != "ok")
    reason = _why(stop) if stop is not None else {"interrupted": sig,
                                                  "failed": f"not ok: {bad}"}.get(run_status)

    def record(s: str, why: str | None) -> None:
        invocation.update(finished=now_iso(), status=s, status_reason=why)
        manifest.update(status=s, status_reason=why, finished=invocation["finished"])

    record(run_status, reason)
    if run_status != "write_error":
        try:
            write_reports(out, manifest)
            release_space(out)
            return stop
        except ReportWriteError as exc:
            record("write_error", f"{exc} (while recording that the run ended {run_status})")
            stop = exc
    if write_status(out, manifest):
        try:  # the pages too, if the freed space allows
            write_reports(out, manifest)
        except ReportWriteError:
            pass
    elif isinstance(stop, ReportWriteError):  # still one line for the CLI
        stop = ReportWriteError(stop.errno, f"{stop}; the run's status could not be recorded "
                                f"in {out / 'manifest.json'} either")
    else:
        print(f"saf-run: could not record the run's status ({manifest['status']}) in "
              f"{out / 'manifest.json'}", file=sys.stderr)
    return stop


def _upstream(out: Path, deps: list[str]) -> dict[str, str | None]:
    from saf_utils.reporting.reuse import upstream_digests

    return upstream_digests(out, deps)


def _write_overview(reports_dir: Path) -> None:
    """The reports folder's runs.html (:mod:`overview`); a failure is one line, never the
    run's exit status."""
    from saf_utils.reporting.overview import write_overview

    try:
        write_overview(reports_dir)
    except (OSError, ValueError, RunnerError) as exc:
        print(f"saf-run: runs.html not written: {exc}", file=sys.stderr)


def _record_inputs(res: NotebookResult, p: NotebookPlan, out: Path,
                   deps_out: dict[str, str | None]) -> None:
    """The inputs, file digests and output digest of a successful execution, its page
    rendered (what --reuse compares and verifies)."""
    from saf_utils.reporting import reuse

    res.inputs = reuse.notebook_inputs(p.path, res.parameters, (lock_info() or {}).get("sha256"),
                                       deps_out, reuse.read_sources(out / p.name))
    res.files = reuse.output_files(out, p.name)
    res.outputs = reuse.folder_digest(res.files, p.name)


def _try_reuse(plan: dict, p: NotebookPlan, out: Path, deps_out: dict[str, str | None],
               hide: bool, n_inv: int, tag: str, manifest: dict) -> NotebookResult | None:
    """Copy ``p``'s outputs from the reuse run when its inputs are unchanged (else None)."""
    from saf_utils.reporting import reuse

    candidates = [(src, m) for src, m in plan.get("reuse_from") or []
                  if Path(src).resolve() != out.resolve()]
    if not candidates:
        return None
    found = next(((src, m, e) for src, m in candidates
                  if (e := reuse.reusable_entry(src, m, p.name)) is not None), None)
    if found is None:
        names = ", ".join(src.name for src, _ in candidates[:3])
        print(f"{tag} {p.name}: no successful execution to reuse in {names}", flush=True)
        return None
    src, old_manifest, old = found
    params = dict(p.params)
    if "output_dir" in p.declared:
        params["output_dir"] = str((out / p.name).resolve())
    now = reuse.notebook_inputs(p.path, params, (lock_info() or {}).get("sha256"), deps_out,
                                reuse.data_digests(old["inputs"].get("data") or {}))
    diff = reuse.changed(old["inputs"], now)
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
    files = reuse.output_files(out, p.name)  # what was copied, hashed in this run
    bad = reuse.mismatch(old.get("files"), files, () if same_html else [f"{p.name}.html"])
    if bad:
        reuse.remove_outputs(out, p.name)
        print(f"{tag} {p.name}: not reused from {src.name}: {bad}; running it", flush=True)
        return None
    original = reuse.original_execution(old_manifest.get("run", src.name), old_manifest, old)
    res = NotebookResult(p.name, "ok", started=old.get("started"), finished=old.get("finished"),
                         seconds=old.get("seconds"), parameters=params, invocation=n_inv,
                         html=old.get("html") if same_html else None, inputs=now,
                         outputs=reuse.folder_digest(files, p.name), files=files,
                         reused={"from": old_manifest.get("run", src.name), "at": now_iso(),
                                 "original": original})
    if not same_html:
        _render(res, out / f"{p.name}.ipynb", hide)
        res.files = reuse.output_files(out, p.name)
    commit = str(original.get("commit") or "?")[:8]
    print(f"{tag} {p.name} reused from {res.reused['from']} (executed {original.get('started')}"
          f" at {commit}, {_duration(original.get('seconds'))})", flush=True)
    return res


def _render(res: NotebookResult, out_nb: Path, hide: bool) -> None:
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
