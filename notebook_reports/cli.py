"""The ``saf-run`` command line: ``run`` (the default), ``sweep``, ``compare`` and ``list``
(examples: docs/profiles.md).

Plain ``saf-run --profile …`` (and ``python -m notebook_reports``) is ``saf-run run``.
Exit codes: docs/profiles.md (129: SIGHUP)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from notebook_reports.manifest import ReportWriteError
from notebook_reports.profiles import REPORTS_DIR, RunnerError
from notebook_reports.run_folder import list_runs

EXIT_WRITE = 3


def _err(msg: str) -> None:
    print(f"saf-run: {' '.join(str(msg).split())}", file=sys.stderr)


def run_parser() -> argparse.ArgumentParser:
    from notebook_reports import runner

    ap = argparse.ArgumentParser(prog="saf-run", description=runner.__doc__.split("\n\n")[0],
                                 epilog="Other commands: saf-run compare RUN_A RUN_B; "
                                        "saf-run list; saf-run sweep --matrix KEY=[a,b].")
    ap.add_argument("--profile", help="configs/<profile>.yaml (default: cpu, or the profile "
                                      "of --run-dir)")
    ap.add_argument("--config", help="explicit profile YAML path (overrides --profile)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (all notebooks) or NOTEBOOK.KEY=VALUE; "
                         "values are YAML (5e-4 is a number), checked against the "
                         "notebook's default")
    ap.add_argument("--only", action="append", metavar="NAME[,NAME]",
                    help="run only these notebooks (names or unique prefixes such as 02; "
                         "comma-separated or repeated)")
    ap.add_argument("--run-name", help="folder name under reports/ (default: <profile>-<time>)")
    ap.add_argument("--run-dir", help="rerun the chosen notebooks inside this existing run")
    ap.add_argument("--reports-dir", help="where run folders go (default: reports/)")
    ap.add_argument("--notebooks-dir", help="where the notebooks are (default: notebooks/)")
    ap.add_argument("--hide-code", action="store_true", default=None,
                    help="HTML without code cells")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the plan (notebooks, parameters, data sources); run nothing")
    ap.add_argument("--baseline", metavar="RUN",
                    help="compare with this run at the end (writes compare.html)")
    ap.add_argument("--reuse", metavar="RUN",
                    help="copy the outputs of notebooks whose inputs are unchanged since RUN "
                         "instead of running them (frozen notebooks)")
    ap.add_argument("--no-reuse", action="store_true",
                    help="run every notebook, even where the profile says reuse: latest")
    from notebook_reports.cluster_options import add_cluster_arguments

    add_cluster_arguments(ap)
    return ap


def run_main(argv: list[str]) -> int:
    from notebook_reports import runner

    args = run_parser().parse_args(argv)
    req = runner.request_from_args(args, ["saf-run", *argv])
    if args.dry_run:
        print(runner.describe_plan(runner.prepare(req), req))
        return 0
    run_dir, results, status = runner.run_profile(req)
    print(f"Report: {(run_dir / 'index.html').resolve()}")
    return runner.exit_code(status, [r.name for r in results if r.status != "ok"])


def sweep_main(argv: list[str]) -> int:
    """``saf-run sweep`` (notebook_reports/sweep.py); exit codes as for a run."""
    from notebook_reports import sweep

    args = sweep.add_sweep_arguments(run_parser()).parse_args(argv)
    return sweep.run_sweep(args, ["saf-run", "sweep", *argv])


def compare_main(argv: list[str]) -> int:
    from notebook_reports.compare import compare_runs, resolve_run
    from notebook_reports.compare_page import to_markdown, write_compare_html

    ap = argparse.ArgumentParser(prog="saf-run compare",
                                 description="Differences of run B against run A (Markdown to "
                                             "stdout, HTML file).")
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--html", help="HTML output (default: RUN_B/compare-<RUN_A>.html)")
    ap.add_argument("--reports-dir", help="where run names are looked up (default: reports/)")
    ap.add_argument("--alpha", type=float, default=0.05, help="significance level, in (0, 1)")
    ap.add_argument("--resamples", type=int, default=1000,
                    help="paired-bootstrap resamples (at least 100)")
    args = ap.parse_args(argv)
    a = resolve_run(args.run_a, args.reports_dir)
    b = resolve_run(args.run_b, args.reports_dir)
    cmp = compare_runs(a, b, alpha=args.alpha, n_resamples=args.resamples)
    print(to_markdown(cmp))
    out = write_compare_html(cmp, args.html or b / f"compare-{a.name}.html")
    print(f"\nHTML: {out}", file=sys.stderr)
    return 0


def list_main(argv: list[str]) -> int:
    """Runs of the reports folder as a text table per profile and dataset (a sweep's cells are
    runs named ``<sweep>-<cell>``), or ``--json``: one object per run, for scripts."""
    import json

    from notebook_reports.pages import duration_text

    ap = argparse.ArgumentParser(prog="saf-run list", description="Runs in the reports folder, "
                                 "grouped by profile and dataset, oldest first.")
    ap.add_argument("--reports-dir", help="default: reports/")
    ap.add_argument("--json", action="store_true", help="one JSON list of the runs, for scripts")
    args = ap.parse_args(argv)
    problems: list[str] = []
    runs = list_runs(args.reports_dir, problems)
    for why in problems:  # one line each; the other runs are still listed
        _err(f"note: {why}")
    if args.json:
        print(json.dumps(runs, indent=1))
        return 0
    if not runs:
        print(f"no {'readable ' if problems else ''}runs in {args.reports_dir or REPORTS_DIR}")
        return 0
    head = ["run", "commit", "status", "started", "duration", "notebooks"]
    rows = {r["run"]: [str(r.get("run") or ""), r.get("commit") or "", r.get("status") or "",
                       (r.get("started") or "").replace("+00:00", "Z"),
                       duration_text(r.get("seconds")), r.get("notebooks") or ""] for r in runs}
    widths = [max(len(h), *(len(row[i]) for row in rows.values())) for i, h in enumerate(head)]
    groups: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        groups.setdefault((str(r.get("profile") or "no profile"),
                           "+".join(r["datasets"]) or "no records"), []).append(r["run"])
    for n, ((profile, datasets), names) in enumerate(sorted(groups.items())):
        print(("\n" if n else "") + f"{profile} · {datasets}")
        for row in [head, *(rows[name] for name in names)]:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


#: What a terminal would act on rather than show: C0 controls but newline and tab, DEL, C1
#: controls, and the bidirectional overrides that reorder a line.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every :data:`CONTROL` character written as its escape (``\\x1b``)."""
    return CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


class _Escaping:
    """A text stream writing :func:`terminal_safe` text, so names and values read from files
    (a manifest's run, a notebook's headings) never reach the terminal as control sequences."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


COMMANDS = {"run": run_main, "sweep": sweep_main, "compare": compare_main, "list": list_main}


def main(argv: list[str] | None = None) -> int:
    """``saf-run [run|sweep|compare|list] ...``, printing through :class:`_Escaping`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(saved[0]), _Escaping(saved[1])
    try:
        return (COMMANDS[argv.pop(0)] if argv and argv[0] in COMMANDS else run_main)(argv)
    except RunnerError as exc:
        _err(exc)
        return 2
    except KeyboardInterrupt:
        _err("interrupted before any notebook ran")
        return 130
    except OSError as exc:
        _err(exc if isinstance(exc, ReportWriteError) else f"{exc.filename or ''} "
             f"{exc.strerror or exc}")
        return EXIT_WRITE
    finally:
        sys.stdout, sys.stderr = saved


if __name__ == "__main__":
    sys.exit(main())
