"""Compare two runs: what changed in the setup and which numbers changed significantly
(``saf-run compare RUN_A RUN_B``; what it reports: docs/reports.md)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from notebook_reports.crossrun import KEY, frame, rows_of
from notebook_reports.manifest import PROJECT_ROOT
from notebook_reports.profiles import REPORTS_DIR, RunnerError, check_folder_name
from saf_utils.data.artifacts import ITEMS_FILE, read_items

IGNORED_PARAMS = {"output_dir"}
MIN_RESAMPLES = 100
#: The type of each field that ``list``, ``compare`` and ``--run-dir`` read (None allowed).
MANIFEST_TYPES = {**dict.fromkeys(("run", "profile", "profile_file", "status", "started",
                                   "finished", "host"), str), "pid": int,
                  **dict.fromkeys(("git", "environment", "lock", "packages"), dict),
                  **dict.fromkeys(("notebooks", "installed", "data_sources", "executions",
                                   "invocations"), list)}
NOTEBOOK_TYPES = {"parameters": dict, "status": str, "started": str, "finished": str}
RECORD_TYPES = dict.fromkeys((*KEY, "kind", "seed", "fold", "notebook_status"),
                             (str, int, float))
_WANT = {str: "a string", int: "a whole number", dict: "a mapping", list: "a list"}


def resolve_run(name: str | os.PathLike, reports_dir: str | os.PathLike | None = None) -> Path:
    """A run folder given as a path or as a name under the reports folder."""
    p = Path(name)
    for cand in (p, Path(reports_dir or REPORTS_DIR) / p):
        if (cand / "manifest.json").is_file():
            return cand.resolve()
    raise RunnerError(f"run {str(name)!r}: no manifest.json at {p} or under "
                      f"{reports_dir or REPORTS_DIR}")


def check_options(alpha: Any, n_resamples: Any) -> None:
    """``alpha`` in (0, 1); at least :data:`MIN_RESAMPLES` bootstrap resamples."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise RunnerError(f"--alpha {alpha!r}: must be a number between 0 and 1 (e.g. 0.05)")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) \
            or n_resamples < MIN_RESAMPLES:
        raise RunnerError(f"--resamples {n_resamples!r}: must be a whole number of at least "
                          f"{MIN_RESAMPLES}")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise RunnerError(f"{path}: missing (not a run folder the runner wrote)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{path}: unreadable ({' '.join(str(exc).split())[:200]})") from None


def wrong_types(obj: dict, types: dict[str, Any], where: str = "") -> str | None:
    """The first ``where + key`` of ``obj`` whose value is neither None nor of its type in
    ``types`` (a bool is never a number), said in one line; None when all are."""
    for key, want in types.items():
        v = obj.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, want)):
            return (f"{where}{key} is {type(v).__name__} {str(v)[:60]!r}, not "
                    f"{_WANT.get(want, 'a string or number')}")
    return None


def check_manifest(manifest: Any, path: Path) -> dict:
    """The fields of a run manifest that are read (:data:`MANIFEST_TYPES`), checked; notebook
    names must be folder names (they are joined to the run folder)."""
    if not isinstance(manifest, dict):
        raise RunnerError(f"{path}: a JSON {type(manifest).__name__}, not a run manifest")
    why = wrong_types(manifest, MANIFEST_TYPES) or next(
        (f"{key}[{i}] is {type(x).__name__}, not {_WANT[want]}" for key, want in
         (("installed", str), ("data_sources", dict), ("notebooks", dict))
         for i, x in enumerate(manifest.get(key) or []) if not isinstance(x, want)), None)
    if why:
        raise RunnerError(f"{path}: {why}")
    for i, nb in enumerate(manifest.get("notebooks") or []):
        check_folder_name(nb.get("name"), f"{path}: notebooks[{i}] name")
        if why := wrong_types(nb, NOTEBOOK_TYPES, f"notebooks[{i}]."):
            raise RunnerError(f"{path}: {why}")
    return manifest


def record_problem(r: Any) -> str | None:
    """Why a metrics.json record cannot be compared (None: it can)."""
    if not isinstance(r, dict):
        return f"a JSON {type(r).__name__}, not an object"
    v = r.get("value")
    bad = (r.get("kind") or "result") == "result" and (
        isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v))
    return wrong_types(r, RECORD_TYPES) or (f"value {v!r} is not a finite number" if bad
                                            else None)


def load_run(run: str | os.PathLike) -> tuple[dict, list[dict]]:
    """A run folder's checked manifest and ``metrics.json`` records; a malformed run raises
    :class:`RunnerError` with one line naming the file and what is wrong."""
    run = Path(run)
    manifest = check_manifest(_read_json(run / "manifest.json"), run / "manifest.json")
    mpath = run / "metrics.json"
    metrics = _read_json(mpath)
    records = metrics.get("records") if isinstance(metrics, dict) else None
    if not isinstance(records, list):
        raise RunnerError(f"{mpath}: not the runner's metrics (an object with a 'records' list)")
    for i, r in enumerate(records):
        if why := record_problem(r):
            raise RunnerError(f"{mpath}: records[{i}]: {why}")
    return manifest, records


