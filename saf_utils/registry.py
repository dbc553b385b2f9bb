"""The one registry idiom of every task's systems and their roles (:data:`ROLES`): notebooks
select systems with :meth:`Registry.select` and run them with :meth:`Registry.each`
(examples: docs/recipes.md)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: Roles of a system (:data:`ROLE_WORDS`).
ROLES = ("baseline", "system", "gold_input", "oracle", "probe")
#: What each role means, in one line (the glossary's words).
ROLE_WORDS = {
    "baseline": "a floor or simple reference",
    "system": "a learned system a user could deploy",
    "gold_input": "reads gold data at test time that a user would not have (a ceiling)",
    "oracle": "sees the gold answer (a ceiling)",
    "probe": "exploits a metric (not a system)",
}
#: Roles that may be chosen on validation or called "best".
ELIGIBLE = ("baseline", "system")


@dataclass(frozen=True)
class NoParams:
    """The parameters of a system that has none."""


@dataclass(frozen=True)
class Entry:
    """One registered system; task-specific ``info`` keys read as attributes;
    ``params_type``: its parameters dataclass (defaults live there only)."""

    name: str
    role: str
    fn: Callable[..., Any]
    params_type: type
    description: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, key: str) -> Any:
        info = self.__dict__.get("info", {})
        if key in info:
            return info[key]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} has no "
                             f"{key!r}")


class Registry:
    """Systems of one task family, in registration order; ``defaults``: the ``info`` every
    entry gets unless it sets its own; ``variants``: ``name:`` also stands for ``name:<x>``."""

    def __init__(self, what: str, defaults: dict[str, Any] | None = None,
                 variants: bool = False):
        self.what = what
        self.defaults = dict(defaults or {})
        self.variants = variants
        self._entries: dict[str, Entry] = {}

    # ---- registering

    def register(self, name: str, role: str, *, description: str | None = None,
                 params: type = NoParams, **info: Any) -> Callable[[Callable], Callable]:
        """Decorator: register the function as ``name`` with ``role``; ``params``: its
        parameters dataclass (called as ``fn(data, params, **context)``)."""
        if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
            raise TypeError(f"{self.what} {name!r}: params must be a dataclass type")
        if role not in ROLES:
            raise ValueError(f"role {role!r} not one of {ROLES}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} registered twice")
        unknown = sorted(set(info) - set(self.defaults))
        if unknown:
            raise ValueError(f"{self.what} {name!r}: unknown info {unknown}; "
                             f"known: {sorted(self.defaults)}")

        def add(fn: Callable) -> Callable:
            doc = description if description is not None else plain_doc(fn.__doc__ or "")
            self._entries[name] = Entry(name, role, fn, params, doc, {**self.defaults, **info})
            return fn

        return add

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    # ---- looking up

    def __getitem__(self, name: str) -> Entry:
        if name in self._entries:
            return self._entries[name]
        if self.variants:
            for key, entry in self._entries.items():
                if key.endswith(":") and name.startswith(key):
                    return entry
        raise KeyError(f"{self.what} {name!r} is not registered; known: {list(self._entries)}")

    def __contains__(self, name: object) -> bool:
        try:
            self[str(name)]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[Entry]:
        return list(self._entries.values())

    def check(self, names: Iterable[str]) -> list[str]:
        """``names`` as a list; an unknown one raises ValueError listing the known ones."""
        names = list(names)
        unknown = [n for n in names if n not in self]
        if unknown:
            raise ValueError(f"unknown {self.what}(s) {sorted(unknown)}; "
                             f"known: {list(self._entries)}")
        return names

    def names(self, roles: Sequence[str] | None = None, **info: Any) -> list[str]:
        """Registered names (registration order) with one of ``roles`` and the given info."""
        return [e.name for e in self._entries.values()
                if (roles is None or e.role in roles)
                and all(e.info.get(k) == v for k, v in info.items())]

    def roles(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """name -> role of ``names`` (default: every registered system)."""
        return {n: self[n].role for n in (self.check(names) if names is not None else self)}

    def by_role(self, names: Iterable[str], *roles: str) -> list[str]:
        """The ``names`` whose role is one of ``roles``, in registration order."""
        rank = {key: i for i, key in enumerate(self._entries)}
        return sorted(dict.fromkeys(n for n in self.check(names) if self[n].role in roles),
                      key=lambda n: rank[self[n].name])

    def order(self, names: Iterable[str]) -> list[str]:
        """Registration order; names not registered (e.g. a composite) last, sorted."""
        names = set(names)
        known = [n for n in self._entries if n in names]
        return known + sorted(names - set(known))

    # ---- the system contract

    def params(self, name: str, values: Mapping[str, Any] | None = None) -> Any:
        """The parameters dataclass of system ``name``: its defaults updated by ``values``
        (checked by :func:`make_params`)."""
        return make_params(self[name].params_type, values, f"{self.what} {name!r}")

    def select(self, selection: Sequence[str] | Mapping[str, Any] | None = None,
               within: Iterable[str] | None = None) -> list[str]:
        """The systems a ``systems``-style parameter names, in registration order: ``None``
        every one (of ``within``), a list those, a mapping selects by ``roles``, ``exclude``
        and ``info`` keys (so that a new system runs unless a profile leaves it out)."""
        pool = list(self) if within is None else self.check(within)
        if selection is None:
            return self.order(pool)
        if not isinstance(selection, Mapping):
            if isinstance(selection, str):
                raise ValueError(f"{self.what}s: {selection!r} is one name, not a list or a "
                                 "mapping (write [name])")
            return self.order(self.check(selection))
        sel = dict(selection)
        roles, exclude = sel.pop("roles", None), self.check(sel.pop("exclude", None) or [])
        unknown = sorted(set(sel) - set(self.defaults))
        if unknown:
            raise ValueError(f"{self.what}s: unknown selection key(s) {unknown}; known: "
                             f"roles, exclude, {', '.join(sorted(self.defaults))}")
        bad_roles = sorted(set(roles or ()) - set(ROLES))
        if bad_roles:
            raise ValueError(f"{self.what}s: role(s) {bad_roles} not one of {ROLES}")
        return [n for n in self.order(pool) if (roles is None or self[n].role in roles)
                and n not in exclude and all(self[n].info.get(k) in list(v)
                                             for k, v in sel.items())]

    def check_params(self, names: Iterable[str],
                     params: Mapping[str, Mapping[str, Any] | None] | None
                     ) -> dict[str, dict[str, Any]]:
        """``params`` (system name -> values) checked before anything runs: a name that is not
        run or a value its dataclass rejects is a ValueError (a typo would keep the defaults)."""
        names = self.check(names)
        given = {n: dict(v or {}) for n, v in (params or {}).items()}
        stray = sorted(set(given) - set(names))
        if stray:
            unknown = [n for n in stray if n not in self]
            raise ValueError(f"parameters given for {self.what}(s) {stray} that are not run"
                             + (f" (unknown {self.what}(s) {unknown}; known: {list(self)})"
                                if unknown else "") + f"; run: {names}")
        for name, values in given.items():
            self.params(name, values)
        return given

    def effective_params(self, names: Iterable[str],
                         params: Mapping[str, Mapping[str, Any] | None] | None = None
                         ) -> dict[str, dict[str, Any]]:
        """System -> the parameters it runs with, for every system of ``names``."""
        given = self.check_params(names, params)
        return {n: dataclasses.asdict(self.params(n, given.get(n))) for n in self.check(names)}

    def each(self, names: Iterable[str], data: Any,
             params: Mapping[str, Mapping[str, Any]] | None = None,
             around: Callable[[str], AbstractContextManager] | None = None, **context: Any
             ) -> Iterator[tuple[str, pd.DataFrame, float]]:
        """The one loop over systems: ``(name, predictions, seconds)`` per system, each called
        as ``fn(data, params, **context)`` (every ``params`` checked first) inside
        ``around(name)`` (e.g. a memory probe); the frame gets its ``system`` column."""
        names = self.check(names)
        params = self.check_params(names, params)
        for name in names:
            t0 = time.perf_counter()
            with around(name) if around is not None else nullcontext():
                try:
                    out = self[name].fn(data, self.params(name, params.get(name)), **context)
                except ValueError as e:
                    raise ValueError(f"{self.what} {name!r}: {e}") from e
            if not isinstance(out, pd.DataFrame):
                raise TypeError(f"{self.what} {name!r} returned {type(out).__name__}, "
                                f"not a predictions DataFrame")
            out = out.assign(system=out["system"] if "system" in out else name)
            yield name, out, time.perf_counter() - t0

    def table(self, names: Iterable[str] | None = None) -> pd.DataFrame:
        """One row per system: name, role, description, parameters and the task's info."""
        names = list(self) if names is None else self.check(names)
        return pd.DataFrame([{"system": system_label(n), "role": self[n].role, **self[n].info,
                              "params": params_text(dataclasses.asdict(self[n].params_type())),
                              "description": self[n].description} for n in names])


