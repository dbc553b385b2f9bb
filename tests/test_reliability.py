"""Bad input, faults, interrupts and concurrency: nothing stale is reused, nothing is left
running, one bad file never blocks a run folder, every training setting is checked before
training, and planning refuses what it cannot run."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from notebook_reports import cli, reuse
from notebook_reports import runner as run
from notebook_reports.compare import compare_runs
from notebook_reports.compare_page import to_markdown
from saf_utils.data import provenance
from saf_utils.training import process_entry
from tests.test_reporting import make_run
from tests.toy_project import notebook, run_args

ROOT = Path(__file__).resolve().parent.parent


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ----------------------------------------------------------------- models named by a path
@pytest.fixture()
def model_project(tmp_path):
    """A notebook with a ``model`` parameter and a model folder beside it, as a notebook
    opened in Lab names it (relative to the notebooks folder)."""
    nbs = tmp_path / "notebooks"
    (nbs / "mdl" / "m1").mkdir(parents=True)
    (nbs / "mdl" / "m1" / "weights.bin").write_bytes(b"one")
    notebook(nbs / "m_model.ipynb", "model = 'scratch'\noutput_dir = None", "pass")
    (tmp_path / "p.yaml").write_text("notebooks: [m_model]\n")
    return tmp_path, run_args(tmp_path / "p.yaml", nbs, tmp_path / "reports")


def test_reuse_keys_on_the_model_folder_the_notebook_reads(model_project, monkeypatch):
    """``-p model=mdl/m1`` is the folder beside the notebook (the kernel's working folder),
    whatever the runner's own folder: new weights there change the key."""
    tmp, _ = model_project
    monkeypatch.chdir(tmp)  # the runner's folder has no mdl/
    nb = tmp / "notebooks" / "m_model.ipynb"
    before = reuse.notebook_inputs(nb, {"model": "mdl/m1"}, None, {}, {})
    (tmp / "notebooks" / "mdl" / "m1" / "weights.bin").write_bytes(b"two")
    after = reuse.notebook_inputs(nb, {"model": "mdl/m1"}, None, {}, {})
    assert before["models"][0]["source"] == "folder", before["models"]
    assert reuse.changed(before, after) == ["models"]


def test_a_model_path_that_names_nothing_is_refused_at_planning(model_project, capsys):
    tmp, args = model_project
    assert cli.main([*args, "-p", "model=../data/model_a", "--dry-run"]) == 2
    err = _one_line(capsys)
    assert "m_model: model '../data/model_a' names no folder" in err, err
    assert cli.main([*args, "-p", "model=mdl/m1", "--dry-run"]) == 0  # beside the notebook
    capsys.readouterr()


def test_identifying_a_model_never_raises():
    """The key of a notebook that succeeded is made after it ran: a name the hub refuses is
    said in the identity, not raised (the run would end in error)."""
    ident = provenance.model_identity("../data/model_a")
    assert ident["revision"] is None and ident["source"].startswith("unresolved"), ident


# ----------------------------------------------------------------- signals, process groups
def test_sighup_stops_a_run_like_sigint():
    """A closed terminal (SIGHUP) is an interrupt the run records (exit 129), not a death
    that leaves the run marked running."""
    code = textwrap.dedent("""
        import os, signal
        from notebook_reports.notebook_exec import Interrupted, _signals
        from notebook_reports.runner import exit_code
        try:
            with _signals(raise_on_signal=True):
                os.kill(os.getpid(), signal.SIGHUP)
                import time; time.sleep(5)
        except Interrupted as why:
            print("interrupted", why, exit_code(f"interrupted:{why}", []))
    """)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.stdout.split() == ["interrupted", "SIGHUP", "129"], (res.returncode, res.stderr)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except OSError:
        return True


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl: Linux")
def test_a_rank_in_a_session_of_its_own_dies_with_the_kernel(tmp_path):
    """torchrun starts each rank in a session of its own, which killing the kernel's process group
    (what the runner does on Ctrl-C) does not reach. A stand-in launcher does the same with a real
    ``python -m saf_utils.training.process_entry`` rank; the kernel's group is killed; the rank must
    be gone within seconds (it would train for minutes). Its output does not go to the kernel: a
    rank that wrote into the dead kernel's pipe died of that by chance."""
    from tests.test_train import TINY, saf_examples

    ex = saf_examples(tmp_path / "examples.jsonl.gz")
    launcher = tmp_path / "launcher.py"
    launcher.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        rank = subprocess.Popen([sys.executable, "-m", "saf_utils.training.process_entry",
                                 sys.argv[1]], start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # no broken pipe to die of
        open({str(tmp_path / "rank.pid")!r}, "w").write(str(rank.pid))
        rank.wait()
    """))
    kernel = textwrap.dedent(f"""
        import sys
        from saf_utils.training import jobs as J, launchers
        launchers.launch_command = lambda launcher, cfg: [sys.executable, {str(launcher)!r},
                                                          str(cfg)]
        J.run_job(J.TrainJob(examples={str(ex)!r}, output_dir={str(tmp_path / "out")!r},
                             settings={dict(TINY, max_steps=100000, logging_steps=1000)!r}),
                  "torchrun:2")
    """)
    proc = subprocess.Popen([sys.executable, "-c", kernel], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "rank.pid"
    deadline = time.time() + 60
    while not pid_file.is_file() and time.time() < deadline:
        time.sleep(0.1)
    rank = int(pid_file.read_text())
    while _cpu_seconds(rank) < 8 and time.time() < deadline:  # past its imports: training
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # as the runner kills a kernel on Ctrl-C
        proc.wait(timeout=10)
        deadline = time.time() + 15
        while not _zombie_or_gone(rank) and time.time() < deadline:
            time.sleep(0.2)
        assert _zombie_or_gone(rank), "the rank outlived its kernel and launcher"
    finally:
        if _alive(rank):
            os.kill(rank, signal.SIGKILL)


# ----------------------------------------------------------------- damaged artifacts
def _damage(path: Path, how: str) -> None:
    data = gzip.decompress(path.read_bytes()) if path.is_file() else "".join(
        json.dumps({"fold": 0, "split": "test", "system": "bm25", "seed": None,
                    "pair_id": f"p{i}", "selected": [i % 3]}) + "\n"
        for i in range(300)).encode()
    if how == "truncated gz":
        path.write_bytes(gzip.compress(data)[:-20])
    elif how == "not JSON":
        path.write_bytes(gzip.compress(b"this is not json\n" + data))
    elif how == "not UTF-8":
        path.write_bytes(gzip.compress(b'{"a": "\xff\xfe"}\n'))


@pytest.fixture(scope="module")
def compare_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    return root, make_run(root, "run_a"), make_run(root, "run_b", param=7, shift=0.15)


@pytest.mark.parametrize("how", ["truncated gz", "not JSON", "not UTF-8"])
def test_compare_names_and_counts_a_damaged_items_file(compare_pair, tmp_path, how):
    """compare reads run B's damaged per-item file: no traceback, and its changed results
    say why there is no paired test instead of a bare "no items"."""
    import shutil

    root, run_a, run_b = compare_pair
    b = tmp_path / "run_b"
    shutil.copytree(run_b, b)
    _damage(b / "02_baseline_finetuning" / "items.jsonl.gz", how)
    cmp = compare_runs(run_a, b, n_resamples=100)
    assert len(cmp["item_notes"]) == 1, cmp["item_notes"]
    assert cmp["item_notes"][0].startswith("B: 02_baseline_finetuning/items.jsonl.gz")
    md = to_markdown(cmp)
    assert "1 per-item file(s) not read" in md and "no items (per-item files not read" in md


def test_compare_reads_the_older_uncompressed_items_layout(compare_pair, tmp_path):
    """A run made before per-item files were compressed has ``items.jsonl``: read, tested."""
    import shutil

    root, run_a, run_b = compare_pair
    b = tmp_path / "run_b"
    shutil.copytree(run_b, b)
    gz = b / "02_baseline_finetuning" / "items.jsonl.gz"
    gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
    gz.unlink()
    cmp = compare_runs(run_a, b, n_resamples=100)
    acc = [c for c in cmp["changed"] if c["metric"] == "accuracy"]
    assert acc and all(c["test"] and "p" in c["test"] for c in acc), acc
    assert not cmp["item_notes"]


# ----------------------------------------------------------------- one run per folder
def test_two_runs_into_one_folder_never_lose_a_manifest_update(project, capsys):
    """Two ``--run-dir`` runs of different notebooks set up in one folder at once: the second
    is refused (one line), or both updates are in the manifest; never one lost."""
    tmp, base, reports = project
    assert cli.main(base + ["--run-name", "r"]) == 0
    folder = reports / "r"

    def request(only: str, value: float) -> run.RunRequest:
        return run.RunRequest(config=str(tmp / "toy.yaml"), run_dir=str(folder),
                              reports_dir=str(reports), notebooks_dir=str(tmp / "notebooks"),
                              only=[only], overrides=[f"value={value}"])

    from notebook_reports.executors import open_executor

    req_a, req_b = request("a_first", 0.125), request("b_reads_a", 0.375)
    plan_a, plan_b = run.prepare(req_a), run.prepare(req_b)  # both read the folder
    with open_executor() as ex:
        first = run._Run(req_a, plan_a, ex, reports)
        try:
            second = run._Run(req_b, plan_b, ex, reports)
        except run.RunnerError as exc:
            second = None
            assert "being written by another saf-run" in str(exc)
        try:
            first.execute()
        finally:
            os.close(first.lock)
        if second is not None:
            second.execute()
    capsys.readouterr()
    m = json.loads((folder / "manifest.json").read_text())
    values = {n["name"]: n["parameters"]["value"] for n in m["notebooks"]}
    assert values["a_first"] == 0.125, values  # what a_first.ipynb ran with
    assert values["b_reads_a"] == (0.75 if second is None else 0.375), values
    assert cli.main(base + ["--run-dir", str(folder), "--only", "b_reads_a"]) == 0  # released


# ----------------------------------------------------------------- training settings
def _job(tmp_path: Path, **change) -> dict:
    from tests.test_train import saf_examples

    job = {"examples": str(saf_examples(tmp_path / "ex.jsonl.gz")),
           "output_dir": str(tmp_path / "out"), "system": "s",
           "settings": {"max_steps": 2, "learning_rate": 0.001}}
    for key, value in change.items():
        if key.startswith("settings."):
            job["settings"][key.split(".", 1)[1]] = value
        else:
            job[key] = value
    return job


BAD_JOBS = {  # (change, text the one line names)
    "infinite learning rate": ({"settings.learning_rate": 1e309}, "learning_rate"),
    "learning rate 0": ({"settings.learning_rate": 0}, "learning_rate"),
    "epochs -inf": ({"settings.epochs": float("-inf")}, "epochs"),
    "negative batch": ({"settings.batch_size": -1}, "batch_size"),
    "max_steps 0": ({"settings.max_steps": 0}, "max_steps"),
    "warmup > 1": ({"settings.warmup_ratio": 2.0}, "warmup_ratio"),
    "null model": ({"settings.model": None}, "model"),
    "null max_steps": ({"settings.max_steps": None}, "max_steps"),
    "null learning rate": ({"settings.learning_rate": None}, "learning_rate"),
    "null settings": ({"settings": None}, "settings"),
    "settings []": ({"settings": []}, "settings"),
    "null output_dir": ({"output_dir": None}, "output_dir"),
    "null examples": ({"examples": None}, "examples"),
    "save_model 'false'": ({"save_model": "false"}, "save_model"),
    "seed text": ({"seed": "1"}, "seed"),
    "src_lang a number": ({"settings.src_lang": 5}, "src_lang"),
}


@pytest.mark.parametrize("case", sorted(BAD_JOBS))
def test_every_training_setting_is_checked_before_training(tmp_path, case, capsys):
    """``python -m saf_utils.training.process_entry job.json``: a bad setting is one line naming the
    field and exit 2, before any process group is joined or model built."""
    change, field = BAD_JOBS[case]
    cfg = tmp_path / "job.json"
    text = json.dumps(_job(tmp_path, **change)).replace("-Infinity", "-1e999")
    cfg.write_text(text.replace("Infinity", "1e309"))  # as a JSON writer outside Python does
    assert process_entry._main([str(cfg)]) == process_entry.EXIT_BAD_JOB
    err = _one_line(capsys)
    assert field in err and "Traceback" not in err, err
    assert not (tmp_path / "out" / "predictions.jsonl.gz").exists()


@pytest.mark.parametrize("content", [b"", b"\x1f\x8b\x08\x00", b"not json\n",
                                     b'{"split": "train", "id": 1}\n'])
def test_an_unreadable_examples_file_is_one_line_naming_it(tmp_path, content, capsys):
    job = _job(tmp_path)
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(content if content.startswith(b"\x1f") or not content
                    else gzip.compress(content))
    job["examples"] = str(bad)
    (tmp_path / "job.json").write_text(json.dumps(job))
    assert process_entry._main([str(tmp_path / "job.json")]) == process_entry.EXIT_BAD_JOB
    assert "bad.jsonl.gz" in _one_line(capsys)


def test_the_train_command_exits_2_with_one_line(tmp_path):
    cfg = tmp_path / "job.json"
    cfg.write_text(json.dumps(_job(tmp_path, **{"settings.learning_rate": None})))
    res = subprocess.run([sys.executable, "-m", "saf_utils.training.process_entry", str(cfg)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(res.stderr.strip().splitlines()) == 1 and "learning_rate" in res.stderr


# ----------------------------------------------------------------- parameters at planning
@pytest.mark.parametrize("launcher", ["null", "''", "5", "'torchrun:0'", "'torchrun:x'",
                                      "'processes:0'", "'accelerate:-1'", "[none]", "'gpu'"])
def test_every_launcher_value_is_checked_at_planning(tmp_path, launcher, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "t_train.ipynb", "launcher = 'none'\noutput_dir = None", "pass")
    (tmp_path / "p.yaml").write_text("notebooks: [t_train]\n")
    args = run_args(tmp_path / "p.yaml", nbs, tmp_path / "reports")
    assert cli.main([*args, "-p", f"launcher={launcher}", "--dry-run"]) == 2, launcher
    assert "launcher" in _one_line(capsys)


@pytest.mark.parametrize("value", ["1:30", "yes", "off", "010", "1_000", "0o17", "0b11"])
def test_scalars_yaml_11_and_12_read_differently_are_refused(project, value, capsys):
    """``-p n=1:30`` is 90 in YAML 1.1 (base 60) and text in 1.2: refused, not guessed."""
    _, base, _ = project
    assert cli.main(base + ["-p", f"a_first.n={value}", "--dry-run"]) == 2
    assert "YAML 1.1" in _one_line(capsys)
    assert cli.main(base + ["-p", "a_first.n=90", "--dry-run"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("profile, message", [
    ("extends: base\nparameters: {value: 0.1}\nparameters: {value: 0.2}\n", "appears twice"),
    ("extends: base\nnotebook_parameters:\n  a_first:\n    n: 4\n    n: 5\n",
     "'n' appears twice"),
    ("notebooks: [a_first, b_reads_a, a_first]\ndepends_on: {b_reads_a: [a_first]}\n",
     "lists ['a_first'] more than once"),
])
def test_a_key_or_notebook_written_twice_in_a_profile_is_refused(project, capsys, profile,
                                                                 message):
    tmp, base, _ = project
    (tmp / "toy.yaml").write_text(profile)
    assert cli.main(base + ["--dry-run"]) == 2
    assert message in _one_line(capsys)


# ----------------------------------------------------------------- a lost Dask scheduler
def test_closing_the_executor_after_a_lost_scheduler_raises_nothing(capsys):
    """After the scheduler is gone the client's close raises (ClosedClientError); the run
    already says cluster_lost, so closing is one line, not a traceback."""
    from concurrent.futures import ThreadPoolExecutor

    from notebook_reports.executors import NotebookExecutor

    class GoneClient:
        def close(self) -> None:
            raise RuntimeError("ClosedClientError: the client is closed")

    NotebookExecutor(ThreadPoolExecutor(1), {"kind": "dask"}, GoneClient()).close()
    assert "closing the executor" in _one_line(capsys)



def _processes_naming(text: str) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(
                    errors="replace") and not _zombie_or_gone(int(proc.name)):
                out.append(int(proc.name))
        except OSError:
            continue
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, prctl: Linux")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: s.name)
def test_a_stopped_run_leaves_no_torchrun_rank(tmp_path, sig):
    """saf-run -> kernel -> torchrun:2 -> two ranks training a tiny model; the runner gets
    Ctrl-C (SIGINT), SIGTERM, SIGHUP or dies (SIGKILL): within seconds no process of the
    job is left (ranks run in sessions of their own, which no group kill reaches). The
    ranks print nothing while they train: one that wrote into its dead launcher's pipe would
    die of that by chance."""
    from tests.test_train import TINY, saf_examples

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    ex = saf_examples(tmp_path / "examples.jsonl.gz")
    notebook(nbs / "t_train.ipynb", "launcher = 'none'\noutput_dir = None",
             "from saf_utils.training import jobs as J\n"
             f"J.run_job(J.TrainJob(examples={str(ex)!r}, output_dir=output_dir, "
             f"settings={dict(TINY, max_steps=100000, logging_steps=100000)!r}), launcher)")
    (tmp_path / "p.yaml").write_text("notebooks: [t_train]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_reports", *run_args(tmp_path / "p.yaml", nbs,
                                                          tmp_path / "reports"),
         "--run-name", "s", "-p", "launcher=torchrun:2"], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    job = str(tmp_path / "reports" / "s" / "t_train" / "job.json")
    deadline = time.time() + 240
    ranks: list[int] = []
    while time.time() < deadline and proc.poll() is None:
        ranks = [p for p in _processes_naming(job) if "saf_utils.training.process_entry" in Path(
            f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        if sum(_cpu_seconds(r) > 5 for r in ranks) >= 2:  # both ranks past their imports
            break
        time.sleep(0.5)
    assert len(ranks) >= 3, proc.communicate(timeout=60)[0][-3000:]
    try:
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        deadline = time.time() + 30
        while _processes_naming(job) and time.time() < deadline:
            time.sleep(0.5)
        assert not _processes_naming(job), ("left running", _processes_naming(job), out[-2000:])
        if sig != signal.SIGKILL:
            m = json.loads((tmp_path / "reports" / "s" / "manifest.json").read_text())
            assert (m["status"], m["status_reason"]) == ("interrupted", sig.name), m["status"]
    finally:
        for pid in _processes_naming(job):
            os.kill(pid, signal.SIGKILL)
