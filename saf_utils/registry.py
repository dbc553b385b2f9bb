"""The one registry idiom of every task's systems, and the roles they play.

A :class:`Registry` holds :class:`Entry` rows: a name, a role (:data:`ROLES`), the function
the task calls, a description (default: the first docstring line) and the names of the
parameters the system reads. Adding a system is one function plus one registration::

    @SYSTEMS.register("my_system", "baseline", params=("k",))
    def my_system(...):
        \"\"\"What it does, in one line.\"\"\"

A task gives its entries extra ``info`` (e.g. ``kind``, ``family``, ``ablation_of``),
readable as attributes. A registry made with ``variants=True`` lets a name ending in ``:``
cover every ``name:<variant>`` (SAF's ``seq2seq:<model>``). Notebooks list systems from a
registry (:meth:`Registry.names`), never by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: Roles of a system: floors and simple references, learned systems, systems that see gold,
#: and systems that exploit a metric.
ROLES = ("baseline", "system", "oracle", "probe")
#: Roles that may be chosen on validation or called "best".
ELIGIBLE = ("baseline", "system")


@dataclass(frozen=True)
class Entry:
    """One registered system; task-specific ``info`` keys read as attributes."""

    name: str
    role: str
    fn: Callable[..., Any]
    description: str = ""
    params: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, key: str) -> Any:
        info = self.__dict__.get("info", {})
        if key in info:
            return info[key]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} has no "
                             f"{key!r}")


class Registry:
    """Systems of one task family, in registration order.

    ``defaults``: task-specific ``info`` every entry gets unless it sets its own;
    ``param_names``: the parameters a system may declare (None: any).
    """

    def __init__(self, what: str, defaults: dict[str, Any] | None = None,
                 param_names: Iterable[str] | None = None, variants: bool = False):
        self.what = what
        self.defaults = dict(defaults or {})
        self.param_names = None if param_names is None else frozenset(param_names)
        self.variants = variants
        self._entries: dict[str, Entry] = {}

    # ---- registering

    def register(self, name: str, role: str, *, description: str | None = None,
                 params: Sequence[str] = (), **info: Any) -> Callable[[Callable], Callable]:
        """Decorator: register the function as ``name`` with ``role``; returns it unchanged."""
        if role not in ROLES:
            raise ValueError(f"role {role!r} not one of {ROLES}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} registered twice")
        unknown = sorted(set(info) - set(self.defaults))
        if unknown:
            raise ValueError(f"{self.what} {name!r}: unknown info {unknown}; "
                             f"known: {sorted(self.defaults)}")
        if self.param_names is not None and set(params) - self.param_names:
            raise ValueError(f"{self.what} {name!r}: unknown parameter(s) "
                             f"{sorted(set(params) - self.param_names)}")

        def add(fn: Callable) -> Callable:
            doc = description if description is not None else \
                (fn.__doc__ or "").strip().split("\n")[0]
            self._entries[name] = Entry(name, role, fn, doc, tuple(params),
                                        {**self.defaults, **info})
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

    def table(self, names: Iterable[str] | None = None) -> pd.DataFrame:
        """One row per system: name, role, description, parameters and the task's info."""
        names = list(self) if names is None else self.check(names)
        return pd.DataFrame([{"system": n, "role": self[n].role, **self[n].info,
                              "params": ", ".join(self[n].params),
                              "description": self[n].description} for n in names])


def role_order(roles: Mapping[str, str]) -> list[str]:
    """The systems of ``roles`` (name -> role) sorted by role (:data:`ROLES`), then name."""
    return sorted(roles, key=lambda s: (ROLES.index(roles[s]), s))
