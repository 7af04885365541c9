"""Executors behind one interface: serial, process and dask give byte-identical tables.

The dask tests use a LocalCluster and a real cluster (``dask scheduler`` plus two ``dask worker``
processes on 127.0.0.1, started as subprocesses and always torn down); they are skipped when
dask.distributed is not installed (``pip install 'netsim[dask]'``).
"""

from __future__ import annotations

import json
import operator
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.experiment import runner
from netsim.experiment.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--set", "run.horizon=150", "--set", "run.checkpoints=4"]
GRID = ["--grid", "network.agents=3,5", "--grid", "network.topology=ring,complete"]
TABLES = ("sweep.csv", "sweep_agents.csv", "sweep_timeseries.csv")
RUN_TABLES = ("trials.csv", "agents.csv", "timeseries.csv")


@pytest.fixture(autouse=True)
def _no_progress(monkeypatch):
    monkeypatch.setenv("NETSIM_NO_PROGRESS", "1")


def sorted_bytes(path: Path) -> bytes:
    """A CSV with its header first and its rows sorted (the acceptance criterion's comparison)."""
    header, *rows = path.read_bytes().split(b"\n")
    return b"\n".join([header, *sorted(rows)])


def cli(*argv: str) -> int:
    return main([str(a) for a in argv])


def sweep(out: Path, *extra: str, trials: int = 2) -> int:
    return cli("sweep", "quickstart", *GRID, "--trials", trials, *SMALL, "--out", out, "--no-plots", "--quiet", *extra)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------- interface
@pytest.mark.parametrize("name", ["serial", "process"])
def test_every_item_comes_back_once_with_its_index(name):
    items = list(range(-7, 8))
    with runner.make_executor(name, jobs=2) as pool:
        got = list(pool.results(operator.neg, items))
    assert sorted(index for index, _ in got) == list(range(len(items)))
    assert all(value == -items[index] for index, value in got)


def test_executor_choice_and_errors():
    assert runner.make_executor(None).name == "serial"
    assert runner.make_executor(None, jobs=3).name == "process"
    with pytest.raises(InputError, match="accepted: serial, process, dask"):
        runner.make_executor("threads")
    with pytest.raises(InputError, match="--jobs 0"):
        runner.make_executor("process", jobs=0)
    with pytest.raises(InputError, match="--scheduler needs --executor dask"):
        runner.make_executor("process", scheduler="tcp://127.0.0.1:8786")


def test_dask_missing_is_a_clear_input_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    assert cli("run", "quickstart", *SMALL, "--executor", "dask", "--no-plots") == 2
    err = capsys.readouterr().err
    assert err.startswith("netsim: error: --executor dask needs dask.distributed") and err.count("\n") == 1
    assert "pip install 'dask[distributed]'" in err


def test_units_survive_pickling():
    """Scenarios hold read-only mapping proxies; units must still travel to workers unchanged."""
    unit = runner.Unit(S.load("quickstart", ["run.horizon=50"]), 3, (11, 12))
    back = pickle.loads(pickle.dumps(unit))
    assert back == unit
    assert back.scenario.as_dict() == unit.scenario.as_dict()
    with pytest.raises(TypeError):
        back.scenario.run["seed"] = 5  # still read-only
    assert back.run().row == unit.run().row


def test_run_same_tables_serial_and_process(tmp_path):
    for name, extra in (("serial", []), ("process", ["--jobs", "2"])):
        assert cli("run", "quickstart", "--trials", 3, *SMALL, "--executor", name, *extra,
                   "--out", tmp_path / name, "--no-plots", "--quiet") == 0
    for table in RUN_TABLES:
        assert (tmp_path / "serial" / table).read_bytes() == (tmp_path / "process" / table).read_bytes()


def test_sweep_same_tables_serial_and_process(tmp_path):
    assert sweep(tmp_path / "serial", "--executor", "serial") == 0
    assert sweep(tmp_path / "process", "--executor", "process", "--jobs", "2") == 0
    for table in TABLES:
        assert sorted_bytes(tmp_path / "serial" / table) == sorted_bytes(tmp_path / "process" / table)
        # Units are stored as they finish but the tables are rebuilt in grid order: equal unsorted too.
        assert (tmp_path / "serial" / table).read_bytes() == (tmp_path / "process" / table).read_bytes()


