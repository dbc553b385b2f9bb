"""Executing one notebook: papermill with an engine that logs each section, the kernel killed
(not orphaned) on an interrupt, SIGINT/SIGTERM/SIGHUP as :class:`Interrupted`."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from notebook_reports.manifest import write_text


class Interrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt, not an error
    """SIGINT/SIGTERM/SIGHUP arrived; carries the signal name."""


#: The signals that stop a run, recorded alike (SIGHUP: the terminal was closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _signals(raise_on_signal: bool):
    """Turn :data:`STOP_SIGNALS` into :class:`Interrupted` (or ignore them while saving)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise Interrupted(signal.Signals(signum).name)

    new = handler if raise_on_signal else signal.SIG_IGN
    old = {s: signal.signal(s, new) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _kill_kernel(km: Any) -> None:
    """Kill a kernel that no client will shut down, with its process group (it runs in a
    session of its own, which its child processes share)."""
    proc = getattr(getattr(km, "provisioner", None), "process", None)
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # no group of its own after all
        with suppress(OSError):
            proc.kill()
    with suppress(Exception):  # best effort
        proc.wait(timeout=5)
        km.cleanup_connection_file()


def execute_one(nb_path: Path, out_path: Path, params: dict, timeout: int | None,
                on_section: Callable[[str], None], stop: Callable[[], str | None]) -> str | None:
    """Run one notebook: None, or the error text. ``on_section(title)`` as a section starts.
    papermill runs in a thread while this one polls ``stop()``; a reason it returns acts as a
    signal: the kernel is killed, papermill saves the partial notebook, :class:`Interrupted`."""
    import papermill as pm
    import zmq
    from jupyter_client.manager import AsyncKernelManager

    box: dict[str, Any] = {}  # "km": the kernel manager, "error": the outcome once done

    class TrackedKernelManager(AsyncKernelManager):
        """nbclient's own kernel manager (it shuts the kernel down), remembered here; CurveZMQ
        keys where pyzmq has them (no "running over TCP without encryption" warning)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if zmq.has("curve"):
                self.transport_encryption = "auto"
            box["km"] = self

    def work() -> None:
        try:
            pm.execute_notebook(
                str(nb_path), str(out_path), parameters=params, kernel_name="python3",
                cwd=str(nb_path.parent), progress_bar=False, execution_timeout=timeout,
                on_cell_start=_section_hook(lambda _, title: on_section(title)),
                kernel_manager_class=TrackedKernelManager,
            )
            box["error"] = None
        except pm.PapermillExecutionError as exc:
            box["error"] = f"{exc.ename}: {exc.evalue}"
        except BaseException as exc:  # noqa: BLE001 - kernel death, timeout, bad notebook
            box["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"

    threading.Thread(target=work, name=f"papermill-{nb_path.stem}", daemon=True).start()
    try:
        # A flag, not Thread.join: a signal handler raising inside join() makes Python 3.11
        # mark a live thread as stopped (a CPython bug), and a later join() returns at once.
        while "error" not in box:
            time.sleep(0.1)
            if why := stop():
                raise Interrupted(why)
    except Interrupted:
        _kill_kernel(box.get("km"))
        deadline = time.monotonic() + 60  # papermill saves the partial notebook when the
        while "error" not in box and time.monotonic() < deadline:  # kernel is gone
            time.sleep(0.1)
        raise
    finally:
        _kill_kernel(box.get("km"))
    return box.get("error", "the execution thread ended without a result")


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _section_hook(report: Callable[[int, str], None]) -> Callable[..., None]:
    """An nbclient ``on_cell_start`` hook: ``report(cell index, heading)`` as the first code
    cell under a Markdown heading starts (the last heading of a Markdown cell counts)."""
    pending: list[str] = []

    def hook(cell: Any, cell_index: int, **_: Any) -> None:
        heads = _HEADING.findall(cell.source) if cell.cell_type == "markdown" else []
        if heads:
            pending[:] = [" ".join(re.sub(r"[*_`$]", "", heads[-1]).split())[:90]]
        elif cell.cell_type == "code" and pending:
            report(cell_index, pending.pop())

    return hook


def section_starts(nb: Any) -> dict[int, str]:
    """``{cell index: heading}``: the first code cell under each Markdown heading."""
    out: dict[int, str] = {}
    hook = _section_hook(out.__setitem__)
    for i, cell in enumerate(nb.cells):
        hook(cell, i)
    return out


def mark_interrupted(ipynb: Path, why: str) -> None:
    """Say so at the top of a partially executed notebook; cells that never ran stay pending
    (papermill marks every cell "completed" when it is interrupted)."""
    import nbformat

    try:
        nb = nbformat.read(ipynb, as_version=4)
        for cell in nb.cells:
            pm_meta = cell.get("metadata", {}).get("papermill")
            if pm_meta is not None and not pm_meta.get("start_time"):
                pm_meta["status"] = "pending"
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(
            f"**Interrupted ({why}).** This notebook did not finish: the last cell with output "
            "is where it stopped, and no cell after it ran."))
        nb.metadata.setdefault("papermill", {})["status"] = "interrupted"
        write_text(ipynb, nbformat.writes(nb))
    except Exception as exc:  # noqa: BLE001 - nothing readable to mark, or a write error
        print(f"saf-run: could not mark {ipynb} interrupted: {exc}", file=sys.stderr)
