"""Profiles, checked before anything runs: ``configs/<name>.yaml``; ``extends: base`` layers
it over ``configs/base.yaml``. Their notebooks' parameters are :mod:`.parameters`', their
data sources :mod:`.data_check`'s. Every problem found here is a :class:`RunnerError` with
one readable line (the CLI exits 2).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from saf_utils.reporting.manifest import PROJECT_ROOT

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
    """``repr(value)`` cut to ``limit`` characters, with the full length said when cut: an
    error message never echoes a 150 KB value back."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a self-containing value, an int past 4300 digits
        return f"<a {type(value).__name__} too large to print>"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class _Loader(yaml.SafeLoader):
    """YAML with 1.2 floats (``5e-4`` and ``1E3`` are numbers; YAML 1.1 reads strings), no
    anchors or aliases and at most :data:`MAX_DEPTH` levels of nesting.

    Why refuse aliases: PyYAML shares an aliased node instead of copying it, so nine lines of
    ``&a``/``*a`` make a value of 10^9 elements that every later step (type checks, the dry
    run, the manifest) walks, and ``&a [*a]`` is a list that contains itself. A profile needs
    neither; refusing them keeps the planned value as large as its text.
    """

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
    """Parse a profile or a ``-p`` value (:class:`_Loader`); every failure is a
    :class:`yaml.YAMLError` (an integer past Python's 4300-digit limit included)."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:  # int("9" * 5000) inside the constructor
        raise yaml.YAMLError(" ".join(str(exc).split())[:ECHO_LIMIT]) from None


PLAIN = (type(None), bool, int, float, str)


def check_plain(where: str, value: Any, origin: str) -> None:
    """A parameter value is JSON data (None, bool, number, string, lists, mappings with
    string keys): what papermill injects and the manifest records. YAML also reads dates,
    ``!!binary`` and ``!!set``; those would fail only after the run folder exists."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, PLAIN):
            continue
        if isinstance(v, list):
            stack.extend((x, f"{at}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise RunnerError(f"{at} (from {origin}): key {short(k)} is "
                                      f"{type(k).__name__}; mapping keys are strings")
                stack.append((x, f"{at}.{k[:40]}"))
        else:
            raise RunnerError(f"{at} = {short(v)} (from {origin}) is a {type(v).__name__}, "
                              "not plain data (null, true/false, a number, a string, a list "
                              "or a mapping); quote it to pass a string")


# ------------------------------------------------------------------ names that become paths
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,120}")


def check_folder_name(name: Any, what: str) -> str:
    """``name`` becomes one folder or file name inside the reports folder (a run, a notebook's
    ``.ipynb`` / ``.html`` / folder): letters, digits and ``. _ + -``; no separators, no ``..``."""
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name) or ".." in name:
        raise RunnerError(f"{what} {short(name)}: use letters, digits and . _ + - only "
                          "(one folder name inside the reports folder)")
    return name


def check_run_name(name: str) -> str:
    """A run name is one folder inside the reports folder."""
    return check_folder_name(name, "--run-name")


# ------------------------------------------------------------------ profiles
PROFILE_KEYS = {"name", "description", "extends", "notebooks", "depends_on", "parameters",
                "notebook_parameters", "choices", "hide_code", "timeout", "reuse", "workers",
                "matrix"}  # matrix: saf-run sweep's axes (reporting/sweep.py checks them)


def _check_fields(path: Path, cfg: dict) -> None:
    """Types of the scalar profile fields, and every name that becomes a path."""
    def bad(key: str, want: str) -> RunnerError:
        v = cfg[key]
        return RunnerError(f"{path}: '{key}' must be {want}, not {type(v).__name__} {short(v)}")

    for key in ("name", "description", "extends"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise bad(key, "a string")
    if cfg.get("name") is not None:
        check_folder_name(cfg["name"], f"{path}: profile name")
    if cfg.get("hide_code") is not None and not isinstance(cfg["hide_code"], bool):
        raise bad("hide_code", "true or false")
    if cfg.get("reuse") not in (None, False, "latest"):
        raise bad("reuse", "'latest' (reuse unchanged notebooks of the profile's latest run) "
                  "or null")
    workers = cfg.get("workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                or workers < 1):
        raise bad("workers", "a whole number of notebooks at once, >= 1 (or null)")
    timeout = cfg.get("timeout")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)
                                or timeout <= 0):
        raise bad("timeout", "a whole number of seconds per cell (or null)")
    for nb in cfg.get("notebooks") or []:
        check_folder_name(nb, f"{path}: notebook name")
    for nb, deps in (cfg.get("depends_on") or {}).items():
        check_folder_name(nb, f"{path}: depends_on notebook name")
        for d in deps:
            check_folder_name(d, f"{path}: depends_on.{nb} notebook name")
    for nb in cfg.get("notebook_parameters") or {}:
        check_folder_name(nb, f"{path}: notebook_parameters notebook name")
    for key, allowed in (cfg.get("choices") or {}).items():
        if not isinstance(allowed, list) or not allowed:
            raise RunnerError(f"{path}: choices.{key} must be a non-empty list of the allowed "
                              f"values, not {short(allowed)}")


