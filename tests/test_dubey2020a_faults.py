"""Issue 15 for the LOCAL-flooding protocols (dubey2020a-private, dubey2020a-byzantine, dp-ucb-int,
feducb-p2p): duplication, reordering and crashes with state kept and lost."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

PROTOCOLS = {
    "dubey2020a-private": {"name": "dubey2020a-private", "epsilon": 0.5, "gamma": 2},
    "dubey2020a-byzantine": {"name": "dubey2020a-byzantine", "epsilon": 0.01, "gamma": 2},
    "dp-ucb-int": {"name": "dp-ucb-int", "epsilon": 0.5},
    "feducb-p2p": {"name": "feducb-p2p", "gamma": 2, "threshold": 0.5},
}
CRASHED, DOWN, UP = 3, 20.0, 40.0


def scenario(protocol: str, faults: dict | None = None, *, horizon: int = 70, seed: int = 5):
    linear = protocol == "feducb-p2p"
    bandit = ({"kind": "linear", "arms": 5, "dimension": 3} if linear else {"kind": "bernoulli", "arms": 4})
    doc = {"name": "t", "bandit": bandit,
           "network": {"topology": "erdos_renyi", "agents": 10, "p": 0.35},
           "protocol": PROTOCOLS[protocol], "run": {"horizon": horizon, "seed": seed, "checkpoints": 7}}
    if protocol == "dubey2020a-byzantine":
        doc["adversary"] = {"agents": [1, 6], "corruption": 0.2,
                            "distribution": {"model": "uniform", "low": 0, "high": 1}}
    if faults:
        doc["faults"] = faults
    return S.from_dict(doc)


def run(sc, trial=0, probes=()):
    """Run one trial; return (row, simulation, pulls of every agent at each probe time)."""
    sim = Simulation(sc, trial_sequence(sc.run["seed"], trial), trial=trial)
    seen = {}
    for when in probes:
        sim.call_at(when, lambda when=when: seen.__setitem__(when, sim.bandit.pulls.copy()))
    result = sim.run()
    return result.row, sim, seen


def invariant(row):
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_duplicates_are_the_message_they_duplicate(protocol):
    """Duplication 0.2 in paper mode: tolerance zero. A copy crosses the same unit-delay link, so it
    arrives at the same instant as its original and the LOCAL layer's sequence numbers discard it:
    the run must equal the duplicate-free run on the same seeds exactly (regret and pulls), for
    three seeds. (dp-ucb-int sends nothing: the fault could not touch it, so it is refused.)"""
    if protocol == "dp-ucb-int":
        with pytest.raises(InputError) as info:
            scenario(protocol, {"duplication": 0.2})
        assert info.value.key == "faults.duplication"
        return
    for trial in range(3):
        clean, _, _ = run(scenario(protocol), trial)
        dup, _, _ = run(scenario(protocol, {"duplication": 0.2}), trial)
        assert dup["status"] == "ok"
        invariant(dup)
        assert dup["group_regret"] == clean["group_regret"]
        assert dup["duplicated"] > 0
        assert dup["messages_sent"] == clean["messages_sent"] + dup["duplicated"]


@pytest.mark.parametrize("protocol", ["dubey2020a-private", "dubey2020a-byzantine"])
def test_reordered_records_never_replace_newer_ones(protocol):
    """Reordering 0.5 with a mean extra delay of 3 ticks: records arrive late and out of order, yet
    the latest-record table only ever moves forward (checked after every trial) and the trial ends ok."""
    sc = scenario(protocol, {"reorder": 0.5, "reorder_delay": {"model": "exponential", "mean": 3.0}})
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    history = []
    if protocol == "dubey2020a-private":
        sim.every(1.0, lambda now: history.append(sim.protocol.flood.latest_seq.copy()), start=0.5)
    row = sim.run().row
    assert row["status"] == "ok" and row["reordered"] > 0
    invariant(row)
    for before, after in zip(history, history[1:], strict=False):
        assert np.all(after >= before)


@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_crash_and_restart(protocol, state):
    """Agent 3 is down during [20, 40): the trial ends ok, the message books balance, its pull count
    does not move while it is down and grows again after the restart; with state lost it comes back
    as a fresh learner."""
    faults = {"crashes": [{"node": CRASHED, "start": DOWN, "end": UP}], "state": state}
    sc = scenario(protocol, faults)
    row, sim, pulls = run(sc, probes=(DOWN - 0.5, DOWN + 0.5, UP - 0.5, UP + 0.5, 60.5))
    assert row["status"] == "ok"
    invariant(row)
    assert pulls[DOWN - 0.5][CRASHED] == pulls[UP - 0.5][CRASHED]        # nothing while down
    others = np.arange(10) != CRASHED
    assert np.all(pulls[UP - 0.5][others] > pulls[DOWN - 0.5][others])   # the others went on
    assert pulls[60.5][CRASHED] > pulls[UP - 0.5][CRASHED]               # back after the restart
    if protocol != "dp-ucb-int":
        assert row["dropped_crashed"] > 0                                # what was sent to it was dropped
    proto = sim.protocol
    if state == "lost" and protocol in ("dubey2020a-private", "dp-ucb-int"):
        # a fresh learner: its own counts hold only the pulls since the restart
        assert proto.counts[CRASHED].sum() == pulls[60.5][CRASHED] - pulls[UP - 0.5][CRASHED] + (
            sim.bandit.pulls[CRASHED] - pulls[60.5][CRASHED])
    if state == "kept" and protocol in ("dubey2020a-private", "dp-ucb-int"):
        assert proto.counts[CRASHED].sum() == sim.bandit.pulls[CRASHED]


def test_lost_agent_forgets_what_it_heard():
    """dubey2020a-private: at its restart with state lost, the agent's running group sums drop its
    old table (they equal the sums over its table, which is empty), and its new records are news."""
    faults = {"crashes": [{"node": CRASHED, "start": DOWN, "end": UP}], "state": "lost"}
    sc = scenario("dubey2020a-private", faults)
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    looks = {}

    def look():
        flood = sim.protocol.flood
        table = flood.latest_values["count"][CRASHED]
        looks["heard"] = sim.protocol.heard_counts[CRASHED].copy()
        looks["table"] = table.sum(axis=0)
        looks["seq"] = int(flood._seq[CRASHED])

    sim.call_at(UP, look, priority=0)  # after the restart event, before the deliveries and the tick at 40
    sim.run()
    assert np.allclose(looks["heard"], 0.0) and np.allclose(looks["table"], 0.0)
    assert looks["seq"] >= 1 << 32  # a new incarnation
