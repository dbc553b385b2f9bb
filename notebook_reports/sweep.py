"""Parameter sweeps: ``saf-run sweep --profile P --matrix KEY=[v1,v2] [--matrix …]``.

The cross product of the matrix becomes ordinary runs ``reports/<sweep>-<cell>/``, all planned
and checked before any runs (docs/cluster.md); a sweep keeps no state of its own."""

from __future__ import annotations

import itertools
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from notebook_reports.notebook_exec import Interrupted, _signals
from notebook_reports.parameters import parse_item
from notebook_reports.profiles import RunnerError, check_folder_name


def parse_matrix(items: list[str]) -> dict[str, list]:
    """``{key: [values]}`` of ``--matrix KEY=[…]``: each a non-empty YAML list."""
    matrix: dict[str, list] = {}
    for item in items:
        key, values = parse_item(item, "--matrix")
        if key in matrix:
            raise RunnerError(f"--matrix {key}: given twice")
        if not isinstance(values, list) or not values:
            raise RunnerError(f"--matrix {item!r}: the values must be a non-empty list "
                              "[v1, v2, ...]")
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < len(values):
            raise RunnerError(f"--matrix {item!r}: a value is listed twice")
        matrix[key] = values
    if not matrix:
        raise RunnerError("a sweep needs a matrix: --matrix KEY=[v1,v2]")
    return matrix


def shown_value(value: Any) -> str:
    """A value as a cell's name shows it: a path by its last part, a list joined by ``+``."""
    if isinstance(value, list | tuple):
        return "+".join(shown_value(v) for v in value)
    if isinstance(value, str) and "/" in value:
        return Path(value.rstrip("/")).name or value
    return str(value)


def cell_name(values: dict[str, Any]) -> str:
    """The run folder name of a cell: ``key-value`` parts (a key without its notebook),
    characters outside letters, digits and ``. _ + -`` replaced by ``-``."""
    parts = []
    for key, value in values.items():
        text = re.sub(r"[^A-Za-z0-9._+-]+", "-", shown_value(value)).strip("-.") or "x"
        parts.append(f"{key.rsplit('.', 1)[-1]}-{text[:40]}")
    return "__".join(parts)[:110]


@dataclass
class Cell:
    name: str
    values: dict[str, Any]
    req: Any  # runner.RunRequest
    plan: Any = None  # runner.RunPlan
    run_dir: Path | None = None
    status: str = "pending"  # pending | ok | failed | interrupted | cluster_lost | error
    error: str | None = None


def plan_cells(base: Any, matrix: dict[str, list], sweep: str) -> list[Cell]:
    """One checked run plan per cell, named ``<sweep>-<cell>``: a bad value fails here."""
    from notebook_reports import runner

    cells: list[Cell] = []
    for combo in itertools.product(*matrix.values()):
        values = dict(zip(matrix, combo, strict=True))
        name = unique = f"{sweep}-{cell_name(values)}"
        k = 1
        while unique in {c.name for c in cells}:  # two values shown alike (/a/x, /b/x)
            k += 1
            unique = f"{name}-{k}"
        check_folder_name(unique, "sweep cell name")
        overrides = [*base.overrides, *(f"{key}={json.dumps(v)}" for key, v in values.items())]
        req = replace(base, overrides=overrides, run_name=unique,
                      argv=[*(base.argv or []), f"# sweep cell {unique}"],
                      label=f"{unique} " if base.workers > 1 or base.scheduler else "")
        try:
            plan = runner.prepare(req)
        except RunnerError as exc:
            raise RunnerError(f"sweep cell {unique}: {exc}") from None
        cells.append(Cell(unique, values, req, plan))
    return cells


def describe_sweep(cells: list[Cell], base: Any) -> str:
    """The dry-run text: one line per cell and its values, then the plan of the first cell."""
    from notebook_reports import runner
    from notebook_reports.cluster_options import where_text

    cfg = cells[0].plan.cfg
    lines = [f"Sweep plan (dry run; nothing runs): profile {cfg['name']}, {len(cells)} cell(s)"
             f" as runs {cells[0].req.reports_dir or 'reports'}/<sweep>-<cell>"]
    lines += [f"[{i}] {c.name}: " + ", ".join(f"{k}={v!r}" for k, v in c.values.items())
              for i, c in enumerate(cells, 1)]
    lines.append(where_text(base.workers, base.scheduler)
                 + ("; the cells at once" if base.workers > 1 or base.scheduler else
                    "; the cells one after another"))
    lines.append("Each cell is a run like the first:")
    lines += ["    " + x for x in runner.describe_plan(cells[0].plan, cells[0].req).splitlines()]
    return "\n".join(lines)


