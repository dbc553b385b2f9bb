"""Run a profile's notebooks with papermill and write a self-contained report folder.

``configs/<profile>.yaml``'s notebooks run in dependency order into ``reports/<run-name>/``
(executed notebooks, their pages, index, results, metrics.json, manifest.json), everything
checked first (:func:`.plan.prepare`); a failed notebook fails the run, the others still run.
How a run ends, ``--run-dir``, ``--workers``/``--scheduler`` and the exit codes
(:mod:`.cli`): docs/runs.md, docs/cluster.md.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from notebook_reports import executors
from notebook_reports.data_check import data_env_vars
from notebook_reports.manifest import Manifest, ReportWriteError, git_state, now_iso, software
from notebook_reports.notebook_exec import Interrupted, _signals, mark_interrupted
from notebook_reports.plan import (  # noqa: F401 - the runner's names for callers and tests
    RunPlan,
    RunRequest,
    describe_plan,
    prepare,
    request_from_args,
)
from notebook_reports.profiles import REPORTS_DIR, RunnerError
from notebook_reports.reuse import record_inputs, run_parameters, tree_digest, try_reuse
from notebook_reports.run_folder import (
    NotebookResult,
    archive_previous,
    lock_run,
    mark_killed,
    new_run_dir,
    read_manifest,
    record_end,
    record_result,
    render,
    reserve_space,
    why_text,
    write_error,
    write_reports,
)

EXIT_INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}


def exit_code(status: str, failed: list[str], what: str = "Failed notebook(s)") -> int:
    """A run's (or sweep's) exit code; names what did not succeed on stderr."""
    if status.startswith("interrupted"):
        return EXIT_INTERRUPTED.get(status.split(":", 1)[1], 130)
    if status.startswith("cluster_lost"):  # the reason is the run's last line already
        return 1
    if failed:
        print(f"{what}: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def run_profile(req: RunRequest, plan: RunPlan | None = None,
                executor: Any = None) -> tuple[Path, list[NotebookResult], str]:
    """Run a profile's notebooks on ``executor`` (default: ``plan.workers`` / ``req.scheduler``);
    returns the run folder, a result per executed, reused or skipped notebook, the status."""
    plan = plan or prepare(req)  # a bad profile is reported before a cluster starts
    if executor is None:
        # N notebooks at once on this machine share its cores: OpenMP pools of 2 threads per
        # kernel on 2 cores spin against each other (03's gradient boosting ran 10x slower).
        saved = os.environ.get("SAF_NUM_THREADS")
        if plan.workers > 1 and not req.scheduler and not saved:
            os.environ["SAF_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // plan.workers))
        try:
            with executors.open_executor(plan.workers, req.scheduler) as ex:
                return run_profile(req, plan, ex)
        finally:  # a later run in this process gets its own split
            if saved is None:
                os.environ.pop("SAF_NUM_THREADS", None)
    _environment(plan)
    reports_root = Path(req.reports_dir).resolve() if req.reports_dir else REPORTS_DIR
    executor.preflight(plan.existing or reports_root, plan.plans, plan.data)
    run = _Run(req, plan, executor, reports_root)
    try:
        run.execute()
    finally:
        os.close(run.lock)  # its flock ends
    return run.out, run.results, run.status


def _absolute_if_path(key: str, value: Any) -> Any:
    """Resolve relative paths in *_source/*_path/*_dir parameters against the caller's cwd."""
    ok = isinstance(value, str) and value and key.endswith(("_source", "_path", "_dir"))
    path = Path(value).expanduser() if ok else None
    return str(path.resolve()) if path and not path.is_absolute() and path.exists() else value


def _environment(plan: RunPlan) -> None:
    """What every kernel inherits: absolute data paths, :data:`.executors.KERNEL_DEFAULTS`,
    pinned kernels and threads."""
    # Notebooks run with notebooks/ as working directory: make data paths absolute first.
    for var in data_env_vars():
        if os.environ.get(var) and Path(os.environ[var]).exists():
            os.environ[var] = str(Path(os.environ[var]).resolve())
    for p in plan.plans:
        p.params = {k: _absolute_if_path(k, v) for k, v in p.params.items()}
    for var, value in executors.KERNEL_DEFAULTS.items():
        os.environ.setdefault(var, value)
    # Kernels and launcher ranks run with the pinned kernel level and threads (OpenBLAS reads
    # its kernel once, when numpy loads: before any saf_utils code in the kernel).
    from saf_utils import determinism

    os.environ.update(determinism.pinned_environment())


class _Run:
    """One invocation while its notebooks run: its folder (``out``) and manifest, the results,
    the executions out (``running``: result, start time, upstream digests), the status."""

    def __init__(self, req: RunRequest, plan: RunPlan, executor: Any, reports_root: Path
                 ) -> None:
        self.req, self.plan, self.executor, cfg = req, plan, executor, plan.cfg
        self.results: list[NotebookResult] = []
        self.running: dict[str, tuple[NotebookResult, float, dict]] = {}
        self.status = "ok"
        inv = self.invocation = {
            "started": now_iso(), "finished": None, "status": "running", "argv": req.argv,
            "only": [p.name for p in plan.plans], "overrides": list(req.overrides or []),
            "git": git_state(), "pid": os.getpid(), "host": socket.gethostname(),
            "executor": executor.description,
        }
        self.out = plan.existing.resolve() if plan.existing else new_run_dir(
            reports_root, plan.run_name or f"{cfg['name']}-{datetime.now(UTC):%Y%m%d-%H%M%S}")
        self.lock = lock_run(self.out)  # then an existing run's manifest as it is now
        if plan.existing:
            m = read_manifest(self.out) if plan.old_manifest else Manifest()
            mark_killed(m)  # an earlier invocation whose process is gone
        else:
            m = Manifest(run=self.out.name, profile=cfg["name"], profile_file=cfg["path"],
                         extends=cfg["extends_chain"], description=cfg.get("description"),
                         started=inv["started"])
        m.invocations.append(inv)
        vars(m).update(  # what this invocation runs with; software(): environment, packages...
            status="running", finished=None, git=inv["git"], pid=inv["pid"], host=inv["host"],
            overrides=inv["overrides"], depends_on=cfg["depends_on"], data_check=plan.data,
            hide_code=cfg.get("hide_code", False) if req.hide_code is None else req.hide_code,
            **software())
        self.manifest, self.n_inv = m, len(m.invocations)
        n = len(plan.plans)
        self.tags = {p.name: f"{req.label}[{i}/{n}]" for i, p in enumerate(plan.plans, 1)}
        self.by_name = {p.name: p for p in plan.plans}

    def record(self, res: NotebookResult, write: bool = True) -> None:
        """``res`` into the manifest (and the pages, unless ``write`` is False)."""
        record_result(self.manifest, res, list(self.plan.cfg["notebooks"]))
        if write:
            write_reports(self.out, self.manifest)

    def execute(self) -> None:
        """Run the graph; what ended the run early is raised once its status is recorded."""
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
                executors.run_graph([p.name for p in self.plan.plans],
                                    self.plan.cfg["depends_on"], self.start, self.finish,
                                    self.executor)
            self.status = "failed" if any(r.status != "ok" for r in self.results) else "ok"
        except (Interrupted, executors.ClusterLost) as why:  # a lost cluster is no bug here
            kind = "interrupted" if isinstance(why, Interrupted) else "cluster_lost"
            self.status = f"{kind}:{why}"
            with _signals(raise_on_signal=False):
                self.stop_running(str(why))
        except BaseException as exc:  # noqa: BLE001 - a write error or a bug: recorded, re-raised
            stop = exc
            self.status = "write_error" if isinstance(exc, OSError) else "error"
            with _signals(raise_on_signal=False):
                self.stop_running(self.status, exc)
        with _signals(raise_on_signal=False):  # the run's end, then --baseline's compare.html
            stop = record_end(self.out, self.manifest, self.invocation, self.status,
                              self.results, stop)  # each failure one line
            if stop is None and (baseline := self.plan.baseline) is not None:
                from notebook_reports.compare import compare_runs
                from notebook_reports.compare_page import write_compare_html

                try:
                    path = write_compare_html(compare_runs(baseline, self.out),
                                              self.out / "compare.html")
                    print(f"Compared with {baseline.name}: {path}")
                except (RunnerError, ValueError) as exc:
                    print(f"saf-run: compare with {baseline} failed: {exc}", file=sys.stderr)
        if stop is not None:
            raise stop

    def start(self, name: str) -> executors.NotebookTask | None:
        """Skip or reuse ``name`` (both done here: None), or set up its execution."""
        p, tag, deps = self.by_name[name], self.tags[name], self.plan.cfg["depends_on"].get(
            name, [])
        bad = [r.name for r in self.results if r.status != "ok" and r.name in deps]
        if bad:  # say so instead of failing later
            res = NotebookResult(p.name, "skipped", started=now_iso(), finished=now_iso(),
                                 seconds=0.0, parameters=p.params, invocation=self.n_inv,
                                 error=f"not run: depends on {', '.join(bad)}, "
                                       "which did not succeed")
            print(f"{tag} {p.name} skipped: {res.error}", flush=True)
            self.results.append(res)
            return self.record(res)
        deps_out = {d: tree_digest(self.out / d) for d in deps}
        reused = try_reuse(self.plan.reuse_from, p, self.out, self.manifest, deps_out, tag)
        if reused is not None:  # reports are written before the next execution and at the end
            self.results.append(reused)
            return self.record(reused, write=False)
        archive_previous(self.out, p.name, self.manifest)
        nb_out = self.out / p.name
        try:
            nb_out.mkdir()
        except OSError as exc:
            raise write_error(exc, f"create {nb_out}") from None
        params = run_parameters(p, self.out)
        current = NotebookResult(p.name, "running", started=now_iso(), parameters=params,
                                 invocation=self.n_inv)
        self.record(current)
        print(f"{tag} {p.name} ...", flush=True)
        self.running[name] = (current, time.perf_counter(), deps_out)
        return executors.NotebookTask(p.name, str(p.path), str(self.out / f"{p.name}.ipynb"),
                                      params, self.plan.cfg.get("timeout"), tag,
                                      executors.forwarded_env())

    def finish(self, name: str, outcome: dict[str, Any]) -> None:
        """Record, render and report an execution that came back."""
        p, (current, t0, deps_out) = self.by_name[name], self.running[name]  # popped once
        current.seconds = round(time.perf_counter() - t0, 1)  # recorded: a write error on the
        current.finished = now_iso()  # way still counts it as running
        current.error, current.worker = outcome["error"], outcome.get("worker")
        current.restarts = outcome.get("restarts") or None
        current.status = "failed" if current.error else "ok"
        render(current, self.out / f"{p.name}.ipynb", self.manifest.hide_code)
        if current.status == "ok":  # after its page: the file digests include it
            try:
                record_inputs(current, p, self.out, deps_out)
            except ReportWriteError:
                raise
            except Exception as exc:  # noqa: BLE001 - a key not made never fails the notebook
                print(f"{self.tags[name]} {p.name}: its inputs were not recorded, so it will "
                      f"not be reused ({why_text(exc)})", file=sys.stderr, flush=True)
        print(f"{self.tags[name]} {p.name} {current.status} in {current.seconds:.1f} s"
              + (f": {current.error}" if current.error else ""), flush=True)
        self.results.append(current)
        self.running.pop(name)
        self.record(current)

    def stop_running(self, why: str, exc: BaseException | None = None) -> None:
        """Stop the executions still out and mark them interrupted: by a signal or a lost
        cluster (``why``; their partial notebooks marked and rendered), or by a write error
        or a bug (``exc``; the run's status comes first)."""
        try:
            came_back = {o.get("out_nb"): o for o in self.executor.stop(why)}
        except Exception:  # noqa: BLE001
            if exc is None:
                raise
            came_back = {}
        for current, t0, _ in self.running.values():
            current.status = "interrupted"
            current.finished = current.finished or now_iso()
            if exc is not None:
                current.error = " | ".join(filter(None, [current.error, "the run stopped: "
                                                         + why_text(exc)]))
            else:
                current.error = f"interrupted by {why}" if why.startswith("SIG") else why
                current.seconds = current.seconds or round(time.perf_counter() - t0, 1)
                out_nb = self.out / f"{current.name}.ipynb"
                current.worker = came_back.get(str(out_nb), {}).get("worker")
                if out_nb.is_file():
                    mark_interrupted(out_nb, why)
                    try:
                        render(current, out_nb, self.manifest.hide_code)
                    except ReportWriteError as err:  # the run's status is still written
                        current.error += f" | page not written: {err}"
            if current not in self.results:
                self.results.append(current)
            self.record(current, write=False)
        if exc is None:
            print(f"Run {self.out.name} interrupted: {why}", file=sys.stderr, flush=True)
