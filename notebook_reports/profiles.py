"""Profiles, checked before anything runs: ``configs/<name>.yaml``; ``extends: base`` layers
it over ``configs/base.yaml``. Every problem is a :class:`RunnerError` with one readable line
(the CLI exits 2)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import yaml

from notebook_reports.manifest import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "configs"
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"


class RunnerError(RuntimeError):
    """A bad profile, parameter, notebook name or data source (raised before anything runs)."""


# Planning limits (docs/runs.md): a profile is a small file, a value is plain data.
MAX_PROFILE_BYTES = 1_000_000
MAX_DEPTH = 32  # nesting of lists and mappings in one YAML document
ECHO_LIMIT = 200  # characters of a value an error message shows


def short(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error never echoes a 150 KB value."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a self-containing value, an int past 4300 digits
        return f"<a {type(value).__name__} too large to print>"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


#: YAML 1.2's core schema (what a plain scalar is read as there); PyYAML reads YAML 1.1.
_CORE = {"null": r"~|null|Null|NULL|", "bool": r"true|True|TRUE|false|False|FALSE",
         "int": r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+",
         "float": r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN"}


def _core_kind(value: str) -> str:
    return next((kind for kind, rx in _CORE.items() if re.fullmatch(rx, value)), "str")


class _Loader(yaml.SafeLoader):
    """YAML with 1.2 floats (``5e-4`` is a number), no anchors or aliases, at most
    :data:`MAX_DEPTH` levels, no key twice in a mapping, and no plain scalar that YAML 1.1
    (PyYAML) and YAML 1.2 read differently (``1:30`` is 90 in 1.1, text in 1.2; ``yes``,
    ``010``, ``1_000``, ``0o17``): such a value is refused, not guessed. Why no aliases:
    PyYAML shares an aliased node, so nine lines of ``&a``/``*a`` make a value of 10^9
    elements and ``&a [*a]`` contains itself."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)
        read = tag.rsplit(":", 1)[-1]  # dates: refused by check_plain; <<: with the anchors
        if kind is yaml.ScalarNode and implicit[0] and read not in ("timestamp", "merge") and (
                read != _core_kind(value)  # 1.1 reads "010" as octal 8, 1.2 as decimal 10
                or read == "int" and re.fullmatch(r"[-+]?0[0-9_]+", value)):
            try:
                read = short(yaml.safe_load(value), 60)
            except (yaml.YAMLError, ValueError):
                read = "another value"
            raise yaml.YAMLError(
                f"{short(value, 60)} is read as {read} by YAML 1.1 but as a "
                f"{_core_kind(value)} by YAML 1.2: put it in quotes for text, "
                "or write the value unambiguously (90, true)")
        return tag

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark,
                        f"key {short(key, 60)} appears twice (the later value would win "
                        "silently)", key_node.start_mark)
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so
                pass
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&name, *name, <<: *name) are not allowed; "
                "write the value out", event.start_mark)
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def yaml_load(text: str) -> Any:
    """Parse a profile or a ``-p`` value; every failure is a :class:`yaml.YAMLError`."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:  # int("9" * 5000) inside the constructor
        raise yaml.YAMLError(" ".join(str(exc).split())[:ECHO_LIMIT]) from None


PLAIN = (type(None), bool, int, float, str)


def check_plain(where: str, value: Any, origin: str) -> None:
    """A parameter value is JSON data with finite numbers, what papermill injects and the
    manifest records (YAML also reads dates, ``!!binary``, ``!!set`` and ``.nan``)."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, list):
            stack.extend((x, f"{at}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise RunnerError(f"{at} (from {origin}): key {short(k)} is "
                                      f"{type(k).__name__}; mapping keys are strings")
                stack.append((x, f"{at}.{k[:40]}"))
        elif isinstance(v, float) and not math.isfinite(v):
            raise RunnerError(f"{at} = {short(v)} (from {origin}): {v} is not a finite number")
        elif not isinstance(v, PLAIN):
            raise RunnerError(f"{at} = {short(v)} (from {origin}) is a {type(v).__name__}, "
                              "not plain data (null, true/false, a number, a string, a list "
                              "or a mapping); quote it to pass a string")


RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,120}")


def check_folder_name(name: Any, what: str) -> str:
    """``name`` becomes one file or folder name in the reports folder: no separators or ``..``."""
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name) or ".." in name:
        raise RunnerError(f"{what} {short(name)}: use letters, digits and . _ + - only "
                          "(one folder name inside the reports folder)")
    return name


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(n, str) for n in v)


_MAPPING = (lambda v: isinstance(v, dict), "a mapping (key: value)")
_STRING = (lambda v: isinstance(v, str), "a string")
#: Every profile key, what its value (when not null) must be.
FIELDS: dict[str, tuple[Any, str]] = {
    "name": _STRING, "description": _STRING, "extends": _STRING,
    "notebooks": (_names, "a list of notebook names"),
    "depends_on": _MAPPING, "parameters": _MAPPING, "notebook_parameters": _MAPPING,
    "choices": _MAPPING,
    "hide_code": (lambda v: isinstance(v, bool), "true or false"),
    "reuse": (lambda v: v in (False, "latest"),
              "'latest' (reuse unchanged notebooks of the profile's latest run) or null"),
    "workers": (_whole, "a whole number of notebooks at once, >= 1 (or null)"),
    "timeout": (_whole, "a whole number of seconds per cell (or null)"),
}
#: What each entry of a mapping field must be.
ENTRIES: dict[str, tuple[Any, str]] = {
    "notebook_parameters": (lambda v: v is None or isinstance(v, dict), "a mapping"),
    "depends_on": (_names, "a list of notebook names"),
    "choices": (lambda v: isinstance(v, list) and bool(v),
                "a non-empty list of the allowed values"),
}


