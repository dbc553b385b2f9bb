"""Where a run's notebooks execute, behind one ``concurrent.futures`` interface
(:class:`NotebookExecutor`): in this process one after another (``--workers 1``), or as Dask
tasks on a ``LocalCluster`` (``--workers N``) or a running scheduler (``--scheduler``). Only
papermill runs on a worker (:func:`run_notebook`), into the run folder all workers see at the
same path. Why Dask: users who outgrow one machine already run Dask or Slurm (dask-jobqueue);
it is an optional extra imported only here.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ThreadPoolExecutor,
    wait,
)
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notebook_reports import cluster_options as options
from notebook_reports.data_check import data_env_vars
from notebook_reports.notebook_exec import Interrupted, execute_one
from notebook_reports.profiles import RunnerError
from saf_utils import determinism

#: What every kernel inherits unless set: string hashes fixed; no progress bars inside a kernel
#: (they clutter its page; the runner prints a line per section and notebook).
KERNEL_DEFAULTS = {"PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false", "TQDM_DISABLE": "1",
                   "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
#: Environment variables a notebook's kernel reads (besides :func:`data_env_vars`); a Dask
#: worker gets the runner's values, so that a worker started elsewhere computes the same.
RUNNER_ENV = (*KERNEL_DEFAULTS, *determinism.KERNEL_ENV, *determinism.OPENBLAS_ENV)
#: ``SAF_``: the data folders, SAF_NUM_THREADS / SAF_NUMERICS (:mod:`saf_utils.determinism`),
#: caches.
RUNNER_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "SAF_")
#: What a Dask nanny sets in its worker processes (``distributed.nanny.pre-spawn-environ``);
#: the kernel gets the runner's values instead (unset where it has none). Thread limits of 1
#: would make a kernel single-threaded and change the last digits of float32 sums against a
#: serial run; ``MALLOC_TRIM_THRESHOLD_=65536`` made glibc hand freed memory back to the
#: system at once, so every large tensor was page-faulted in again (cpu profile, 2 workers:
#: 221 million minor page faults and 367 s of system time, against 47 s serially).
NANNY_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "MALLOC_TRIM_THRESHOLD_")


STOP_REASON = "stop requested by the runner"
#: How long a ``--scheduler`` run waits for its first worker.
WAIT_FOR_WORKERS_S = 60
#: How long an interrupted Dask task may take to stop its kernel and save the partial notebook.
STOP_GRACE_S = 90


def forwarded_env() -> dict[str, str | None]:
    """The runner's values of :data:`RUNNER_ENV`, its prefixes, the data folders, and of
    :data:`NANNY_ENV` and whatever else this Dask version's nanny sets (None: unset)."""
    try:
        import dask

        nanny = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    except ImportError:
        nanny = {}
    names = set(RUNNER_ENV) | set(data_env_vars())
    return {**{k: os.environ.get(k) for k in (*NANNY_ENV, *map(str, nanny))},
            **{k: v for k, v in os.environ.items()
               if k in names or k.startswith(RUNNER_ENV_PREFIXES)}}


@dataclass
class NotebookTask:
    """One papermill execution, as the runner hands it to an executor (picklable)."""
    name: str
    nb_path: str
    out_nb: str
    params: dict[str, Any]
    timeout: int | None
    tag: str  # "[2/5]", the runner's progress prefix
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset


class ClusterLost(Exception):
    """The connection to the Dask scheduler is gone mid-run (the run is ``cluster_lost``)."""


# ------------------------------------------------------------------ the graph
def run_graph(names: Sequence[str], depends_on: dict[str, list[str]],
              start: Callable[[str], NotebookTask | None],
              finish: Callable[[str, dict], None], executor: Any) -> None:
    """Start each of ``names``, in list order, once its dependencies among them have finished
    (ok or not) and the executor has a free slot; ``start`` returns None for a notebook it
    finished itself (reused, skipped)."""
    todo = list(names)
    running: dict[Future, str] = {}
    while todo or running:
        for name in list(todo):
            if not executor.free_slots():
                break
            if any(d in todo or d in running.values() for d in depends_on.get(name, [])):
                continue
            todo.remove(name)
            task = start(name)
            if task is not None:
                running[executor.submit(task)] = name
        if running:  # else all of todo were reused or skipped: the next pass starts more
            for future in executor.wait(list(running)):
                finish(running.pop(future), executor.outcome(future))


