"""Frozen notebooks (--reuse) and the runner's log: one line per section, no kernel warning."""

from __future__ import annotations

import json

import nbformat
import pytest

from notebook_reports import cli, compare, notebook_exec, profiles, reuse
from saf_utils.data import provenance


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def test_section_starts_name_the_first_code_cell_under_each_heading():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\nintro"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("## 1. Load *data*\n### 1.1 `files`"),
        nbformat.v4.new_code_cell("y = 2"), nbformat.v4.new_code_cell("z = 3"),
        nbformat.v4.new_markdown_cell("## Without code below"),
        nbformat.v4.new_markdown_cell("text, no heading"),
        nbformat.v4.new_markdown_cell("## 2. Fit"), nbformat.v4.new_code_cell("w = 4")])
    assert notebook_exec.section_starts(nb) == {1: "Title", 3: "1.1 files", 8: "2. Fit"}


@pytest.mark.slow
def test_reuse_copies_unchanged_notebooks_and_reruns_changed_ones(project, capfd):
    tmp, base, reports = project
    assert cli.main(base + ["--run-name", "r1"]) == 0
    out = capfd.readouterr()
    assert "without encryption" not in out.err + out.out
    assert "§ test x^2" in out.out  # a line per section, the output is not a terminal
    # nothing changed: both notebooks reused, with the original execution
    assert cli.main(base + ["--run-name", "r2", "--reuse", "r1"]) == 0
    assert "reused from r1" in capfd.readouterr().out
    m1, m2 = _manifest(reports / "r1"), _manifest(reports / "r2")
    for n1, n2 in zip(m1["notebooks"], m2["notebooks"], strict=True):
        assert n2["reused"]["from"] == "r1" and n2["status"] == "ok"
        assert n2["reused"]["original"]["started"] == n1["started"]
        assert n2["inputs"]["key"] == n1["inputs"]["key"] and n2["files"] == n1["files"]
        assert (reports / "r2" / n2["name"] / "records.jsonl").read_bytes() == \
            (reports / "r1" / n1["name"] / "records.jsonl").read_bytes()
    index = (reports / "r2" / "index.html").read_text()
    assert "reused from r1" in index and "stale" not in index
    cmp = compare.compare_runs(reports / "r1", reports / "r2")
    assert cmp["identical"] == ["a_first", "b_reads_a"] and not cmp["changed"]
    # a chain: r3 reuses r2, whose outputs came from r1's execution
    assert cli.main(base + ["--run-name", "r3", "--reuse", "r2"]) == 0
    assert _manifest(reports / "r3")["notebooks"][0]["reused"]["original"]["run"] == "r1"
    # a parameter of the first notebook changed: it and its dependent rerun
    capfd.readouterr()
    assert cli.main(base + ["--run-name", "r4", "--reuse", "r3", "-p",
                            "a_first.value=0.125"]) == 0
    log = capfd.readouterr().out
    assert "a_first: changed since r3: parameters" in log
    assert "b_reads_a: changed since r3: depends_on" in log
    assert not any(n.get("reused") for n in _manifest(reports / "r4")["notebooks"])
    # --only the dependent with the same inputs as r4: reused
    assert cli.main(base + ["--run-name", "r5", "--reuse", "r4", "-p",
                            "a_first.value=0.125"]) == 0
    assert all(n.get("reused") for n in _manifest(reports / "r5")["notebooks"])


def test_reuse_inputs_and_changes(tmp_path):
    nb = tmp_path / "x.ipynb"
    nb.write_text("{}")
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    def read() -> dict:  # a notebook without data sources: the files its execution read
        return reuse.notebook_data({}, {}, [str(data)])

    a = reuse.notebook_inputs(nb, {"k": 1, "output_dir": "/r1/x"}, "L", {"up": "u"}, read())
    b = reuse.notebook_inputs(nb, {"k": 1, "output_dir": "/r2/x"}, "L", {"up": "u"}, read())
    assert a == b and reuse.changed(a, b) == []
    data.write_text("a\n2\n")
    c = reuse.notebook_inputs(nb, {"k": 2}, "L", {"up": "v"}, read())
    assert reuse.changed(a, c) == ["parameters", "data", "depends_on"]
    gone = reuse.notebook_inputs(nb, {"k": 1}, "L", {"up": None}, a["data"])
    assert reuse.changed(gone, gone) == ["depends_on"]  # an upstream folder missing: rerun
    data.unlink()
    assert read() == {"other_files": {str(data): "missing"}}


