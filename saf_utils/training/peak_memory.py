"""Peak memory of one step of a run (Linux), beside its wall time: :func:`measure` resets the
peak resident set (``5`` to ``/proc/self/clear_refs``) and reads ``VmHWM`` back, as
``resource.getrusage`` gives the lifetime peak only; elsewhere None, not a misleading number."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

_CLEAR = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def peak_rss_mb() -> float | None:
    """The process's peak resident memory since the last reset, MiB (None off Linux)."""
    try:
        for line in _STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def reset_peak() -> bool:
    """Reset the peak to the current resident memory; False where the system refuses."""
    try:
        _CLEAR.write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


@contextlib.contextmanager
def measure(into: dict[str, float | None], key: str) -> Iterator[None]:
    """``into[key]``: the peak resident memory (MiB) of the process during the block (the
    memory held before it included); None where the peak cannot be reset."""
    ok = reset_peak()
    try:
        yield
    finally:
        into[key] = peak_rss_mb() if ok else None