def shown_path(run: Path, other: Path | None = None) -> str:
    """How a page names a run folder: relative to the project, else to the folder it shares
    with ``other`` (the reports folder), else its name; never an absolute local path."""
    run = Path(run).resolve()
    if run.is_relative_to(PROJECT_ROOT):
        return run.relative_to(PROJECT_ROOT).as_posix()
    if other is not None:
        common = Path(os.path.commonpath([run, Path(other).resolve()]))
        if common != run and common != Path(common.anchor):
            return run.relative_to(common).as_posix()
    return run.name


def _params(manifest: dict, run: Path) -> dict[tuple[str, str | None], tuple[Any, str, bool]]:
    """(notebook, parameter) -> (value, note, known). A parameter the manifest does not list
    ran with the default of the run's copy of the notebook (note ``default``; not ``known``
    when it is no literal); (notebook, None) -> the note of a parameter it lacks."""
    from notebook_reports.parameters import declared_default, notebook_parameters

    out: dict[tuple[str, str | None], tuple[Any, str, bool]] = {}
    for n in manifest.get("notebooks", []):
        path = run / f"{n['name']}.ipynb"
        try:
            declared = notebook_parameters(path) if path.is_file() else None
        except RunnerError:
            declared = None
        out[(n["name"], None)] = (None, "default, not recorded" if declared is None
                                  else "not a parameter", False)
        for key, info in (declared or {}).items():
            known, value = declared_default(info)
            out[(n["name"], key)] = (value, "default", known)
        out.update({(n["name"], k): (v, "", True) for k, v in (n.get("parameters") or {}).items()})
    return {k: v for k, v in out.items() if k[1] not in IGNORED_PARAMS}


def _packages(manifest: dict) -> dict[str, str]:
    inst = manifest.get("installed")
    if inst:
        return dict(x.split("==", 1) for x in inst if "==" in x)
    return {k: v for k, v in (manifest.get("packages") or {}).items() if v}


def _data(manifest: dict) -> dict[tuple, str]:
    return {(s.get("dataset"), s.get("split"), Path(str(s.get("path"))).name): s.get("sha256")
            for s in manifest.get("data_sources") or []}


def _origin(run: str, n: dict) -> tuple:
    """The execution that made a notebook's outputs (the original one when it was reused)."""
    orig = (n.get("reused") or {}).get("original")
    return (orig.get("run"), orig.get("started")) if orig else (run, n.get("started"))


def same_executions(man_a: dict, man_b: dict) -> list[str]:
    """Notebooks whose outputs in both runs come from one execution (reused, identical)."""
    a = {n["name"]: _origin(man_a.get("run"), n) for n in man_a.get("notebooks", [])
         if n.get("status") == "ok"}
    return [n["name"] for n in man_b.get("notebooks", []) if n.get("status") == "ok"
            and a.get(n["name"]) == _origin(man_b.get("run"), n)]


def _items(run: Path, manifest: dict, side: str, notes: list[str]):
    """The per-item scores of a run's notebooks; a file that cannot be read (damaged, or
    without the columns a paired test needs) is one line in ``notes``, naming it."""
    import pandas as pd

    frames = []
    for n in manifest.get("notebooks", []):
        where = f"{side}: {n['name']}/{ITEMS_FILE}"
        try:
            frame = read_items(run / n["name"], n["name"])
        except FileNotFoundError:  # a notebook that wrote no per-item scores
            continue
        except (OSError, ValueError) as exc:
            why = " ".join(str(exc).replace(f"{run}{os.sep}", "").split())[:300]
            notes.append(f"{side}: {why} (not read)")  # the message names the file
            continue
        missing = sorted({*KEY[:5], "item", "value"} - set(frame.columns))
        if missing and not frame.empty:
            notes.append(f"{where} not read (no column(s) {', '.join(missing)})")
        elif not missing:
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _significance(run_a: Path, man_a: dict, run_b: Path, man_b: dict, keys: list[tuple],
                  alpha: float, n_resamples: int, notes: list[str]) -> dict[tuple, dict]:
    """Paired randomization (B vs A) on the items both runs scored, per changed key; the
    p-values of all keys are Holm-adjusted together (``significant``: adjusted p < alpha);
    per-item files not read are lines in ``notes``."""
    import pandas as pd

    from saf_utils.statistics import protocol as P
    from saf_utils.statistics.uncertainty import holm

    a, b = _items(run_a, man_a, "A", notes), _items(run_b, man_b, "B", notes)
    if a.empty or b.empty:
        return {}
    # two runs score the same items: the unit is the item ("these items"), folds as strata
    design = P.Design("items", "item", estimand="the same items, run B vs run A",
                      strata="fold", n_resamples=n_resamples, alpha=alpha)
    by = list(KEY[:5])
    both = pd.concat([a.assign(_run="A"), b.assign(_run="B")], ignore_index=True)
    wanted = {k[:5] for k in keys if k[5] is None}
    both = both[[k in wanted for k in zip(*(both[c] for c in by), strict=True)]]
    out: dict[tuple, dict] = {}
    for key, g in both.groupby(by, sort=False, dropna=False):
        if g["_run"].nunique() < 2:
            continue
        try:
            res = P.paired_table(g.drop(columns="system").rename(columns={"_run": "system"}),
                                 "A", design, by=["metric"])
        except ValueError as exc:
            out[(*key, None)] = {"error": str(exc)}
            continue
        for row in res.to_dict(orient="records"):
            out[(*key, None)] = {"p": row["p_value"], "low": row["ci_low"],
                                 "high": row["ci_high"], "n_items": row["n_items"]}
    tested = [k for k, v in out.items() if "p" in v]
    for k, p_adj in zip(tested, holm([out[k]["p"] for k in tested]), strict=True):
        out[k].update(p_adj=float(p_adj), significant=bool(p_adj < alpha))
    return out