# ---------------------------------------------------------------------- dask
def test_unreachable_scheduler_is_one_line_exit_2_and_keeps_units(tmp_path, capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "s"
    assert sweep(out, trials=1) == 0
    before = {p.name: p.read_bytes() for p in (out / "units").iterdir()}
    capsys.readouterr()
    code = sweep(out, "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--scheduler-timeout", "1", trials=2)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("netsim: error: --scheduler tcp://127.0.0.1:") and "cannot reach" in err
    assert err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in (out / "units").iterdir()} == before


def test_run_and_sweep_on_a_local_dask_cluster(tmp_path):
    """One LocalCluster of two workers serves a run and a sweep; both match serial byte for byte."""
    pytest.importorskip("distributed")
    from netsim.experiment import results as R
    from netsim.experiment import sweeps as W

    scenario = runner.with_run_options(S.load("quickstart", SMALL[1::2]), trials=3)
    serial_run = runner.run_scenario(scenario)
    assert sweep(tmp_path / "serial") == 0
    plan = W.plan("quickstart", GRID[1::2], overrides=SMALL[1::2], trials=2)
    with runner.make_executor("dask", jobs=2) as pool:
        assert pool.name == "dask" and pool.cluster is not None
        dask_run = runner.run_scenario(scenario, executor=pool)
        outcome = W.run(plan, tmp_path / "dask", executor=pool, progress=False)
    for build in (R.trials_table, R.agents_table, R.series_table):
        assert build(serial_run).to_csv(index=False) == build(dask_run).to_csv(index=False)
    W.write_tables(tmp_path / "dask", W.tables(plan, outcome.results))
    for table in TABLES:
        assert sorted_bytes(tmp_path / "serial" / table) == sorted_bytes(tmp_path / "dask" / table)


def test_losing_the_cluster_mid_sweep_is_an_input_error_and_keeps_units(tmp_path):
    pytest.importorskip("distributed")
    from netsim.experiment import sweeps as W

    plan = W.plan("quickstart", GRID[1::2], overrides=["run.horizon=1500", "run.checkpoints=3"], trials=2)
    stored = []
    with runner.make_executor("dask", jobs=1) as pool:
        def lose_cluster_after_two(unit):
            stored.append(unit.id)
            if len(stored) == 2:
                pool.cluster.close()

        with pytest.raises(InputError, match=r"^--executor dask: lost the dask cluster .*finished units are kept"):
            W.run(plan, tmp_path, executor=pool, progress=False, on_stored=lose_cluster_after_two)
    store = W.UnitStore(tmp_path / "units")
    assert store.ids() == set(stored) and all(store.get(uid) for uid in stored)


class DaskProcesses:
    """``python -m dask ...`` subprocesses started from the checkout's root, each in its own session."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        # Workers (and the scheduler, which unpickles tasks) import this netsim and its protocols;
        # an installed netsim works the same way.
        self.env = {**os.environ,
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        with open(log, "wb") as handle:
            proc = subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=ROOT, env=self.env, stdout=handle,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((proc, log))
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for _, log in self.procs if log.exists())

    def stop(self) -> None:
        # Workers first (a worker whose scheduler is gone keeps trying to reconnect), then the scheduler.
        for proc, _ in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)


@pytest.fixture(scope="module")
def dask_processes(tmp_path_factory):
    pytest.importorskip("distributed")
    procs = DaskProcesses(tmp_path_factory.mktemp("dask-cluster"))
    try:
        yield procs
    finally:
        procs.stop()


@pytest.fixture(scope="module")
def dask_scheduler(dask_processes):
    """A real ``dask scheduler`` on 127.0.0.1; it picks a free port (``--port 0``) and writes its
    address to a scheduler file, which is polled for at most 60 s."""
    scheduler_file = dask_processes.folder / "scheduler.json"
    scheduler = dask_processes.start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", "0",
                                     "--no-dashboard", "--scheduler-file", str(scheduler_file))
    deadline = time.monotonic() + 60
    while True:
        if scheduler.poll() is not None:
            pytest.fail(f"dask scheduler exited with {scheduler.returncode}\n{dask_processes.logs()}")
        if time.monotonic() > deadline:
            pytest.fail(f"dask scheduler did not start within 60 s\n{dask_processes.logs()}")
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.2)


@pytest.fixture(scope="module")
def dask_cluster(dask_processes, dask_scheduler):
    """The scheduler plus two ``dask worker`` processes (one thread each), all torn down by
    ``dask_processes``' finalizer whatever happens."""
    import distributed

    for i in range(2):
        dask_processes.start(f"worker{i}", "worker", dask_scheduler, "--host", "127.0.0.1", "--nthreads", "1",
                             "--no-nanny", "--no-dashboard", "--local-directory", str(dask_processes.folder / f"w{i}"))
    with distributed.Client(dask_scheduler, timeout=30) as client:
        try:
            client.wait_for_workers(2, timeout=90)
        except TimeoutError:
            pytest.fail(f"dask workers did not connect within 90 s\n{dask_processes.logs()}")
    return dask_scheduler


