"""Where a run's notebooks execute: in this process, one after another (``--workers 1``, the
default), or as Dask tasks on a ``distributed.LocalCluster`` (``--workers N``) or on any
running Dask scheduler (``--scheduler tcp://host:port``, e.g. Slurm through dask-jobqueue).

:func:`run_graph` walks a run's notebooks in profile order and starts each one whose
``depends_on`` have finished as soon as the executor has a free slot (one per worker
thread), so independent notebooks run side by side. Starting, reusing, skipping and
finishing a notebook (the manifest, the pages, reuse) stay in the runner's process; only
papermill runs on a worker (:func:`run_notebook`), writing into the run folder, which
therefore has to be on storage that every worker sees at the same path (checked by
:meth:`DaskExecutor.preflight` before anything runs, with the data and the notebooks).

Why Dask, not a scheduler of our own: users who outgrow one machine already run Dask
clusters or Slurm (dask-jobqueue); a run then needs only their scheduler's address.
Dask is an optional extra (``pip install 'saf_utils[dask]'``) imported only here.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saf_utils import numerics
from saf_utils.reporting.data_check import data_env_vars
from saf_utils.reporting.execute import Interrupted, execute_one
from saf_utils.reporting.profiles import RunnerError

#: Environment variables a notebook's kernel reads (besides :func:`data_env_vars`); a Dask
#: worker gets the runner's values, so that a worker started elsewhere computes the same.
RUNNER_ENV = ("PYTHONHASHSEED", "TOKENIZERS_PARALLELISM", "TQDM_DISABLE",
              "HF_HUB_DISABLE_PROGRESS_BARS", *numerics.KERNEL_ENV, *numerics.OPENBLAS_ENV)
#: ``SAF_``: the data folders, SAF_NUM_THREADS / SAF_NUMERICS (:mod:`saf_utils.numerics`), caches.
RUNNER_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "SAF_")
#: What a Dask nanny sets in its worker processes (``distributed.nanny.pre-spawn-environ``);
#: the kernel gets the runner's values instead (unset where it has none). Thread limits of 1
#: would make a kernel single-threaded and change the last digits of float32 sums against a
#: serial run; ``MALLOC_TRIM_THRESHOLD_=65536`` made glibc hand freed memory back to the
#: system at once, so every large tensor was page-faulted in again (cpu profile, 2 workers:
#: 221 million minor page faults and 367 s of system time, against 47 s serially).
NANNY_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "MALLOC_TRIM_THRESHOLD_")


def nanny_env() -> tuple[str, ...]:
    """:data:`NANNY_ENV` and whatever else this Dask version's nanny sets."""
    try:
        import dask

        extra = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    except ImportError:
        extra = {}
    return tuple(dict.fromkeys([*NANNY_ENV, *map(str, extra)]))


#: How long an interrupted Dask task may take to stop its kernel and save the partial notebook.
STOP_GRACE_S = 90