def test_profile_reuse_setting_is_checked(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("notebooks: [a]\nreuse: yesterday\n")
    with pytest.raises(profiles.RunnerError, match="'reuse' must be 'latest'"):
        profiles.load_profile(config=bad)


@pytest.mark.slow
def test_profile_reuse_latest_finds_each_notebook_in_the_latest_run_that_has_it(project, capfd):
    tmp, base, reports = project
    (tmp / "toy.yaml").write_text((tmp / "toy.yaml").read_text() + "reuse: latest\n")
    assert cli.main(base + ["--run-name", "r1", "--no-reuse"]) == 0
    assert cli.main(base + ["--run-name", "r2", "--only", "a_first"]) == 0
    capfd.readouterr()
    assert cli.main(base + ["--run-name", "r3"]) == 0
    assert "a_first reused from r2" in capfd.readouterr().out
    got = {n["name"]: (n["reused"]["from"], n["reused"]["original"]["run"])
           for n in _manifest(reports / "r3")["notebooks"]}
    assert got == {"a_first": ("r2", "r1"), "b_reads_a": ("r1", "r1")}
    assert cli.main(base + ["--run-name", "r4", "--no-reuse", "--only", "a_first"]) == 0
    assert not _manifest(reports / "r4")["notebooks"][0].get("reused")


def test_package_digest_covers_notebook_code_not_the_runner():
    from notebook_reports.manifest import PROJECT_ROOT

    for name in reuse.RUNNER_ONLY:
        assert (PROJECT_ROOT / name).is_file(), name
    assert "notebook_reports/records.py" not in reuse.RUNNER_ONLY  # notebooks import it
    assert "notebook_reports/pages.py" not in reuse.RUNNER_ONLY  # it renders the copied pages
    assert len(reuse.package_digest()) == 64


def _reused(run_dir) -> dict[str, bool]:
    return {n["name"]: bool(n.get("reused")) for n in _manifest(run_dir)["notebooks"]}


@pytest.mark.slow
def test_reuse_verifies_every_copied_file_and_rehashes_upstream_folders(project, capfd):
    """Edited records, pages and artifacts of a notebook and of a dependency are never
    reused, because "reused" must mean the files its execution made; the log names the file."""
    tmp, base, reports = project
    assert cli.main(base + ["--run-name", "r1"]) == 0
    r1 = reports / "r1"
    original = (r1 / "a_first" / "records.jsonl").read_text()
    # the notebook's records edited: it runs again; its dependent reads the same bytes as
    # before from the fresh execution and is reused
    (r1 / "a_first" / "records.jsonl").write_text(original.replace("0.75", "0.99"))
    capfd.readouterr()
    assert cli.main(base + ["--run-name", "r2", "--reuse", "r1"]) == 0
    log = capfd.readouterr().out
    assert ("a_first: not reused from r1: a_first/records.jsonl differs from the file its "
            "execution made") in log
    assert (reports / "r2" / "a_first" / "records.jsonl").read_text() == original
    assert _reused(reports / "r2") == {"a_first": False, "b_reads_a": True}
    files = _manifest(reports / "r2")["notebooks"][0]["files"]
    assert {"a_first.html", "a_first.ipynb", "a_first/records.jsonl"} <= set(files)
    values = {r["notebook"]: r["value"] for r in
              json.loads((reports / "r2" / "metrics.json").read_text())["records"]}
    assert values == {"a_first": 0.75, "b_reads_a": 0.75}
    # a page edited (r2's b_reads_a files are links to r1's)
    page = reports / "r2" / "b_reads_a.html"
    page.write_text(page.read_text().replace("</body>", "<p>edited</p></body>"))
    assert cli.main(base + ["--run-name", "r3", "--reuse", "r2"]) == 0
    assert "b_reads_a: not reused from r2: b_reads_a.html differs" in capfd.readouterr().out
    assert _reused(reports / "r3") == {"a_first": True, "b_reads_a": False}
    assert "edited" not in (reports / "r3" / "b_reads_a.html").read_text()
    # an artifact added to the upstream folder: it reruns, its dependent is reused
    (reports / "r3" / "a_first" / "model.bin").write_bytes(b"\0")
    assert cli.main(base + ["--run-name", "r4", "--reuse", "r3"]) == 0
    assert "a_first: not reused from r3: a_first/model.bin was not made by its execution" \
        in capfd.readouterr().out
    assert _reused(reports / "r4") == {"a_first": False, "b_reads_a": True}
    assert not (reports / "r4" / "a_first" / "model.bin").exists()
    # a dependency's artifact edited in the run itself: the dependent's key is computed from
    # the files, not from the digest the manifest keeps
    (reports / "r4" / "a_first" / "records.jsonl").write_text(original.replace("0.75", "0.5"))
    assert cli.main(base + ["--run-dir", "r4", "--only", "b_reads_a", "--reuse", "r3"]) == 0
    assert "b_reads_a: changed since r3: depends_on" in capfd.readouterr().out
    assert _reused(reports / "r4") == {"a_first": False, "b_reads_a": False}
    # an execution recorded before files were verified (no "files"): run again
    m = _manifest(reports / "r3")
    del m["notebooks"][0]["files"]
    (reports / "r3" / "manifest.json").write_text(json.dumps(m))
    assert cli.main(base + ["--run-name", "r5", "--reuse", "r3", "--only", "a_first"]) == 0
    assert "a_first: not reused from r3: no digests of its files were recorded" \
        in capfd.readouterr().out


def test_reuse_file_digests_and_mismatches(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "nb" / "sub").mkdir(parents=True)
    (run_dir / "nb.ipynb").write_text("{}")
    (run_dir / "nb" / "records.jsonl").write_text("{}\n")
    (run_dir / "nb" / "sub" / "a").write_text("x")
    (run_dir / "nb-b").mkdir()  # a sibling whose name starts like the notebook's: not its
    (run_dir / "nb-b" / "z").write_text("z")
    files = reuse.output_files(run_dir, "nb")
    assert sorted(files) == ["nb.ipynb", "nb/records.jsonl", "nb/sub/a"]
    assert reuse.tree_digest(run_dir / "gone") is None
    assert reuse.tree_digest(run_dir / "nb") != reuse.tree_digest(run_dir / "nb-b")
    assert reuse.mismatch(files, files) is None
    assert reuse.mismatch({**files, "nb.html": "0"}, files) == "nb.html is missing"
    assert reuse.mismatch({**files, "nb.html": "0"}, files, ["nb.html"]) is None
    assert "nb/sub/a differs" in reuse.mismatch({**files, "nb/sub/a": "0"}, files)
    assert "not made by its execution" in reuse.mismatch({"nb.ipynb": files["nb.ipynb"]}, files)
    assert "no digests" in reuse.mismatch(None, files)


def test_data_input_is_what_the_notebook_would_read_now(tmp_path, monkeypatch):
    """The data key lists the folders a notebook would read now: another folder (either data
    variable or saf_source), a new, removed or changed file, an optional file appearing or
    disappearing, each changes it."""
    a, b, chat = tmp_path / "a", tmp_path / "b", tmp_path / "chat"
    for d in (a, b, chat):
        d.mkdir()
        (d / "train.json").write_text("[]")
    monkeypatch.setenv("SAF_DATA", str(a))
    monkeypatch.setenv("ARGSCICHAT_DATA", str(chat))
    declared = {"saf_source": {}, "argscichat_source": {}, "output_dir": {}}
    first = reuse.notebook_data({"saf_source": None}, declared)
    assert first["saf"] == {"source": str(a.resolve()), "files": {"train.json": first["saf"][
        "files"]["train.json"]}}
    assert reuse.notebook_data({}, declared) == first
    monkeypatch.setenv("SAF_DATA", str(b))  # same bytes, another folder
    now = reuse.notebook_data({}, declared)
    assert now != first and now["saf"]["source"] == str(b.resolve())
    monkeypatch.setenv("SAF_DATA", str(a))
    assert reuse.notebook_data({"saf_source": str(b)}, declared) == now  # the parameter
    (chat / "intents.csv").write_text("id,intent\n")  # an optional file appears
    with_intents = reuse.notebook_data({}, declared)
    assert sorted(with_intents["argscichat"]["files"]) == ["intents.csv", "train.json"]
    (chat / "intents.csv").unlink()  # ... and disappears again
    assert reuse.notebook_data({}, declared) == first
    monkeypatch.setenv("ARGSCICHAT_DATA", str(b))
    assert reuse.notebook_data({}, declared)["argscichat"]["source"] == str(b.resolve())
    monkeypatch.setenv("ARGSCICHAT_DATA", str(chat))
    (a / "train.json").write_text("[1]")
    assert reuse.notebook_data({}, declared)["saf"]["files"] != first["saf"]["files"]
    # files read outside the declared folders (a hub cache): hashed now
    other = tmp_path / "cache.bin"
    other.write_text("x")
    inside = str(a / "train.json")  # in a declared folder: already in its files
    assert reuse.notebook_data({}, declared, [str(other), inside])["other_files"] == {
        str(other): provenance.sha256_file(other)}


@pytest.mark.slow
def test_reuse_reruns_a_notebook_whose_data_folder_changed(project, capfd, monkeypatch):
    """SAF_DATA, ARGSCICHAT_DATA or saf_source pointing at another folder, or an optional
    file appearing in it, never returns the earlier run's results."""
    from tests.toy_project import notebook, run_args

    tmp, _, reports = project
    notebook(tmp / "notebooks" / "e_reads.ipynb",
             "saf_source = None\nargscichat_source = None\noutput_dir = None", "pass")
    (tmp / "e.yaml").write_text("notebooks: [e_reads]\nreuse: latest\n")
    base = run_args(tmp / "e.yaml", tmp / "notebooks", reports)
    folders = {}
    for name in ("saf_a", "saf_b", "chat_a"):
        folders[name] = tmp / name
        folders[name].mkdir()
        (folders[name] / "train.json").write_text("[]")
    monkeypatch.setenv("SAF_DATA", str(folders["saf_a"]))
    monkeypatch.setenv("ARGSCICHAT_DATA", str(folders["chat_a"]))
    assert cli.main(base + ["--run-name", "r1"]) == 0
    capfd.readouterr()

    def run(name: str, *extra: str) -> str:
        assert cli.main(base + ["--run-name", name, *extra]) == 0
        return capfd.readouterr().out

    assert "e_reads reused from r1" in run("r2")
    monkeypatch.setenv("SAF_DATA", str(folders["saf_b"]))
    assert "e_reads: changed since r1: data\n" in run("r3", "--reuse", "r1")
    monkeypatch.setenv("SAF_DATA", str(folders["saf_a"]))
    monkeypatch.setenv("ARGSCICHAT_DATA", str(folders["saf_b"]))
    assert "e_reads: changed since r1: data\n" in run("r4", "--reuse", "r1")
    monkeypatch.setenv("ARGSCICHAT_DATA", str(folders["chat_a"]))
    (folders["chat_a"] / "intents.csv").write_text("id,intent\n")
    assert "e_reads: changed since r1: data\n" in run("r5", "--reuse", "r1")
    (folders["chat_a"] / "intents.csv").unlink()
    assert "e_reads: changed since r5: data\n" in run("r6", "--reuse", "r5")
    assert "changed since r1: parameters, data\n" in run(
        "r7", "--reuse", "r1", "-p", f"saf_source={folders['saf_b']}")
    assert _manifest(reports / "r7")["notebooks"][0]["inputs"]["data"]["saf"]["source"] == \
        str(folders["saf_b"].resolve())
