"""How training jobs start (docs/distributed-training.md): a launcher's command line and its
checks, a launched job as a subprocess tied to the kernel, and forked processes
(``processes:N``) that send back only their log lines and, on failure, the traceback (a forked
copy of a kernel's stream would wait on threads that did not survive the fork)."""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from saf_utils import determinism

PREFIX = "processes"
#: prctl(2): the signal a process gets when its parent ends (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """End this process when its parent ``parent`` ends (Linux: SIGKILL via prctl
    PR_SET_PDEATHSIG; elsewhere nothing), now if ``parent`` already ended. Linux also ends
    it when the *thread* that started it ends: start it from a thread that waits for it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):  # no prctl: nothing to ask
        return
    if os.getppid() != parent:
        os._exit(1)


#: ``python -c`` code that ties a launcher to the process starting it (:func:`tied`).
_TIE = ("import os, sys; from saf_utils.training.launchers import die_with_parent; "
        "die_with_parent(int(sys.argv[1])); os.environ['SAF_LAUNCHER_PID'] = str(os.getpid()); "
        "os.execv(sys.argv[2], sys.argv[2:])")


def tied(cmd: Sequence[str]) -> list[str]:
    """``cmd`` (an absolute executable first) run so that it dies with this process; the ranks
    read its pid from ``SAF_LAUNCHER_PID`` to die with it (torchrun starts each rank in a
    session of its own, which no process-group kill reaches)."""
    return [sys.executable, "-c", _TIE, str(os.getpid()), *cmd]


def processes(launcher: str) -> int | None:
    """N of ``"processes:N"`` (N ≥ 1), None for any other launcher."""
    if not launcher.startswith(PREFIX):
        return None
    _, _, n = launcher.partition(":")
    if not n.isdigit() or int(n) < 1:
        raise ValueError(f"launcher {launcher!r}: use processes:N with N a positive integer")
    return int(n)


#: ``run_one(job, launcher, log)``: :func:`saf_utils.training.jobs.run_job`, passed in by the
#: caller (this module sits below :mod:`saf_utils.training.jobs`; it pickles by name).
RunOne = Callable[[Any, str, Callable[[str], None]], Any]


def _child(run_one: RunOne, job: Any) -> tuple[list[str], str | None, float]:
    """Run one job in a forked child: (log lines, traceback or None, seconds)."""
    lines: list[str] = []
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the child's lifetime)
    sys.stdout = sys.stderr = devnull  # never the kernel's streams (see module doc)
    t0 = time.perf_counter()
    try:
        run_one(job, "none", lines.append)
    except BaseException:  # noqa: BLE001 - the parent raises it with the job's name
        return lines, traceback.format_exc()[-3000:], time.perf_counter() - t0
    return lines, None, time.perf_counter() - t0


def run_forked(jobs: Sequence[Any], n: int, run_one: RunOne, error: type[Exception],
               log: Callable[[str], None] = print, launcher: str = "none") -> list[float]:
    """Run ``jobs`` with ``run_one`` on up to ``n`` forked processes (outputs in their
    folders); each job's seconds. A failure raises ``error`` naming the first failed job. One
    at a time, each runs under ``launcher``."""
    jobs = list(jobs)
    if n <= 1 or len(jobs) <= 1 or sys.platform == "win32":
        out = []
        for job in jobs:
            t0 = time.perf_counter()
            run_one(job, launcher, log)
            out.append(time.perf_counter() - t0)
        return out
    ctx = multiprocessing.get_context("fork")
    log(f"[jobs] {len(jobs)} jobs on {min(n, len(jobs))} forked processes")
    # No die_with_parent here: Linux kills a child when the *thread* that forked it ends,
    # and the pool's worker-handler thread forks the replacement workers and ends before
    # the pool is shut down; a worker killed then holds the task queue's lock (a hang).
    # The workers share the kernel's process group, which the runner kills on a stop.
    with ctx.Pool(min(n, len(jobs)), maxtasksperchild=1) as pool:
        results = pool.map(functools.partial(_child, run_one), jobs, chunksize=1)
    seconds, failed = [], []
    for job, (lines, trace, secs) in zip(jobs, results, strict=True):
        for line in lines:
            log(line)
        seconds.append(secs)
        if trace is not None:
            failed.append(f"{job.system} seed {job.seed} ({job.output_dir}):\n{trace}")
    if failed:
        raise error(f"{len(failed)} of {len(jobs)} job(s) failed; first: {failed[0]}")
    return seconds


