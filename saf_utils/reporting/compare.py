"""Compare two runs: what changed in the setup and which numbers changed significantly.

``saf-run compare RUN_A RUN_B`` prints Markdown and writes an HTML page: the parameter,
data-fingerprint and package differences of the two manifests; per (task, dataset, split,
system, metric[, subset]) of the ``result`` records the two values and B - A, flagged where a
paired randomization test on the per-item scores of both runs (``items.jsonl``, item level:
the same items scored twice; :func:`saf_utils.protocol.paired_table`) finds the difference
significant after Holm's adjustment over all changed records; and the records that appear or
disappear.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from saf_utils.artifacts import ITEMS_FILE, read_items
from saf_utils.reporting.crossrun import KEY, frame, rows_of
from saf_utils.reporting.manifest import PROJECT_ROOT
from saf_utils.reporting.profiles import REPORTS_DIR, RunnerError, check_folder_name

IGNORED_PARAMS = {"output_dir"}
MIN_RESAMPLES = 100


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


def _typed(obj: dict, path: Path, where: str, types: tuple, keys: tuple[str, ...],
           want: str) -> None:
    for key in keys:
        v = obj.get(key)
        if v is not None and (isinstance(v, bool) and bool not in types
                              or not isinstance(v, types)):
            raise RunnerError(f"{path}: {where}{key} is {type(v).__name__} {str(v)[:60]!r}, "
                              f"not {want}")


def check_manifest(manifest: Any, path: Path) -> dict:
    """The fields of a run manifest that ``list``, ``compare`` and ``--run-dir`` read, checked;
    notebook names must be folder names (they are joined to the run folder)."""
    if not isinstance(manifest, dict):
        raise RunnerError(f"{path}: a JSON {type(manifest).__name__}, not a run manifest")
    _typed(manifest, path, "", (str,), ("run", "profile", "profile_file", "status", "started",
                                        "finished", "host"), "a string")
    _typed(manifest, path, "", (int,), ("pid",), "a process id")
    _typed(manifest, path, "", (dict,), ("git", "environment", "lock", "packages"), "a mapping")
    _typed(manifest, path, "", (list,), ("notebooks", "installed", "data_sources",
                                         "executions", "invocations"), "a list")
    if not all(isinstance(x, str) for x in manifest.get("installed") or []):
        raise RunnerError(f"{path}: installed must list name==version strings")
    if not all(isinstance(x, dict) for x in manifest.get("data_sources") or []):
        raise RunnerError(f"{path}: data_sources must list mappings")
    for i, nb in enumerate(manifest.get("notebooks") or []):
        if not isinstance(nb, dict):
            raise RunnerError(f"{path}: notebooks[{i}] is {type(nb).__name__}, not a mapping")
        check_folder_name(nb.get("name"), f"{path}: notebooks[{i}] name")
        _typed(nb, path, f"notebooks[{i}].", (dict,), ("parameters",), "a mapping")
        _typed(nb, path, f"notebooks[{i}].", (str,), ("status", "started", "finished"),
               "a string")
    return manifest


def _check_record(r: Any) -> str | None:
    """Why a metrics.json record cannot be compared (None: it can)."""
    if not isinstance(r, dict):
        return f"a JSON {type(r).__name__}, not an object"
    for k in (*KEY, "kind", "seed", "fold", "notebook_status"):
        v = r.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
            return f"{k} is {type(v).__name__} {str(v)[:40]!r}"
    if (r.get("kind") or "result") == "result":
        v = r.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return f"value {v!r} is not a finite number"
    return None


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
        why = _check_record(r)
        if why:
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


class Default:
    """A parameter a notebook ran with without the profile or ``-p`` setting it: the value of
    its ``parameters`` cell (``known`` False where the run keeps no readable copy of it)."""

    def __init__(self, value: Any = None, known: bool = True) -> None:
        self.value, self.known = value, known

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Default):
            return self.known == other.known and self.value == other.value
        return self.known and self.value == other

    __hash__ = None  # type: ignore[assignment]


def _defaults(run: Path, name: str) -> dict[str, Default] | None:
    """The parameters cell of the run's own copy of the notebook (``<run>/<name>.ipynb``: the
    defaults it ran with, which the manifest does not repeat); None without a readable copy."""
    from saf_utils.reporting.parameters import declared_default, notebook_parameters

    path = run / f"{name}.ipynb"
    if not path.is_file():
        return None
    try:
        declared = notebook_parameters(path)
    except RunnerError:
        return None
    out = {}
    for key, info in declared.items():
        known, value = declared_default(info)
        out[key] = Default(value, known)
    return out


def _params(manifest: dict, run: Path) -> dict[tuple[str, str], Any]:
    """(notebook, parameter) -> value for every notebook of the run's manifest. A parameter the
    manifest does not list ran with its default (a :class:`Default`); keys ``(notebook,
    None)`` mark a notebook whose copy is missing, so its defaults are not known."""
    out: dict[tuple[str, str | None], Any] = {}
    for n in manifest.get("notebooks", []):
        defaults = _defaults(run, n["name"])
        if defaults is None:
            out[(n["name"], None)] = Default(known=False)
        for k, v in {**(defaults or {}), **(n.get("parameters") or {})}.items():
            if k not in IGNORED_PARAMS:
                out[(n["name"], k)] = v
    return out


def _param_value(params: dict, ran: set[str], key: tuple[str, str]) -> tuple[Any, str]:
    """(value, note) of one side of a parameter row; the note says where a value came from
    when it was not set (``default``) or why there is none."""
    if key in params:
        v = params[key]
        return (v.value, "default") if isinstance(v, Default) else (v, "")
    if key[0] not in ran:
        return None, "not run"
    if (key[0], None) in params:
        return None, "default, not recorded"
    return None, "not a parameter"


def _packages(manifest: dict) -> dict[str, str]:
    inst = manifest.get("installed")
    if inst:
        return dict(x.split("==", 1) for x in inst if "==" in x)
    return {k: v for k, v in (manifest.get("packages") or {}).items() if v}


def _data(manifest: dict) -> dict[tuple, str]:
    out = {}
    for s in manifest.get("data_sources") or []:
        key = (s.get("dataset"), s.get("split"), Path(str(s.get("path"))).name)
        out[key] = s.get("sha256")
    return out


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


def _items(run: Path, manifest: dict):
    import pandas as pd

    frames = []
    need = {"task", "dataset", "split", "system", "metric", "item", "value"}
    for n in manifest.get("notebooks", []):
        if (run / n["name"] / ITEMS_FILE).is_file():
            try:
                frame = read_items(run / n["name"], n["name"])
            except ValueError:
                continue
            if need <= set(frame.columns):  # else no paired test for its records
                frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: Two runs score the same items: the unit is the item ("these items"), folds as strata.
RUN_DESIGN_ESTIMAND = "the same items, run B vs run A"


def _significance(run_a: Path, man_a: dict, run_b: Path, man_b: dict, keys: list[tuple],
                  alpha: float, n_resamples: int) -> dict[tuple, dict]:
    """Paired randomization (B vs A) on the items both runs scored, per changed key; the
    p-values of all keys are Holm-adjusted together (``significant``: adjusted p < alpha)."""
    import pandas as pd

    from saf_utils import protocol as P
    from saf_utils.stats import holm

    a, b = _items(run_a, man_a), _items(run_b, man_b)
    if a.empty or b.empty:
        return {}
    design = P.Design("items", "item", estimand=RUN_DESIGN_ESTIMAND, strata="fold",
                      n_resamples=n_resamples, alpha=alpha)
    by = ["task", "dataset", "split", "system", "metric"]
    wanted = {k[:5] for k in keys if k[5] is None}
    out: dict[tuple, dict] = {}
    both = pd.concat([a.assign(_run="A"), b.assign(_run="B")], ignore_index=True)
    both["_key"] = list(zip(*(both[c] for c in by), strict=True))
    both = both[both["_key"].isin(wanted)].drop(columns="_key")
    for key, g in both.groupby(by, sort=False, dropna=False):
        if g["_run"].nunique() < 2:
            continue
        try:
            res = P.paired_table(g.drop(columns="system").rename(columns={"_run": "system"}),
                                 "A", design, by=["metric"])
        except ValueError as exc:
            out[tuple(key) + (None,)] = {"error": str(exc)}
            continue
        for row in res.to_dict(orient="records"):
            out[tuple(key) + (None,)] = {
                "p": row["p_value"], "low": row["ci_low"], "high": row["ci_high"],
                "n_items": row["n_items"]}
    tested = [k for k, v in out.items() if "p" in v]
    for k, p_adj in zip(tested, holm([out[k]["p"] for k in tested]), strict=True):
        out[k].update(p_adj=float(p_adj), significant=bool(p_adj < alpha))
    return out


def compare_runs(run_a: str | os.PathLike, run_b: str | os.PathLike, alpha: float = 0.05,
                 n_resamples: int = 1000, tol: float = 1e-9) -> dict[str, Any]:
    """Everything that differs between two run folders (B relative to A).

    ``a`` / ``b`` of the result name the folders as :func:`shown_path` does."""
    check_options(alpha, n_resamples)
    run_a, run_b = Path(run_a), Path(run_b)
    man_a, rec_a = load_run(run_a)
    man_b, rec_b = load_run(run_b)
    pa, pb = _params(man_a, run_a), _params(man_b, run_b)
    ran = ({n["name"] for n in man_a.get("notebooks", [])},
           {n["name"] for n in man_b.get("notebooks", [])})
    params = []
    for key in sorted({k for k in set(pa) | set(pb) if k[1] is not None}, key=str):
        if key in pa and key in pb and pa[key] == pb[key]:
            continue
        row: dict[str, Any] = {"notebook": key[0], "parameter": key[1]}
        for side, vals, names in (("a", pa, ran[0]), ("b", pb, ran[1])):
            row[side], row[f"{side}_note"] = _param_value(vals, names, key)
        params.append(row)
    setup = []
    for label, get in (("profile", lambda m: m.get("profile")),
                       ("commit", lambda m: (m.get("git") or {}).get("commit")),
                       ("dirty", lambda m: (m.get("git") or {}).get("dirty")),
                       ("lock sha256", lambda m: (m.get("lock") or {}).get("sha256")),
                       ("python", lambda m: (m.get("environment") or {}).get("python")),
                       ("platform", lambda m: (m.get("environment") or {}).get("platform"))):
        if get(man_a) != get(man_b):
            setup.append({"what": label, "a": get(man_a), "b": get(man_b)})
    da, db = _data(man_a), _data(man_b)
    data = [{"dataset": k[0], "split": k[1], "file": k[2], "a": da.get(k), "b": db.get(k)}
            for k in sorted(set(da) | set(db), key=str) if da.get(k) != db.get(k)]
    ka, kb = _packages(man_a), _packages(man_b)
    packages = [{"package": k, "a": ka.get(k), "b": kb.get(k)}
                for k in sorted(set(ka) | set(kb)) if ka.get(k) != kb.get(k)]
    df = frame({"A": rec_a, "B": rec_b})
    va, vb = ({tuple(r[k] for k in KEY): r for r in rows_of(df[df["run"] == s])} for s in "AB")
    changed, same = [], 0
    for key in sorted(set(va) & set(vb), key=str):
        x, y = va[key]["value"], vb[key]["value"]
        if math.isclose(x, y, rel_tol=0, abs_tol=tol):
            same += 1
            continue
        changed.append({**dict(zip(KEY, key, strict=True)), "a": x, "b": y, "diff": y - x,
                        "status": [va[key]["status"], vb[key]["status"]]})
    sig = _significance(run_a, man_a, run_b, man_b,
                        [tuple(c[k] for k in KEY) for c in changed], alpha, n_resamples)
    for c in changed:
        c["test"] = sig.get(tuple(c[k] for k in KEY))
    appeared = [{**dict(zip(KEY, k, strict=True)), "b": vb[k]["value"]}
                for k in sorted(set(vb) - set(va), key=str)]
    disappeared = [{**dict(zip(KEY, k, strict=True)), "a": va[k]["value"]}
                   for k in sorted(set(va) - set(vb), key=str)]
    return {"a": shown_path(run_a, run_b), "b": shown_path(run_b, run_a),
            "a_name": man_a.get("run", run_a.name), "b_name": man_b.get("run", run_b.name),
            "alpha": alpha, "setup": setup, "identical": same_executions(man_a, man_b),
            "parameters": params, "data": data, "packages": packages, "changed": changed,
            "unchanged": same, "appeared": appeared, "disappeared": disappeared}


