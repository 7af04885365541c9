"""Issue 18 item 2: a Dask worker running other code that joins after the cluster check.

The check made when netsim connects sees only the workers present then; a worker that joins later
with a modified ``netsim/engine/sim.py`` used to return altered results that were accepted (exit 0). Every
result now carries the fingerprint of the code and dependency versions of the process that computed
it, and a result whose fingerprint is not this process's is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.experiment import runner

ROOT = Path(__file__).resolve().parents[1]

# Appended to the other worker's copy of netsim/engine/sim.py: every trial it runs reports a regret of -1.
ALTERED = '''

_honest_run_trial = run_trial


def run_trial(*args, **kwargs):
    result = _honest_run_trial(*args, **kwargs)
    result.row["group_regret"] = -1.0
    return result
'''


def altered_checkout(folder: Path) -> Path:
    """A copy of netsim and the protocols whose sim.py is altered (PYTHONPATH puts it first)."""
    for package in ("netsim", "protocols"):
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(folder / "netsim" / "engine" / "sim.py", "a") as handle:
        handle.write(ALTERED)
    return folder


def start_altered_worker(procs, folder: Path, *args: str) -> None:
    """``dask worker ARGS`` importing netsim from ``folder`` (its working directory, first on sys.path)."""
    log = procs.folder / "altered.log"
    env = {**os.environ, "PYTHONPATH": str(folder)}
    with open(log, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "dask", "worker", *args], cwd=folder, env=env, stdout=handle,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    procs.procs.append((proc, log))


def test_the_code_fingerprint_covers_code_and_dependency_versions():
    found = runner.code_fingerprint()
    assert set(found) == {"netsim", "code", "python", *runner.FINGERPRINT_DEPENDENCIES}
    other = dict(found, numpy="0.0")
    assert "numpy 0.0 there" in runner._difference(other, found)
    assert runner._difference(dict(found, code="f" * 64), found).startswith("code ffffffffffff there")


def test_a_worker_with_other_code_joining_after_submission_gets_no_result_accepted(tmp_path):
    pytest.importorskip("distributed")
    import distributed

    from tests.test_executors import DaskProcesses

    procs = DaskProcesses(tmp_path)
    try:
        scheduler_file = tmp_path / "scheduler.json"
        procs.start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                    "--scheduler-file", str(scheduler_file))
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = None
        while address is None and time.monotonic() < deadline:
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                time.sleep(0.2)
        assert address, procs.logs()
        worker_args = ["--host", "127.0.0.1", "--nthreads", "1", "--no-nanny", "--no-dashboard"]
        good = procs.start("good", "worker", address, *worker_args, "--local-directory", str(tmp_path / "wg"))

        scenario = S.load("quickstart", ["run.horizon=2000", "run.checkpoints=2"])
        units = [runner.Unit(scenario, trial) for trial in range(16)]

        with runner.make_executor("dask", scheduler=address, timeout=90) as pool:  # checks the good worker
            results = pool.results(runner._run_unit, units)
            accepted = [next(results)]  # the units are submitted and one came back from the good worker
            # the good worker leaves and another one joins, running altered code: the rest goes to it
            os.killpg(good.pid, signal.SIGTERM)
            good.wait(timeout=30)
            start_altered_worker(procs, altered_checkout(tmp_path / "altered"), address, *worker_args,
                                 "--local-directory", str(tmp_path / "wa"))
            with distributed.Client(address, timeout=30) as client:
                client.wait_for_workers(1, timeout=90)
            with pytest.raises(InputError, match=r"worker tcp://127\.0\.0\.1:\d+ returned a result computed with "
                                                 r"different code \(code \w+ there, \w+ here\); its results are "
                                                 r"refused"):
                for item in results:
                    accepted.append(item)
        # nothing the altered worker computed was accepted: every accepted result is the honest one
        assert accepted and all(result.row["group_regret"] == units[index].run().row["group_regret"]
                                for index, result in accepted)
        assert len(accepted) < len(units)
    finally:
        procs.stop()