def _read_yaml(path: Path) -> dict:
    try:
        if (size := path.stat().st_size) > MAX_PROFILE_BYTES:
            raise RunnerError(f"{path}: {size:,} bytes; a profile is at most "
                              f"{MAX_PROFILE_BYTES:,} bytes")
        cfg = yaml_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        why = " ".join(str(exc).split())
        raise RunnerError(f"{path}: not valid YAML ({why[:2 * ECHO_LIMIT]})") from None
    except UnicodeDecodeError as exc:
        raise RunnerError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise RunnerError(f"{path}: cannot read ({exc.strerror})") from None
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, dict):
        raise RunnerError(f"{path}: a profile is a mapping of keys, not {type(cfg).__name__}")
    if unknown := set(cfg) - set(FIELDS):
        raise RunnerError(f"{path}: unknown key(s) {short(sorted(map(str, unknown)))}; allowed: "
                          f"{sorted(FIELDS)}")
    for key, (ok, want) in FIELDS.items():
        if cfg.get(key) is not None and not ok(cfg[key]):
            raise RunnerError(f"{path}: '{key}' must be {want}, "
                              f"not {type(cfg[key]).__name__} {short(cfg[key])}")
    for key, (ok, want) in ENTRIES.items():
        for k, v in (cfg.get(key) or {}).items():
            if not ok(v):
                raise RunnerError(f"{path}: {key}.{k} must be {want}, "
                                  f"not {type(v).__name__} {short(v)}")
    listed, deps = cfg.get("notebooks") or [], cfg.get("depends_on") or {}
    if twice := sorted({n for n in listed if listed.count(n) > 1}):
        raise RunnerError(f"{path}: 'notebooks' lists {short(twice)} more than once (one "
                          "notebook runs once into its folder)")
    for what, names in (("profile name", [] if cfg.get("name") is None else [cfg["name"]]),
                        ("notebook name", listed), ("depends_on notebook name", deps),
                        ("notebook_parameters notebook name",
                         cfg.get("notebook_parameters") or {}),
                        *((f"depends_on.{nb} notebook name", d) for nb, d in deps.items())):
        for name in names:
            check_folder_name(name, f"{path}: {what}")
    return cfg


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the file system refuses (too long, ...)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


#: How deep a child profile's value merges into its base's: 1 key by key, 2 per notebook and
#: key by key; other keys replace.
MERGE_DEPTH = {"parameters": 1, "depends_on": 1, "choices": 1, "notebook_parameters": 2}


def _merge(base: Any, child: Any, depth: int) -> Any:
    if depth == 0:
        return child
    base, child = base or {}, child or {}
    return {**base, **{k: _merge(base.get(k), v, depth - 1) for k, v in child.items()}}


def load_profile(profile: str | None = None, config: str | os.PathLike | None = None) -> dict:
    """Read and check ``configs/<profile>.yaml`` (or the path ``config``), after the chain of
    profiles it ``extends`` (each relative to the one naming it)."""
    path = Path(config) if config else CONFIG_DIR / f"{profile}.yaml"
    if not _is_file(path):
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise RunnerError(f"profile file {short(str(path))} not found; known profiles: {known}")
    chain, layers = [path], [_read_yaml(path)]
    while parent := layers[-1].get("extends"):
        ppath = Path(parent if parent.endswith((".yaml", ".yml")) else f"{parent}.yaml")
        ppath = chain[-1].parent / ppath  # an absolute ppath stays itself
        if not _is_file(ppath):
            raise RunnerError(f"{chain[-1]}: extends {short(parent)}, but "
                              f"{short(str(ppath))} does not exist")
        if ppath.resolve() in [c.resolve() for c in chain]:
            raise RunnerError(f"{path}: 'extends' loops through {ppath}")
        chain.append(ppath)
        layers.append(_read_yaml(ppath))
    cfg: dict = {}
    for layer in reversed(layers):
        cfg = {**{k: v for k, v in cfg.items() if k not in ("name", "extends")},
               **{k: _merge(cfg.get(k), v, MERGE_DEPTH.get(k, 0)) for k, v in layer.items()}}
    if not cfg.get("notebooks"):
        raise RunnerError(f"{path}: 'notebooks' must list at least one notebook")
    order = {n: i for i, n in enumerate(cfg["notebooks"])}
    for nb, deps in (cfg.get("depends_on") or {}).items():
        bad = [d for d in deps if order.get(d, len(order)) >= order[nb]] if nb in order else []
        if bad:  # (a profile may run fewer notebooks than base lists)
            raise RunnerError(f"{path}: {nb} depends on {bad}, which must be listed in "
                              f"'notebooks' before it")
    cfg["name"] = layers[0].get("name") or check_folder_name(
        path.stem, f"{path}: profile name (from the file name; set 'name:')")
    for key in ("parameters", "depends_on", "choices"):
        cfg[key] = cfg.get(key) or {}
    cfg["notebook_parameters"] = {k: v or {} for k, v in
                                  (cfg.get("notebook_parameters") or {}).items()}
    return {**cfg, "path": str(path), "extends_chain": [str(c) for c in chain[1:]]}
