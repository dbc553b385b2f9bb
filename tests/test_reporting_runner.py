"""Runner reliability: checks before anything runs, --run-dir, depends_on, interrupts, writes.

Tiny notebooks in temp dirs; the kernel-starting tests take a few seconds each.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from notebook_reports import cli, executors, parameters, profiles, run_folder
from notebook_reports import runner as run
from tests.page_helpers import external_resources
from tests.toy_project import notebook

ROOT = Path(__file__).resolve().parent.parent


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_profiles_extend_base_and_merge(project):
    tmp, base, _ = project
    cfg = profiles.load_profile(config=tmp / "toy.yaml")
    assert cfg["notebooks"] == ["a_first", "b_reads_a"]
    assert cfg["parameters"] == {"value": 0.75} and cfg["notebook_parameters"] == {
        "a_first": {"n": 4}}
    assert cfg["extends_chain"] == [str(tmp / "base.yaml")]


def test_bad_invocations_are_one_line_and_rc_2(project, capsys, monkeypatch):
    tmp, base, reports = project
    cases = {
        "-p value=abc": (["-p", "value=abc"], "does not match the notebook's default 0.5"),
        "-p bool": (["-p", "a_first.flag=1"], "flag = 1"),
        "-p float for int": (["-p", "a_first.n=2.5"], "(int)"),
        "-p folds=[0,1": (["-p", "folds=[0,1"], "is not a valid value"),
        "-p no value": (["-p", "novalue"], "expected key=value"),
        "undeclared": (["-p", "a_first.nope=1"], "not in its parameters cell"),
        "--only zzz": (["--only", "zzz"], "matches nothing"),
        "run name": (["--run-name", "../x"], "one folder name inside the reports folder"),
        "run name abs": (["--run-name", "/tmp/x"], "one folder name"),
        "missing dep": (["--only", "b_reads_a"], "b_reads_a needs a_first"),
        "run-dir not a run": (["--run-dir", str(tmp)], "no manifest.json"),
    }
    for label, (args, expected) in cases.items():
        assert cli.main(base + args) == 2, label
        err = _err_line(capsys)
        assert expected in err, (label, err)
    for text, expected in (("parameters: 5\nnotebooks: [a_first]\n", "'parameters' must be a"),
                           ("notebooks: [a_first\n", "not valid YAML"),
                           ("- a\n- b\n", "a mapping of keys"),
                           ("extends: nowhere\n", "does not exist"),
                           ("notebook_parameters: {a_first: 3}\nnotebooks: [a_first]\n",
                            "notebook_parameters.a_first must be a mapping"),
                           ("notebooks: [b_reads_a, a_first]\n"
                            "depends_on: {b_reads_a: [a_first]}\n", "before it")):
        bad = tmp / "bad.yaml"
        bad.write_text(text)
        assert cli.main(["--config", str(bad), "--notebooks-dir", str(tmp / "notebooks")]) == 2
        assert expected in _err_line(capsys), text
    assert cli.main(["--profile", "no_such_profile"]) == 2
    capsys.readouterr()
    assert not reports.exists()  # nothing ran, nothing was written


def test_dry_run_shows_the_plan_with_yaml12_floats(project, capsys):
    tmp, base, reports = project
    assert cli.main(base + ["--dry-run", "-p", "a_first.lr=5e-4", "-p", "value=1"]) == 0
    out = capsys.readouterr().out
    assert "lr = 0.0005    # -p a_first" in out and "n = 4    # profile notebook_parameters" in out
    assert "value = 1    # -p" in out  # an int where the default is a float is fine
    assert "[2] b_reads_a  depends on a_first (selected)" in out
    assert "no selected notebook declares a data source" in out
    assert not reports.exists()


def test_data_sources_are_checked_before_anything_runs(project, capsys, monkeypatch):
    tmp, base, reports = project
    cfg = tmp / "data.yaml"
    cfg.write_text("notebooks: [d_data]\n")
    args = ["--config", str(cfg), "--notebooks-dir", str(tmp / "notebooks"), "--reports-dir",
            str(reports)]
    monkeypatch.delenv("SAF_DATA", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(args) == 2
    assert "huggingface.co is unreachable; set SAF_DATA" in _err_line(capsys)
    monkeypatch.setattr("notebook_reports.data_check.reachable", lambda host: False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert cli.main(args) == 2
    _err_line(capsys)
    assert cli.main(args + ["-p", "saf_source=data/nowhere"]) == 2  # relative, hub-id-like
    err = _err_line(capsys)
    assert "saf_source=data/nowhere is no folder (relative to" in err and "unset" not in err
    assert cli.main(args + ["-p", "saf_source=/no/such/folder"]) == 2
    assert "saf_source=/no/such/folder does not exist" in _err_line(capsys)
    monkeypatch.setenv("SAF_DATA", str(tmp))
    assert cli.main(args + ["--dry-run"]) == 0
    assert f"saf: local {tmp} via SAF_DATA for d_data" in capsys.readouterr().out
    assert not reports.exists()


def test_write_failures_are_one_line(project, capsys, monkeypatch):
    tmp, base, reports = project
    blocker = tmp / "a_file"
    blocker.write_text("")
    args = base[:-1] + [str(blocker / "reports"), "--only", "a_first"]
    assert cli.main(args) == 3  # the reports folder cannot be created
    assert "cannot create a run folder" in _err_line(capsys)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("notebook_reports.manifest.os.replace", full)
    assert cli.main(base + ["--only", "a_first", "--run-name", "full"]) == 3
    err = _err_line(capsys)
    assert "No space left on device" in err
    assert "metrics.json" in err or "manifest.json" in err
    assert not list((reports / "full").glob("*.json"))  # no truncated file left behind


@pytest.mark.slow
def test_run_dir_reruns_a_notebook_and_keeps_both_executions(project, capsys):
    tmp, base, reports = project
    assert cli.main(base + ["--run-name", "r1"]) == 0
    r1 = reports / "r1"
    a_before = (r1 / "a_first" / "records.jsonl").read_text()
    assert cli.main(base + ["--only", "b_reads_a", "--run-dir", "r1",  # a name in reports
                            "-p", "b_reads_a.value=0.125"]) == 0
    m = json.loads((r1 / "manifest.json").read_text())
    assert [e["name"] for e in m["executions"]] == ["a_first", "b_reads_a", "b_reads_a"]
    assert m["executions"][1]["archived_to"] == "previous/b_reads_a-1"
    assert (r1 / "previous" / "b_reads_a-1" / "b_reads_a.html").is_file()
    assert (r1 / "a_first" / "records.jsonl").read_text() == a_before  # untouched
    assert [n["name"] for n in m["notebooks"]] == ["a_first", "b_reads_a"]
    assert len(m["invocations"]) == 2 and m["status"] == "ok"
    values = {r["notebook"]: r["value"] for r in
              json.loads((r1 / "metrics.json").read_text())["records"]}
    assert values == {"a_first": 0.75, "b_reads_a": 0.125}
    assert m["lock"] is None or len(m["lock"]["sha256"]) == 64
    # notebook pages load nothing from the network
    for page in ("a_first.html", "b_reads_a.html", "index.html", "results.html"):
        text = (r1 / page).read_text()
        assert not external_resources(text), page
        assert "require.js" not in text and "mathjax" not in text.lower(), page
    # a new run compared with r1: one parameter differs
    capsys.readouterr()
    assert cli.main(base + ["--run-name", "r2", "-p", "value=0.5", "--baseline", "r1",
                            "--reports-dir", str(reports)]) == 0
    cmp = (reports / "r2" / "compare.html").read_text()
    assert "<b>value</b>" in cmp and "0.75" in cmp and "0.5" in cmp
    assert "A = r1<br>B = r2" in cmp and str(tmp) not in cmp  # no absolute local path
    assert cli.main(["list", "--reports-dir", str(reports)]) == 0
    out = capsys.readouterr().out
    assert "r1" in out and "r2" in out and "2/2 ok" in out
    # a failed dependency: its dependents are skipped, and cannot be rerun on top of it
    # (a value such as .nan is refused at planning, so the notebook itself fails)
    notebook(tmp / "notebooks" / "a_first.ipynb", "value = 0.5\nn = 3\noutput_dir = None",
             "raise ValueError('boom')")
    assert cli.main(base + ["--run-name", "r3"]) == 1
    m = json.loads((reports / "r3" / "manifest.json").read_text())
    assert [n["status"] for n in m["notebooks"]] == ["failed", "skipped"]
    capsys.readouterr()
    assert cli.main(base + ["--only", "b_reads_a", "--run-dir", str(reports / "r3")]) == 2
    assert "whose latest execution in r3 is failed" in _err_line(capsys)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_marks_the_run_and_still_writes_reports(project, sig):
    tmp, base, reports = project
    cfg = tmp / "sleep.yaml"
    cfg.write_text("notebooks: [c_sleeps, a_first]\nparameters: {value: 0.1}\n")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_reports", "--config", str(cfg), "--notebooks-dir",
         str(tmp / "notebooks"), "--reports-dir", str(reports), "--run-name", "s"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid_file = reports / "s" / "c_sleeps" / "kernel.pid"
    deadline = time.time() + 90
    while not pid_file.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert pid_file.is_file(), proc.communicate()[0] if proc.poll() is not None else "timeout"
    m = json.loads((reports / "s" / "manifest.json").read_text())
    assert m["status"] == "running" and m["notebooks"][0]["status"] == "running"
    assert "running" in (reports / "s" / "index.html").read_text()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), out
    m = json.loads((reports / "s" / "manifest.json").read_text())
    assert m["status"] == "interrupted" and m["status_reason"] == sig.name
    assert m["invocations"][-1]["status"] == "interrupted"
    assert [(n["name"], n["status"]) for n in m["notebooks"]] == [
        ("c_sleeps", "interrupted"), ("a_first", "pending")]
    assert not (reports / "s" / run_folder.RESERVE_FILE).exists()
    assert re.search(rf"^sleep · (?:.*\n)+?\s+s\s+\S*\s+interrupted \({sig.name}\)",
                     _list(reports), re.M)
    index = (reports / "s" / "index.html").read_text()
    assert '<span class="interrupted">interrupted</span>' in index
    nb = nbformat.read(reports / "s" / "c_sleeps.ipynb", as_version=4)
    assert nb.cells[0].source.startswith("**Interrupted")
    assert nb.cells[-1].metadata.papermill["status"] == "pending"  # not "completed"
    assert (reports / "s" / "c_sleeps.html").is_file()
    kernel = int(pid_file.read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(kernel, 0)  # the kernel did not outlive the run


def _fake_run(folder: Path, manifest: object = None, metrics: object = None) -> Path:
    """A run folder as far as list/compare/--baseline read it (no kernel)."""
    folder.mkdir(parents=True)
    if manifest is None:
        manifest = {"run": folder.name, "profile": "toy", "status": "ok",
                    "started": "2026-01-01T00:00:00+00:00", "notebooks": [
                        {"name": "a_first", "status": "ok", "parameters": {"value": 0.5}}]}
    if metrics is None:
        metrics = {"records": [{"notebook": "a_first", "task": "t", "dataset": "d",
                                "split": "test", "system": "s", "metric": "m", "value": 0.5}]}
    (folder / "manifest.json").write_text(
        manifest if isinstance(manifest, str) else json.dumps(manifest))
    if metrics is not False:
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_names_that_become_paths_stay_inside_the_reports_folder(project, capsys):
    tmp, base, reports = project
    args = ["--notebooks-dir", str(tmp / "notebooks"), "--reports-dir", str(reports)]
    cases = {
        "name: ../x\nnotebooks: [a_first]\n": "profile name '../x'",
        "name: /tmp/x\nnotebooks: [a_first]\n": "profile name '/tmp/x'",
        "notebooks: [a_first, ../t1x]\n": "notebook name '../t1x'",
        "notebooks: [a_first]\ndepends_on: {a_first: [../b]}\n": "depends_on.a_first",
        "notebooks: [a_first]\ndepends_on: {../c: [a_first]}\n": "depends_on notebook name",
        "notebooks: [a_first]\nnotebook_parameters: {a/b: {n: 1}}\n": "'a/b'",
    }
    for text, expected in cases.items():
        bad = tmp / "bad.yaml"
        bad.write_text(text)
        assert cli.main(["--config", str(bad), *args]) == 2, text
        assert expected in _err_line(capsys), text
    odd = tmp / "my profile.yaml"  # the file name becomes the run name
    odd.write_text("notebooks: [a_first]\n")
    assert cli.main(["--config", str(odd), *args]) == 2
    assert "from the file name; set 'name:'" in _err_line(capsys)
    odd.write_text("name: mine\nnotebooks: [a_first]\n")
    assert cli.main(["--config", str(odd), *args, "--dry-run"]) == 0
    assert "profile mine" in capsys.readouterr().out
    with pytest.raises(profiles.RunnerError, match="one folder name"):
        run_folder.new_run_dir(reports, "../escaped")
    assert not reports.exists() and not (tmp / "x").exists() and not (tmp / "escaped").exists()


def test_planning_checks_unselected_notebooks_list_elements_choices_and_fields(project, capsys):
    tmp, base, reports = project
    a = ["--only", "a_first"]
    cases = {  # -p NB.key for a notebook that is not selected is still checked
        "unselected type": (a + ["-p", "b_reads_a.value=two"], "b_reads_a.value = 'two'"),
        "unselected name": (a + ["-p", "b_reads_a.nope=1"], "['nope'] (-p b_reads_a)"),
        "list element": (["-p", "a_first.folds=[0, x]"], "element 'x' is str"),
        "list element float": (["-p", "a_first.folds=[1.5]"], "element 1.5 is float"),
        "list element None": (["-p", "a_first.folds=[null]"], "default [0] (list of int)"),
        "list for str": (["-p", "a_first.name=[1]"], "(list, from -p a_first)"),
    }
    for label, (args, expected) in cases.items():
        assert cli.main(base + args) == 2, label
        assert expected in _err_line(capsys), label
    assert cli.main(base + a + ["--dry-run", "-p", "b_reads_a.value=0.1"]) == 0
    assert "[2]" not in capsys.readouterr().out  # checked, not run

    nbs = ["--notebooks-dir", str(tmp / "notebooks"), "--reports-dir", str(reports)]
    profile = "notebooks: [a_first, b_reads_a]\n"
    for text, extra, expected in (
            ("timeout: ten minutes\n", [], "'timeout' must be a whole number of seconds"),
            ("timeout: 0\n", [], "'timeout' must be"),
            ("timeout: true\n", [], "'timeout' must be"),
            ("hide_code: 3\n", [], "'hide_code' must be true or false"),
            ("name: 5\n", [], "'name' must be a string"),
            ("description: [a]\n", [], "'description' must be a string"),
            ("choices: {folds: 3}\n", [], "choices.folds must be a non-empty list"),
            ("choices: 3\n", [], "'choices' must be a mapping"),
            ("choices: {folds: [0, 1, 2]}\n", ["-p", "folds=[7]"],
             "a_first.folds = [7] (from -p): 7 is not one of the profile's choices.folds"),
            ("choices: {folds: [0, 1]}\nparameters: {folds: [0, 2]}\n", [],
             "2 is not one of the profile's choices.folds"),
            ("choices: {name: [x, y]}\n", ["-p", "a_first.name=z"], "choices.name"),
            ("notebook_parameters: {b_reads_a: {value: x}}\n", a,  # not selected, still checked
             "b_reads_a.value = 'x'")):
        bad = tmp / "bad.yaml"
        bad.write_text(profile + text)
        assert cli.main(["--config", str(bad), *nbs, *extra]) == 2, text
        assert expected in _err_line(capsys), text
    bad.write_text(profile + "choices: {folds: [0, 1, 2]}\ntimeout: 600\n")
    assert cli.main(["--config", str(bad), *nbs, "--dry-run", "-p", "folds=[2, 0]"]) == 0
    capsys.readouterr()
    assert not reports.exists()


def test_base_profile_limits_folds_to_the_official_ones():
    cfg = profiles.load_profile("smoke")
    assert cfg["choices"]["folds"] == [0, 1, 2, 3, 4]
    with pytest.raises(profiles.RunnerError, match="7 is not one of the profile's choices.folds"):
        parameters.plan_notebooks(cfg, ["01_data_exploration"], ROOT / "notebooks", ["folds=[7]"])
    with pytest.raises(profiles.RunnerError, match=r"03_fact_selection.k = 'two'"):
        parameters.plan_notebooks(cfg, ["01_data_exploration"], ROOT / "notebooks",
                           ["03_fact_selection.k=two"])


def test_baseline_must_be_a_readable_run(project, capsys):
    tmp, base, reports = project
    elsewhere = tmp / "runs"
    cases = {
        "list": ("[1, 2]", None, "a JSON list, not a run manifest"),
        "bad json": ("{", None, "manifest.json: unreadable"),
        "notebook name": ({"notebooks": [{"name": "../x"}]}, None, "notebooks[0] name '../x'"),
        "notebooks": ({"notebooks": "a_first"}, None, "notebooks is str"),
        "no metrics": (None, False, "metrics.json: missing"),
        "metrics list": (None, [], "not the runner's metrics"),
        "no value": (None, {"records": [{"task": "t", "system": "s", "metric": "m"}]},
                     "records[0]: value None is not a finite number"),
        "list key": (None, {"records": [{"system": ["s"], "value": 1}]}, "system is list"),
    }
    for i, (label, (manifest, metrics, expected)) in enumerate(cases.items()):
        bad = _fake_run(elsewhere / f"b{i}", manifest, metrics)
        assert cli.main(base + ["--baseline", str(bad), "--dry-run"]) == 2, label
        assert expected in _err_line(capsys), label
        assert cli.main(base + ["--baseline", str(bad)]) == 2, label
        _err_line(capsys)
    assert not reports.exists()  # nothing ran
    good = _fake_run(elsewhere / "good")
    assert cli.main(base + ["--baseline", str(good), "--dry-run"]) == 0
    capsys.readouterr()


def test_list_and_compare_report_a_malformed_run_in_one_line(tmp_path, capsys):
    reports = tmp_path / "reports"
    _fake_run(reports / "good")
    _fake_run(reports / "good2")
    _fake_run(reports / "listy", "[1]")
    _fake_run(reports / "pid", {"pid": [1], "notebooks": []})
    _fake_run(reports / "novalue", metrics={"records": [{"system": "s", "metric": "m"}]})
    assert cli.main(["list", "--reports-dir", str(reports)]) == 0
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 2 and "Traceback" not in captured.err, err
    assert "listy" in err[0] and "not a run manifest" in err[0] and "pid is list" in err[1]
    assert all(name in captured.out for name in ("good", "good2", "novalue"))
    with pytest.raises(profiles.RunnerError):
        cli.list_runs(reports)  # without a problems list it raises

    def compare(*args: str) -> int:
        return cli.main(["compare", *args, "--reports-dir", str(reports)])

    for args, expected in ((["good", "listy"], "not a run manifest"),
                           (["novalue", "good"], "records[0]: value None"),
                           (["good", "good2", "--alpha", "5"], "--alpha 5.0: must be"),
                           (["good", "good2", "--alpha", "0"], "--alpha 0.0"),
                           (["good", "good2", "--alpha", "nan"], "--alpha nan"),
                           (["good", "good2", "--resamples", "0"], "--resamples 0: must be"),
                           (["good", "good2", "--resamples", "99"], "at least 100")):
        assert compare(*args) == 2, args
        assert expected in _err_line(capsys), args
    assert compare("good", "good2") == 0
    captured = capsys.readouterr()
    assert "A = good\nB = good2" in captured.out and str(tmp_path) not in captured.out
    page = (reports / "good2" / "compare-good.html").read_text()
    assert "A = good<br>B = good2" in page and str(tmp_path) not in page


def _bomb(levels: int, width: int = 10) -> str:
    """A YAML "billion laughs": ``levels`` anchors, each ``width`` aliases of the one before."""
    lines = ['l0: &l0 "lol"']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "{" + ", ".join(lines) + "}"


def test_planning_refuses_aliases_deep_values_and_non_plain_data(project, capsys):
    """A value that cannot be planned (an alias bomb, too deep, not plain data) is one line
    and rc 2, and nothing is written: planning fails before any folder exists."""
    tmp, base, reports = project
    bomb = tmp / "bomb.yaml"  # inside a mapping parameter: 10^6 strings once expanded
    bomb.write_text("extends: base\nnotebook_parameters:\n  a_first:\n"
                    f"    output_dir: {_bomb(7)}\n")
    t0 = time.perf_counter()
    assert cli.main(["--config", str(bomb), *base[2:], "--dry-run"]) == 2
    assert "anchors and aliases" in _err_line(capsys)
    assert time.perf_counter() - t0 < 5
    deep = "[" * 3000 + "]" * 3000
    for value, expected in (("&a [*a]", "anchors and aliases"),  # a list that holds itself
                            ("{a: &x 1, b: *x}", "anchors and aliases"),
                            ("{<<: &m {a: 1}}", "anchors and aliases"),
                            (deep, "nested deeper than 32 levels"),
                            ("9" * 5000, "is not a valid value"),
                            ("2020-01-01", "is a date, not plain data"),
                            ("!!binary aGVsbG8=", "is a bytes"),
                            ("[1, !!set {a: null}]", "output_dir[1] = {'a'} (from -p a_first)"),
                            ("{[1]: 2}", "is not a valid value")):
        for extra in ([], ["--dry-run"]):
            assert cli.main(base + ["-p", f"a_first.output_dir={value}", *extra]) == 2, value
            err = _err_line(capsys)
            assert expected in err and len(err) < 700, (value, err)
    assert not reports.exists()  # nothing was written
    for text, expected in ((f"notebooks: [a_first]\nparameters: {_bomb(3)}\n", "aliases"),
                           ("x: 1\n" * 250_000, "a profile is at most 1,000,000 bytes"),
                           (b"notebooks: [a_first]\n\xff\n", "not UTF-8")):
        bad = tmp / "bad.yaml"
        (bad.write_bytes if isinstance(text, bytes) else bad.write_text)(text)
        assert cli.main(["--config", str(bad), *base[2:]]) == 2
        assert expected in _err_line(capsys)
    cfg = profiles.load_profile(config=tmp / "toy.yaml")  # plain YAML still loads, 1.2 floats too
    assert cfg["notebook_parameters"] == {"a_first": {"n": 4}}
    assert parameters.parse_overrides(["lr=5e-4", "x=[1, {a: b}]"])[0] == {"lr": 5e-4,
                                                                    "x": [1, {"a": "b"}]}


def test_error_messages_echo_at_most_a_prefix_of_a_value(project, capsys):
    tmp, base, reports = project
    huge = "x" * 150_000
    for args in (["-p", f"a_first.n={huge}"],  # a type error
                 ["-p", f"a_first.folds=[0, {huge}]"],  # a bad list element
                 ["-p", f"a_first.{huge}=1"],  # not a parameter name
                 ["-p", f"{huge}"],  # no '='
                 ["-p", f"a_first.folds=[{huge}"],  # not valid YAML
                 ["-p", f"{'n' * 150_000}.value=1"],  # no such notebook
                 ["--run-name", huge]):
        assert cli.main(base + args) == 2
        err = _err_line(capsys)
        assert len(err) < 1000 and "(150,0" in err, err[:300]
    bad = tmp / "bad.yaml"
    for text in (f"notebooks: [a_first]\nchoices: {{folds: {huge}}}\n",
                 f"notebooks: [a_first]\nextends: {huge}\n",
                 f"notebooks: [a_first]\n{huge}: 1\n",
                 f"notebooks: [a_first]\ntimeout: {huge}\n",
                 "notebooks: [a_first]\nchoices: {name: [a]}\n"
                 f"notebook_parameters: {{a_first: {{name: {huge}}}}}\n"):
        bad.write_text(text)
        assert cli.main(["--config", str(bad), *base[2:]]) == 2
        err = _err_line(capsys)
        assert len(err) < 1000, err[:300]
    assert not reports.exists()


def _list(reports: Path) -> str:
    """``saf-run list`` output (the header line first)."""
    from contextlib import redirect_stdout
    from io import StringIO

    buf = StringIO()
    with redirect_stdout(buf):
        assert cli.main(["list", "--reports-dir", str(reports)]) == 0
    return buf.getvalue()


def _copy_notebook(nb_path: Path, out_path: Path, *args: object, **kwargs: object) -> None:
    """execute_one without a kernel: the output notebook is the input (fast runner tests)."""
    shutil.copy(nb_path, out_path)


@pytest.mark.slow
def test_a_full_disk_still_leaves_a_readable_status(project, capsys, monkeypatch):
    """The disk fills while a notebook runs; the space kept at the start is freed and the
    manifest says write_error, so a full disk never leaves a run that looks alive."""
    tmp, base, reports = project
    disk = {"full": False}
    real_replace = os.replace

    def replace(src, dst):  # full until the run frees the space it kept
        if disk["full"] and (reports / "w" / run_folder.RESERVE_FILE).exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    def execute(nb_path, out_path, *args, **kwargs):
        assert (reports / "w" / run_folder.RESERVE_FILE).stat().st_size == run_folder.RESERVE_BYTES
        _copy_notebook(nb_path, out_path)
        disk["full"] = True

    monkeypatch.setattr("notebook_reports.manifest.os.replace", replace)
    monkeypatch.setattr(executors, "execute_one", execute)
    assert cli.main(base + ["--run-name", "w"]) == 3
    err = _err_line(capsys)
    assert "cannot write" in err and "a_first.html: No space left on device" in err
    m = json.loads((reports / "w" / "manifest.json").read_text())
    assert m["status"] == "write_error" and m["invocations"][-1]["status"] == "write_error"
    assert "a_first.html: No space left on device" in m["status_reason"] and m["finished"]
    assert [(n["name"], n["status"]) for n in m["notebooks"]] == [
        ("a_first", "interrupted"), ("b_reads_a", "pending")]
    assert "the run stopped: cannot write" in m["notebooks"][0]["error"]
    assert not (reports / "w" / run_folder.RESERVE_FILE).exists()
    assert re.search(r"^toy · (?:.*\n)+?\s+w\s+\S*\s+write_error\s", _list(reports), re.M)
    # the disk stays full even for the manifest: one line, and it says so
    disk["full"] = False

    def reserve_then_fill(run_dir):
        real_reserve(run_dir)
        disk["full"] = True

    def always_full(src, dst):
        if disk["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    real_reserve = run.reserve_space
    monkeypatch.setattr(run, "reserve_space", reserve_then_fill)
    monkeypatch.setattr("notebook_reports.manifest.os.replace", always_full)
    assert cli.main(base + ["--run-name", "w2"]) == 3
    assert "the run's status could not be recorded" in _err_line(capsys)


@pytest.mark.slow
def test_a_failed_notebook_and_a_runner_error_say_so_in_the_status(project, capsys,
                                                                     monkeypatch):
    tmp, base, reports = project
    failing = {"a_first"}
    monkeypatch.setattr(executors, "execute_one", lambda nb, out, params, *a, **k: (
        _copy_notebook(nb, out), "ValueError: bad" if nb.stem in failing else None)[1])
    assert cli.main(base + ["--run-name", "f"]) == 1
    failing.clear()
    capsys.readouterr()
    m = json.loads((reports / "f" / "manifest.json").read_text())
    assert m["status"] == "failed"
    assert m["status_reason"] == "not ok: a_first (failed), b_reads_a (skipped)"

    def boom(*args, **kwargs):
        raise RuntimeError("a bug in the runner")

    # a bug while the notebook's page is made (a failure to record a finished notebook's
    # inputs is no longer one: it only makes the notebook not reusable)
    monkeypatch.setattr(run, "render", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(base + ["--run-name", "e", "--only", "a_first", "-p", "a_first.n=1"])
    m = json.loads((reports / "e" / "manifest.json").read_text())
    assert m["status"] == "error" and m["status_reason"] == "RuntimeError: a bug in the runner"
    assert m["notebooks"][0]["status"] == "interrupted"
    out = _list(reports)
    assert re.search(r"^toy · (?:.*\n)+?\s+f\s+\S*\s+failed\s", out, re.M)
    assert re.search(r"^toy · (?:.*\n)+?\s+e\s+\S*\s+error\s", out, re.M)


@pytest.mark.slow
def test_a_killed_run_is_found_and_marked_killed(project):
    tmp, base, reports = project
    cfg = tmp / "sleep.yaml"
    cfg.write_text("notebooks: [c_sleeps, a_first]\nparameters: {value: 0.1}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_reports", "--config", str(cfg), "--notebooks-dir",
         str(tmp / "notebooks"), "--reports-dir", str(reports), "--run-name", "k"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = reports / "k" / "c_sleeps" / "kernel.pid"
    deadline = time.time() + 90
    while not pid_file.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert pid_file.is_file()
    proc.kill()  # SIGKILL: nothing is written
    proc.wait(timeout=30)
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # its orphaned kernel
    except (ProcessLookupError, ValueError):
        pass
    assert json.loads((reports / "k" / "manifest.json").read_text())["status"] == "running"
    assert re.search(r"^sleep · (?:.*\n)+?\s+k\s+\S*\s+killed\s", _list(reports), re.M)
    m = json.loads((reports / "k" / "manifest.json").read_text())  # written down by list
    assert m["status"] == "killed" and f"process {proc.pid}" in m["status_reason"]
    assert m["invocations"][-1]["status"] == "killed"
    assert [(n["name"], n["status"]) for n in m["notebooks"]] == [
        ("c_sleeps", "interrupted"), ("a_first", "pending")]
    assert "killed" in m["notebooks"][0]["error"]
    assert '<span class="killed">killed</span>' in (reports / "k" / "index.html").read_text()
    assert not (reports / "k" / run_folder.RESERVE_FILE).exists()


@pytest.mark.slow
def test_a_real_full_disk_still_leaves_a_readable_status(project, tmp_path):
    """The same as above on a 3 MiB tmpfs that a notebook fills (root only)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs",
                                            str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        tmp, base, _ = project
        notebook(tmp / "notebooks" / "e_fills.ipynb", "output_dir = None",
                  "from pathlib import Path\n"
                  "with open(Path(output_dir).parent.parent / 'filler', 'wb') as fh:\n"
                  "    try:\n        while True:\n            fh.write(b'x' * 4096)\n"
                  "            fh.flush()\n    except OSError:\n        pass")
        cfg = tmp / "fill.yaml"
        cfg.write_text("notebooks: [e_fills]\n")
        proc = subprocess.run(
            [sys.executable, "-m", "notebook_reports", "--config", str(cfg), "--notebooks-dir",
             str(tmp / "notebooks"), "--reports-dir", str(mnt / "reports"), "--run-name", "d"],
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "No space left on device" in proc.stderr.strip().splitlines()[-1]
        m = json.loads((mnt / "reports" / "d" / "manifest.json").read_text())
        assert m["status"] == "write_error" and "No space left" in m["status_reason"]
        assert re.search(r"^fill · (?:.*\n)+?\s+d\s+\S*\s+write_error\s",
                         _list(mnt / "reports"), re.M)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_manifest_reads_back_an_older_runs_keys_unchanged():
    """Manifest is a dataclass, manifest.json keeps its keys: an older run's manifest (no
    ``executions``, a key this version does not know) reads back and writes the same values."""
    from notebook_reports.manifest import Manifest

    old = {"run": "r1", "profile": "toy", "status": "ok", "pid": 7, "host": "h",
           "notebooks": [{"name": "a_first", "status": "ok", "parameters": {}}],
           "someday": {"kept": True}}
    m = Manifest.from_dict(old)
    assert m.executions == old["notebooks"] and m.extra == {"someday": {"kept": True}}
    back = m.to_dict()
    assert {k: back[k] for k in old} == old and back["executions"] == old["notebooks"]
    assert Manifest.from_dict(back).to_dict() == back


def test_every_notebook_parameter_has_a_declared_type():
    """Each parameter of the project's notebooks has a type: its default, or where that is
    None its annotation as papermill reads it (so that planning can check every value); and
    papermill sees every assignment of the cell (it skips an annotation it cannot read, such
    as ``str | None``)."""
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        declared = parameters.notebook_parameters(nb)
        for key, info in declared.items():
            known, example = parameters.declared_type(info)
            assert known and example is not None, (nb.name, key)
        cell = next(c for c in nbformat.read(nb, as_version=4).cells
                    if "parameters" in c.metadata.get("tags", []))
        assigned = re.findall(r"^([A-Za-z_]\w*)\s*[:=]", cell.source, flags=re.M)
        assert assigned == list(declared), nb.name


def test_numbers_out_of_type_or_range_are_refused_at_planning(project, capsys):
    """nan, inf, -1, 0, 1e308 and 10**29 as a row cap (None by default): one line and exit 2
    from -p, a profile and a sweep matrix; nan/inf anywhere inside a value too."""
    tmp, base, reports = project
    nbs = tmp / "notebooks"
    notebook(nbs / "m_rows.ipynb", "max_rows: int = None\nseeds = [1, 2]\nlr = 0.001\n"
             "system_params = {}\noutput_dir = None", "pass")
    prof = tmp / "m.yaml"
    args = ["--config", str(prof), "--notebooks-dir", str(nbs), "--reports-dir", str(reports),
            "--dry-run"]
    prof.write_text("notebooks: [m_rows]\n")
    for raw in (".nan", ".inf", "-.inf", "-1", "0", "1e308", str(10**29)):
        assert cli.main(args + ["-p", f"max_rows={raw}"]) == 2, raw
        assert "m_rows.max_rows" in _err_line(capsys), raw
        assert cli.main(["sweep", *args, "--matrix", f"max_rows=[30, {raw}]"]) == 2, raw
        assert "max_rows" in _err_line(capsys), raw
        prof.write_text(f"notebooks: [m_rows]\nparameters: {{max_rows: {raw}}}\n")
        assert cli.main(args) == 2, raw
        assert "max_rows" in _err_line(capsys), raw
        prof.write_text("notebooks: [m_rows]\n")
    for item, expected in (("seeds=[1, -2]", "-2 is outside 0 to"),
                           ("lr=.nan", "nan is not a finite number"),
                           ("system_params={a: {lr: .inf}}", "inf is not a finite number"),
                           ("max_rows=30.0", "the type its parameters cell annotates")):
        assert cli.main(args + ["-p", item]) == 2, item
        assert expected in _err_line(capsys), item
    assert cli.main(args + ["-p", "max_rows=30", "-p", "lr=-0.5"]) == 0
    assert "max_rows = 30 " in capsys.readouterr().out
    assert not reports.exists()


def _headline_run(folder: Path, value: object, run: object = None) -> Path:
    rec = {"notebook": "a_first", "task": "argscichat_fact_selection", "dataset": "d",
           "split": "test", "system": "sys", "metric": "fact_f1", "value": value,
           "role": "system", "kind": "result"}
    return _fake_run(folder, {"run": run or folder.name, "profile": "toy", "status": "ok",
                              "started": f"2026-01-0{len(folder.name) % 9 + 1}T00:00:00+00:00",
                              "notebooks": [{"name": "a_first", "status": "ok"}]},
                     {"records": [rec]})


def test_list_names_each_run_by_its_folder_and_notes_renamed_ones(tmp_path, capsys):
    """A copied run (its manifest names another run, or an absolute path) is listed under
    its own folder; each renamed run is one note, never a traceback, and the other runs are
    still listed."""
    reports = tmp_path / "reports"
    _headline_run(reports / "orig", 0.5)
    _headline_run(reports / "copied", 0.25, run="orig")
    _headline_run(reports / "abs", 0.125, run=str(reports / "orig"))
    assert cli.main(["list", "--reports-dir", str(reports), "--json"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    notes = [line for line in captured.err.splitlines() if "note:" in line]
    assert len(notes) == 2 and all("copied or renamed" in n for n in notes), captured.err
    assert sorted(r["run"] for r in json.loads(captured.out)) == ["abs", "copied", "orig"]


def test_shared_pages_are_written_by_parallel_writers_without_collisions(tmp_path):
    """16 writers of one page at once: each writes a temporary file of its own and
    replaces the page atomically; none fails, no temporary file is left."""
    import threading

    from notebook_reports.manifest import write_text

    page, errors = tmp_path / "page.html", []

    def write(i: int) -> None:
        try:
            for _ in range(20):
                write_text(page, f"writer {i}\n" * 2000)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert len(set(page.read_text().splitlines())) == 1  # one writer's whole page
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_saf_run_list_escapes_control_characters_from_files(tmp_path, capsys):
    """A manifest's run, profile or status with terminal control sequences (window title,
    screen clear, colours) reaches the terminal escaped, in list and in compare."""
    reports = tmp_path / "reports"
    evil = "\x1b]0;pwned\x07\x1b[2J\x1b[32mok\x1b[0m\u202e"
    _fake_run(reports / "r1", {"run": "r1", "profile": evil, "status": "ok",
                               "started": "2026-01-01T00:00:00+00:00", "notebooks": [
                                   {"name": "a_first", "status": "ok", "parameters": {}}]})
    _fake_run(reports / "r2")
    assert cli.main(["list", "--reports-dir", str(reports)]) == 0
    assert cli.main(["compare", "r1", "r2", "--reports-dir", str(reports)]) in (0, 1)
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", stream), stream
    assert "\\x1b]0;pwned\\x07" in captured.out