# --------------------------------------------------------------------------- launchers


def launch_command(launcher: str, config_path: str | os.PathLike) -> list[str]:
    """The command line of a launcher (``torchrun:N``, ``torchrun:gpu``, ``accelerate``,
    ``accelerate:N``), run as ``sys.executable -m`` to use the notebook's environment."""
    kind, _, n = launcher.partition(":")
    target = ["-m", "saf_utils.training.process_entry", str(config_path)]
    if kind in ("torchrun", "accelerate") and n and n != "gpu" * (kind == "torchrun") \
            and not (n.isdigit() and int(n) >= 1):
        raise ValueError(f"launcher {launcher!r}: {kind}:N needs N >= 1")
    if kind == "torchrun" and n:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", n, *target]
    if kind == "accelerate":
        extra = ["--multi_gpu", "--num_processes", n, "--num_machines", "1"] if n else []
        return [sys.executable, "-m", "accelerate.commands.launch", *extra, *target]
    raise ValueError(f"launcher {launcher!r}: use none, processes:N, torchrun:N, torchrun:gpu, "
                     "accelerate or accelerate:N")


def check_launcher(launcher: str) -> None:
    """A launcher this machine can start, or a one-line ``ValueError`` saying why not (when a
    run is planned, not at the first training job)."""
    if not isinstance(launcher, str):
        raise ValueError(f"launcher {launcher!r}: a launcher is a string: none, processes:N, "
                         "torchrun:N, torchrun:gpu, accelerate or accelerate:N")
    if launcher == "none" or processes(launcher):
        return
    launch_command(launcher, "job.json")  # the syntax
    kind, _, n = launcher.partition(":")
    if n == "gpu" or (kind == "accelerate" and n):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"launcher {launcher!r} needs CUDA GPUs and this machine has "
                             "none: use torchrun:N (N CPU processes) or none")


def _failure_message(out: Path, returncode: int, tail: Sequence[str]) -> str:
    errors = []
    for path in out.glob("rank*.error"):
        try:
            errors.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    if errors:
        first = min(errors, key=lambda e: e["time"])  # later ones are usually its fallout
        others = sorted(e["rank"] for e in errors if e is not first)
        return (f"rank {first['rank']} failed: {first['type']}: {first['message']}"
                + (f" (ranks {others} failed after it)" if others else "")
                + "\n" + first["traceback"][-3000:])
    return (f"launcher exited with code {returncode} and no rank error file; last lines:\n"
            + "".join(tail[-40:]))


#: Seconds a launcher gets to stop its ranks after SIGTERM, before SIGKILL.
STOP_GRACE_S = 30
#: A launched job's output, in its folder.
LAUNCHER_LOG = "launcher.log"


def launch(launcher: str, config_path: Path, log: Callable[[str], None],
           error: type[Exception]) -> None:
    """Run one job's config under a launcher, tied to this process, its lines to ``log`` and
    ``launcher.log``; a failure raises ``error`` with the failing rank's exception."""
    out = config_path.parent
    cmd = tied(launch_command(launcher, config_path))
    # Progress bars redraw with \r, which a line-by-line stream cannot show: the Trainer
    # prints its loss lines instead.
    env = {"PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", **os.environ,
           **determinism.pinned_environment()}
    log("[run_job] " + " ".join(cmd))
    tail: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1, env=env) as proc, \
            open(out / LAUNCHER_LOG, "w", encoding="utf-8") as fh:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                fh.write(line)
                tail = [*tail[-199:], line]
                log(line.rstrip("\n"))
        except BaseException:  # e.g. an interrupted cell: stop the launcher and its ranks
            proc.terminate()  # torchrun forwards SIGTERM to its workers
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:  # the ranks die with it (tied)
                proc.kill()
            raise
        returncode = proc.wait()
    if returncode != 0:
        raise error(_failure_message(out, returncode, tail))
