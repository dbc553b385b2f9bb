"""Every field of a job's settings dataclass against its declared type and range, checked
before a launcher starts: a learning rate given as ``"5e-05"``, null or ``1e309`` is a
``ValueError`` naming the field, not an optimizer's traceback in a rank."""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import Any

#: The range of each numeric setting of either kind, (lowest, highest, lowest excluded);
#: every float must also be finite (``1e309`` in JSON is infinite).
_POSITIVE, _NON_NEGATIVE, _FRACTION = (0, math.inf, True), (0, math.inf, False), (0, 1, False)
SETTING_RANGES: dict[str, tuple[float, float, bool]] = {
    **dict.fromkeys(("learning_rate", "epochs", "batch_size", "eval_batch_size", "grad_accum",
                     "max_source_length", "max_target_length", "max_length", "num_beams",
                     "scratch_vocab_size", "scratch_d_model", "scratch_layers", "scratch_heads",
                     "scratch_ff", "logging_steps"), _POSITIVE),
    **dict.fromkeys(("weight_decay", "no_repeat_ngram_size", "freeze_layers", "train_layers",
                     "fold", "seed"), _NON_NEGATIVE),
    **dict.fromkeys(("warmup_ratio", "label_smoothing"), _FRACTION),
    "max_steps": (-1, math.inf, False),  # -1: train for ``epochs``; 0 is refused below
}
#: The largest whole number a setting takes (a batch of 10**30 is a typo).
MAX_INT = 2**31 - 1


def _type_ok(value: Any, hint: Any) -> bool:
    """``value`` has the type ``hint`` (a class, ``X | None``, ``list[X]``, ``dict[K, V]``: its
    items or keys checked; numpy's numbers count, a bool is no number, an int is a float)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in args)
    if origin is not None:
        return isinstance(value, origin) and all(_type_ok(v, args[0]) for v in value)
    if hint in (int, float):  # a fold from a groupby is an np.int64
        kind = numbers.Integral if hint is int else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)
    return hint is Any or isinstance(value, hint)


def check_fields(obj: Any, where: str) -> None:
    """Every field of the dataclass ``obj`` against its type hint, finite and in
    :data:`SETTING_RANGES`, or a one-line ``ValueError`` naming the field."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, hint = getattr(obj, f.name), hints[f.name]
        said = f"{where}: {f.name} = {str(value)[:80]!r}"
        if not _type_ok(value, hint):
            shown = str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")
            need = "a value" if value is None else f"of type {shown}"
            raise ValueError(f"{said} is {type(value).__name__}; it needs {need}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        if not math.isfinite(value):
            raise ValueError(f"{said} is not a finite number")
        if isinstance(value, numbers.Integral) and abs(value) > MAX_INT:
            raise ValueError(f"{said} is larger than {MAX_INT:,}")
        lo, hi, open_lo = SETTING_RANGES.get(f.name, (-math.inf, math.inf, False))
        if value < lo or value > hi or (open_lo and value == lo) or (
                f.name == "max_steps" and value == 0):
            want = ("-1 (train for epochs) or a positive number" if f.name == "max_steps"
                    else f"{'above' if open_lo else 'at least'} {lo:g}"
                    + (f" and at most {hi:g}" if math.isfinite(hi) else ""))
            raise ValueError(f"{said} is out of range: it must be {want}")
