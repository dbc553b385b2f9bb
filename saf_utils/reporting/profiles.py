"""What a run will do, checked before anything runs: profiles, parameters, dependencies, data.

A profile is ``configs/<name>.yaml``; ``extends: base`` layers it over ``configs/base.yaml``.
Every problem found here is a :class:`RunnerError` with one readable line (the CLI exits 2).
"""

from __future__ import annotations

import ast
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from saf_utils.reporting.manifest import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "configs"
NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"


def data_env_vars() -> tuple[str, ...]:
    """Environment variables that name local data folders: each task's data source, and
    WordNet for METEOR."""
    from saf_utils.tasks import data_sources

    return (*(d.env for d in data_sources()), "WORDNET_DIR")


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
                "notebook_parameters", "choices", "hide_code", "timeout", "reuse",
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


# ------------------------------------------------------------------ parameters
def parse_overrides(items: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``key=value`` (all notebooks) or ``notebook.key=value``; values are YAML (1.2 floats, no
    anchors or aliases: :class:`_Loader`)."""
    common: dict[str, Any] = {}
    per_nb: dict[str, dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise RunnerError(f"-p {short(item)}: expected key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key or not re.fullmatch(r"(?:[\w-]+\.)?[A-Za-z_]\w*", key):
            raise RunnerError(f"-p {short(item)}: {short(key)} is not a parameter name "
                              "(key or notebook.key)")
        try:
            value = yaml_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            why = " ".join(str(getattr(exc, "problem", None) or exc).split())[:ECHO_LIMIT]
            raise RunnerError(f"-p {short(key)}=…: {short(raw)} is not a valid value ({why}); "
                              "lists are written [0, 1], strings with spaces in quotes") from None
        if "." in key:
            nb, key = key.split(".", 1)
            per_nb.setdefault(nb, {})[key] = value
        else:
            common[key] = value
    return common, per_nb


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The parameters a notebook declares in its ``parameters`` cell (via papermill)."""
    import papermill as pm

    try:
        return pm.inspect_notebook(str(path))
    except Exception as exc:  # an unreadable notebook is a planning error, not a traceback
        raise RunnerError(f"{path}: cannot read its parameters ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]})") from None


def declared_default(info: Any) -> tuple[bool, Any]:
    """(known, value) of a declared parameter's default (a literal; else not known)."""
    src = info.get("default") if isinstance(info, dict) else None
    if src is None:
        return False, None
    try:
        return True, ast.literal_eval(src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _type_ok(value: Any, default: Any) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple)) and all(_element_ok(v, default) for v in value)
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def _element_ok(value: Any, default: list | tuple) -> bool:
    """A list element fits one of the default's elements (None only where the default has
    one; an empty or all-None default fits anything)."""
    kinds = [d for d in default if d is not None]
    if value is None:
        return not kinds or len(kinds) < len(default)
    return not kinds or any(_type_ok(value, d) for d in kinds)


def _type_name(x: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", tuple: "list",
            dict: "mapping", type(None): "None"}.get(type(x), type(x).__name__)


def check_types(notebook: str, params: dict[str, Any], declared: dict[str, Any],
                origins: dict[str, str]) -> None:
    """Each value must have the type of the notebook's default (None fits anything)."""
    for key, value in params.items():
        known, default = declared_default(declared.get(key))
        if known and not _type_ok(value, default):
            what = (f"{_type_name(value)}, from {origins.get(key, '?')}")
            want = _type_name(default)
            if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
                bad = next(v for v in value if not _element_ok(v, default))
                what = (f"element {short(bad)} is {_type_name(bad)}, from {origins.get(key, '?')}")
                want += " of " + " or ".join(sorted({_type_name(d) for d in default}))
            raise RunnerError(
                f"{notebook}.{key} = {short(value)} ({what}) does not match the notebook's "
                f"default {short(default)} ({want})")


def check_choices(notebook: str, params: dict[str, Any], choices: dict[str, list],
                  origins: dict[str, str]) -> None:
    """A value (each element of a list value) must be one of the profile's ``choices`` for
    that parameter; None is the notebook's own default and always allowed."""
    for key, value in params.items():
        allowed = choices.get(key)
        if allowed is None or value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in values if v not in allowed]  # types were checked before
        if bad:
            raise RunnerError(f"{notebook}.{key} = {short(value)} (from {origins.get(key, '?')}): "
                              f"{short(bad[0])} is not one of the profile's choices.{key} "
                              f"{short(allowed)}")


@dataclass
class NotebookPlan:
    name: str
    path: Path
    params: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)


def _resolve(cfg: dict, name: str, path: Path, common: dict[str, Any],
             per_nb: dict[str, dict[str, Any]]) -> NotebookPlan:
    """One notebook's parameters from the profile and the overrides, names and types checked."""
    declared = notebook_parameters(path)
    layers = [("profile parameters", {k: v for k, v in cfg["parameters"].items()
                                      if k in declared}),
              (f"profile notebook_parameters.{name}", cfg["notebook_parameters"].get(name) or {}),
              ("-p", {k: v for k, v in common.items() if k in declared}),
              (f"-p {name}.", per_nb.get(name, {}))]
    for origin, layer in (layers[1], layers[3]):
        undeclared = sorted(set(layer) - set(declared))
        if undeclared:
            raise RunnerError(f"{name}: parameter(s) {short(undeclared)} ({origin.rstrip('.')}) "
                              f"not in its parameters cell (declared: {sorted(declared)})")
    params: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for origin, layer in layers:
        for k, v in layer.items():
            params[k] = v
            origins[k] = origin.rstrip(".")
    for k, v in params.items():
        check_plain(f"{name}.{k}", v, origins[k])
    check_types(name, params, declared, origins)
    check_choices(name, params, cfg.get("choices") or {}, origins)
    return NotebookPlan(name, path, params, origins, declared)