def forwarded_env() -> dict[str, str | None]:
    """The variables of :data:`RUNNER_ENV`, its prefixes and the data folders, as set here;
    :func:`nanny_env` as here, None for unset."""
    names = set(RUNNER_ENV) | set(data_env_vars())
    return {**{k: os.environ.get(k) for k in nanny_env()},
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


@dataclass
class Outcome:
    """What came back: the error text (None: ok), whether it was stopped, and where it ran."""
    error: str | None
    interrupted: bool = False
    worker: str | None = None
    out_nb: str | None = None  # the task's output notebook (which task this was)
    restarts: list[str] = field(default_factory=list)  # workers lost while it ran there


class ClusterLost(Exception):
    """The connection to the Dask scheduler is gone mid-run (the runner records the run as
    ``cluster_lost`` and its running notebooks as interrupted)."""


def section_printer(tag: str, t0: float, emit: Callable[..., None] = print
                    ) -> Callable[[str], None]:
    """The runner's line per notebook section: ``[2/5]     1:03  § Title``."""
    from saf_utils.reporting.pages import duration_text

    def section(title: str) -> None:
        emit(f"{tag}   {duration_text(time.perf_counter() - t0):>7}  § {title}", flush=True)

    return section


# ------------------------------------------------------------------ the graph
def run_graph(names: Sequence[str], depends_on: dict[str, list[str]],
              start: Callable[[str], NotebookTask | None],
              finish: Callable[[str, Outcome], None], executor: Any) -> None:
    """Start every notebook of ``names`` once its dependencies in ``names`` have finished
    (ok or not: ``start`` decides to skip), in list order, while the executor has a free
    slot; ``start`` returns None for a notebook it finished itself (reused, skipped).

    With one slot this is the order of the profile, one notebook after another.
    :class:`Interrupted` propagates (the caller stops the executor's tasks).
    """
    todo = list(names)
    running: dict[Any, str] = {}
    while todo or running:
        for name in list(todo):
            if not executor.free_slots():
                break
            waiting = {d for d in depends_on.get(name, []) if d in todo or d in running.values()}
            if waiting:
                continue
            todo.remove(name)
            task = start(name)
            if task is not None:
                running[executor.submit(task)] = name
        if not running:  # all of todo were reused or skipped; a dependency comes first
            continue        # in ``names``, so the next pass starts something
        for handle, outcome in executor.wait(list(running)):
            finish(running.pop(handle), outcome)


# ------------------------------------------------------------------ executors
class InProcessExecutor:
    """Today's runner: each notebook in this process, one at a time (one slot); ``wait``
    executes it (papermill in a thread, SIGINT/SIGTERM as :class:`Interrupted`)."""

    description = {"kind": "in-process", "workers": 1}

    def __init__(self) -> None:
        self._queued: dict[int, NotebookTask] = {}
        self._next = 0

    def free_slots(self) -> int:
        return 0 if self._queued else 1

    def preflight(self, folder: Path, plans: Sequence[Any], data: Sequence[dict]) -> None:
        """Nothing to check: the runner's process sees what it planned with."""

    def submit(self, task: NotebookTask) -> int:
        self._next += 1
        self._queued[self._next] = task
        return self._next

    def wait(self, handles: list[int]) -> list[tuple[int, Outcome]]:
        handle = handles[0]
        task = self._queued[handle]
        try:
            error = execute_one(Path(task.nb_path), Path(task.out_nb), task.params,
                                task.timeout, section_printer(task.tag, time.perf_counter()))
        finally:
            del self._queued[handle]
        return [(handle, Outcome(error, out_nb=task.out_nb))]

    def request_stop(self, sig: str) -> None:
        """Nothing queued outlives the signal (``execute_one`` stopped the kernel)."""

    def stop(self, sig: str) -> dict[int, Outcome]:
        return {}

    def close(self) -> None:
        pass


class DaskExecutor:
    """Notebooks as tasks of a ``distributed.Client``: one slot per worker thread."""

    def __init__(self, client: Any, description: dict[str, Any]) -> None:
        self.client = client
        self.description = description
        self.stop_event = f"saf-run-stop-{uuid.uuid4().hex[:12]}"
        self.stopped: str | None = None
        self._inflight: set[Any] = set()
        self._checked: set[str] = set()

    def slots(self) -> int:
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception as exc:  # noqa: BLE001 - the connection to the cluster is gone
            raise self._lost(exc) from None

    def _lost(self, exc: BaseException) -> ClusterLost:
        return ClusterLost(f"lost the Dask scheduler {self.description.get('scheduler')}: "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")

    def free_slots(self) -> int:
        return max(0, self.slots() - len(self._inflight))

    def preflight(self, folder: Path, plans: Sequence[Any], data: Sequence[dict]) -> None:
        """Every worker sees ``folder`` (a probe file written here is read there), the local
        data sources, the same notebooks (SHA-256), the same package sources and a python3
        kernel; else one :class:`RunnerError` naming each worker and what it lacks."""
        from saf_utils.provenance import sha256_file
        from saf_utils.reporting.reuse import package_digest

        folder = Path(folder).resolve()
        if str(folder) in self._checked:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunnerError(f"cannot create {folder}: {exc.strerror or exc}") from None
        token = uuid.uuid4().hex
        probe = folder / f".saf-run-probe-{token[:8]}"
        expected = {
            "probe": [str(probe), token],
            "data": sorted({d["source"] for d in data if d.get("kind") == "local"}),
            "notebooks": {str(Path(p.path).resolve()): sha256_file(p.path) for p in plans},
            "package": package_digest(),
        }
        try:
            probe.write_text(token)
        except OSError as exc:
            raise RunnerError(f"cannot write a probe file into {folder}: "
                              f"{exc.strerror or exc}") from None
        try:
            answers = self.client.run(check_worker, expected, on_error="return")
        finally:
            probe.unlink(missing_ok=True)
        problems = []
        for worker, answer in sorted(answers.items()):
            if isinstance(answer, BaseException):
                problems.append(f"{worker} cannot run the runner's check "
                                f"({type(answer).__name__}: {answer}); start workers with "
                                "this project importable (PYTHONPATH or pip install)")
            elif answer:
                problems.append(f"{worker} ({answer['host']}): {'; '.join(answer['problems'])}")
        if problems:
            raise RunnerError(
                "Dask worker(s) cannot run this run: " + " | ".join(problems) + ". Workers "
                "need the run folder, the data and the project at the same paths (a shared "
                "file system; see docs/cluster.md)")
        self._checked.add(str(folder))

    def submit(self, task: NotebookTask) -> Any:
        if self.stopped:  # a run set this task up while the signal arrived
            raise Interrupted(self.stopped)
        try:
            future = self.client.submit(run_notebook, task, self.stop_event, pure=False,
                                        key=f"{task.name}-{uuid.uuid4().hex[:8]}", retries=0)
        except Exception as exc:  # noqa: BLE001 - the connection to the cluster is gone
            raise self._lost(exc) from None
        self._inflight.add(future)
        return future

    def wait(self, handles: list[Any]) -> list[tuple[Any, Outcome]]:
        """Poll (half-second steps, so that a signal reaches the main thread) until one of
        ``handles`` is done; :class:`Interrupted` once :meth:`request_stop` was called."""
        from distributed import wait

        while True:
            if self.stopped:
                raise Interrupted(self.stopped)
            try:
                done = wait(handles, timeout=0.5, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                continue
            except Exception as exc:  # noqa: BLE001 - the connection to the cluster is gone
                raise self._lost(exc) from None
            if done:
                return [(f, self._outcome(f)) for f in handles if f in done]

    def _outcome(self, future: Any) -> Outcome:
        self._inflight.discard(future)
        if future.status == "finished":
            out = Outcome(**future.result())
        elif future.status == "cancelled":
            return Outcome("the Dask task was cancelled")
        else:
            exc = future.exception()
            out = Outcome(f"the Dask task failed: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:400]}")
        out.restarts = self._restarts(future.key)
        return out

    def _restarts(self, key: Any) -> list[str]:
        """The workers a task started on before its last start (each lost mid-task: Dask
        started the notebook again elsewhere), from the events :func:`run_notebook` logs."""
        try:
            events = self.client.get_events(self.stop_event)
        except Exception:  # noqa: BLE001 - no events, no restarts to tell
            return []
        starts = [e.get("worker") for _, e in events if isinstance(e, dict)
                  and e.get("key") == str(key)]
        return [str(w) for w in starts[:-1]]

    def request_stop(self, sig: str) -> None:
        """Ask every running task to stop its kernel (a distributed Event the tasks poll);
        :meth:`wait` raises :class:`Interrupted` in each run's loop from then on."""
        from distributed import Event

        self.stopped = sig
        try:
            Event(self.stop_event, client=self.client).set()
        except Exception:  # noqa: BLE001 - a gone scheduler: the tasks are gone with it
            pass

    def stop(self, sig: str) -> dict[Any, Outcome]:
        """Stop the running tasks, wait for them to save their partial notebooks (at most
        :data:`STOP_GRACE_S`), cancel what is left; returns the outcomes that came back."""
        from distributed import wait

        self.request_stop(sig)
        pending = list(self._inflight)
        if pending:
            try:
                wait(pending, timeout=STOP_GRACE_S)
            except Exception:  # noqa: BLE001 - a timeout, or a scheduler that is gone
                pass
        out = {f: self._outcome(f) for f in pending if f.done()}
        left = [f for f in pending if not f.done()]
        if left:
            try:
                self.client.cancel(left, force=True)
            except Exception:  # noqa: BLE001 - a gone scheduler: the tasks are gone with it
                pass
            self._inflight.difference_update(left)
        return out

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            cluster = getattr(self, "cluster", None)
            if cluster is not None:
                cluster.close()


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise RunnerError("--workers N (N > 1) and --scheduler run notebooks on Dask, which is "
                          "not installed: pip install 'saf_utils[dask]' (or dask[distributed])"
                          ) from None
    return distributed


#: Notebooks at once where neither ``--workers`` nor the profile's ``workers`` says: one,
#: in the runner's process.
DEFAULT_WORKERS = 1


def resolve_workers(workers: int | None, address: str | None,
                    profile_workers: int | None = None) -> int:
    """Notebooks at once: ``--workers`` if given, else the profile's ``workers`` (for a
    local run: with ``--scheduler`` the cluster's own workers run them), else
    :data:`DEFAULT_WORKERS`."""
    if workers is not None:
        return workers
    if address is None and profile_workers is not None:
        return profile_workers
    return DEFAULT_WORKERS


def check_scheduler_options(workers: Any, address: str | None) -> None:
    """``--workers`` is a whole number >= 1; ``--scheduler`` excludes ``--workers N > 1``."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise RunnerError(f"--workers {workers!r}: a whole number of local Dask workers, >= 1")
    if address is not None and workers != 1:
        raise RunnerError("--workers sizes a local cluster; with --scheduler the cluster's own "
                          "workers run the notebooks (omit --workers)")
    if address is not None:
        check_address(address)


#: The schemes a ``--scheduler`` address may have: Dask's TCP, and TLS where Dask's
#: ``distributed.comm.tls`` settings give the certificates.
SCHEMES = ("tcp", "tls")
#: Seconds for the whole handshake with a scheduler (connect, identify, client start): a port
#: that accepts and never answers, or answers something else, fails within this time.
HANDSHAKE_TIMEOUT_S = 20


def check_address(address: str) -> tuple[str, str, int]:
    """``--scheduler``'s scheme, host and port, checked before anything connects."""
    from urllib.parse import urlsplit

    from saf_utils.reporting.profiles import short

    scheme, sep, rest = address.partition("://")
    try:
        parts = urlsplit(f"//{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not sep or scheme not in SCHEMES or not host or not port or rest != parts.netloc:
        raise RunnerError(f"--scheduler {short(address)}: a Dask scheduler address "
                          f"{' or '.join(s + '://host:port' for s in SCHEMES)}, such as "
                          "tcp://host:8786")
    return scheme, host, port


def probe_scheduler(address: str, timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Connect to ``address`` and ask who it is, all within ``timeout`` seconds; one
    :class:`RunnerError` unless a Dask scheduler answers (a silent port, an HTTP server, a
    TLS address without TLS settings)."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    from saf_utils.reporting.profiles import short

    async def identity() -> Any:
        comm = await connect(address, timeout=timeout,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(identity(), timeout))
    except TimeoutError:
        why = f"no Dask answer within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - every failure is one line (ArrayMemoryError too)
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    else:
        if isinstance(reply, dict) and reply.get("type") == "Scheduler":
            return
        why = "the peer is no Dask scheduler"
    raise RunnerError(f"--scheduler {short(address)}: cannot connect ({short(why, 200)})")


def where_text(workers: int, address: str | None) -> str:
    """The dry run's line on where the notebooks will execute (options checked)."""
    check_scheduler_options(workers, address)
    if address:
        return f"Notebooks run as Dask tasks on the workers of {address}"
    if workers > 1:
        return (f"Notebooks run as Dask tasks on a local cluster of {workers} workers, "
                "independent ones at once")
    return "Notebooks run in this process, one after another"


def add_cluster_arguments(ap: Any) -> None:
    """``--workers`` and ``--scheduler`` of ``saf-run`` and ``saf-run sweep``."""
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="notebooks at once: 1 runs them in this process, one after another; "
                         "N > 1 on a local Dask cluster of N workers (default: the profile's "
                         "'workers', else 1)")
    ap.add_argument("--scheduler", metavar="ADDRESS",
                    help="run the notebooks on this Dask scheduler's workers (tcp://host:8786;"
                         " they need the run folder and the data at the same paths)")


@contextmanager
def open_executor(workers: int = 1, address: str | None = None,
                  wait_for_workers_s: float = 60) -> Iterator[Any]:
    """The executor for ``--workers`` / ``--scheduler`` (closed on exit)."""
    check_scheduler_options(workers, address)
    if address is None and workers == 1:
        yield InProcessExecutor()
        return
    distributed = _import_distributed()
    import logging

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
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        os.environ.update(saved)
        client = distributed.Client(cluster)
        description = {"kind": "dask-local", "workers": workers,
                       "scheduler": cluster.scheduler_address}
    else:
        probe_scheduler(address, HANDSHAKE_TIMEOUT_S)
        try:
            client = distributed.Client(address, timeout=f"{HANDSHAKE_TIMEOUT_S}s")
        except Exception as exc:  # noqa: BLE001 - one line, exit 2, nothing written
            raise RunnerError(f"--scheduler {address}: cannot connect "
                              f"({' '.join(str(exc).split())[:200]})") from None
        try:
            client.wait_for_workers(1, timeout=wait_for_workers_s)
        except Exception:  # noqa: BLE001 - a timeout, or the scheduler went away
            client.close()
            raise RunnerError(f"--scheduler {address}: no worker connected within "
                              f"{wait_for_workers_s:.0f} s (start one: dask worker {address})"
                              ) from None
        description = {"kind": "dask", "scheduler": address,
                       "workers": len(client.scheduler_info().get("workers", {}))}
    executor = DaskExecutor(client, description)
    executor.cluster = cluster
    try:
        yield executor
    finally:
        executor.close()


# ------------------------------------------------------------------ on a worker
def check_worker(expected: dict[str, Any]) -> dict[str, Any] | None:
    """Run on each worker by :meth:`DaskExecutor.preflight`: None, or what it lacks."""
    from saf_utils.provenance import sha256_file
    from saf_utils.reporting.reuse import package_digest

    problems = []
    probe, token = expected["probe"]
    try:
        seen = Path(probe).read_text()
    except OSError:
        seen = None
    if seen != token:
        problems.append(f"cannot see the run folder {Path(probe).parent}")
    missing = [d for d in expected["data"] if not Path(d).exists()]
    if missing:
        problems.append(f"cannot see the data {', '.join(missing)}")
    for path, sha in expected["notebooks"].items():
        if not Path(path).is_file():
            problems.append(f"cannot see the notebook {path}")
        elif sha256_file(path) != sha:
            problems.append(f"has another version of the notebook {path}")
    if package_digest() != expected["package"]:
        import saf_utils

        problems.append(f"imports other saf_utils sources ({Path(saf_utils.__file__).parent})")
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        KernelSpecManager().get_kernel_spec("python3")
    except Exception as exc:  # noqa: BLE001 - no kernel: say so
        problems.append(f"has no python3 Jupyter kernel ({type(exc).__name__})")
    return {"host": socket.gethostname(), "problems": problems} if problems else None


def run_notebook(task: NotebookTask, stop_event: str) -> dict[str, Any]:
    """A Dask task: execute one notebook with the runner's environment; section lines go
    to the client's console; the runner's stop event stops the kernel (partial notebook
    saved, ``interrupted`` returned)."""
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
    worker.log_event(stop_event, {"key": str(worker.get_current_task()), "worker": where})
    last = [time.monotonic()]

    def stop() -> str | None:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return None
        last[0] = now
        return "stop requested by the runner" if event.is_set() else None

    try:
        error = execute_one(Path(task.nb_path), Path(task.out_nb), task.params, task.timeout,
                            section_printer(task.tag, time.perf_counter(), client_print),
                            stop=stop)
    except Interrupted as why:
        return {"error": f"interrupted ({why})", "interrupted": True, "worker": where,
                "out_nb": task.out_nb}
    return {"error": error, "interrupted": False, "worker": where, "out_nb": task.out_nb}