def run_cells(cells: list[Cell], executor: Any) -> str:
    """Run every cell on ``executor``, each a thread of this process submitting to it: in
    this process one after another (so that with ``reuse: latest`` a cell reuses the cells
    before it), on Dask all at once; ok | failed | interrupted:<SIGNAL>."""
    from notebook_reports import runner

    serial = not getattr(executor, "client", None)

    def one(cell: Cell) -> None:
        try:
            if serial and cell.plan.cfg.get("reuse") == "latest" \
                    and not (cell.req.reuse or cell.req.no_reuse):
                cell.plan = runner.prepare(cell.req)  # now sees the cells run before this one
            cell.run_dir, _, status = runner.run_profile(cell.req, cell.plan, executor)
            cell.status = status.split(":")[0]
        except Exception as exc:  # noqa: BLE001 - one cell's failure is that cell's
            cell.status = "error"
            cell.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"

    interrupted = None
    with ThreadPoolExecutor(1 if serial else len(cells), thread_name_prefix="sweep") as pool:
        futures = [pool.submit(one, c) for c in cells]
        try:
            with _signals(raise_on_signal=True):  # the main thread polls: see execute_one
                while not all(f.done() for f in futures):
                    time.sleep(0.2)
        except Interrupted as sig:
            interrupted = str(sig)
            with _signals(raise_on_signal=False):
                executor.request_stop(interrupted)
                for f in futures:
                    f.cancel()
                wait(futures)
    if interrupted:
        return f"interrupted:{interrupted}"
    return "ok" if all(c.status == "ok" for c in cells) else "failed"


def add_sweep_arguments(ap: Any) -> Any:
    """``saf-run sweep``'s parser: the run options (:func:`cli.run_parser`) and the matrix."""
    ap.prog = "saf-run sweep"
    ap.description = ("Run the cross product of --matrix values as ordinary runs named "
                      "<sweep>-<cell> (saf-run list lists them, saf-run compare compares two).")
    ap.epilog = None
    ap.add_argument("--matrix", action="append", default=[], metavar="KEY=[V1,V2]",
                    help="a parameter (key or notebook.key) and its values, a YAML list; "
                         "repeat for more axes (cross product)")
    ap.add_argument("--sweep-name", help="the prefix of the cells' run folders (default: "
                                         "sweep-<profile>-<time>)")
    return ap


def run_sweep(args: Any, argv: list[str]) -> int:
    """``saf-run sweep`` after parsing; a bad invocation raises before anything runs."""
    from notebook_reports import runner
    from notebook_reports.cluster_options import resolve_workers
    from notebook_reports.executors import open_executor
    from notebook_reports.profiles import REPORTS_DIR, load_profile

    for opt in ("run_name", "run_dir", "baseline"):
        if getattr(args, opt):
            raise RunnerError(f"--{opt.replace('_', '-')} is for one run; a sweep makes a new "
                              "run per cell, named with its prefix (--sweep-name)")
    base = runner.request_from_args(args, argv)
    cfg = load_profile(args.profile or "cpu", args.config)
    base = replace(base, workers=resolve_workers(args.workers, args.scheduler, cfg.get("workers")))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = check_folder_name(args.sweep_name or f"sweep-{cfg['name']}-{stamp}", "--sweep-name")
    cells = plan_cells(base, parse_matrix(args.matrix), name)
    if args.dry_run:
        print(describe_sweep(cells, base))
        return 0
    with open_executor(base.workers, args.scheduler) as executor:
        print(f"Sweep {name}: {len(cells)} cell(s), each a run {name}-<cell>", flush=True)
        executor.preflight(Path(base.reports_dir or REPORTS_DIR), [
            p for c in cells for p in c.plan.plans], [d for c in cells for d in c.plan.data])
        status = run_cells(cells, executor)
    for c in cells:
        print(f"  {c.run_dir.name if c.run_dir else c.name}: {c.status}"
              + (f" ({c.error})" if c.error else ""))
    print(f"Compare two cells: saf-run compare {cells[0].name} <other cell>; list them: "
          "saf-run list")
    return runner.exit_code(status, [c.name for c in cells if c.status != "ok"],
                            "Cells not ok")
