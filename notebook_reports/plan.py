"""What a run will do, checked before anything runs: the request (:class:`RunRequest`, what
``saf-run`` was asked) and the plan (:class:`RunPlan`, what :func:`prepare` found). Nothing
here writes a file; ``--dry-run`` prints :func:`describe_plan`."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from notebook_reports.data_check import check_data_sources
from notebook_reports.manifest import Manifest, pid_alive
from notebook_reports.parameters import (
    NotebookPlan,
    check_dependencies,
    plan_notebooks,
    select_notebooks,
)
from notebook_reports.profiles import (
    NOTEBOOK_DIR,
    REPORTS_DIR,
    RunnerError,
    check_folder_name,
    load_profile,
    short,
)
from notebook_reports.tasks import system_params_lines


@dataclass
class RunRequest:
    """One ``saf-run`` invocation's options (:func:`request_from_args` reads them)."""

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
    workers: int | None = None  # --workers; None: the profile's (cluster_options.resolve_workers)
    scheduler: str | None = None  # tcp://host:port of a running Dask scheduler
    label: str = ""  # before each progress line (a sweep's cell, its runs print at once)


def request_from_args(args: Any, argv: list[str]) -> RunRequest:
    """The request of parsed ``saf-run`` (or ``saf-run sweep``) arguments."""
    given = {f.name: getattr(args, f.name) for f in fields(RunRequest) if hasattr(args, f.name)}
    return RunRequest(**{**given, "overrides": args.param, "argv": argv})


@dataclass
class RunPlan:
    """Everything :func:`prepare` checked: the merged profile (``cfg``), one
    :class:`NotebookPlan` per selected notebook, each dependency's status, the data check and
    where the run goes (``existing`` with its ``old_manifest``, else a new ``run_name``)."""

    cfg: dict[str, Any]
    plans: list[NotebookPlan]
    deps: dict[str, Any] = field(default_factory=dict)
    data: list[dict[str, Any]] = field(default_factory=list)
    existing: Path | None = None
    old_manifest: Manifest | None = None
    run_name: str | None = None
    baseline: Path | None = None
    reuse_from: list[tuple[Path, Manifest]] = field(default_factory=list)  # where to look
    workers: int = 1  # notebooks at once (cluster_options.resolve_workers: request, profile)


def prepare(req: RunRequest) -> RunPlan:
    """Everything checked before anything runs; returns the plan (nothing is written)."""
    from notebook_reports.compare import load_run, resolve_run
    from notebook_reports.run_folder import read_manifest

    # --run-dir: a path, or a run name under the reports folder
    existing = resolve_run(req.run_dir, req.reports_dir) if req.run_dir else None
    old_manifest = read_manifest(existing) if existing else None
    cfg = _profile(req, existing, old_manifest)
    if req.run_name and existing:
        raise RunnerError("--run-name and --run-dir exclude each other")
    run_name = check_folder_name(req.run_name, "--run-name") if req.run_name else None
    nb_dir = Path(req.notebooks_dir) if req.notebooks_dir else NOTEBOOK_DIR
    names = select_notebooks(list(cfg["notebooks"]), req.only)
    deps = check_dependencies(cfg, names, existing, {
        n["name"]: n.get("status") for n in (old_manifest.notebooks if old_manifest else [])})
    plans = plan_notebooks(cfg, names, nb_dir, req.overrides or [])
    for p in plans:
        check_launcher_and_models(p)
    baseline = None
    if req.baseline:  # a readable run: checked manifest and metrics
        baseline = resolve_run(req.baseline, req.reports_dir)
        load_run(baseline)
    data = check_data_sources(plans)
    from notebook_reports.cluster_options import resolve_workers

    workers = resolve_workers(req.workers, req.scheduler, cfg.get("workers"))
    return RunPlan(cfg, plans, deps, data, existing, old_manifest, run_name, baseline,
                   _reuse_sources(req, cfg, existing), workers)


