"""Issue 27 item 4: netsim's Dask cluster listens on loopback only, without a dashboard; the client never
unpickles a reply (results travel as JSON); a cluster that loses every worker ends the run in one line."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from netsim.engine.errors import InputError
from netsim.engine.sim import TrialResult
from netsim.experiment import runner

pytest.importorskip("distributed")


class Planted:
    """Unpickling this object writes a file: the proof that a reply was unpickled."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def make_planted(marker: str) -> Planted:
    return Planted(marker)


@pytest.fixture(scope="module")
def executor():
    pool = runner.DaskExecutor(None, 1, timeout=1.0)
    yield pool
    pool.close()


def test_the_local_cluster_listens_on_loopback_only(executor):
    """Every listening socket of this process (the scheduler, its HTTP endpoints) and of the worker processes
    is on 127.0.0.1; the Bokeh dashboard is not started."""
    import psutil

    info = executor.client.scheduler_info()
    assert info["address"].startswith("tcp://127.0.0.1:")
    assert info["workers"] and all(address.startswith("tcp://127.0.0.1:") for address in info["workers"])
    me = psutil.Process()
    listening = [c.laddr.ip for p in (me, *me.children(recursive=True)) for c in p.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= 3 and set(listening) == {"127.0.0.1"}, listening


def test_a_pickled_reply_is_refused_not_unpickled(executor, tmp_path):
    marker = tmp_path / "unpickled"
    future = executor.client.submit(make_planted, str(marker), pure=False)
    with pytest.raises(Exception):  # noqa: B017 - dask's own refusal to deserialize
        future.result(timeout=60)
    assert not marker.exists()


def test_results_travel_as_json_and_exceptions_as_text(executor):
    assert list(executor.results(abs, [-3, 4])) in ([(0, 3), (1, 4)], [(1, 4), (0, 3)])
    result = TrialResult({"trial": 1, "group_regret": 0.1 + 0.2, "status": "ok", "failure": None},
                         {"agent": np.arange(3, dtype=np.int64), "regret": np.array([0.5, np.nan, 1e-300])},
                         {"time": np.array([0.0, 1.0], dtype=np.float32)}, 0.25, {"k": [1, 2]})
    back = runner._from_wire(runner._to_wire(result))
    assert back.row == result.row and back.info == result.info
    recorded = {"wall_s": 0.25}  # a stored field that must survive the wire, not a timing
    assert {name: getattr(back, name) for name in recorded} == recorded
    for table in ("agents", "timeseries"):
        for key, values in getattr(result, table).items():
            got = getattr(back, table)[key]
            assert got.dtype == values.dtype and np.array_equal(got, values, equal_nan=True)
    with pytest.raises(InputError, match="bad key"):
        runner._from_wire(runner._to_wire(InputError("bad key")))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        list(executor.results(lambda x: 1 / x, [0]))
    with pytest.raises(InputError, match="JSON"):
        runner._from_wire(b"\x80\x04")


def test_a_cluster_without_a_live_worker_fails_after_the_timeout(executor):
    """(Last: it takes the module's cluster's worker away.)"""
    threading.Timer(2.0, lambda: executor.cluster.scale(0)).start()
    started = time.monotonic()
    with pytest.raises(InputError, match="no live dask worker for 1 s"):
        list(executor.results(time.sleep, [60, 60]))
    assert time.monotonic() - started < 50  # the units would take 120 s