def test_scheduler_without_workers_is_one_line_exit_2(tmp_path, dask_scheduler, capsys):
    import distributed

    with distributed.Client(dask_scheduler, timeout=30) as client:
        if client.scheduler_info()["workers"]:
            pytest.skip("workers already started (tests run out of order)")
    code = sweep(tmp_path / "s", "--scheduler", dask_scheduler, "--scheduler-timeout", "1")
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"netsim: error: --scheduler {dask_scheduler}: no dask worker joined within 1 s")
    assert err.count("\n") == 1


def test_sweep_through_a_real_dask_cluster_matches_serial(tmp_path, dask_cluster, capsys):
    assert dask_cluster.startswith("tcp://127.0.0.1:")
    assert sweep(tmp_path / "serial") == 0
    capsys.readouterr()
    assert sweep(tmp_path / "dask", "--scheduler", dask_cluster) == 0
    assert "executor dask" in capsys.readouterr().err
    for table in TABLES:
        assert sorted_bytes(tmp_path / "serial" / table) == sorted_bytes(tmp_path / "dask" / table)
    # ``netsim run`` through the same cluster.
    assert cli("run", "quickstart", "--trials", 3, *SMALL, "--out", tmp_path / "run-serial", "--no-plots",
               "--quiet") == 0
    assert cli("run", "quickstart", "--trials", 3, *SMALL, "--scheduler", dask_cluster,
               "--out", tmp_path / "run-dask", "--no-plots", "--quiet") == 0
    for table in RUN_TABLES:
        assert (tmp_path / "run-serial" / table).read_bytes() == (tmp_path / "run-dask" / table).read_bytes()


def test_dask_workers_import_the_plugin_files(tmp_path, dask_cluster, isolated_plugins):
    """A protocol from a --plugin file runs on workers that never saw the flag (the units carry the path)."""
    import netsim
    from tests.test_protocol_author_guide import guide_file

    (tmp_path / "neighbour_ucb.py").write_text(guide_file("neighbour_ucb.py"))
    (tmp_path / "guide.toml").write_text(guide_file("guide.toml"))
    netsim.load_plugin(tmp_path / "neighbour_ucb.py")
    options = {"set": {"run.horizon": 40}, "trials": 3}
    serial = netsim.run(str(tmp_path / "guide.toml"), **options)
    remote = netsim.run(str(tmp_path / "guide.toml"), scheduler=dask_cluster, **options)
    assert remote.meta["trials"] == 3 and (remote.trials["messages_sent"] == 6 * 5 * 40).all()
    assert remote.trials.to_csv(index=False) == serial.trials.to_csv(index=False)


def test_process_executor_progress_moves_inside_running_trials(monkeypatch):
    """Two trials on two worker processes: the parent's progress hook receives the running trials' fractions
    of their horizons before any trial finishes (issue 16: the bar used to move only per finished trial)."""
    from netsim.engine import scenario as S
    from netsim.engine import sim as simulation
    from netsim.experiment import runner as R

    seen: list[float] = []
    monkeypatch.setattr(simulation, "progress_hook", seen.append)
    monkeypatch.setattr(R, "PROGRESS_POLL", 0.05)
    scenario = S.load("quickstart", ["run.horizon=60000", "run.checkpoints=400"])
    units = [R.Unit(scenario, trial) for trial in range(2)]
    results = R.execute(units, executor=R.ProcessExecutor(2))
    assert len(results) == 2
    inside = [f for f in seen if 0 < f < 2]
    assert inside, seen[:10]
    assert max(inside) <= 2.0
