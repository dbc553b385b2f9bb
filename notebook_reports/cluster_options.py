"""``--workers N`` and ``--scheduler ADDRESS`` of ``saf-run`` and ``saf-run sweep``, checked
before anything is written: the address, a handshake with the scheduler, and its workers
(:func:`check_workers`). The executors they choose are in :mod:`.executors`.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from notebook_reports.profiles import RunnerError, short

#: The schemes a ``--scheduler`` address may have: Dask's TCP, and TLS where Dask's
#: ``distributed.comm.tls`` settings give the certificates.
SCHEMES = ("tcp", "tls")
#: Seconds for the whole handshake with a scheduler (connect, identify, client start): a port
#: that accepts and never answers, or answers something else, fails within this time.
HANDSHAKE_TIMEOUT_S = 20


def resolve_workers(workers: Any, address: str | None, profile_workers: Any = None) -> int:
    """Notebooks at once: ``--workers``, else the profile's ``workers`` (for a local run: with
    ``--scheduler`` the cluster's own workers run them), else one in the runner's process;
    a whole number >= 1, and with ``--scheduler`` (``scheme://host:port``) exactly 1."""
    from urllib.parse import urlsplit

    if workers is None:
        workers = profile_workers if address is None and profile_workers is not None else 1
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise RunnerError(f"--workers {workers!r}: a whole number of local Dask workers, >= 1")
    if address is None:
        return workers
    if workers != 1:
        raise RunnerError("--workers sizes a local cluster; with --scheduler the cluster's own "
                          "workers run the notebooks (omit --workers)")
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
    return workers


def probe_scheduler(address: str) -> None:
    """Connect to ``address`` and ask who it is within :data:`HANDSHAKE_TIMEOUT_S`: one
    :class:`RunnerError` unless a Dask scheduler answers (not a silent port, an HTTP server).
    Why not ``distributed.Client(address, timeout=...)`` alone: on a port that accepts and
    never answers it waited for minutes, whatever its timeout."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    timeout = HANDSHAKE_TIMEOUT_S

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
    """The dry run's line on where the notebooks will execute (:func:`resolve_workers`)."""
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


# ------------------------------------------------------------------ the workers
def check_workers(client: Any, folder: Path, plans: Sequence[Any], data: Sequence[dict]
                  ) -> None:
    """Every worker sees ``folder`` (a probe file written here is read there), the local data,
    the same notebooks and package sources and a python3 kernel; else one
    :class:`RunnerError` naming each worker and what it lacks."""
    from notebook_reports.reuse import package_digest
    from saf_utils.data.provenance import sha256_file

    token = uuid.uuid4().hex
    probe = folder / f".saf-run-probe-{token[:8]}"
    expected = {
        "probe": [str(probe), token],
        "data": sorted({d["source"] for d in data if d.get("kind") == "local"}),
        "notebooks": {str(Path(p.path).resolve()): sha256_file(p.path) for p in plans},
        "package": package_digest(),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_text(token)
    except OSError as exc:
        raise RunnerError(f"cannot write a probe file into {folder}: "
                          f"{exc.strerror or exc}") from None
    try:
        answers = client.run(check_worker, expected, on_error="return")
    finally:
        probe.unlink(missing_ok=True)
    problems = [f"{worker} cannot run the runner's check ({type(answer).__name__}: {answer}); "
                "start workers with this project importable (PYTHONPATH or pip install)"
                if isinstance(answer, BaseException) else
                f"{worker} ({answer['host']}): {'; '.join(answer['problems'])}"
                for worker, answer in sorted(answers.items()) if answer is not None]
    if problems:
        raise RunnerError(
            "Dask worker(s) cannot run this run: " + " | ".join(problems) + ". Workers "
            "need the run folder, the data and the project at the same paths (a shared "
            "file system; see docs/cluster.md)")


def check_worker(expected: dict[str, Any]) -> dict[str, Any] | None:
    """Run on each worker by :func:`check_workers`: None, or what it lacks."""
    from notebook_reports.reuse import package_digest
    from saf_utils.data.provenance import sha256_file

    problems = []
    probe, token = expected["probe"]
    if not Path(probe).is_file() or Path(probe).read_text() != token:
        problems.append(f"cannot see the run folder {Path(probe).parent}")
    if missing := [d for d in expected["data"] if not Path(d).exists()]:
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
