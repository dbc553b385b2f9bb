"""The notebook graph on Dask and sweeps (notebook_reports/executors.py, notebook_reports/sweep.py).

Fast: the matrix, cell names, the graph walk with a fake executor, the worker checks, bad
options. Slow, against the real engine: a LocalCluster (``--workers 2``) over tiny
notebooks, and a ``dask scheduler`` + ``dask worker`` on 127.0.0.1 running a two-cell smoke
sweep of notebook 01 that must give the records of serial runs of the same cells.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml

from notebook_reports import cli, cluster_options, executors, sweep
from notebook_reports.profiles import RunnerError
from tests.toy_project import RECORD, notebook, reads_a, run_args

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ fast
def test_matrix_from_the_command_line():
    m = sweep.parse_matrix(["seeds=[[1,2],[3]]", "02_x.lr=[1e-3, 5e-4]"])
    assert m == {"seeds": [[1, 2], [3]], "02_x.lr": [0.001, 0.0005]}
    for items, expected in ((["lr"], "expected key="), (["lr=3"], "non-empty list"),
                            (["lr=[]"], "non-empty list"), (["lr=[1,1]"], "listed twice"),
                            (["a b=[1]"], "not a parameter name"),
                            (["lr=[1", ], "not a valid value"),
                            (["lr=[1]", "lr=[2]"], "given twice"), ([], "needs a matrix")):
        with pytest.raises(RunnerError, match=expected):
            sweep.parse_matrix(items)


def test_cell_names_are_folder_names_without_paths():
    assert sweep.cell_name({"saf_source": "/data/saf_legal/", "02_b.seeds": [1, 2, 3]}) == \
        "saf_source-saf_legal__seeds-1+2+3"
    assert sweep.cell_name({"model": "local:all MiniLM"}) == "model-local-all-MiniLM"
    assert sweep.shown_value("/a/b/c") == "c" and sweep.shown_value(0.5) == "0.5"


class FakeExecutor:
    """Slots, and an event log instead of kernels; a task 'runs' until waited for (then the
    oldest one ends)."""

    def __init__(self, slots: int) -> None:
        self.slots, self.log, self.queue = slots, [], []

    def free_slots(self) -> int:
        return self.slots - len(self.queue)

    def submit(self, task):
        self.log.append(("start", task.name))
        future = Future()
        self.queue.append((future, task.name))
        return future

    def wait(self, futures):
        future, name = self.queue.pop(0)
        self.log.append(("end", name))
        future.set_result({"error": None})
        return {future}

    def outcome(self, future):
        return future.result()


def _walk(slots: int, reused: frozenset = frozenset()):
    ex = FakeExecutor(slots)
    finished = []

    def start(name):
        if name in reused:
            ex.log.append(("reused", name))
            return None
        return executors.NotebookTask(name, "", "", {}, None, "")

    executors.run_graph(["a", "b", "c", "d"], {"b": ["a"], "d": ["b", "c"]}, start,
                        lambda name, outcome: finished.append(name), ex)
    return ex.log, finished


def test_run_graph_follows_depends_on_and_fills_free_slots():
    log, finished = _walk(1)  # one slot: the profile's order, one after another
    assert log == [(e, n) for n in "abcd" for e in ("start", "end")]
    log, finished = _walk(2)  # two slots: c runs beside a; b after a; d after b and c
    assert log[:2] == [("start", "a"), ("start", "c")]
    assert log.index(("start", "b")) > log.index(("end", "a"))
    assert log.index(("start", "d")) > max(log.index(("end", "b")), log.index(("end", "c")))
    assert sorted(finished) == list("abcd")
    log, finished = _walk(1, frozenset("a"))  # a reused: no slot used, b starts at once
    assert log[:2] == [("reused", "a"), ("start", "b")] and "a" not in finished


class FakeClient:
    """client.run(check_worker, …) on two 'workers'; the second lacks the probe and data."""

    def run(self, fn, expected, on_error):
        blind = json.loads(json.dumps(expected))
        blind["probe"][1] = "another token"
        blind["data"].append("/nowhere/saf")
        return {"tcp://w1:1": fn(expected), "tcp://w2:1": fn(blind)}


def test_preflight_names_each_worker_and_what_it_lacks(tmp_path):
    ex = executors.NotebookExecutor(None, {"kind": "dask"}, FakeClient())
    with pytest.raises(RunnerError) as err:
        ex.preflight(tmp_path / "reports", [], [{"kind": "local", "source": str(tmp_path)}])
    msg = str(err.value)
    assert "tcp://w2:1" in msg and "tcp://w1:1" not in msg
    assert "cannot see the run folder" in msg and "cannot see the data /nowhere/saf" in msg
    assert "shared" in msg and not list((tmp_path / "reports").iterdir())  # probe removed


def _toy(tmp_path: Path) -> list[str]:
    """a -> b; e independent (sleeps); f fails -> g skipped."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "a_first.ipynb", "value = 0.5\noutput_dir = None",
              "import os, time\nfrom pathlib import Path\ntime.sleep(4)\n"
              "Path(output_dir, 'threads.txt').write_text(repr([os.environ.get(k) for k in "
              "('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'PYTHONHASHSEED', "
              "'MALLOC_TRIM_THRESHOLD_')]))",
              RECORD.replace("NAME", "'a_first'"))
    reads_a(nbs)
    notebook(nbs / "e_alone.ipynb", "output_dir = None\nvalue = 0.125",
              "import time\ntime.sleep(4)", RECORD.replace("NAME", "'e_alone'"))
    notebook(nbs / "f_fails.ipynb", "output_dir = None", "raise ValueError('boom')")
    notebook(nbs / "g_needs_f.ipynb", "output_dir = None", "pass")
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump({
        "notebooks": ["a_first", "b_reads_a", "e_alone", "f_fails", "g_needs_f"],
        "depends_on": {"b_reads_a": ["a_first"], "g_needs_f": ["f_fails"]}}))
    return run_args(tmp_path / "toy.yaml", nbs, tmp_path / "reports")