def plain_doc(doc: str) -> str:
    """A docstring's first paragraph as one line of plain words (reST markup unwrapped)."""
    import re

    text = " ".join(doc.strip().split("\n\n")[0].split())
    return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text).replace("``", "")


def system_label(name: str) -> str:
    """A system's name in a table: a template ``feature_clf:`` is "every feature_clf variant"."""
    return f"every {name[:-1]} variant" if name.endswith(":") else name


def role_order(roles: Mapping[str, str]) -> list[str]:
    """The systems of ``roles`` (name -> role) sorted by role (:data:`ROLES`), then name."""
    return sorted(roles, key=lambda s: (ROLES.index(roles[s]), s))


# ---- the system contract: typed parameters


def make_params(params_type: type, values: Mapping[str, Any] | None, where: str) -> Any:
    """The dataclass ``params_type`` from its defaults and ``values``; an unknown name or a
    value of another type than the default's (an int for a float is fine) is a ValueError."""
    values = dict(values or {})
    known = {f.name: f for f in dataclasses.fields(params_type)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown parameter(s) {unknown}; known: {sorted(known)}")
    defaults = params_type()
    for key, value in values.items():
        default = getattr(defaults, key)
        if default is None or value is None:
            continue
        if isinstance(default, bool) != isinstance(value, bool) or not (
                isinstance(value, type(default))
                or (isinstance(default, float) and isinstance(value, int))
                or (isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)))):
            raise ValueError(f"{where}: parameter {key!r} = {str(value)[:80]!r} should be "
                             f"{type(default).__name__} like its default {default!r}")
    return dataclasses.replace(defaults, **values)


def params_text(values: Mapping[str, Any]) -> str:
    """``name=value, ...`` of a system's parameters (values as Python writes them)."""
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
