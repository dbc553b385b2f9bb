"""A notebook's parameters in a run, checked before anything runs: what its ``parameters``
cell declares (papermill), what the profile and ``-p key=value`` give it, their types and the
profile's ``choices``; the notebooks ``--only`` selects and whether their ``depends_on`` are
there."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from notebook_reports.profiles import ECHO_LIMIT, RunnerError, check_plain, short, yaml_load


def parse_item(item: str, option: str = "-p") -> tuple[str, Any]:
    """``key=value`` of ``-p`` or ``--matrix`` (``key`` or ``notebook.key``); the value is YAML
    (1.2 floats, no anchors or aliases: :class:`profiles._Loader`)."""
    if "=" not in item:
        raise RunnerError(f"{option} {short(item)}: expected key=value")
    key, raw = (s.strip() for s in item.split("=", 1))
    if not re.fullmatch(r"(?:[\w-]+\.)?[A-Za-z_]\w*", key):
        raise RunnerError(f"{option} {short(item)}: {short(key)} is not a parameter name "
                          "(key or notebook.key)")
    try:
        return key, yaml_load(raw) if raw else ""
    except yaml.YAMLError as exc:
        why = " ".join(str(getattr(exc, "problem", None) or exc).split())[:ECHO_LIMIT]
        raise RunnerError(f"{option} {short(key)}=…: {short(raw)} is not a valid value "
                          f"({why}); lists are written [0, 1], strings with spaces in quotes"
                          ) from None


def parse_overrides(items: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``-p`` values: ``({key: value}, {notebook: {key: value}})``."""
    common: dict[str, Any] = {}
    per_nb: dict[str, dict[str, Any]] = {}
    for item in items:
        key, value = parse_item(item)
        nb, _, key = key.rpartition(".")
        (per_nb.setdefault(nb, {}) if nb else common)[key] = value
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


#: A parameter's annotation in its notebook's parameters cell (papermill's
#: ``inferred_type_name``: ``max_rows: int = None``) as an example value of that type.
ANNOTATED = {"str": "", "int": 0, "float": 0.0, "bool": False, "dict": {}, "list[str]": [""],
             "list[int]": [0], "list[float]": [0.0]}
#: Parameters that select a notebook's systems: a list of names, or a mapping that selects
#: by role and registration info (checked by :meth:`saf_utils.registry.Registry.select`).
SELECTION_PARAMS = ("systems", "baselines", "oracles", "ablations")
#: The largest whole number a parameter takes (a row cap of 10**29 is a typo, not a cap).
MAX_INT = 2**31 - 1
#: The range of whole-number parameters (a list's elements too); others: 0 to MAX_INT.
INT_RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("max_rows", "max_train_rows", "n_resamples", "k", "bertscore_layers"),
                    (1, MAX_INT)),
}


def declared_type(info: Any) -> tuple[bool, Any]:
    """(known, example) of a parameter's type: its default, else (a None default) the type
    its annotation names (:data:`ANNOTATED`); None passes either way."""
    known, default = declared_default(info)
    if known and default is None:
        return True, ANNOTATED.get(info.get("inferred_type_name"))
    return known, default


_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list",
               tuple: "list", dict: "mapping", type(None): "None"}


def _type_name(x: Any) -> str:
    return _TYPE_NAMES.get(type(x), type(x).__name__)


def _fits(value: Any, default: Any) -> bool:
    """``value`` has the type of ``default`` (an int fits a float; None fits anything); each
    element of a list, not None, that of the default's first element."""
    want, got = _type_name(default), _type_name(value)
    if value is None or want not in ("bool", "int", "float", "str", "list", "mapping"):
        return True
    if want == "list" and default:
        return got == "list" and all(v is not None and _fits(v, default[0]) for v in value)
    return got == want or (want, got) == ("float", "int")


