"""rio2023 protocols on realistic timelines: duplicated votes, agent and coordinator crashes
(protocols/rio2023/bai.py module docstring, docs/faults.md)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import reliability
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

NAMES = ["central-se", "corrupted-elimination", "dp-mase", "feraud2019", "independent-se", "mase"]


def load(name: str, *extra: str):
    """The reliability table's base instance of ``name`` (N = 16), with ``extra`` overrides."""
    return reliability._load(name, list(extra))


def run(sc, seed: int, probes=()):
    sim = Simulation(sc, trial_sequence(seed, 0))
    seen = {}
    for when in probes:
        sim.call_at(when, lambda when=when: seen.__setitem__(when, sim.bandit.pulls.copy()))
    return sim.run().row, seen


@pytest.mark.parametrize("name", [n for n in NAMES if n != "independent-se"])  # it sends nothing: refused
def test_duplicated_votes_change_nothing(name):
    """Duplication p = 0.2: the coordinator counts one vote per (agent, arm) and eliminations are flags,
    and faults draw from their own random streams, so the run must equal the duplicate-free one on the
    same seeds exactly (tolerance 0: sample complexity and identified arm, seeds 0-2). Without the count
    of voters a duplicated vote would reach the threshold M early."""
    for seed in range(3):
        clean, _ = run(load(name), seed)
        dup, _ = run(load(name, "faults.duplication=0.2"), seed)
        for key in ("sample_complexity", "identified_arm"):
            assert dup[key] == clean[key]
        if clean["votes_sent"]:
            assert dup["duplicated"] > 0


DOWN, UP = 300.0, 1500.0


@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("name", NAMES)
def test_agent_crash_and_restart(name, state):
    """Agent 3 is down during [300, 1500) (round-by-round simulation): the run identifies an arm with
    status ok, sent = delivered + dropped + in flight, and agent 3's pull count does not grow while down."""
    sc = load(name, "protocol.simulation='rounds'", f"faults.crashes=[{{node=3, start={DOWN}, end={UP}}}]",
              f"faults.state='{state}'")
    row, pulls = run(sc, 1, probes=(DOWN + 0.5, UP - 0.5))
    assert row["status"] == "ok" and row["identified_arm"] >= 0
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    assert pulls[DOWN + 0.5][3] == pulls[UP - 0.5][3]
    assert pulls[UP - 0.5].sum() > pulls[DOWN + 0.5].sum()     # the others went on


@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("name", ["mase", "dp-mase", "corrupted-elimination", "feraud2019"])
def test_coordinator_crash_stalls_votes_until_restart(name, state):
    """The coordinator (node 16) is down during [1000, 20000): votes sent to it meanwhile are dropped, and
    on its restart every agent sends its votes again, so the run still identifies the best arm (arm 0 of
    these instances, identified in every fault-free trial) and no global elimination happens while down."""
    sc = load(name, "protocol.simulation='rounds'", "faults.crashes=[{node=16, start=1000, end=20000}]",
              f"faults.state='{state}'")
    sim = Simulation(sc, trial_sequence(1, 0))
    during = []
    sim.call_at(1000.5, lambda: during.append(sim.protocol.global_set.copy()))
    sim.call_at(19999.5, lambda: during.append(sim.protocol.global_set.copy()))
    row = sim.run().row
    assert row["status"] == "ok" and row["identified_arm"] == 0 and row["correct"] == 1
    assert row["dropped_crashed"] > 0
    np.testing.assert_array_equal(during[0], during[1])
    assert row["sample_complexity"] > 20000


def test_event_mode_refuses_crashes_with_one_line():
    with pytest.raises(InputError, match=r"protocol\.simulation.*accepted: simulation = 'rounds'"):
        load("mase", "faults.crashes=[{node=3, start=10, end=20}]")


@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("name", ["central-se", "independent-se"])
def test_server_crash_of_the_baselines(name, state):
    """CENTRAL's pooled learner lives at the server: samples taken while it is down (rounds 300-1500) are lost,
    so the run needs more rounds than without the crash; INDEPENDENT's agents never need the
    server. Both end ok with the best arm, and what was sent to the down server is dropped and counted."""
    crash = [f"faults.crashes=[{{node=16, start={DOWN}, end={UP}}}]", f"faults.state='{state}'"]
    row, _ = run(load(name, "protocol.simulation='rounds'", *crash), 1)
    plain, _ = run(load(name, "protocol.simulation='rounds'"), 1)
    assert row["status"] == "ok" and row["identified_arm"] == plain["identified_arm"] == 0
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    if name == "central-se":
        assert row["sample_complexity"] > plain["sample_complexity"]
