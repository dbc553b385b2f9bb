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
cluster) run independent notebooks at once (:mod:`.executors`; ``saf-run sweep``:
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

from saf_utils.reporting.data_check import data_env_vars
from saf_utils.reporting.executors import ClusterLost, NotebookTask, forwarded_env, run_graph
from saf_utils.reporting.manifest import (
    Manifest,
    ReportWriteError,
    environment_info,
    git_state,
    installed_packages,
    lock_info,
    now_iso,
    package_versions,
)
from saf_utils.reporting.notebook_exec import Interrupted, _signals, mark_interrupted
from saf_utils.reporting.parameters import NotebookPlan
from saf_utils.reporting.plan import (  # noqa: F401 - the runner's names for callers and tests
    RunPlan,
    RunRequest,
    describe_plan,
    prepare,
    request_from_args,
)
from saf_utils.reporting.profiles import REPORTS_DIR, RunnerError
from saf_utils.reporting.reuse import (
    record_inputs,
    run_parameters,
    try_reuse,
    upstream_digests,
)
from saf_utils.reporting.run_folder import (
    NotebookResult,
    _record_result,
    archive_previous,
    mark_killed,
    new_run_dir,
    record_end,
    render,
    reserve_space,
    why_text,
    write_reports,
)

EXIT_INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143}


