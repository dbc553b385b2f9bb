"""Same numbers on any machine (docs/reproducibility.md): kernels pinned to AVX2 before torch's
first operation, fixed thread counts, features rounded before a fit and scores before a
choice. ``SAF_NUMERICS=native`` switches pinning off."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np

#: Threads of every numeric pool (torch, OpenMP, BLAS); ``SAF_NUM_THREADS`` overrides it.
#: Fixed rather than "all cores": a reduction split over another number of threads sums in
#: another order.
THREADS = 2
#: Threads of every training job (:func:`training_threads`): one, so that a model trained on
#: a laptop, a 2-core runner or a 64-core server (any ``--workers``) is the same model.
TRAIN_THREADS = 1
#: Decimals kept of a feature before fitting (values are cosines, ratios and logs near 1;
#: float32 kernels differ by about 1e-7 there, float64 ones by about 1e-16).
DECIMALS = 5
#: Decimals of a validation score that a choice compares (macro-F1 and the like on a few
#: hundred answers move in steps of about 1e-3; below 1e-9 it is float noise).
SCORE_DECIMALS = 9
#: Decimals kept of a bootstrap resample's sums (sums of up to thousands of item scores:
#: float64 kernels differ there by about 1e-12).
SUM_DECIMALS = 9
#: The kernel level pinned (every x86-64 processor since Haswell, 2013, and AMD Zen has it).
KERNEL_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
              "DNNL_MAX_CPU_ISA": "AVX2"}
#: OpenBLAS's kernel of that level (read once, when numpy or scipy load OpenBLAS).
OPENBLAS_ENV = {"OPENBLAS_CORETYPE": "Haswell"}


_WARNED: list[bool] = []


def native() -> bool:
    """True when ``SAF_NUMERICS=native``: no pinning (results may differ across machines)."""
    return os.environ.get("SAF_NUMERICS", "pinned").strip().lower() == "native"


def _count(name: str, default: int) -> int:
    """The positive integer in environment variable ``name``, else ``default``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name}={raw!r}: give a positive integer")
    return int(raw)


def threads() -> int:
    """The pinned thread count: ``SAF_NUM_THREADS`` if set, else :data:`THREADS`."""
    return _count("SAF_NUM_THREADS", THREADS)


@lru_cache(maxsize=1)
def has_avx2() -> bool:
    """Whether this processor runs the pinned AVX2 kernels (x86-64 Linux: /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return False


def pinned_environment() -> dict[str, str]:
    """Environment variables that pin kernels and threads in a process started with them (a
    launcher's ranks, a kernel); empty with ``SAF_NUMERICS=native``, threads only without
    AVX2."""
    if native():
        return {}
    env = {k: str(threads()) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                       "OPENBLAS_NUM_THREADS")}
    if has_avx2():
        env.update(KERNEL_ENV)
        env.update(OPENBLAS_ENV)
    return env


def pin_kernels() -> dict[str, str]:
    """Fix torch's, MKL's and oneDNN's kernel level for this process (effective before torch's
    first operation); what was set."""
    if native() or not has_avx2():
        return {}
    os.environ.update(KERNEL_ENV)
    torch = sys.modules.get("torch")
    if torch is not None and torch.backends.cpu.get_cpu_capability() != "AVX2" \
            and not _WARNED:
        _WARNED.append(True)
        warnings.warn("saf_utils.determinism.pin_kernels came after torch's first operation: "
                      f"its kernels stay {torch.backends.cpu.get_cpu_capability()}, so "
                      "results may differ from other machines' (docs/reproducibility.md)",
                      stacklevel=2)
    return dict(KERNEL_ENV)


#: Thread counts of the :func:`training_threads` blocks being run (innermost last).
_TRAINING: list[int] = []


def pin_threads(n: int | None = None) -> int:
    """Limit torch's and every OpenMP/BLAS pool to ``n`` threads (default :func:`threads`;
    inside :func:`training_threads`, its count); the count (0: native mode)."""
    if native():
        return 0
    n = (_TRAINING[-1] if _TRAINING else threads()) if n is None else n
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)
    try:
        import torch
    except ImportError:
        return n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def train_threads() -> int:
    """Threads of a training job: ``SAF_TRAIN_THREADS`` if set, else :data:`TRAIN_THREADS`."""
    return _count("SAF_TRAIN_THREADS", TRAIN_THREADS)


@contextlib.contextmanager
def training_threads() -> Iterator[int]:
    """Run a training job (or an embedding metric) on :func:`train_threads` threads, then
    restore: gradient reductions split their sums by thread, and over hundreds of steps the
    last bits change the generated texts."""
    if native():
        yield 0
        return
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    n = train_threads()
    with threadpool_limits(limits=n):
        torch.set_num_threads(n)
        _TRAINING.append(n)
        try:
            yield n
        finally:
            _TRAINING.pop()
            torch.set_num_threads(before)


def pin() -> None:
    """:func:`pin_kernels` and :func:`pin_threads`: call before numeric work starts."""
    pin_kernels()
    pin_threads()


def round_features(x: Any, decimals: int = DECIMALS) -> np.ndarray:
    """``x`` as float64 rounded to ``decimals`` decimals (-0.0 becomes 0.0), so a model
    fitted on it sees the same numbers on machines whose kernels differ in the last bits."""
    return np.round(np.asarray(x, dtype=np.float64), decimals) + 0.0


def sort_best(table: Any, column: str, lower_is_better: bool = False,
              decimals: int = SCORE_DECIMALS) -> Any:
    """Rows of a DataFrame best first by ``column`` rounded to ``decimals``; ties keep the
    table's order (the stated order of the candidates), so the first row is the choice."""
    key = table[column].astype(float).round(decimals)
    order = key.sort_values(ascending=lower_is_better, kind="stable").index
    return table.loc[order]