# ------------------------------------------------------------------ the executor
class NotebookExecutor:
    """A run's notebooks on a ``concurrent.futures.Executor`` (a one-thread pool, or a Dask
    client's) with free slots, preflight and a stop that reaches the kernels. Not the main
    thread: SIGINT/SIGTERM must reach the runner waiting in :meth:`wait`."""

    def __init__(self, pool: Executor, description: dict[str, Any], client: Any = None,
                 cluster: Any = None) -> None:
        self.pool, self.description = pool, description
        self.client, self.cluster = client, cluster
        self.stop_event = f"saf-run-stop-{uuid.uuid4().hex[:12]}"  # a distributed Event
        self.stopped: str | None = None
        self._inflight: set[Future] = set()
        self._checked: set[Path] = set()

    def _lost(self, exc: BaseException) -> ClusterLost:
        return ClusterLost(f"lost the Dask scheduler {self.description.get('scheduler')}: "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")

    def free_slots(self) -> int:
        """One in this process; one per worker thread on Dask (shared by a sweep's runs)."""
        try:
            slots = 1 if self.client is None else max(1, sum(self.client.nthreads().values()))
        except Exception as exc:  # noqa: BLE001 - the connection to the cluster is gone
            raise self._lost(exc) from None
        return max(0, slots - len(self._inflight))

    def submit(self, task: NotebookTask) -> Future:
        if self.stopped:  # a run set this task up while the signal arrived
            raise Interrupted(self.stopped)
        try:
            future = (self.pool.submit(run_notebook, task, lambda: self.stopped and STOP_REASON)
                      if self.client is None else
                      self.pool.submit(run_on_worker, task, self.stop_event))
        except Exception as exc:  # noqa: BLE001 - the connection to the cluster is gone
            raise self._lost(exc) from None
        self._inflight.add(future)
        return future

    def wait(self, futures: list[Future]) -> set[Future]:
        """The done ones of ``futures`` (half-second waits: a signal reaches the main thread),
        once one is; :class:`Interrupted` once :meth:`request_stop` was called."""
        while not self.stopped:
            if done := wait(futures, timeout=0.5, return_when=FIRST_COMPLETED).done:
                return done
        raise Interrupted(self.stopped)

    def outcome(self, future: Future) -> dict[str, Any]:
        """What a finished task returned (:func:`run_notebook`'s fields and ``restarts``); a
        task cancelled without a stop lost its scheduler (the client cancels every task)."""
        self._inflight.discard(future)
        if future.cancelled():
            if not self.stopped:
                raise self._lost(CancelledError("scheduler-connection-lost"))
            return {"error": "the task was cancelled"}
        if (exc := future.exception()) is not None:
            return {"error": f"the task failed: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:400]}"}
        out = future.result()
        if self.client is not None:  # the workers it started on before its last start (each
            try:                     # lost mid-task), from the events run_on_worker logs
                events = self.client.get_events(self.stop_event)
            except Exception:  # noqa: BLE001 - no events, no restarts to tell
                events = ()
            out["restarts"] = [str(e.get("worker")) for _, e in events if isinstance(e, dict)
                               and e.get("task") == out["out_nb"]][:-1]
        return out

    def request_stop(self, sig: str) -> None:
        """Ask every task to stop its kernel (on Dask: a distributed Event the tasks poll)."""
        self.stopped = sig
        if self.client is not None:
            from distributed import Event

            with suppress(Exception):  # a gone scheduler: the tasks are gone with it
                Event(self.stop_event, client=self.client).set()

    def stop(self, sig: str) -> list[dict[str, Any]]:
        """Stop the running tasks, wait for them to save their partial notebooks (at most
        :data:`STOP_GRACE_S`), cancel what is left; returns the outcomes that came back."""
        self.request_stop(sig)
        pending = set(self._inflight)
        done = wait(pending, timeout=STOP_GRACE_S).done if pending else set()
        for f in pending - done:
            f.cancel()
        self._inflight.clear()
        return [self.outcome(f) for f in done]

    def preflight(self, folder: Path, plans: Sequence[Any], data: Sequence[dict]) -> None:
        """On Dask, once per folder: :func:`cluster_options.check_workers`."""
        folder = Path(folder).resolve()
        if self.client is not None and folder not in self._checked:
            options.check_workers(self.client, folder, plans, data)
            self._checked.add(folder)

    def close(self) -> None:
        """Shut pool, client and cluster down; after a lost scheduler that fails, one line
        (the run already says ``cluster_lost``)."""
        for step in (lambda: self.pool.shutdown(wait=False),
                     self.client and self.client.close, self.cluster and self.cluster.close):
            if step:
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - ClosedClientError, a gone scheduler
                    print(f"saf-run: closing the executor: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]}", file=sys.stderr)


@contextmanager
def open_executor(workers: int = 1, address: str | None = None) -> Iterator[Any]:
    """The executor for ``--workers`` / ``--scheduler`` (checked by
    :func:`cluster_options.resolve_workers`), closed on exit."""
    executor = (NotebookExecutor(ThreadPoolExecutor(1, thread_name_prefix="notebook"),
                                 {"kind": "in-process", "workers": 1})
                if address is None and workers == 1 else _dask_executor(workers, address))
    try:
        yield executor
    finally:
        executor.close()


def _dask_executor(workers: int, address: str | None) -> NotebookExecutor:
    import logging

    try:
        import distributed
    except ImportError:
        raise RunnerError("--workers N (N > 1) and --scheduler run notebooks on Dask, which is "
                          "not installed: pip install 'saf_utils[dask]' (or dask[distributed])"
                          ) from None
    cluster = None
    if address is None:
        # One thread per worker (a notebook's kernel uses the cores); no memory limit (the
        # kernel, not the worker process, holds the memory); the scheduler's HTTP server on a
        # free port of 127.0.0.1 (it would take :8787, and warn when another run has it).
        saved = dict(os.environ)
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", memory_limit=0, silence_logs=logging.ERROR)
        # The nanny, in this process, wrote its worker settings into os.environ
        # (PYTHONHASHSEED=6640, *_NUM_THREADS=1): the runner and its kernels keep their own.
        os.environ.clear()
        os.environ.update(saved)
        client = distributed.Client(cluster)
        description = {"kind": "dask-local", "workers": workers,
                       "scheduler": cluster.scheduler_address}
    else:
        options.probe_scheduler(address)
        client = None
        try:
            client = distributed.Client(address, timeout=f"{options.HANDSHAKE_TIMEOUT_S}s")
            client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
        except Exception as exc:  # noqa: BLE001 - one line, exit 2, nothing written
            why = (f"no worker connected within {WAIT_FOR_WORKERS_S} s (start one: dask worker "
                   f"{address})" if client else
                   f"cannot connect ({' '.join(str(exc).split())[:200]})")
            if client is not None:
                client.close()
            raise RunnerError(f"--scheduler {address}: {why}") from None
        description = {"kind": "dask", "scheduler": address,
                       "workers": len(client.scheduler_info().get("workers", {}))}
    return NotebookExecutor(client.get_executor(pure=False, retries=0), description, client,
                            cluster)


# ------------------------------------------------------------------ on a worker
def run_notebook(task: NotebookTask, stop: Callable[[], str | None],
                 emit: Callable[..., None] = print) -> dict[str, Any]:
    """A task: execute one notebook, printing a line per section (``[2/5]   1:03  § Title``);
    a reason ``stop()`` returns stops its kernel; returns its error (None: ok) and notebook."""
    from notebook_reports.pages import duration_text

    t0 = time.perf_counter()

    def section(title: str) -> None:
        emit(f"{task.tag}   {duration_text(time.perf_counter() - t0):>7}  § {title}", flush=True)

    try:
        error = execute_one(Path(task.nb_path), Path(task.out_nb), task.params, task.timeout,
                            section, stop=stop)
    except Interrupted as why:
        error = f"interrupted ({why})"
    return {"error": error, "out_nb": task.out_nb}


def run_on_worker(task: NotebookTask, stop_event: str) -> dict[str, Any]:
    """A Dask task: :func:`run_notebook` with the runner's environment, printing on the
    client's console, polling the runner's stop event once a second."""
    from distributed import Event, get_worker
    from distributed import print as client_print

    for key, value in task.env.items():  # the kernel inherits the worker's environment
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    worker = get_worker()
    event = Event(stop_event)
    where = f"{worker.address} ({socket.gethostname()}, pid {os.getpid()})"
    worker.log_event(stop_event, {"task": task.out_nb, "worker": where})
    last = [time.monotonic()]

    def stop() -> str | None:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return None
        last[0] = now
        return STOP_REASON if event.is_set() else None

    return {**run_notebook(task, stop, client_print), "worker": where}