def exit_code(status: str, failed: list[str], what: str = "Failed notebook(s)") -> int:
    """A run's (or sweep's) exit code from its status and what did not succeed, which it
    names on stderr: 0 ok, 1 failed or cluster lost, 130/143 interrupted."""
    if status.startswith("interrupted"):
        return EXIT_INTERRUPTED.get(status.split(":", 1)[1], 130)
    if status.startswith("cluster_lost"):  # the reason is the run's last line already
        return 1
    if failed:
        print(f"{what}: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _absolute_if_path(key: str, value: Any) -> Any:
    """Resolve relative paths in *_source/*_path/*_dir parameters against the caller's cwd."""
    if isinstance(value, str) and key.endswith(("_source", "_path", "_dir")) and value:
        path = Path(value).expanduser()
        if not path.is_absolute() and path.exists():
            return str(path.resolve())
    return value


# ------------------------------------------------------------------ a run
def run_profile(req: RunRequest, plan: RunPlan | None = None,
                executor: Any = None) -> tuple[Path, list[NotebookResult], str]:
    """Run the notebooks of a profile; returns the run folder, one result per executed or
    reused notebook and the run status (ok | failed | interrupted:<SIGNAL>).

    Notebooks run on ``executor`` (:mod:`.executors`; default: the one ``plan.workers`` /
    ``req.scheduler`` name), each as soon as its ``depends_on`` have finished; ``plan`` is
    :func:`prepare`'s (made here when not given). The steps: :func:`_own_executor`,
    :func:`_environment`, :func:`_open_manifest`, then :class:`_Run` (start, finish, stop,
    close)."""
    plan = plan or prepare(req)  # a bad profile is reported before a cluster starts
    if executor is None:
        return _own_executor(req, plan)
    _environment(plan)
    reports_root = Path(req.reports_dir).resolve() if req.reports_dir else REPORTS_DIR
    executor.preflight(plan.existing or reports_root, plan.plans, plan.data)
    run = _Run(req, plan, *_open_manifest(req, plan, executor, reports_root))
    stop = run.execute(executor)
    if stop is not None:
        raise stop
    return run.out, run.results, run.status


def _own_executor(req: RunRequest, plan: RunPlan) -> tuple[Path, list[NotebookResult], str]:
    """Run on the executor ``req`` names, with the cores split between local workers."""
    from saf_utils.reporting.executors import open_executor

    # N notebooks at once on this machine share its cores: OpenMP pools of 2 threads per
    # kernel on 2 cores spin against each other (03's gradient boosting ran 10x slower).
    saved = os.environ.get("SAF_NUM_THREADS")
    if plan.workers > 1 and not req.scheduler and not saved:
        os.environ["SAF_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // plan.workers))
    try:
        with open_executor(plan.workers, req.scheduler) as ex:
            return run_profile(req, plan, ex)
    finally:  # a later run in this process gets its own split
        if saved is None:
            os.environ.pop("SAF_NUM_THREADS", None)


def _environment(plan: RunPlan) -> None:
    """What every kernel inherits: absolute data paths, pinned kernels and threads, quiet
    progress bars."""
    # Notebooks run with notebooks/ as working directory: make data paths absolute first.
    for var in data_env_vars():
        if os.environ.get(var) and Path(os.environ[var]).exists():
            os.environ[var] = str(Path(os.environ[var]).resolve())
    for p in plan.plans:
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


def _open_manifest(req: RunRequest, plan: RunPlan, executor: Any, reports_root: Path
                   ) -> tuple[Path, Manifest, dict[str, Any]]:
    """The run folder (an existing run's, or a fresh one), its manifest with this
    invocation appended, and the invocation."""
    cfg = plan.cfg
    invocation = {
        "started": now_iso(), "finished": None, "status": "running", "argv": req.argv,
        "only": [p.name for p in plan.plans], "overrides": list(req.overrides or []),
        "git": git_state(), "pid": os.getpid(), "host": socket.gethostname(),
        "executor": executor.description,
    }
    if plan.existing:
        out = plan.existing.resolve()
        manifest = plan.old_manifest or Manifest()
        mark_killed(manifest)  # an earlier invocation whose process is gone
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = new_run_dir(reports_root, plan.run_name or f"{cfg['name']}-{stamp}")
        manifest = Manifest(run=out.name, profile=cfg["name"], profile_file=cfg["path"],
                            extends=cfg["extends_chain"], description=cfg.get("description"),
                            started=invocation["started"])
    manifest.invocations.append(invocation)
    manifest.status, manifest.finished = "running", None
    manifest.git, manifest.pid, manifest.host = (invocation["git"], invocation["pid"],
                                                 invocation["host"])
    manifest.environment, manifest.packages = environment_info(), package_versions()
    manifest.installed, manifest.lock = installed_packages(), lock_info()
    manifest.overrides = list(req.overrides or [])
    manifest.hide_code = cfg.get("hide_code", False) if req.hide_code is None else req.hide_code
    manifest.depends_on, manifest.data_check = cfg["depends_on"], plan.data
    return out, manifest, invocation


@dataclass
class _Running:
    """An execution under way: its result so far, plan, start time and upstream digests."""

    result: NotebookResult
    plan: NotebookPlan
    t0: float
    deps_out: dict[str, str | None]


@dataclass
class _Run:
    """One invocation's state while its notebooks run: what came back (``results``), what is
    out (``running``) and how it ended (``status``)."""

    req: RunRequest
    plan: RunPlan
    out: Path
    manifest: Manifest
    invocation: dict[str, Any]
    results: list[NotebookResult] = field(default_factory=list)
    running: dict[str, _Running] = field(default_factory=dict)
    status: str = "ok"

    def __post_init__(self) -> None:
        self.hide = self.manifest.hide_code
        self.n_inv = len(self.manifest.invocations)
        self.order = list(self.plan.cfg["notebooks"])
        self.depends_on = self.plan.cfg["depends_on"]
        n = len(self.plan.plans)
        self.tags = {p.name: f"{self.req.label}[{i}/{n}]" for i, p in enumerate(self.plan.plans, 1)}
        self.by_name = {p.name: p for p in self.plan.plans}

    def record(self, res: NotebookResult, write: bool = True) -> None:
        """``res`` into the manifest (and the pages, unless ``write`` is False)."""
        _record_result(self.manifest, res, self.order)
        if write:
            write_reports(self.out, self.manifest)

    def execute(self, executor: Any) -> BaseException | None:
        """Run the graph; returns what ended the run early (None: nothing), raised by the
        caller once the run's status is recorded."""
        print(f"Run {self.out.name}: {len(self.plan.plans)} notebook(s) -> {self.out}",
              flush=True)
        stop: BaseException | None = None
        try:
            with _signals(raise_on_signal=True):
                reserve_space(self.out)
                listed = {n["name"] for n in self.manifest.notebooks}
                for p in self.plan.plans:  # the index lists what will run before anything does
                    if p.name not in listed:
                        self.record(NotebookResult(p.name, parameters=p.params,
                                                   invocation=self.n_inv), write=False)
                write_reports(self.out, self.manifest)
                run_graph([p.name for p in self.plan.plans], self.depends_on, self.start,
                          self.finish, executor)
            self.status = "failed" if any(r.status != "ok" for r in self.results) else "ok"
        except Interrupted as sig:
            self.status = f"interrupted:{sig}"
            with _signals(raise_on_signal=False):
                self.interrupted(str(sig), executor)
        except ClusterLost as lost:  # not a bug of the runner: the notebooks were cut off
            self.status = f"cluster_lost:{lost}"
            with _signals(raise_on_signal=False):
                self.interrupted(str(lost), executor)
        except BaseException as exc:  # noqa: BLE001 - a write error or a bug: recorded, re-raised
            stop = exc
            self.status = "write_error" if isinstance(exc, OSError) else "error"
            with _signals(raise_on_signal=False):
                self.stopped(exc, executor)
        with _signals(raise_on_signal=False):
            return self.close(stop)

    def skip(self, p: NotebookPlan, bad: list[str]) -> None:
        """``p`` is not run: its inputs are missing (say so instead of failing later)."""
        res = NotebookResult(p.name, "skipped", started=now_iso(), finished=now_iso(),
                             seconds=0.0, parameters=p.params, invocation=self.n_inv,
                             error=f"not run: depends on {', '.join(bad)}, "
                                   "which did not succeed")
        print(f"{self.tags[p.name]} {p.name} skipped: {res.error}", flush=True)
        self.results.append(res)
        self.record(res)

    def start(self, name: str) -> Any:
        """Skip, reuse (both done here: None) or set up an execution of ``name`` (its
        :class:`~.executors.NotebookTask`)."""
        p, tag, deps = self.by_name[name], self.tags[name], self.depends_on.get(name, [])
        bad = [r.name for r in self.results if r.status != "ok" and r.name in deps]
        if bad:
            return self.skip(p, bad)
        deps_out = upstream_digests(self.out, deps)
        reused = try_reuse(self.plan.reuse_from, p, self.out, self.manifest, deps_out, tag)
        if reused is not None:  # reports are written before the next execution and at the end
            self.results.append(reused)
            return self.record(reused, write=False)
        archive_previous(self.out, p.name, self.manifest)
        nb_out = self.out / p.name
        try:
            nb_out.mkdir()
        except OSError as exc:
            raise ReportWriteError(exc.errno, f"cannot create {nb_out}: "
                                   f"{exc.strerror or exc}") from None
        params = run_parameters(p, self.out)
        current = NotebookResult(p.name, "running", started=now_iso(), parameters=params,
                                 invocation=self.n_inv)
        self.record(current)
        print(f"{tag} {p.name} ...", flush=True)
        self.running[name] = _Running(current, p, time.perf_counter(), deps_out)
        return NotebookTask(p.name, str(p.path), str(self.out / f"{p.name}.ipynb"), params,
                            self.plan.cfg.get("timeout"), tag, forwarded_env())

    def finish(self, name: str, outcome: Any) -> None:
        """Record, render and report an execution that came back."""
        run = self.running[name]  # popped once recorded: a write error on the way here
        current, p = run.result, run.plan  # still counts it as running
        current.seconds = round(time.perf_counter() - run.t0, 1)
        current.finished = now_iso()
        current.error, current.worker = outcome.error, outcome.worker
        current.restarts = getattr(outcome, "restarts", None) or None
        current.status = "failed" if current.error else "ok"
        render(current, self.out / f"{p.name}.ipynb", self.hide)
        if current.status == "ok":  # after its page: the file digests include it
            record_inputs(current, p, self.out, run.deps_out)
        print(f"{self.tags[name]} {p.name} {current.status} in {current.seconds:.1f} s"
              + (f": {current.error}" if current.error else ""), flush=True)
        self.results.append(current)
        self.running.pop(name)
        self.record(current)

    def interrupted(self, sig: str, executor: Any) -> None:
        """Ctrl-C, SIGTERM or a lost cluster (``sig``: why): the executions out are stopped
        and marked interrupted."""
        came_back = {o.out_nb: o for o in executor.stop(sig).values()}
        for run in self.running.values():
            current = run.result
            current.status = "interrupted"
            current.error = f"interrupted by {sig}" if sig.startswith("SIG") else sig
            current.seconds = current.seconds or round(time.perf_counter() - run.t0, 1)
            current.finished = current.finished or now_iso()
            out_nb = self.out / f"{current.name}.ipynb"
            current.worker = getattr(came_back.get(str(out_nb)), "worker", None)
            if out_nb.is_file():
                mark_interrupted(out_nb, sig)
                try:
                    render(current, out_nb, self.hide)
                except ReportWriteError as exc:  # the run's status is still written
                    current.error += f" | page not written: {exc}"
            self._keep(current)
        print(f"Run {self.out.name} interrupted: {sig}", file=sys.stderr, flush=True)

    def stopped(self, exc: BaseException, executor: Any) -> None:
        """A write error or a bug: tasks still out (Dask) are cancelled, the executions
        that ran, or were about to, are marked incomplete."""
        try:
            executor.stop(self.status)
        except Exception:  # noqa: BLE001 - the run's status comes first
            pass
        for run in self.running.values():
            current = run.result
            current.status = "interrupted"
            current.error = " | ".join(filter(None, [current.error, "the run stopped: "
                                                     + why_text(exc)]))
            current.finished = current.finished or now_iso()
            self._keep(current)

    def _keep(self, current: NotebookResult) -> None:
        if current not in self.results:
            self.results.append(current)
        self.record(current, write=False)

    def close(self, stop: BaseException | None) -> BaseException | None:
        """The run's end in manifest and pages, runs.html and the baseline comparison;
        notebooks that never started in a stopped run stay "pending"."""
        stop = record_end(self.out, self.manifest, self.invocation, self.status,
                          self.results, stop)
        if stop is None:  # after a write error the status line is the one line said
            _write_overview(self.out.parent)
        if self.plan.baseline is not None and stop is None:
            _compare(self.plan.baseline, self.out)
        return stop


def _compare(baseline: Path, out: Path) -> None:
    """``--baseline``: compare.html of the baseline vs this run (a failure is one line)."""
    from saf_utils.reporting.compare import compare_runs
    from saf_utils.reporting.compare_page import write_compare_html

    try:
        path = write_compare_html(compare_runs(baseline, out), out / "compare.html")
        print(f"Compared with {baseline.name}: {path}")
    except (RunnerError, ValueError) as exc:
        print(f"saf-run: compare with {baseline} failed: {exc}", file=sys.stderr)


def _write_overview(reports_dir: Path) -> None:
    """The reports folder's runs.html (:mod:`overview`); a failure is one line, never the
    run's exit status."""
    from saf_utils.reporting.overview import write_overview

    try:
        write_overview(reports_dir)
    except Exception as exc:  # noqa: BLE001 - the overview of all runs never fails this one
        print(f"saf-run: runs.html not written: {type(exc).__name__}: {exc}", file=sys.stderr)