#: The setup rows of a comparison: (label, manifest field, its key or None).
SETUP = (("profile", "profile", None), ("commit", "git", "commit"), ("dirty", "git", "dirty"),
         ("lock sha256", "lock", "sha256"), ("python", "environment", "python"),
         ("platform", "environment", "platform"))


def _setup(m: dict) -> dict[str, Any]:
    return {label: (m.get(field) or {}).get(sub) if sub else m.get(field)
            for label, field, sub in SETUP}


def _differ(a: dict, b: dict, keys: list[str], order: Any = None) -> list[dict]:
    """A row per key whose values differ (a key tuple spread over ``keys``)."""
    return [{**dict(zip(keys, k if isinstance(k, tuple) else (k,), strict=True)),
             "a": a.get(k), "b": b.get(k)}
            for k in sorted(set(a) | set(b), key=order or str) if a.get(k) != b.get(k)]


def compare_runs(run_a: str | os.PathLike, run_b: str | os.PathLike, alpha: float = 0.05,
                 n_resamples: int = 1000, tol: float = 1e-9) -> dict[str, Any]:
    """Everything that differs between two run folders (B relative to A)."""
    check_options(alpha, n_resamples)
    run_a, run_b = Path(run_a), Path(run_b)
    man_a, rec_a = load_run(run_a)
    man_b, rec_b = load_run(run_b)
    pa, pb = _params(man_a, run_a), _params(man_b, run_b)
    params = []
    for key in sorted({k for k in {*pa, *pb} if k[1] is not None}, key=str):
        a, b = (p.get(key) or p.get((key[0], None)) or (None, "not run", False) for p in (pa, pb))
        if not (key in pa and key in pb and (a[0], a[2]) == (b[0], b[2])):
            params.append({"notebook": key[0], "parameter": key[1], "a": a[0], "a_note": a[1],
                           "b": b[0], "b_note": b[1]})
    df = frame({"A": rec_a, "B": rec_b})
    va, vb = ({tuple(r[k] for k in KEY): r for r in rows_of(df[df["run"] == s])} for s in "AB")
    changed, same = [], 0
    for key in sorted(set(va) & set(vb), key=str):
        x, y = va[key]["value"], vb[key]["value"]
        if math.isclose(x, y, rel_tol=0, abs_tol=tol):
            same += 1
            continue
        changed.append({**dict(zip(KEY, key, strict=True)), "a": x, "b": y, "diff": y - x})
    notes: list[str] = []
    sig = _significance(run_a, man_a, run_b, man_b,
                        [tuple(c[k] for k in KEY) for c in changed], alpha, n_resamples, notes)
    for c in changed:
        c["test"] = sig.get(tuple(c[k] for k in KEY))
    return {"a": shown_path(run_a, run_b), "b": shown_path(run_b, run_a),
            "a_name": man_a.get("run", run_a.name), "b_name": man_b.get("run", run_b.name),
            "alpha": alpha, "identical": same_executions(man_a, man_b), "parameters": params,
            "setup": _differ(_setup(man_a), _setup(man_b), ["what"],
                             [s[0] for s in SETUP].index),
            "data": _differ(_data(man_a), _data(man_b), ["dataset", "split", "file"]),
            "packages": _differ(_packages(man_a), _packages(man_b), ["package"]),
            "changed": changed, "unchanged": same, "item_notes": notes,
            **{what: [{**dict(zip(KEY, k, strict=True)), side: v[k]["value"]}
                      for k in sorted(set(v) - set(w), key=str)]
               for what, side, v, w in (("appeared", "b", vb, va), ("disappeared", "a", va, vb))}}