def check_launcher_and_models(p: NotebookPlan) -> None:
    """``p``'s launcher (null too: the notebook needs one) is valid, and each model its
    parameters name is a folder where the notebook looks (relative to its folder, the
    kernel's working folder), a packaged model, or a name the hub accepts; a path that names
    nothing is refused here, not after the notebook ran."""
    from huggingface_hub.utils import validate_repo_id

    from saf_utils.data.provenance import model_folder, named_models
    from saf_utils.training.launchers import check_launcher

    try:
        if "launcher" in p.params:
            check_launcher(p.params["launcher"])
    except ValueError as err:
        raise RunnerError(f"{p.name}: {err}") from None
    for name in named_models(p.params):
        if name.startswith("local:") or model_folder(name, p.path.parent) is not None:
            continue
        try:
            validate_repo_id(name)
            if not model_folder(name):  # a hub id, unless it is meant as a folder
                continue
            why = f"a folder relative to {Path.cwd()}, not to {p.path.parent}"
        except Exception as exc:  # noqa: BLE001 - HFValidationError: no hub id either
            why = f"no folder there, and no hub model id ({' '.join(str(exc).split())[:120]})"
        raise RunnerError(f"{p.name}: model {short(name)} names no folder relative to "
                          f"{p.path.parent} (the notebook's working folder): {why}; give "
                          "an absolute path or one relative to that folder")


def _profile(req: RunRequest, existing: Path | None, old: Manifest | None) -> dict[str, Any]:
    """The profile the request names; rerunning inside a run, the one that run used (a
    different one, or a run still going, is an error)."""
    profile, config = req.profile, req.config
    if old and not (profile or config):
        if old.profile_file and Path(old.profile_file).is_file():
            config = old.profile_file
        else:
            profile = old.profile
    cfg = load_profile(profile or "cpu", config)
    if old and old.profile not in (None, cfg["name"]):
        raise RunnerError(f"{existing} was run with profile {old.profile!r}, "
                          f"not {cfg['name']!r}; omit --profile to reuse it")
    if old and old.status == "running" and old.host == socket.gethostname() \
            and pid_alive(old.pid) and old.pid != os.getpid():
        raise RunnerError(f"{existing} is still being run by process {old.pid}")
    return cfg


def _reuse_sources(req: RunRequest, cfg: dict[str, Any], existing: Path | None
                   ) -> list[tuple[Path, Manifest]]:
    """The runs (folder, manifest) to reuse unchanged notebooks from, in order: ``--reuse``'s
    run, or with ``reuse: latest`` the profile's earlier runs (``--no-reuse``: none)."""
    from notebook_reports.compare import resolve_run
    from notebook_reports.run_folder import read_manifest

    if req.reuse and req.no_reuse:
        raise RunnerError("--reuse and --no-reuse exclude each other")
    if req.reuse:
        path = resolve_run(req.reuse, req.reports_dir)
        return [(path, read_manifest(path))]
    if cfg.get("reuse") != "latest" or req.no_reuse:
        return []
    from notebook_reports.reuse import profile_runs

    return profile_runs(Path(req.reports_dir or REPORTS_DIR), cfg["name"], existing)


def describe_plan(plan: RunPlan, req: RunRequest) -> str:
    """The dry-run text: where, which notebooks with which parameters, which data."""
    cfg = plan.cfg
    where = (f"inside existing run {plan.existing}" if plan.existing else
             f"new run {plan.run_name or cfg['name'] + '-<time>'} in "
             f"{req.reports_dir or REPORTS_DIR}")
    lines = [f"Plan (dry run; nothing runs): profile {cfg['name']} ({cfg['path']}"
             + (f", extends {', '.join(cfg['extends_chain'])}" if cfg["extends_chain"] else "")
             + f"), {where}"]
    for i, p in enumerate(plan.plans, 1):
        deps = cfg["depends_on"].get(p.name, [])
        dep_txt = ", ".join(f"{d} ({plan.deps.get(d)})" for d in deps)
        lines.append(f"[{i}] {p.name}" + (f"  depends on {dep_txt}" if deps else ""))
        for k, v in p.params.items():
            # whole, as a Python literal: the lines paste into a notebook's parameters cell
            lines.append(f"      {k} = {v!r}    # {p.origins.get(k)}")
        lines += system_params_lines(p.name, p.params)  # effective, by system
    lines.append("Data sources:")
    for d in plan.data:
        extra = {"local": ""}.get(d["kind"], " (cached)" if d.get("cached") else " (download)")
        lines.append(f"  {d['dataset']}: {d['kind']} {d['source']}{extra} via {d['via']}"
                     f" for {', '.join(d['notebooks'])}")
    if not plan.data:
        lines.append("  (no selected notebook declares a data source)")
    if plan.baseline:
        lines.append(f"Compare with {plan.baseline} (compare.html)")
    from notebook_reports.cluster_options import where_text

    lines.append(where_text(plan.workers, req.scheduler))
    if plan.reuse_from:
        where = (plan.reuse_from[0][0] if len(plan.reuse_from) == 1 else
                 f"the latest of {len(plan.reuse_from)} {cfg['name']} runs that has it")
        lines.append(f"Reuse each notebook whose inputs are unchanged from {where}")
    return "\n".join(lines)
