"""The baselines ``ucb1`` and ``central-ucb`` (protocols/baselines.py) under duplication and crashes."""

import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.conftest import scenario_dict


def build(protocol, faults=None, horizon=400):
    doc = scenario_dict(protocol={"name": protocol}, network={"topology": "ring", "agents": 5},
                        run={"horizon": horizon, "checkpoints": 4, "seed": 3})
    if faults is not None:
        doc["faults"] = faults
    return S.from_dict(doc)


def simulate(sc, seed=3, probes=()):
    sim = Simulation(sc, trial_sequence(seed, 0))
    seen = {}
    for t in probes:
        sim.call_at(t, lambda t=t: seen.__setitem__(t, sim.bandit.pulls.copy()))
    return sim, sim.run().row, seen


@pytest.mark.parametrize("protocol", ["ucb1", "central-ucb"])
def test_duplication_is_refused(protocol):
    """Neither baseline sends a message (``sends = False``): duplication could change nothing, so it is
    refused when the scenario loads rather than run unchanged (tests/test_no_inert_knob.py)."""
    with pytest.raises(InputError) as info:
        build(protocol, {"duplication": 0.2})
    assert info.value.key == "faults.duplication"


@pytest.mark.parametrize("protocol, state", [("ucb1", "kept"), ("ucb1", "lost"), ("central-ucb", "kept")])
def test_agent_crash_and_restart(protocol, state):
    """Agent 2 is down during [100, 250): it pulls nothing then (T - 150 pulls), the others pull every
    tick, the trial ends ok, and the (empty) message books balance."""
    faults = {"crashes": [{"node": 2, "start": 100.0, "end": 250.0}], "state": state}
    sim, row, seen = simulate(build(protocol, faults), probes=(100.0, 249.5))
    assert row["status"] == "ok"
    assert seen[100.0][2] == seen[249.5][2] == 100
    assert sim.bandit.pulls.tolist() == [400, 400, 250, 400, 400]
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"] == 0


def test_central_ucb_refuses_lost():
    """The pooled learner lives outside the agents: a lost agent would lose nothing, so "lost" (which
    would run exactly as "kept") is refused."""
    with pytest.raises(InputError) as info:
        build("central-ucb", {"crashes": [{"node": 2, "start": 100.0, "end": 250.0}], "state": "lost"})
    assert info.value.key == "faults.state"


def test_ucb1_lost_agent_starts_afresh():
    """A lost ucb1 agent re-runs UCB1 from scratch: its first K pulls after the restart try every arm."""
    sc = build("ucb1", {"crashes": [{"node": 2, "start": 100.0, "end": 250.0}], "state": "lost"})
    sim, _, _ = simulate(sc)
    counts = sim.protocol.counts[2]
    assert counts.sum() == 150 and (counts >= 1).all()  # only the pulls since the restart


def test_central_ucb_pays_c1_for_every_upload():
    """li2022 Eq. 2 by hand: every pull is one reward uploaded over the agent's link to the server in
    its slot, so C(T) = c1 x pulls and links_server_agent = pulls; agent 2 is down for 150 slots
    and pays for 250 uploads. Pooling without cost would give 0; a reward sent per pull over another
    link kind would give c2 x pulls."""
    c1, c2 = 7.0, 1.0
    doc = scenario_dict(protocol={"name": "central-ucb"}, network={
        "topology": "ring", "agents": 5, "cost": {"server_agent": c1, "agent_agent": c2}},
        run={"horizon": 400, "checkpoints": 4, "seed": 3})
    doc["faults"] = {"crashes": [{"node": 2, "start": 100.0, "end": 250.0}]}
    sc = S.from_dict(doc)
    assert sc.network["servers"] == 1  # the protocol's default: its learner's node
    sim, row, _ = simulate(sc)
    pulls = 4 * 400 + 250
    assert row["links_server_agent"] == pulls and row["links_agent_agent"] == 0
    assert row["comm_cost"] == c1 * pulls and row["messages_sent"] == 0
    assert sim.metrics.node_links.tolist() == [400, 400, 250, 400, 400, pulls]


def test_central_ucb_refuses_a_scenario_without_its_server():
    with pytest.raises(S.InputError, match="network.servers.*servers = 1"):
        S.from_dict(scenario_dict(protocol={"name": "central-ucb"}, network={"topology": "ring", "agents": 3,
                                                                                  "servers": 0}))