def plan_notebooks(cfg: dict, names: list[str], nb_dir: Path,
                   overrides: list[str]) -> list[NotebookPlan]:
    """Resolve every selected notebook's parameters; check names, types and choices.

    Precedence (low to high): profile ``parameters`` (to notebooks that declare them),
    ``notebook_parameters.<nb>``, ``-p key=value``, ``-p nb.key=value``. The profile's other
    notebooks are checked too (without ``-p key=value``), so that a bad profile value or
    ``-p nb.key=value`` fails whichever notebooks are selected; of those, only a notebook
    named by ``-p nb.key`` must exist in ``nb_dir``.
    """
    common, per_nb = parse_overrides(overrides)
    for nb in per_nb:
        if nb not in cfg["notebooks"]:
            raise RunnerError(f"-p {short(nb)}.…: no notebook of that name in profile "
                              f"{cfg['name']}")
    plans: list[NotebookPlan] = []
    for name in cfg["notebooks"]:
        path = nb_dir / f"{name}.ipynb"
        selected = name in names
        if not path.is_file():
            if selected or name in per_nb:
                raise RunnerError(f"notebook {path} not found")
            continue
        plan = _resolve(cfg, name, path, common if selected else {}, per_nb)
        if selected:
            plans.append(plan)
    unused = set(common) - {k for p in plans for k in p.params}
    if unused:
        raise RunnerError(f"-p {short(sorted(unused))}: no selected notebook declares these "
                          "parameters")
    return plans


# ------------------------------------------------------------------ selection, dependencies
def select_notebooks(names: list[str], wanted: list[str] | None) -> list[str]:
    """The notebooks ``--only`` names, in profile order: each entry a full name or a unique
    prefix (``02``), repeated (``--only 02 --only 05``) or comma-separated (``--only 02,05``)."""
    if not wanted:
        return names
    chosen = []
    for w in (part.strip() for entry in wanted for part in entry.split(",")):
        if not w:
            raise RunnerError(f"--only {','.join(wanted)!r}: an empty name")
        hits = [n for n in names if n == w] or [n for n in names if n.startswith(w)]
        if len(hits) != 1:
            raise RunnerError(f"--only {w!r} matches {hits or 'nothing'} in {names}")
        chosen.append(hits[0])
    return [n for n in names if n in chosen]


def check_dependencies(cfg: dict, selected: list[str], run_dir: Path | None,
                       statuses: dict[str, str] | None = None) -> dict[str, str]:
    """Each dependency of a selected notebook is selected too or present in ``run_dir``
    (its folder exists and its latest execution there, per ``statuses``, was ok).

    Returns ``{dependency: "selected" | "present"}``; raises naming every missing one.
    """
    statuses = statuses or {}
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in selected:
        for dep in cfg["depends_on"].get(name, []):
            if dep in selected:
                found[dep] = "selected"
            elif run_dir is not None and (run_dir / dep).is_dir():
                if statuses.get(dep, "ok") != "ok":
                    missing.append(f"{name} needs {dep}, whose latest execution in "
                                   f"{run_dir.name} is {statuses[dep]}")
                    continue
                found[dep] = "present"
            else:
                missing.append(f"{name} needs {dep}")
    if missing:
        where = f"not in {run_dir}" if run_dir else "not selected"
        raise RunnerError(
            f"missing dependency: {'; '.join(missing)} ({where}); select it too (--only) or "
            "rerun inside a run that has it (--run-dir reports/<run>)")
    return found


# ------------------------------------------------------------------ data sources
def reachable(host: str, timeout: float = 3.0) -> bool:
    """Can a TCP connection to ``host:443`` be opened (offline env variables say no)?"""
    offline = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if host == "huggingface.co" else ()
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes") for v in offline):
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def check_data_sources(plans: list[NotebookPlan]) -> list[dict[str, Any]]:
    """Where each dataset will come from; one error naming every unavailable source.

    A notebook that declares a task's source parameter (``saf_source``, ...) needs that
    dataset: a local folder (the parameter, else its environment variable) must exist; with
    neither, the hub copy must be cached or its host reachable (:class:`DataSource`).
    """
    from saf_utils.tasks import data_sources

    out: list[dict[str, Any]] = []
    problems: list[str] = []
    for src in data_sources():
        notebooks = [p.name for p in plans if src.param in p.declared]
        params = {p.params.get(src.param) for p in plans if p.name in notebooks}
        for value in sorted(params, key=str) if notebooks else ():
            source, via = (value, src.param) if value else (os.environ.get(src.env), src.env)
            entry = {"dataset": src.name, "notebooks": notebooks,
                     "via": via if source else "hub"}
            if source:
                local = Path(str(source)).expanduser()
                if local.exists():
                    entry.update(kind="local", source=str(local.resolve()))
                elif src.is_hub_id is not None and src.is_hub_id(str(source)):
                    entry.update(kind="hub", source=str(source))
                else:
                    problems.append(f"{src.name}: {via}={source} does not exist")
                    continue
            else:
                entry.update(kind="hub", source=src.hub)
            if entry["kind"] == "hub":
                entry["cached"] = cached = src.cached(entry["source"])
                if not cached and not reachable(src.host):
                    given = (f"{via}={source} is no folder (relative to {Path.cwd()}) and, as "
                             "a hub id," if source else f"no local source ({src.env} / "
                             f"{src.param} unset) and")
                    problems.append(f"{src.name}: {given} {src.host} is unreachable; set "
                                    f"{src.env}=<local copy>")
                    continue
            out.append(entry)
    if problems:
        raise RunnerError("data sources: " + "; ".join(problems))
    return out