def check_values(notebook: str, params: dict[str, Any], declared: dict[str, Any],
                 choices: dict[str, list], origins: dict[str, str]) -> None:
    """Each value is plain data (:func:`check_plain`), has the type of the notebook's default
    (:func:`declared_type`), whole numbers in :data:`INT_RANGES`, and is (each element of a
    list is) one of the profile's ``choices``; None, the notebook's own default, passes."""
    for key, value in params.items():
        origin = origins.get(key, "?")
        check_plain(f"{notebook}.{key}", value, origin)
        if value is None:
            continue
        where = f"{notebook}.{key} = {short(value)}"
        items = value if isinstance(value, (list, tuple)) else [value]
        # a selection mapping: the registry checks it (tasks.system_params_lines)
        selection = key in SELECTION_PARAMS and isinstance(value, dict)
        known, default = (False, None) if selection else declared_type(declared.get(key))
        if type(default[0] if isinstance(default, (list, tuple)) and default
                else default) is int:
            lo, hi = INT_RANGES.get(key, (0, MAX_INT))
            if bad := [v for v in items if type(v) is int and not lo <= v <= hi]:
                raise RunnerError(f"{where} (from {origin}): {short(bad[0])} is outside "
                                  f"{lo:,} to {hi:,}")
        if known and not _fits(value, default):
            what, want = f"{_type_name(value)}, from {origin}", _type_name(default)
            if isinstance(value, list) and want == "list":  # an element that does not fit
                bad = next(v for v in value if not _fits([v], default))
                what = f"element {short(bad)} is {_type_name(bad)}, from {origin}"
                want += f" of {_type_name(default[0])}"
            said = (f"the notebook's default {short(default)}" if
                    declared_default(declared.get(key))[1] is not None else
                    f"the type its parameters cell annotates for {key}")
            raise RunnerError(f"{where} ({what}) does not match {said} ({want})")
        if key in choices and (bad := [v for v in items if v not in choices[key]]):
            raise RunnerError(f"{where} (from {origin}): {short(bad[0])} is not one of the "
                              f"profile's choices.{key} {short(choices[key])}")


@dataclass
class NotebookPlan:
    name: str
    path: Path
    params: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)


def _resolve(cfg: dict, name: str, path: Path, common: dict[str, Any],
             per_nb: dict[str, dict[str, Any]]) -> NotebookPlan:
    """One notebook's parameters from the profile and the overrides, checked."""
    declared = notebook_parameters(path)
    layers = [("profile parameters", {k: v for k, v in cfg["parameters"].items()
                                      if k in declared}),
              (f"profile notebook_parameters.{name}", cfg["notebook_parameters"].get(name) or {}),
              ("-p", {k: v for k, v in common.items() if k in declared}),
              (f"-p {name}", per_nb.get(name, {}))]
    for origin, layer in (layers[1], layers[3]):
        if undeclared := sorted(set(layer) - set(declared)):
            raise RunnerError(f"{name}: parameter(s) {short(undeclared)} ({origin}) "
                              f"not in its parameters cell (declared: {sorted(declared)})")
    params = {k: v for _, layer in layers for k, v in layer.items()}
    origins = {k: origin for origin, layer in layers for k in layer}
    check_values(name, params, declared, cfg.get("choices") or {}, origins)
    return NotebookPlan(name, path, params, origins, declared)


def plan_notebooks(cfg: dict, names: list[str], nb_dir: Path,
                   overrides: list[str]) -> list[NotebookPlan]:
    """Every selected notebook's parameters, checked. Precedence (low to high): profile
    ``parameters`` (to notebooks that declare them), ``notebook_parameters.<nb>``, ``-p
    key=value``, ``-p nb.key=value``. The profile's other notebooks are checked too (without
    ``-p key=value``): a bad profile value fails whichever notebooks are selected."""
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
    if unused := set(common) - {k for p in plans for k in p.params}:
        raise RunnerError(f"-p {short(sorted(unused))}: no selected notebook declares these "
                          "parameters")
    return plans


def select_notebooks(names: list[str], wanted: list[str] | None) -> list[str]:
    """The notebooks ``--only`` names (full names or unique prefixes), in profile order."""
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
    """Each dependency of a selected notebook is selected too or in ``run_dir`` with an ok
    latest execution (``statuses``); raises naming every missing one."""
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in selected:
        for dep in cfg["depends_on"].get(name, []):
            status = (statuses or {}).get(dep, "ok")
            if dep in selected:
                found[dep] = "selected"
            elif run_dir is None or not (run_dir / dep).is_dir():
                missing.append(f"{name} needs {dep}")
            elif status != "ok":
                missing.append(f"{name} needs {dep}, whose latest execution in "
                               f"{run_dir.name} is {status}")
            else:
                found[dep] = "present"
    if missing:
        where = f"not in {run_dir}" if run_dir else "not selected"
        raise RunnerError(
            f"missing dependency: {'; '.join(missing)} ({where}); select it too (--only) or "
            "rerun inside a run that has it (--run-dir reports/<run>)")
    return found
