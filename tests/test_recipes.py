"""The recipes of docs/recipes.md, applied as written to a copy of the repository (its
tracked files): each system's and the metric's module written into the package there, its
one import line added where the task collects its modules, its profile entry merged into
the smoke profile. On that copy the layers test passes and ``saf-run --dry-run`` lists the
new systems with their parameters (fast); a smoke run of 02, 03 and 04 records them and the
new metric, with the notebook-cell system of "Try a system in the notebook first" run by 02
(slow). The "Add a task" recipe is followed in test_tasks.py, "Add a notebook" in
test_run.py.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fakes import bow_encoder

from saf_utils.argscichat.systems import SELECTORS
from saf_utils.data.artifacts import SAF_PREDICTIONS_FILE, read_jsonl, record_rows
from saf_utils.saf import experiments as SR
from saf_utils.saf.all_systems import SYSTEMS
from saf_utils.saf.context import EncoderChoice, load_data

ROOT = Path(__file__).parents[1]
FIX = Path(__file__).parent / "fixtures"
RECIPES = ROOT / "docs" / "recipes.md"
#: recipe -> the file its import line goes into (docs/recipes.md says which)
COLLECTED_IN = {"saf": "saf_utils/saf/all_systems.py",
                "selector": "saf_utils/argscichat/systems.py",
                "reply": "saf_utils/argscichat/systems.py",
                "metric": "saf_utils/metrics/__init__.py"}


def _recipe(name: str) -> str:
    """The code block of docs/recipes.md after ``<!-- recipe: name -->``."""
    text = RECIPES.read_text(encoding="utf-8")
    start = text.index(f"<!-- recipe: {name} -->")
    block = text[text.index("```", start):]
    body = block[block.index("\n") + 1:]
    return body[:body.index("```")]


def _module_path(import_line: str) -> str:
    """The package file an import line imports (``import a.b`` / ``from a import b``)."""
    node = ast.parse(import_line).body[0]
    name = (node.names[0].name if isinstance(node, ast.Import)
            else f"{node.module}.{node.names[0].name}")
    return name.replace(".", "/") + ".py"


def _merge(into: dict, entry: dict) -> None:
    for k, v in entry.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def apply_recipes(dest: Path) -> dict[str, str]:
    """A copy of the repository's tracked files (as they are in the work tree) at ``dest``
    with every recipe applied as written; returns the metric's name."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    if (ROOT / ".cache").is_dir():  # downloaded resources (WordNet, models): `make` puts
        (dest / ".cache").symlink_to((ROOT / ".cache").resolve())  # them there, untracked
    profile = dest / "configs" / "smoke.yaml"
    cfg = yaml.safe_load(profile.read_text(encoding="utf-8"))
    for kind, collected in COLLECTED_IN.items():
        line = _recipe(f"{kind} import").strip()
        module = dest / _module_path(line)
        assert not module.exists(), module
        module.write_text(_recipe(f"{kind} module"), encoding="utf-8")
        with open(dest / collected, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        if kind != "metric":
            _merge(cfg["notebook_parameters"], yaml.safe_load(_recipe(f"{kind} profile")))
    profile.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    # the metric's use: its name in the SAF task's one list of scored metrics
    metric = re.search(r'register_metric\("(\w+)"', _recipe("metric module")).group(1)
    evaluate = dest / "saf_utils" / "saf" / "scores.py"
    text = evaluate.read_text(encoding="utf-8")
    assert text.count('"moverscore", "unparseable_rate")') == 1
    evaluate.write_text(text.replace('"moverscore", "unparseable_rate")',
                                     f'"moverscore", "{metric}", "unparseable_rate")'),
                        encoding="utf-8")
    return {"metric": metric}


def _env(copy: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(copy)}


def _saf_run(copy: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "notebook_reports", *args], cwd=copy,
                          env=_env(copy), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    dest = tmp_path_factory.mktemp("recipes") / "repo"
    return dest, apply_recipes(dest)


def test_the_recipes_touch_their_module_one_import_line_and_one_profile_entry() -> None:
    text = RECIPES.read_text(encoding="utf-8")
    for title in ("### SAF", "## Add a fact selector (ArgSciChat)",
                  "## Add a reply system (ArgSciChat)", "## Add a metric"):
        section = text[text.index(title):]
        files = section[:section.index("<!-- recipe:")]
        assert "Files touched: **the" in files and "**one import line**" in files, title
    for collected in COLLECTED_IN.values():
        assert f"`{collected}`" in text, collected


@pytest.mark.slow  # ~3 s: copies the repository and plans three profiles on the copy
def test_on_a_copy_the_layers_hold_and_the_dry_run_lists_the_new_systems(copy, monkeypatch
                                                                          ) -> None:
    import test_layers

    repo, _ = copy
    monkeypatch.setattr(test_layers, "ROOT", repo / "saf_utils")  # the copy's package
    assert test_layers.violations() == [] and test_layers.module_cycles() == []
    data = [f"saf_source={FIX / 'saf_legal_jsonl'}", f"argscichat_source={FIX / 'argscichat'}"]
    script = ("import sys\nfrom notebook_reports import cli\n"
              "for profile in ('smoke', 'cpu'):\n"
              "    print('== profile', profile, flush=True)\n"
              "    code = cli.main(['--profile', profile, '--dry-run', '-p', sys.argv[1], "
              "'-p', sys.argv[2]])\n"
              "    assert code in (0, None), code\n")
    done = subprocess.run([sys.executable, "-c", script, *data], cwd=repo, env=_env(repo),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    smoke, cpu = done.stdout.split("== profile cpu")
    assert "systems: error" not in done.stdout, done.stdout
    for system, params in (("always_partial", "score=0.25"), ("last_k", "skip=1"),
                           ("echo_query", "words=3")):
        assert f"      system {system}: {params}" in smoke, system  # the profile's value
        assert re.search(rf"runs \d+ systems: .*\b{system}\b", smoke), system
    # a profile that selects (cpu: every system but seq2seq): the new one runs, its default
    assert "      system always_partial: score=0.5" in cpu


def test_a_system_defined_in_a_notebook_cell_runs_with_the_others() -> None:
    """The "notebook cell" recipe, run as 02's cell above its run cell would run it (twice:
    a cell is rerun after an edit)."""
    cell = _recipe("notebook cell")
    try:
        for _ in range(2):
            exec(compile(cell, "notebook cell", "exec"), {"SYSTEMS": SYSTEMS})
        names = list(SR.planned_systems({"systems": None, "system_params": {}}))
        assert names[-1] == "always_correct"
        data = load_data(str(FIX / "saf_legal_jsonl"))
        run = SR.run_systems(data, ["majority", "always_correct"],
                             EncoderChoice("de", "bow", (), "local:all-MiniLM-L6-v2", ()),
                             {"always_correct": {"score": 0.5}}, embed=bow_encoder)
        mine = run.preds[run.preds.system == "always_correct"]
        assert len(mine) and (mine.pred_label == "Correct").all()
        assert (mine.pred_score == 0.5).all() and run.roles["always_correct"] == "baseline"
    finally:
        SYSTEMS.unregister("always_correct")
    assert "always_correct" not in SYSTEMS


@pytest.mark.parametrize("family", [SYSTEMS, SELECTORS])
def test_unregistering_leaves_the_registry_as_it_was(family) -> None:
    before = list(family.names())
    family.register("tmp_recipe", "baseline")(lambda *a: None)
    family.unregister("tmp_recipe")
    assert list(family.names()) == before


def test_notebook_02_needs_no_edit_for_a_new_saf_system() -> None:
    """02 runs what its ``systems`` selects and takes parameters by system name only: no
    parameter of one system in its parameters cell (``seeds`` is the run's)."""
    import dataclasses

    from notebook_reports.parameters import notebook_parameters

    nb_path = ROOT / "notebooks" / "02_baseline_finetuning.ipynb"
    params = notebook_parameters(nb_path)
    assert params["system_params"]["default"] == "{}" and params["systems"]["default"] == "None"
    per_system = {f.name for e in SYSTEMS.values() for f in dataclasses.fields(e.params_type)}
    assert not (per_system - {"seeds"}) & set(params), sorted(per_system & set(params))
    code = "\n".join("".join(c["source"]) for c in json.loads(nb_path.read_text())["cells"]
                     if c["cell_type"] == "code")
    assert "runner.planned_systems(" in code and "runner.run_systems(" in code


def test_a_metric_scale_can_be_any_interval_and_takes_only_its_options() -> None:
    from saf_utils import metrics as M

    @M.register_metric("agreement", level="item", inputs="scores", scale="[-1, 1]",
                       description="sign agreement")
    def agreement(gold, pred, labels=None):
        return [1.0 if (g > 0) == (p > 0) else -1.0 for g, p in zip(gold, pred, strict=True)]

    try:
        m = M.metric("agreement")
        assert M.bounds("agreement") == (-1.0, 1.0) and m.range == "-1 to 1"
        assert M.scale_label("agreement") == "↑ -1–1"
        assert m.options({"labels": ["x"], "model": "m"}) == {"labels": ["x"]}
        assert m.score([1.0, -1.0], [2.0, 3.0], **m.options({"model": "m"})).value == 0.0
    finally:
        del M.METRICS["agreement"]
    assert M.bounds("accuracy") == (0.0, 1.0) and M.bounds("chrf") == (0.0, 100.0)
    assert M.bounds("mse") == (0.0, float("inf")) and M.bounds("unregistered") is None
    for bad in ("-1-1", "[1, -1]", "[0, inf]", "0..1"):
        with pytest.raises(ValueError, match="scale"):
            M.Metric("x", scale=bad, compute=len)


def test_every_notebook_has_an_empty_your_reading_cell() -> None:
    """A markdown cell for the author's own reading beside the computed conclusions: its
    title and no visible text (an HTML comment says what goes there)."""
    for path in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                 if "".join(c["source"]).startswith("## Your reading")]
        assert len(cells) == 1 and cells[0]["cell_type"] == "markdown", path.name
        body = "".join(cells[0]["source"]).removeprefix("## Your reading")
        assert not re.sub(r"<!--.*?-->", "", body, flags=re.S).strip(), path.name


@pytest.mark.slow
def test_a_smoke_run_of_the_copy_records_the_new_systems_and_metric(copy, tmp_path) -> None:
    """02 (with the notebook-cell system pasted above its run cell), 03 and 04 on the copy:
    every recipe's system is recorded with its profile value, and the metric too."""
    if not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")):
        pytest.skip("needs SAF_DATA and ARGSCICHAT_DATA (local data copies)")
    repo, applied = copy
    nb_path = repo / "notebooks" / "02_baseline_finetuning.ipynb"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    at = next(i for i, c in enumerate(nb["cells"]) if "runner.run_systems(" in "".join(
        c["source"]))
    nb["cells"].insert(at, {"cell_type": "code", "execution_count": None, "id": "my-try",
                            "metadata": {}, "outputs": [],
                            "source": _recipe("notebook cell").splitlines(keepends=True)})
    nb_path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    done = _saf_run(repo, "--profile", "smoke", "--only", "02,03,04", "--no-reuse",
                    "--reports-dir", str(tmp_path), "--run-name", "r", timeout=1500)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    run = tmp_path / "r"
    rows = record_rows([run / nb / "records.jsonl" for nb in
                        ("02_baseline_finetuning", "03_fact_selection", "04_generation")])
    results = [r for r in rows if r["kind"] == "result"]
    for system in ("always_partial", "always_correct", "last_k", "echo_query"):
        assert any(r["system"] == system for r in results), system
    assert any(r["metric"] == applied["metric"] and r["system"] == "majority"
               for r in results)
    preds = read_jsonl(run / "02_baseline_finetuning" /
                       SAF_PREDICTIONS_FILE.format(split="validation"))
    assert set(preds.loc[preds.system == "always_partial", "pred_score"]) == {0.25}