def test_bad_cluster_options_are_one_line_and_rc_2(tmp_path, capsys):
    base = _toy(tmp_path)
    for args, expected in ((["--workers", "0"], "--workers 0"),
                           (["--scheduler", "localhost:8786"], "tcp://host:8786"),
                           (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
                            "omit --workers")):
        for command in ([], ["sweep", "--matrix", "value=[1.0]"]):
            assert cli.main(command + base + args) == 2, (command, args)
            err = capsys.readouterr().err.strip()
            assert expected in err and len(err.splitlines()) == 1, err
    assert cli.main(["sweep", *base, "--run-name", "x", "--matrix", "value=[1.0]"]) == 2
    assert "--run-name is for one run" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def _listener(answer: bytes | None):
    """A loopback port that accepts and then never answers (``answer`` None) or answers
    ``answer`` to whatever it is sent; returns (port, close)."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    conns = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conns.append(conn)
            if answer is not None:
                conn.recv(65536)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()

    def close() -> None:
        for c in [*conns, srv]:
            c.close()

    return srv.getsockname()[1], close


@pytest.mark.slow  # ~3 s: waits out a handshake timeout on a port that never answers
def test_scheduler_addresses_are_checked_and_a_bad_peer_is_one_line(tmp_path, capsys,
                                                                       monkeypatch):
    """A malformed address, an unknown scheme, TLS without settings, a port that accepts and
    never answers, a port that answers HTTP: each one line, exit 2, within the stated
    handshake time, before anything is written."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(cluster_options, "HANDSHAKE_TIMEOUT_S", 3)
    base = _toy(tmp_path)
    silent, close_silent = _listener(None)
    http, close_http = _listener(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
                                 * 40)
    try:
        for address, expected in (
                ("tcp://", "a Dask scheduler address"),
                ("nosuchproto://x:1", "a Dask scheduler address"),
                ("tcp://127.0.0.1", "a Dask scheduler address"),
                ("tcp://127.0.0.1:99999", "a Dask scheduler address"),
                ("tcp://127.0.0.1:1/x", "a Dask scheduler address"),
                ("tcp://\x1b]0;x\x07:1", "a Dask scheduler address"),
                ("tls://127.0.0.1:1", "cannot connect"),
                (f"tcp://127.0.0.1:{silent}", "no Dask answer within 3 s"),
                (f"tcp://127.0.0.1:{http}", "cannot connect")):
            t0 = time.monotonic()
            assert cli.main([*base, "--scheduler", address]) == 2, address
            err = capsys.readouterr().err.strip()
            assert expected in err and len(err.splitlines()) == 1, (address, err)
            assert "\x1b" not in err and time.monotonic() - t0 < 15, (address, err)
    finally:
        close_silent()
        close_http()
    assert not (tmp_path / "reports").exists()