def _read_yaml(path: Path) -> dict:
    try:
        size = path.stat().st_size
        if size > MAX_PROFILE_BYTES:
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
    unknown = set(cfg) - PROFILE_KEYS
    if unknown:
        raise RunnerError(f"{path}: unknown key(s) {short(sorted(map(str, unknown)))}; allowed: "
                          f"{sorted(PROFILE_KEYS)}")
    for key in ("parameters", "notebook_parameters", "depends_on", "choices"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise RunnerError(f"{path}: '{key}' must be a mapping (key: value), "
                              f"not {type(cfg[key]).__name__} {short(cfg[key])}")
    for nb, block in (cfg.get("notebook_parameters") or {}).items():
        if block is not None and not isinstance(block, dict):
            raise RunnerError(f"{path}: notebook_parameters.{nb} must be a mapping, "
                              f"not {type(block).__name__} {short(block)}")
    for nb, deps in (cfg.get("depends_on") or {}).items():
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise RunnerError(f"{path}: depends_on.{nb} must be a list of notebook names")
    if cfg.get("notebooks") is not None and (
            not isinstance(cfg["notebooks"], list)
            or not all(isinstance(n, str) for n in cfg["notebooks"])):
        raise RunnerError(f"{path}: 'notebooks' must be a list of notebook names")
    _check_fields(path, cfg)
    return cfg


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the file system refuses (too long, ...)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _merge_profiles(base: dict, child: dict) -> dict:
    """``child`` over ``base``: scalars and lists replace; ``parameters``, ``depends_on`` and
    ``choices`` merge key by key; ``notebook_parameters`` merge per notebook, key by key."""
    out = {k: v for k, v in base.items() if k not in ("name", "extends")}
    for key, value in child.items():
        if key in ("parameters", "depends_on", "choices"):
            out[key] = {**(base.get(key) or {}), **(value or {})}
        elif key == "notebook_parameters":
            merged = {nb: dict(b or {}) for nb, b in (base.get(key) or {}).items()}
            for nb, block in (value or {}).items():
                merged[nb] = {**merged.get(nb, {}), **(block or {})}
            out[key] = merged
        else:
            out[key] = value
    return out


def load_profile(profile: str | None = None, config: str | os.PathLike | None = None) -> dict:
    """Read a profile YAML (``configs/<profile>.yaml`` or an explicit path) and check its keys.

    ``extends: base`` reads ``base.yaml`` from the same folder first (chains allowed); see
    :func:`_merge_profiles` for how the two combine. ``depends_on`` maps a notebook to the
    notebooks whose outputs it reads.
    """
    path = Path(config) if config else CONFIG_DIR / f"{profile}.yaml"
    if not _is_file(path):
        known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise RunnerError(f"profile file {short(str(path))} not found; known profiles: {known}")
    chain = [path]
    cfg = _read_yaml(path)
    layers = [cfg]
    while layers[-1].get("extends"):
        parent = layers[-1]["extends"]
        if not isinstance(parent, str):
            raise RunnerError(f"{chain[-1]}: 'extends' must name a profile, not {short(parent)}")
        ppath = Path(parent) if parent.endswith((".yaml", ".yml")) else Path(f"{parent}.yaml")
        ppath = ppath if ppath.is_absolute() else chain[-1].parent / ppath
        if not _is_file(ppath):
            raise RunnerError(f"{chain[-1]}: extends {short(parent)}, but "
                              f"{short(str(ppath))} does not exist")
        if ppath.resolve() in [c.resolve() for c in chain]:
            raise RunnerError(f"{path}: 'extends' loops through {ppath}")
        chain.append(ppath)
        layers.append(_read_yaml(ppath))
    cfg = {}
    for layer in reversed(layers):
        cfg = _merge_profiles(cfg, layer)
    if not cfg.get("notebooks"):
        raise RunnerError(f"{path}: 'notebooks' must list at least one notebook")
    order = {n: i for i, n in enumerate(cfg["notebooks"])}
    for nb, deps in (cfg.get("depends_on") or {}).items():
        if nb not in order:  # a profile may run fewer notebooks than base lists
            continue
        bad = [d for d in deps if order.get(d, len(order)) >= order[nb]]
        if bad:
            raise RunnerError(f"{path}: {nb} depends on {bad}, which must be listed in "
                              f"'notebooks' before it")
    cfg["name"] = layers[0].get("name") or check_folder_name(
        path.stem, f"{path}: profile name (from the file name; set 'name:')")
    cfg.setdefault("parameters", {})
    cfg.setdefault("notebook_parameters", {})
    cfg.setdefault("depends_on", {})
    cfg["parameters"] = cfg["parameters"] or {}
    cfg["notebook_parameters"] = {k: v or {} for k, v in (cfg["notebook_parameters"] or {}).items()}
    cfg["depends_on"] = cfg["depends_on"] or {}
    cfg["choices"] = cfg.get("choices") or {}
    cfg["path"] = str(path)
    cfg["extends_chain"] = [str(c) for c in chain[1:]]
    return cfg