class LostExecutor(FakeExecutor):
    """A cluster whose scheduler goes away while the first notebook runs."""

    description = {"kind": "dask", "scheduler": "tcp://127.0.0.1:9"}

    def preflight(self, folder, plans, data):
        pass

    def wait(self, futures):
        raise executors.ClusterLost("lost the Dask scheduler tcp://127.0.0.1:9: "
                                    "FuturesCancelledError: scheduler-connection-lost")

    def stop(self, sig):
        return []


def test_a_lost_scheduler_marks_the_run_and_its_notebook_not_error(tmp_path, capsys):
    """The run says cluster_lost with the cause, the running notebook is interrupted, the
    others stay pending; no traceback, exit 1."""
    from notebook_reports import runner

    base = _toy(tmp_path)
    args = cli.run_parser().parse_args([*base, "--run-name", "lost", "--only", "a_first,b"])
    req = runner.request_from_args(args, ["saf-run"])
    out, results, status = runner.run_profile(req, executor=LostExecutor(1))
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "cluster_lost" and "scheduler-connection-lost" in m["status_reason"]
    assert [(n["name"], n["status"]) for n in m["notebooks"]] == [
        ("a_first", "interrupted"), ("b_reads_a", "pending")]
    assert "lost the Dask scheduler" in m["notebooks"][0]["error"]
    assert runner.exit_code(status, [r.name for r in results if r.status != "ok"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_the_profile_says_how_many_notebooks_at_once(tmp_path, capsys):
    """``workers`` in a profile is the default of ``--workers`` (the cpu profile's 2 lives
    there, not in the Makefile); ``--workers`` overrides it, ``--scheduler`` ignores it
    (the cluster's workers run the notebooks), and a bad value is one line and rc 2."""
    base = _toy(tmp_path)
    profile = tmp_path / "toy.yaml"
    cfg = yaml.safe_load(profile.read_text())

    def where(*args: str) -> str:
        assert cli.main([*base, "--dry-run", *args]) == 0
        return capsys.readouterr().out

    assert "in this process, one after another" in where()
    profile.write_text(yaml.safe_dump({**cfg, "workers": 2}))
    assert "local cluster of 2 workers" in where()
    assert "in this process, one after another" in where("--workers", "1")
    assert "on the workers of tcp://127.0.0.1:1" in where("--scheduler", "tcp://127.0.0.1:1")
    assert cli.main(["sweep", *base, "--dry-run", "--sweep-name", "sw",
                     "--matrix", "value=[0.5]"]) == 0
    assert "local cluster of 2 workers" in capsys.readouterr().out
    profile.write_text(yaml.safe_dump({**cfg, "workers": "two"}))
    assert cli.main([*base, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'workers' must be a whole number" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "reports").exists()


def test_sweep_dry_run_plans_every_cell_and_checks_values(tmp_path, capsys):
    base = _toy(tmp_path)
    assert cli.main(["sweep", *base, "--only", "a_first", "--dry-run", "--sweep-name", "sw",
                     "--matrix", "value=[0.5, 0.75]"]) == 0
    out = capsys.readouterr().out
    assert "2 cell(s)" in out and "[1] sw-value-0.5: value=0.5" in out  # runs named
    assert "[2] sw-value-0.75" in out and "value = 0.75    # -p" not in out  # with the prefix
    assert "in this process, one after another" in out
    assert cli.main(["sweep", *base, "--only", "a_first", "--matrix", "value=[0.5, x]"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"sweep cell sweep-\S+-value-x:", err)  # the run named with its prefix
    assert "does not match the notebook's default" in err
    assert not (tmp_path / "reports").exists()


# ------------------------------------------------------------------ slow: the real engine
def _records(run: Path) -> list[str]:
    rows = json.loads((run / "metrics.json").read_text())["records"]
    return sorted(json.dumps({k: v for k, v in r.items() if k != "notebook_status"},
                             sort_keys=True) for r in rows)


@pytest.mark.slow
def test_local_cluster_runs_independent_notebooks_at_once(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    # a stated thread count: --workers N would otherwise split the cores (cores // N each)
    monkeypatch.setenv("SAF_NUM_THREADS", "2")
    base = _toy(tmp_path)
    assert cli.main([*base, "--run-name", "serial"]) == 1  # f fails
    assert cli.main([*base, "--run-name", "dask", "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert "g_needs_f skipped: not run: depends on f_fails" in out
    runs = tmp_path / "reports"
    manifest = json.loads((runs / "dask" / "manifest.json").read_text())
    nb = {n["name"]: n for n in manifest["notebooks"]}
    assert {n: e["status"] for n, e in nb.items()} == {
        "a_first": "ok", "b_reads_a": "ok", "e_alone": "ok", "f_fails": "failed",
        "g_needs_f": "skipped"}
    assert "ValueError: boom" in nb["f_fails"]["error"]
    assert manifest["invocations"][-1]["executor"]["kind"] == "dask-local"
    assert all(nb[n]["worker"].startswith("tcp://127.0.0.1:") for n in ("a_first", "e_alone"))
    # e ran beside a (one started before the other finished); b waited for a
    assert nb["e_alone"]["started"] < nb["a_first"]["finished"]
    assert nb["b_reads_a"]["started"] >= nb["a_first"]["finished"]
    assert _records(runs / "dask") == _records(runs / "serial")
    threads = [(runs / r / "a_first" / "threads.txt").read_text() for r in ("serial", "dask")]
    # not the nanny's 1 thread, hash seed 6640 or memory trimming (glibc gave freed memory
    # back at once: a cpu run's kernels page-faulted 221 million times)
    assert threads[0] == threads[1], threads
    assert threads[0].startswith("['2', '2'") and threads[0].endswith("None]"), threads
    serial = json.loads((runs / "serial" / "manifest.json").read_text())
    assert all(n["worker"] is None for n in serial["notebooks"])
    assert (runs / "dask" / "a_first.html").is_file()


@pytest.fixture()
def dask_cluster(tmp_path):
    """A ``dask scheduler`` and one ``dask worker`` (no nanny: its pid is the worker's):
    (address, the worker's pid, the scheduler's process)."""
    pytest.importorskip("distributed")
    dask = Path(sys.executable).with_name("dask")
    file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    common = ["--no-dashboard"]
    sched = subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--scheduler-file", str(file), *common], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not file.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(file.read_text())["address"]
        worker = subprocess.Popen([str(dask), "worker", address, "--host", "127.0.0.1",
                                   "--nthreads", "1", "--no-nanny", "--memory-limit", "0",
                                   *common], env=env, cwd=str(tmp_path),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield address, worker.pid, sched
    finally:
        for proc in (worker, sched):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()


@pytest.mark.slow
@pytest.mark.realdata
def test_sweep_on_a_dask_scheduler_matches_serial_runs(tmp_path, dask_cluster, capsys):
    """Two cells of the smoke profile's notebook 01 through ``--scheduler``: the worker ran
    them, each is a run named with the sweep's prefix, and each cell's records are those of
    a serial run."""
    if not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")):
        pytest.skip("needs SAF_DATA and ARGSCICHAT_DATA (local data copies)")
    address, worker_pid, _ = dask_cluster
    reports = tmp_path / "reports"
    args = ["--profile", "smoke", "--only", "01", "--reports-dir", str(reports),
            "--matrix", "max_rows=[30, 60]"]
    assert cli.main(["sweep", *args, "--sweep-name", "on-dask", "--scheduler", address]) == 0
    assert cli.main(["sweep", *args, "--sweep-name", "serial"]) == 0
    capsys.readouterr()
    names = ["max_rows-30", "max_rows-60"]
    assert sorted(p.name for p in reports.iterdir()) == sorted(
        f"{sweep}-{n}" for sweep in ("on-dask", "serial") for n in names)
    for name in names:
        run = reports / f"on-dask-{name}"
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["invocations"][0]["executor"]["kind"] == "dask"
        (nb,) = manifest["notebooks"]
        assert nb["status"] == "ok" and f"pid {worker_pid})" in nb["worker"]
        assert nb["parameters"]["max_rows"] == int(name.split("-")[1])
        assert _records(run) == _records(reports / f"serial-{name}") != []
    assert _records(reports / f"on-dask-{names[0]}") != _records(reports / f"on-dask-{names[1]}")


@pytest.mark.slow
def test_ctrl_c_on_a_local_cluster_stops_the_kernels_and_marks_the_run(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C reaches the Dask workers too):
    both running notebooks are interrupted with their partial notebooks, their dependant
    stays pending, no kernel outlives the run."""
    pytest.importorskip("distributed")
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    sleeper = ("import os, time\nfrom pathlib import Path\n"
               "Path(output_dir, 'kernel.pid').write_text(str(os.getpid()))\ntime.sleep(300)")
    for name in ("c_sleeps", "d_sleeps"):
        notebook(nbs / f"{name}.ipynb", "output_dir = None", sleeper, "print('never runs')")
    notebook(nbs / "a_first.ipynb", "output_dir = None", "pass")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "notebooks": ["c_sleeps", "d_sleeps", "a_first"], "depends_on": {"a_first": ["c_sleeps"]}}))
    reports = tmp_path / "reports"
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_reports", "--config", str(tmp_path / "p.yaml"),
         "--notebooks-dir", str(nbs), "--reports-dir", str(reports), "--run-name", "s",
         "--workers", "2"], cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pids = [reports / "s" / n / "kernel.pid" for n in ("c_sleeps", "d_sleeps")]
    deadline = time.time() + 180
    while not all(p.is_file() for p in pids) and time.time() < deadline \
            and proc.poll() is None:
        time.sleep(0.2)
    assert all(p.is_file() for p in pids), proc.communicate()[0] if proc.poll() is not None \
        else "timeout"
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=150)
    assert proc.returncode == 130, out
    m = json.loads((reports / "s" / "manifest.json").read_text())
    assert m["status"] == "interrupted", out
    assert [(n["name"], n["status"]) for n in m["notebooks"]] == [
        ("c_sleeps", "interrupted"), ("d_sleeps", "interrupted"), ("a_first", "pending")], out
    for name in ("c_sleeps", "d_sleeps"):
        nb = nbformat.read(reports / "s" / f"{name}.ipynb", as_version=4)
        assert nb.cells[0].source.startswith("**Interrupted"), out
        assert (reports / "s" / f"{name}.html").is_file()
    time.sleep(1)
    for p in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(int(p.read_text()), 0)  # no kernel outlived the run


@pytest.mark.slow
def test_serial_sweep_reuses_what_the_matrix_does_not_touch(tmp_path, capsys):
    """reuse: latest, cells one after another: the notebook without the swept parameter
    runs in the first cell only; each cell is a run with its own records."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "a_first.ipynb", "value = 0.5\noutput_dir = None",
              RECORD.replace("NAME", "'a_first'"))
    notebook(nbs / "z_plain.ipynb", "output_dir = None\nvalue_z = 0.25",
              RECORD.replace("NAME", "'z_plain'").replace("value,", "value_z,")
              .replace("'sys'", "'zsys'"))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "notebooks": ["a_first", "z_plain"], "reuse": "latest"}))
    reports = tmp_path / "reports"
    assert cli.main(["sweep", "--config", str(tmp_path / "p.yaml"), "--notebooks-dir",
                     str(nbs), "--reports-dir", str(reports), "--sweep-name", "sw",
                     "--matrix", "value=[0.5, 0.75]"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in reports.iterdir()) == ["sw-value-0.5", "sw-value-0.75"]
    second = json.loads((reports / "sw-value-0.75" / "manifest.json").read_text())
    nb = {n["name"]: n for n in second["notebooks"]}
    assert nb["z_plain"]["reused"]["from"] == "sw-value-0.5" and not nb["a_first"]["reused"]
    values = {(cell, r["system"]): r["value"] for cell in ("0.5", "0.75") for r in json.loads(
        (reports / f"sw-value-{cell}" / "metrics.json").read_text())["records"]
        if r["split"] == "test"}
    assert values == {("0.5", "sys"): 0.5, ("0.75", "sys"): 0.75,
                      ("0.5", "zsys"): 0.25, ("0.75", "zsys"): 0.25}


def test_workers_split_the_cores_unless_a_thread_count_is_stated(tmp_path, monkeypatch):
    """--workers N on one machine: each kernel gets cores // N threads (two 2-thread OpenMP
    pools on 2 cores spun against each other), and the setting does not outlive the run."""
    from notebook_reports import runner

    seen = {}

    class Stop(Exception):
        pass

    def fake_open(workers, scheduler):
        seen["threads"] = os.environ.get("SAF_NUM_THREADS")
        raise Stop

    monkeypatch.delenv("SAF_NUM_THREADS", raising=False)
    monkeypatch.setattr("notebook_reports.executors.open_executor", fake_open)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    req = runner.RunRequest(workers=2)
    plan = SimpleNamespace(cfg={}, plans=[], workers=2)
    with pytest.raises(Stop):
        runner.run_profile(req, plan=plan)
    assert seen["threads"] == "2" and "SAF_NUM_THREADS" not in os.environ
    monkeypatch.setenv("SAF_NUM_THREADS", "3")
    with pytest.raises(Stop):
        runner.run_profile(req, plan=plan)
    assert seen["threads"] == "3"


@pytest.mark.slow
def test_a_scheduler_killed_mid_run_is_recorded_as_cluster_lost(tmp_path, dask_cluster):
    """The scheduler SIGKILLed while a notebook runs on its worker: the run ends (bounded)
    with status cluster_lost naming the scheduler, the notebook interrupted, exit 1."""
    address, _, sched = dask_cluster
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "c_sleeps.ipynb", "output_dir = None",
             "import os, time\nfrom pathlib import Path\n"
             "Path(output_dir, 'kernel.pid').write_text(str(os.getpid()))\ntime.sleep(120)")
    (tmp_path / "p.yaml").write_text("notebooks: [c_sleeps]\n")
    reports = tmp_path / "reports"
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_reports", *run_args(tmp_path / "p.yaml", nbs, reports),
         "--run-name", "s", "--scheduler", address], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    pid = reports / "s" / "c_sleeps" / "kernel.pid"
    deadline = time.time() + 120
    while not pid.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert pid.is_file(), proc.communicate()
    sched.kill()
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 1, (out, err)
    m = json.loads((reports / "s" / "manifest.json").read_text())
    assert m["status"] == "cluster_lost" and address in m["status_reason"], m["status_reason"]
    assert m["notebooks"][0]["status"] == "interrupted", m["notebooks"]
    assert "the runner itself raised" not in err and "Traceback" not in out
    assert "Traceback" not in err, err[-3000:]  # no ClosedClientError traceback at the end


@pytest.mark.slow
def test_a_worker_lost_mid_notebook_is_recorded_as_a_restart(tmp_path, monkeypatch):
    """A notebook whose first run kills its Dask worker: Dask starts it again on a worker,
    the run is ok, and the manifest names the worker lost under ``restarts``."""
    pytest.importorskip("distributed")
    monkeypatch.setenv("SAF_NUM_THREADS", "1")
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    marker = tmp_path / "killed-once"
    notebook(nbs / "k_kills.ipynb", "output_dir = None\nvalue = 0.5",
             "import os, signal\nfrom pathlib import Path\n"
             f"m = Path({str(marker)!r})\n"
             "if not m.exists():\n    m.write_text('x')\n"
             "    os.kill(os.getppid(), signal.SIGKILL)\n    import time; time.sleep(60)",
             RECORD.replace("NAME", "'k_kills'"))
    (tmp_path / "p.yaml").write_text("notebooks: [k_kills]\n")
    reports = tmp_path / "reports"
    assert cli.main([*run_args(tmp_path / "p.yaml", nbs, reports), "--run-name", "r",
                     "--workers", "2"]) == 0
    entry = json.loads((reports / "r" / "manifest.json").read_text())["notebooks"][0]
    assert entry["status"] == "ok" and len(entry["restarts"]) == 1, entry
    assert entry["restarts"][0] != entry["worker"]


def test_a_lost_connection_is_cluster_lost_wherever_the_executor_meets_it():
    """Counting slots, submitting or waiting on a client whose scheduler is gone: one
    ClusterLost naming the scheduler (never an OSError the runner would call a write error)."""
    class GoneClient:
        def nthreads(self):
            raise OSError("Timed out trying to connect to tcp://127.0.0.1:9")

        submit = nthreads

    ex = executors.NotebookExecutor(GoneClient(), {"kind": "dask",
                                                   "scheduler": "tcp://127.0.0.1:9"}, GoneClient())
    for call in (ex.free_slots, lambda: ex.submit(SimpleNamespace(name="a"))):
        with pytest.raises(executors.ClusterLost, match="lost the Dask scheduler tcp://127"):
            call()


@pytest.mark.slow
def test_a_two_cell_sweep_on_two_workers_gives_two_listed_runs(tmp_path, capsys,
                                                                 monkeypatch):
    """Both cells run at once on two workers; each is a run, and ``saf-run list`` lists
    them together."""
    pytest.importorskip("distributed")
    monkeypatch.setenv("SAF_NUM_THREADS", "1")
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    notebook(nbs / "a_first.ipynb", "value = 0.5\noutput_dir = None",
             RECORD.replace("NAME", "'a_first'"))
    (tmp_path / "p.yaml").write_text("notebooks: [a_first]\n")
    reports = tmp_path / "reports"
    base = run_args(tmp_path / "p.yaml", nbs, reports)
    assert cli.main(["sweep", *base, "--matrix", "value=[0.25, 0.75]", "--workers", "2",
                     "--sweep-name", "sw"]) == 0
    err = capsys.readouterr().err
    assert "not written" not in err, err
    assert cli.main(["list", "--reports-dir", str(reports), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert sorted((r["run"], r["status"]) for r in runs) == [("sw-value-0.25", "ok"),
                                                             ("sw-value-0.75", "ok")]
